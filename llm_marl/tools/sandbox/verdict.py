"""Turn the supervisor's raw facts about one job into an ExecutionResult / TestReport.

This runs on the host (trusted).  The only input that could have been influenced by the program
is the output it printed and the messages of the exceptions it raised; the test records come
from the test runner, and they are still parsed strictly: a test counts as passed only when its
record says so, in the expected order.

Every string that leaves here is valid UTF-8 (:func:`clean_text`): a program can put lone
surrogates into an exception message (JSON carries them as ``\\udXXX`` escapes), and a tokenizer
fed such a string raises, which would kill a training step.
"""

from __future__ import annotations

import json
import signal
from typing import Any

from llm_marl.tools.sandbox.base import ExecutionResult, Limits, Status, TestCaseResult, TestReport
from llm_marl.tools.sandbox.suite import TestSuite
from llm_marl.tools.text import scrub_surrogates

# Error types the test runner reports for the time rules (see ``harness._runner_main``).
PROGRAM_TIMEOUT = "ProgramTimeout"
SUITE_TIMEOUT = "SuiteTimeout"

_SIGKILL = int(signal.SIGKILL)
_SIGXCPU = int(signal.SIGXCPU)
_SIGXFSZ = int(signal.SIGXFSZ)


def clean_text(text: Any) -> str:
    """``text`` as a string that encodes to UTF-8: lone surrogates become U+FFFD."""
    return scrub_surrogates(text if isinstance(text, str) else str(text))


def _clean_optional(text: Any) -> str | None:
    return None if text is None else clean_text(text)


def infra_execution_result(message: str) -> ExecutionResult:
    return ExecutionResult(
        status=Status.INFRA_ERROR,
        stdout="",
        stderr="",
        exit_code=None,
        duration=0.0,
        error=clean_text(message),
    )


def infra_test_report(suite: TestSuite, message: str) -> TestReport:
    return _unrun_report(suite, Status.INFRA_ERROR, message, "not run: sandbox failure")


def crash_execution_result(status: Status, message: str) -> ExecutionResult:
    """A verdict without output: the program killed its workers, or was refused."""
    return ExecutionResult(
        status=status, stdout="", stderr="", exit_code=None, duration=0.0, error=clean_text(message)
    )


def crash_test_report(suite: TestSuite, status: Status, message: str) -> TestReport:
    return _unrun_report(suite, status, message, "not run: " + message)


def _unrun_report(suite: TestSuite, status: Status, message: str, test_error: str) -> TestReport:
    tests = tuple(
        TestCaseResult(index=i, source=clean_text(src), passed=False, error=clean_text(test_error))
        for i, src in enumerate(suite.tests)
    )
    return TestReport(status=status, tests=tests, error=clean_text(message))


def _limit_status(
    facts: dict[str, Any], limits: Limits, exit_info: dict | None, seconds: float
) -> tuple[Status, str] | None:
    """The limit that ended the job, if any: (status, message)."""
    sig = (exit_info or {}).get("signal")
    if facts.get("runner_stopped"):
        return Status.TIMEOUT, "the test runner was stopped (by the program?): counted as a timeout"
    if facts.get("job_process_stopped"):
        return (
            Status.TIMEOUT,
            "the sandbox's job process was stopped (by the program?): counted as a timeout",
        )
    if facts.get("timed_out") or sig == _SIGXCPU:
        return Status.TIMEOUT, f"time limit exceeded ({seconds:g} s)"
    if facts.get("files_exceeded"):
        return (
            Status.MEMORY,
            f"memory limit exceeded: more than {facts['files_exceeded']} files in the scratch "
            f"space; the run was stopped",
        )
    exceeded = facts.get("output_exceeded")
    if exceeded in ("stdout", "stderr"):
        return (
            Status.OUTPUT_LIMIT,
            f"output limit exceeded on {exceeded} ({limits.output_bytes} bytes kept); the run "
            f"was stopped",
        )
    return None


