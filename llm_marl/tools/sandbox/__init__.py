"""Code-execution sandbox: run untrusted Python and score tests, never in the caller's process.

Quick start::

    from llm_marl.tools.sandbox import Limits, TestJob, make_sandbox

    with make_sandbox("auto", limits=Limits(timeout=5)) as sandbox:
        result = sandbox.run("print(input()[::-1])", stdin="abc")
        result.status, result.stdout                  # (Status.OK, "cba\\n")

        report = sandbox.run_tests(
            "def add(a, b):\\n    return a + b\\n",
            "def check(candidate):\\n    assert candidate(1, 2) == 3\\n    assert candidate(0, 0) == 1\\n",
            entry_point="add",
        )
        report.status, report.passed, report.total     # (Status.FAILED, 1, 2)
        report.fraction                                # 0.5

        reports = sandbox.run_tests_batch([TestJob(prog, ["assert f(1) == 2"]) for prog in progs])

Backends (same API, :class:`Sandbox` protocol; what each guarantees, class by class, is in
``docs/guides/sandbox.md``):

* :class:`DockerSandbox`: warm pool of containers (no network, read-only root, nobody user, no
  capabilities, memory/pids/CPU cgroup limits).  Needs a Docker engine and the local image:
  ``python -m llm_marl.tools.sandbox build-image``.
* :class:`ProcessSandbox`: warm pool of supervisor subprocesses in bubblewrap namespaces (no
  network, only read-only ``/usr`` visible, private ``/tmp``), with rlimits and a whole-job
  memory cap (a cgroup per worker, or a single-process job under a system-call filter).
  Weaker isolation (``unshare``, ``none``) only when asked for by name.
* :func:`make_sandbox` (``"auto"``): Docker when reachable with the image, else ProcessSandbox
  with bubblewrap, else :class:`SandboxUnavailableError` -- never a silent downgrade.

Time (``run_tests``): the program loads within ``Limits.timeout``; each test gets
``Limits.test_timeout`` (10 s) of the program's own time, a test that overruns fails and the
program is restarted, and after ``Limits.max_timeouts`` (3) timeouts the rest are not run -- the
MAGRPO reference harness's rules.

Tests: a list of assert strings, each scored separately; or HumanEval-style
``def check(candidate)`` source plus ``entry_point``, split into one test per assert (setup lines
still run) -- see :class:`TestSuite`, the one splitter.  Asserts that cannot fail (``assert
True``: nothing in them reads the program) are not tests; code the task itself gives
(``task_code=``) is bound after the program's names, so the tests use the task's definitions.
Tests run in a separate trusted process that calls the program through proxies, so nothing the
program does (``sys.exit(0)``, fake output, patched builtins, objects with a rigged ``__eq__``,
...) can make a test pass; see ``harness.py``.

Programs written by a team (a helper's ``aux`` plus a main agent's entry point):
pass a :class:`TeamProgram` and the entry point's author runs in a process of its own, where no
other author's code runs, so the tests call that author's own function (see
:mod:`~llm_marl.tools.sandbox.program`).

Statuses (:class:`Status`): ``ok``, ``failed``, ``timeout``, ``memory``, ``output_limit``, and
``infra_error`` when the sandbox itself broke -- never because of what the program did (a
program that kills its workers is scored ``failed``).  Every string in a result is valid UTF-8.  Infrastructure errors are *returned* (one bad job
never loses a batch), are never a verdict on the program, and reading a score
(``passed``/``fraction``/``all_passed``) from such a report raises :class:`InfrastructureError`.
Constructors raise :class:`SandboxUnavailableError` with what to do when a backend cannot run.
"""

from llm_marl.tools.sandbox.base import (
    JOB_OVERHEAD_MB,
    ExecutionResult,
    InfrastructureError,
    Limits,
    RunJob,
    Sandbox,
    SandboxError,
    SandboxUnavailableError,
    Status,
    TestCaseResult,
    TestJob,
    TestReport,
)
from llm_marl.tools.sandbox.docker import DockerSandbox
from llm_marl.tools.sandbox.factory import make_sandbox
from llm_marl.tools.sandbox.image import DEFAULT_IMAGE, build_image, image_exists
from llm_marl.tools.sandbox.process import ProcessSandbox, bwrap_available
from llm_marl.tools.sandbox.program import TeamProgram
from llm_marl.tools.sandbox.suite import TestSuite

__all__ = [
    "DEFAULT_IMAGE",
    "JOB_OVERHEAD_MB",
    "DockerSandbox",
    "ExecutionResult",
    "InfrastructureError",
    "Limits",
    "ProcessSandbox",
    "RunJob",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailableError",
    "Status",
    "TeamProgram",
    "TestCaseResult",
    "TestJob",
    "TestReport",
    "TestSuite",
    "build_image",
    "bwrap_available",
    "image_exists",
    "make_sandbox",
]
