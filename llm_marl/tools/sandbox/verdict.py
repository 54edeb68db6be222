"""Turn the supervisor's raw facts about one job into an ExecutionResult / TestReport.

This runs on the host (trusted).  The only input that could have been influenced by the program
is the output it printed; the test records come from the test runner, and they are still parsed
strictly: a test counts as passed only when its record says so, in the expected order.
"""

from __future__ import annotations

import json
import signal
from typing import Any

from llm_marl.tools.sandbox.base import ExecutionResult, Limits, Status, TestCaseResult, TestReport
from llm_marl.tools.sandbox.suite import TestSuite

_SIGKILL = int(signal.SIGKILL)
_SIGXCPU = int(signal.SIGXCPU)
_SIGXFSZ = int(signal.SIGXFSZ)


def infra_execution_result(message: str) -> ExecutionResult:
    return ExecutionResult(
        status=Status.INFRA_ERROR,
        stdout="",
        stderr="",
        exit_code=None,
        duration=0.0,
        error=message,
    )


def infra_test_report(suite: TestSuite, message: str) -> TestReport:
    tests = tuple(
        TestCaseResult(index=i, source=src, passed=False, error="not run: sandbox failure")
        for i, src in enumerate(suite.tests)
    )
    return TestReport(status=Status.INFRA_ERROR, tests=tests, error=message)


def _limit_status(
    facts: dict[str, Any], limits: Limits, exit_info: dict | None
) -> tuple[Status, str] | None:
    """The limit that ended the job, if any: (status, message)."""
    sig = (exit_info or {}).get("signal")
    if facts.get("timed_out") or sig == _SIGXCPU:
        return Status.TIMEOUT, f"time limit exceeded ({limits.timeout:g} s)"
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
    return bool(exit_info) and exit_info.get("signal") == _SIGKILL and not exit_info.get("swept")


def make_execution_result(facts: dict[str, Any], limits: Limits) -> ExecutionResult:
    exit_info = facts.get("program_exit")
    common = dict(
        stdout=facts.get("stdout", ""),
        stderr=facts.get("stderr", ""),
        duration=float(facts.get("duration", 0.0)),
        stdout_truncated=bool(facts.get("stdout_truncated")),
        stderr_truncated=bool(facts.get("stderr_truncated")),
    )
    limit = _limit_status(facts, limits, exit_info)
    if limit is not None:
        return ExecutionResult(status=limit[0], exit_code=None, error=limit[1], **common)
    uncaught = facts.get("aux", "").strip()
    if uncaught == "MemoryError" or _killed_on_its_own(exit_info):
        return ExecutionResult(
            status=Status.MEMORY,
            exit_code=_exit_code(exit_info),
            error=f"memory limit exceeded ({limits.memory_mb} MiB)",
            **common,
        )
    code = _exit_code(exit_info)
    if code is None:
        return ExecutionResult(
            status=Status.FAILED,
            exit_code=None,
            error="the program's exit status was lost",
            **common,
        )
    if exit_info and exit_info.get("signal") == _SIGXFSZ:
        error = f"file size limit exceeded ({limits.file_size_mb} MiB)"
    elif code < 0:
        error = f"killed by signal {-code} ({_signal_name(-code)})"
    elif code:
        error = f"exit code {code}"
    else:
        error = None
    return ExecutionResult(
        status=Status.OK if code == 0 else Status.FAILED, exit_code=code, error=error, **common
    )


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
    """Strict parse of the runner's records (JSON lines ``{"k", "i", "ok", "err", "et"}``)."""

    def __init__(self, text: str, n_tests: int) -> None:
        self.results: dict[int, tuple[bool, str]] = {}
        self.load: tuple[bool, str, str] | None = None
        self.setup: tuple[str, str] | None = None
        self.done = False
        self.garbled: str | None = None
        self.error_types: list[str] = []
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
                err = str(rec.get("err", ""))
                et = str(rec.get("et", ""))
            except (ValueError, KeyError, TypeError) as e:
                self.garbled = f"unreadable test record ({e})"
                return
            if self.done:
                self.garbled = "test record after the end marker"
                return
            if et:
                self.error_types.append(et)
            if kind == "L" and self.load is None:
                self.load = (ok, err, et)
            elif kind == "T" and self.load and self.load[0] and self.setup is None:
                if rec.get("i") != expected or expected >= n_tests:
                    self.garbled = f"test record {rec.get('i')!r} out of order"
                    return
                self.results[expected] = (ok, err)
                expected += 1
            elif kind == "S" and self.load and self.load[0] and self.setup is None and not ok:
                self.setup = (err, et)
            elif kind == "D":
                self.done = True
            else:
                self.garbled = f"unexpected test record {kind!r}"
                return


def make_test_report(facts: dict[str, Any], suite: TestSuite, limits: Limits) -> TestReport:
    n = len(suite.tests)
    records = _Records(facts.get("aux", ""), n)
    runner_exit = facts.get("runner_exit")
    limit = _limit_status(facts, limits, facts.get("program_exit"))
    if limit is None and facts.get("output_exceeded") == "records":
        records.garbled = "the test runner wrote more records than possible"

    if records.garbled:
        pending = f"not scored: {records.garbled}"
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
        if records.garbled is None and i in records.results:
            ok, err = records.results[i]
            tests.append(TestCaseResult(index=i, source=src, passed=ok, error=None if ok else err))
        else:
            tests.append(TestCaseResult(index=i, source=src, passed=False, error=pending))
    all_passed = records.garbled is None and n > 0 and all(t.passed for t in tests)

    if records.garbled:
        status, error = Status.FAILED, f"test results rejected: {records.garbled}"
    elif all_passed:
        status, error = Status.OK, None
    elif limit is not None:
        status, error = limit
    elif "MemoryError" in records.error_types or _killed_on_its_own(facts.get("program_exit")):
        status, error = Status.MEMORY, f"memory limit exceeded ({limits.memory_mb} MiB)"
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
        stdout=facts.get("stdout", ""),
        stderr=facts.get("stderr", ""),
        duration=float(facts.get("duration", 0.0)),
        error=error,
        stdout_truncated=bool(facts.get("stdout_truncated")),
        stderr_truncated=bool(facts.get("stderr_truncated")),
    )


def _describe(exit_info: dict) -> str:
    if exit_info.get("signal") is not None:
        return f"killed by signal {exit_info['signal']} ({_signal_name(int(exit_info['signal']))})"
    return f"exit code {exit_info.get('code')}"
