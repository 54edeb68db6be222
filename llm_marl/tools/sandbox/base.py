"""Sandbox protocol and result types shared by every backend."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from llm_marl.checks import check_int, check_number
from llm_marl.errors import InfrastructureError, LLMMarlError

if TYPE_CHECKING:
    from llm_marl.tools.sandbox.program import TeamProgram
    from llm_marl.tools.sandbox.suite import TestSuite


class SandboxError(LLMMarlError, RuntimeError):
    """Base class of the errors raised by the sandbox package (closed sandbox, lost worker...).

    Reading a score from a result whose status is ``INFRA_ERROR`` raises
    :class:`~llm_marl.errors.InfrastructureError` instead: such a result says nothing about the
    program, so callers must check :attr:`TestReport.status` (or catch it) and drop or retry the
    sample. Envs turn sandbox failures into ``InfrastructureError`` (a truncated episode).
    """


class SandboxUnavailableError(SandboxError):
    """The requested backend cannot run here (no engine, no image, no interpreter...).

    A setup problem, raised when a sandbox is built; the message always says what to do.
    """


class Status(str, enum.Enum):
    """Outcome of one sandboxed run.

    ``INFRA_ERROR`` means the sandbox itself failed (engine down, worker crashed twice, image
    missing...).  It is *returned*, never raised, by the run methods so that one broken job does
    not lose a whole batch; it is never a verdict on the program, and reading a score from such a
    result raises :class:`InfrastructureError`.
    """

    OK = "ok"  # exit code 0 / every test passed
    FAILED = "failed"  # non-zero exit, exception, failed assertion, syntax error
    TIMEOUT = "timeout"  # a time limit hit: load, a test, the suite, wall clock or CPU
    MEMORY = "memory"  # memory limit hit (MemoryError, or OOM-killed inside the job's cgroup)
    OUTPUT_LIMIT = "output_limit"  # stdout or stderr exceeded the output limit; the run was killed
    INFRA_ERROR = "infra_error"  # the sandbox broke; not the program's fault

    def __str__(self) -> str:
        return self.value


# Memory a worker needs besides the program's own: the supervisor, the job process, the test
# runner and the job's scratch files.  A whole-job cap (Docker's container cgroup, ProcessSandbox's
# worker cgroup) is ``Limits.memory_mb`` plus this.
JOB_OVERHEAD_MB = 256


@dataclass(frozen=True)
class Limits:
    """Resource limits of one job.

    Time (``run_tests``) follows the MAGRPO reference harness (``rewards/code_rewards.py`` of
    OpenMLRL/LLM_Collab_Code_Generation: ``TEST_TIMEOUT = 10`` seconds per test, ``MAX_TIMEOUTS
    = 3`` then the remaining tests are not run), with what it leaves open made explicit: loading
    the program has its own budget, and only the program's own time counts against a test.

    Args:
        timeout: ``run()``: wall-clock seconds of the whole program.  ``run_tests()``: seconds the
            program may take to load (its module-level code).  A program that loads too slowly
            fails every test with ``Status.TIMEOUT``.
        test_timeout: ``run_tests()``: seconds the program's own code may run for one scored test
            (the time spent in calls into the program; the tests' own code is not counted).  A
            test that exceeds it fails, the program is restarted (loaded again, with ``timeout``)
            and the next test runs.
        max_timeouts: ``run_tests()``: after this many tests timed out, the remaining tests are
            not run (they fail).
        suite_timeout: ``run_tests()``: seconds the test code itself (not the program) may take
            in all, so that a slow test suite is never charged to the program; past it the
            remaining tests fail with a message naming this limit.
        memory_mb: memory of the job in MiB.  Every process gets an address-space limit
            (``RLIMIT_AS``) of this size, and the job as a whole is capped too (see
            ``docs/guides/sandbox.md`` for how each backend holds that bound).
        output_bytes: bytes kept per stream (stdout, stderr); a job that writes more is killed
            and gets ``Status.OUTPUT_LIMIT`` (what it wrote up to the limit is kept).
        nproc: process/thread limit (``RLIMIT_NPROC`` under ProcessSandbox; Docker uses the
            container's pids limit instead).
        file_size_mb: largest file the job may write (``RLIMIT_FSIZE``), in MiB; also the largest
            program accepted.
        open_files: descriptor limit (``RLIMIT_NOFILE``).
    """

    timeout: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 1 << 20
    nproc: int = 64
    file_size_mb: int = 16
    open_files: int = 64
    test_timeout: float = 10.0
    max_timeouts: int = 3
    suite_timeout: float = 60.0

    def __post_init__(self) -> None:
        for name in ("timeout", "test_timeout", "suite_timeout"):
            check_number(getattr(self, name), f"Limits.{name}", 0, open_low=True, unit=" seconds")
        why = "a Python process needs that much address space to start"
        check_int(self.memory_mb, "Limits.memory_mb", 64, why=why)
        for name in ("output_bytes", "nproc", "file_size_mb", "max_timeouts"):
            check_int(getattr(self, name), f"Limits.{name}")
        check_int(self.open_files, "Limits.open_files", 16)

    def job_seconds(self, n_tests: int | None = None) -> float:
        """Longest a job can legitimately take: ``timeout`` for ``run()``; for ``run_tests()``
        with ``n_tests`` tests, one load plus one reload per timed-out test, every test's
        budget, and the suite's own time.  The supervisor stops any job at this bound."""
        if n_tests is None:
            return float(self.timeout)
        loads = 1 + min(self.max_timeouts, n_tests)
        return loads * self.timeout + n_tests * self.test_timeout + self.suite_timeout

    def to_wire(self) -> dict[str, float | int]:
        return {
            "timeout": float(self.timeout),
            "memory_mb": int(self.memory_mb),
            "output_bytes": int(self.output_bytes),
            "nproc": int(self.nproc),
            "file_size_mb": int(self.file_size_mb),
            "open_files": int(self.open_files),
            "test_timeout": float(self.test_timeout),
            "max_timeouts": int(self.max_timeouts),
            "suite_timeout": float(self.suite_timeout),
        }


@dataclass(frozen=True)
class ExecutionResult:
    """Result of :meth:`Sandbox.run`.

    ``exit_code`` follows :mod:`subprocess`: the exit status, or ``-N`` when the program was
    killed by signal ``N`` on its own (a kill by the sandbox after a limit shows in ``status``
    and leaves ``exit_code`` as ``None``).  ``error`` explains a non-OK status in one line.
    """

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    duration: float
    error: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the program ran to completion with exit code 0."""
        return self.status is Status.OK


@dataclass(frozen=True)
class TestCaseResult:
    """One scored test: an assert (or a statement holding asserts) and its outcome."""

    index: int
    source: str
    passed: bool
    error: str | None = None

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class TestReport:
    """Result of :meth:`Sandbox.run_tests`.

    ``tests`` has one entry per scored test, in order.  ``status`` is ``OK`` only when every
    test passed; a limit hit (``TIMEOUT``, ``MEMORY``, ``OUTPUT_LIMIT``) takes precedence over
    ``FAILED`` and keeps the per-test results gathered before it.  ``error`` carries the
    program-level problem (syntax error traceback, "entry point not defined", limit message...).
    """

    status: Status
    tests: tuple[TestCaseResult, ...]
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    error: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    sentinel_returns: tuple[int, int, int] | None = None
    """With a suite's :attr:`~llm_marl.tools.sandbox.TestSuite.sentinel`: ``(calls, returns,
    digest)``, how many times the tests called the entry point, how many of those calls
    returned the sentinel unchanged, and a CRC-32 of every value (or exception type) the calls
    returned, equal for equal results in any process (counted by the test runner)."""

    __test__ = False  # not a pytest test class

    @property
    def total(self) -> int:
        """Number of scored tests."""
        return len(self.tests)

    @property
    def passed(self) -> int:
        """Number of tests that passed (raises on an infrastructure error)."""
        self._require_verdict()
        return sum(1 for t in self.tests if t.passed)

    @property
    def fraction(self) -> float:
        """Fraction of tests passed in [0, 1] (raises on an infrastructure error)."""
        self._require_verdict()
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """True when every test passed (raises on an infrastructure error)."""
        self._require_verdict()
        return self.status is Status.OK

    def _require_verdict(self) -> None:
        if self.status is Status.INFRA_ERROR:
            raise InfrastructureError(
                f"no score: the sandbox failed ({self.error}); drop or retry this sample"
            )


@dataclass(frozen=True)
class RunJob:
    """One program for :meth:`Sandbox.run_batch`."""

    program: str
    stdin: str = ""
    limits: Limits | None = None


@dataclass(frozen=True)
class TestJob:
    """One program and its tests for :meth:`Sandbox.run_tests_batch`.

    ``tests`` is a :class:`~llm_marl.tools.sandbox.suite.TestSuite`, a list of assert
    statements, or a HumanEval-style ``def check(candidate)`` source (then ``entry_point`` is
    required).
    """

    program: str | TeamProgram
    tests: TestSuite | Sequence[str] | str
    entry_point: str | None = None
    limits: Limits | None = None

    __test__ = False  # not a pytest test class


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted Python programs and scores tests, never in the caller's process.

    Every method is thread-safe.  Backends keep a pool of warm workers; the batch methods run
    jobs concurrently on all of them and return results in input order.
    """

    def run(
        self, program: str, *, stdin: str = "", limits: Limits | None = None
    ) -> ExecutionResult:
        """Run ``program`` as a script (``__name__ == "__main__"``) with ``stdin`` as input."""
        ...

    def run_tests(
        self,
        program: str | TeamProgram,
        tests: TestSuite | Sequence[str] | str,
        *,
        entry_point: str | None = None,
        limits: Limits | None = None,
    ) -> TestReport:
        """Load ``program`` (as module ``solution``) and score every test separately; a
        :class:`~llm_marl.tools.sandbox.program.TeamProgram` runs its entry point's author in a
        process of its own."""
        ...

    def run_batch(self, jobs: Sequence[RunJob]) -> list[ExecutionResult]:
        """:meth:`run` for many programs at once, concurrently; results in input order."""
        ...

    def run_tests_batch(self, jobs: Sequence[TestJob]) -> list[TestReport]:
        """:meth:`run_tests` for many jobs at once, concurrently; results in input order."""
        ...

    def close(self) -> None:
        """Stop every worker.  Idempotent; also runs at interpreter exit."""
        ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...