def _killed_on_its_own(exit_info: dict | None) -> bool:
    """SIGKILL the supervisor did not send: in practice the kernel's OOM killer."""
    if not exit_info:
        return False
    return exit_info.get("signal") == _SIGKILL and not exit_info.get("swept")


def make_execution_result(facts: dict[str, Any], limits: Limits) -> ExecutionResult:
    exit_info = facts.get("program_exit")

    def result(status: Status, exit_code: int | None, error: str | None) -> ExecutionResult:
        return ExecutionResult(
            status=status,
            stdout=clean_text(facts.get("stdout", "")),
            stderr=clean_text(facts.get("stderr", "")),
            exit_code=exit_code,
            duration=float(facts.get("duration", 0.0)),
            error=error,
            stdout_truncated=bool(facts.get("stdout_truncated")),
            stderr_truncated=bool(facts.get("stderr_truncated")),
        )

    limit = _limit_status(facts, limits, exit_info, limits.job_seconds())
    if limit is not None:
        return result(limit[0], None, limit[1])
    uncaught = facts.get("aux", "").strip()
    if uncaught == "MemoryError" or _killed_on_its_own(exit_info) or facts.get("oom_killed"):
        return result(
            Status.MEMORY, _exit_code(exit_info), f"memory limit exceeded ({limits.memory_mb} MiB)"
        )
    code = _exit_code(exit_info)
    if code is None:
        return result(Status.FAILED, None, "the program's exit status was lost")
    error: str | None
    if exit_info and exit_info.get("signal") == _SIGXFSZ:
        error = f"file size limit exceeded ({limits.file_size_mb} MiB)"
    elif code < 0:
        error = f"killed by signal {-code} ({_signal_name(-code)})"
    elif code:
        error = f"exit code {code}"
    else:
        error = None
    return result(Status.OK if code == 0 else Status.FAILED, code, error)


def _exit_code(exit_info: dict | None) -> int | None:
    if not exit_info:
        return None
    if exit_info.get("code") is not None:
        return int(exit_info["code"])
    if exit_info.get("signal") is not None:
        return -int(exit_info["signal"])
    return None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown"


class _Records:
    """Strict parse of the runner's records (JSON lines ``{"k", "i", "ok", "err", "et"}``).

    Kinds: ``L`` program loaded (or not), ``T`` one test, ``S`` test setup failed, ``Q`` the
    runner stopped by rule (too many timeouts, suite too slow), ``W`` a cooperation probe's
    counts (calls of the entry point, calls that returned the sentinel), ``D`` done.
    """

    def __init__(self, text: str, n_tests: int) -> None:
        self.results: dict[int, tuple[bool, str, str]] = {}
        self.load: tuple[bool, str, str] | None = None
        self.setup: tuple[str, str] | None = None
        self.stopped: tuple[str, str] | None = None
        self.done = False
        self.garbled: str | None = None
        self.error_types: list[str] = []
        self.watch: tuple[int, int, int] | None = None
        lines = text.split("\n")
        # A last line without its newline was cut off when the runner was killed: ignore it.
        complete = lines[:-1]
        expected = 0
        for line in complete:
            try:
                rec = json.loads(line)
                kind = rec["k"]
                ok = rec["ok"]
                if not isinstance(ok, bool):
                    raise ValueError("ok is not a bool")
                err = clean_text(rec.get("err", ""))
                et = clean_text(rec.get("et", ""))
            except (ValueError, KeyError, TypeError) as e:
                self.garbled = f"unreadable test record ({e})"
                return
            if self.done:
                self.garbled = "test record after the end marker"
                return
            if et and kind != "W":
                self.error_types.append(et)
            if kind == "L" and self.load is None:
                self.load = (ok, err, et)
            elif kind == "T" and self.load and self.load[0] and self.setup is None:
                if self.stopped or rec.get("i") != expected or expected >= n_tests:
                    self.garbled = f"test record {rec.get('i')!r} out of order"
                    return
                self.results[expected] = (ok, err, et)
                expected += 1
            elif kind == "S" and self.load and self.load[0] and self.setup is None and not ok:
                self.setup = (err, et)
            elif kind == "Q" and self.stopped is None:
                self.stopped = (err, et)
            elif kind == "W" and self.watch is None and isinstance(rec.get("i"), int):
                try:
                    self.watch = (int(rec["i"]), int(err), int(et))
                except ValueError:
                    self.garbled = "unreadable probe record"
                    return
            elif kind == "D":
                self.done = True
            else:
                self.garbled = f"unexpected test record {kind!r}"
                return


