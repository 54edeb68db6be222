"""Class 1: a program signals its supervisor to get itself unscored.

The supervisor is PID 1 of the job's PID namespace (bubblewrap, Docker); it must survive every
signal a job can send, so that the job is always scored and the worker serves the next job.  And
if a worker does die twice on the same job, the job is scored as failing (a healthy worker
answers), never dropped as an infrastructure error.
"""

from __future__ import annotations

import signal

import pytest

from llm_marl.tools.sandbox import Status
from llm_marl.tools.sandbox.docker import DockerWorker
from llm_marl.tools.sandbox.process import ProcessWorker

DOUBLE_CHECK = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 10\n"
)
CORRECT = "def double(x):\n    return 2 * x\n"

SIGNALS = [
    signal.SIGINT,  # the interpreter's default handler raises KeyboardInterrupt
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGALRM,
    signal.SIGTSTP,
    signal.SIGSEGV,
    signal.SIGXCPU,
    signal.SIGRTMIN + 3,
    signal.SIGSTOP,
    signal.SIGKILL,
]


def _attack(sig: int, repeat: int = 20, everyone: bool = True) -> str:
    """Signal the supervisor by every name it has: PID 1, the parent, and everyone (-1).

    ``kill(-1)`` also reaches the test runner, which the program may kill: that only fails its
    own tests (a verdict), see ``test_isolation``.
    """
    return f"""
import os, signal, time
me = os.getpid()
targets = sorted({{1, os.getppid()}})
for _ in range({repeat}):
    for pid in targets:
        try:
            os.kill(pid, {int(sig)})
        except OSError:
            pass
    try:
        signal.signal({int(sig)}, signal.SIG_IGN)   # spare ourselves, then hit everyone
    except (OSError, ValueError, RuntimeError):
        pass
    if {everyone}:
        try:
            os.kill(-1, {int(sig)})
        except OSError:
            pass
    time.sleep(0.001)
"""


def _replaced(sandbox) -> int:
    pool = getattr(sandbox, "_pool", None)
    return getattr(pool, "replaced", 0)


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIGRTMIN+{sig - signal.SIGRTMIN}"


@pytest.mark.parametrize("sig", SIGNALS, ids=_name)
def test_signals_to_the_supervisor_cannot_unscore_a_run(single_sandbox, sig):
    before = _replaced(single_sandbox)
    result = single_sandbox.run(_attack(sig) + "print('scored')\n")
    assert result.status is not Status.INFRA_ERROR, result
    # The next job runs on the same, healthy worker.
    after = single_sandbox.run("print(6 * 7)")
    assert after.status is Status.OK and after.stdout == "42\n", after
    assert _replaced(single_sandbox) == before


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGUSR2], ids=_name
)
def test_signals_from_inside_a_test_cannot_unscore_the_tests(single_sandbox, sig):
    attack = _attack(sig, repeat=5).replace("\n", "\n    ")
    program = "def double(x):\n    " + attack.strip() + "\n    return 2 * x\n"
    report = single_sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.status is not Status.INFRA_ERROR, report
    _ = report.passed  # a verdict: reading the score does not raise
    assert single_sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").all_passed


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=_name)
def test_signals_during_module_load_leave_a_correct_program_passing(sandbox, sig):
    program = _attack(sig, everyone=False) + CORRECT
    report = sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.status is Status.OK, report


# --------------------------------------------------------------------------- dies twice

KILLER_MARK = b"KILL_MY_WORKER_NOW"


@pytest.fixture
def workers_die_on_marked_jobs(monkeypatch):
    """Stands for a program that kills its supervisor: a job whose program holds the marker
    loses its worker as soon as it is sent (what SIGINT did to the supervisor before)."""
    for cls in (ProcessWorker, DockerWorker):
        original = cls.request

        def request(self, payload, timeout, _original=original):
            if KILLER_MARK in payload:
                self.close()
            return _original(self, payload, timeout)

        monkeypatch.setattr(cls, "request", request)


def test_a_job_whose_worker_dies_twice_is_scored_as_failing(sandbox, workers_die_on_marked_jobs):
    program = f"# {KILLER_MARK.decode()}\n" + CORRECT
    report = sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.status is Status.FAILED, report
    assert report.passed == 0 and "crashed the sandbox worker twice" in report.error
    run = sandbox.run(f"# {KILLER_MARK.decode()}\nprint(1)")
    assert run.status is Status.FAILED and not run.ok
    # The pool recovered: the same program without the marker passes.
    assert sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").all_passed


def test_two_deaths_with_a_broken_infrastructure_stay_infra_errors(
    process_sandbox, workers_die_on_marked_jobs, monkeypatch
):
    # No worker can start any more (the machine ran out of processes): that is not the
    # program's doing, so no verdict.
    def cannot_start():
        raise OSError("cannot fork a new worker")

    monkeypatch.setattr(process_sandbox._pool, "_start", cannot_start)
    program = f"# {KILLER_MARK.decode()}\n" + CORRECT
    report = process_sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.status is Status.INFRA_ERROR, report
    monkeypatch.undo()
    # Replacements start again once the machine recovers.
    for _ in range(3):
        assert process_sandbox.run("print(1)").status is Status.OK