def make_test_report(facts: dict[str, Any], suite: TestSuite, limits: Limits) -> TestReport:
    n = len(suite.tests)
    records = _Records(facts.get("aux", ""), n)
    runner_exit = facts.get("runner_exit")
    limit = _limit_status(facts, limits, facts.get("program_exit"), limits.job_seconds(n))
    if limit is None and facts.get("output_exceeded") == "records":
        records.garbled = "the test runner wrote more records than possible"

    if records.garbled:
        pending = f"not scored: {records.garbled}"
    elif records.stopped:
        pending = f"not run: {records.stopped[0]}"
    elif limit is not None:
        pending = f"not run: {limit[1]}"
    elif records.load and not records.load[0]:
        pending = "not run: the program failed to load"
    elif records.setup:
        pending = "not run: the test setup failed"
    else:
        pending = "no result: the test runner stopped early"

    tests = []
    for i, src in enumerate(suite.tests):
        source = clean_text(src)
        if records.garbled is None and i in records.results:
            ok, err, _ = records.results[i]
            tests.append(
                TestCaseResult(index=i, source=source, passed=ok, error=None if ok else err)
            )
        else:
            tests.append(TestCaseResult(index=i, source=source, passed=False, error=pending))
    all_passed = records.garbled is None and n > 0 and all(t.passed for t in tests)
    timed_out = PROGRAM_TIMEOUT in records.error_types or SUITE_TIMEOUT in records.error_types

    error: str | None
    if records.garbled:
        status, error = Status.FAILED, f"test results rejected: {records.garbled}"
    elif all_passed:
        status, error = Status.OK, None
    elif limit is not None:
        status, error = limit
    elif (
        "MemoryError" in records.error_types
        or _killed_on_its_own(facts.get("program_exit"))
        or _killed_on_its_own(facts.get("owner_exit"))  # a team program's entry-point process
        or facts.get("oom_killed")
    ):
        status, error = Status.MEMORY, f"memory limit exceeded ({limits.memory_mb} MiB)"
    elif timed_out:
        status = Status.TIMEOUT
        if records.load and not records.load[0]:
            error = records.load[1]
        elif records.stopped:
            error = records.stopped[0]
        else:
            count = sum(1 for r in records.results.values() if r[2] == PROGRAM_TIMEOUT)
            error = f"{count} test(s) exceeded the time limit ({limits.test_timeout:g} s per test)"
    else:
        status = Status.FAILED
        if records.load and not records.load[0]:
            error = records.load[1] or "the program failed to load"
        elif records.setup:
            error = f"test setup failed: {records.setup[0]}"
        elif not records.done:
            error = "the test runner stopped early" + (
                f" ({_describe(runner_exit)})" if runner_exit else ""
            )
        else:
            error = None
    return TestReport(
        status=status,
        tests=tuple(tests),
        stdout=clean_text(facts.get("stdout", "")),
        stderr=clean_text(facts.get("stderr", "")),
        duration=float(facts.get("duration", 0.0)),
        error=_clean_optional(error),
        stdout_truncated=bool(facts.get("stdout_truncated")),
        stderr_truncated=bool(facts.get("stderr_truncated")),
        sentinel_returns=records.watch if records.garbled is None else None,
    )


def _describe(exit_info: dict) -> str:
    if exit_info.get("signal") is not None:
        return f"killed by signal {exit_info['signal']} ({_signal_name(int(exit_info['signal']))})"
    return f"exit code {exit_info.get('code')}"
