"""Issue 28, item 17: every phase of a job sits inside its deadline.

The program controls the bytes its process sends back, so it can build replies that are slow to
*decode* in the trusted test runner (keys that share one hash, a fraction of two huge integers,
a decimal number of a million digits, a manifest of its globals far larger than any test reads),
or stop the test runner itself so that nothing more happens until the job's whole-job deadline.
Each must end within the phase's own budget (the test's or the load's time), far below the
whole-job bound ``Limits.job_seconds`` that a stopped runner used to run into.

Bounds here are upper bounds with a wide margin (the shared CI machine is slow); the verdicts are
what is asserted.
"""

from __future__ import annotations

import time

import pytest

from llm_marl.tools.sandbox import Limits, Status

# suite_timeout keeps the whole-job deadline at 2 * 2 + 2 + 60 = 66 s for one test: an attack
# that runs into it is caught by BOUND.
LIMITS = Limits(timeout=2, test_timeout=2, suite_timeout=60)
BOUND = 25.0
CHECK = "def check(candidate):\n    assert candidate(1) == 2\n"

# The program writes its own reply frame on the descriptor its answers travel on (fd 5),
# bypassing the encoder, then blocks: R must decode (or refuse) the frame within the test's time.
RAW_REPLY = r"""
import json, os, time
def double(x):
    body = json.dumps({"ok": VALUE}).encode()
    os.write(5, b"%010d\n" % len(body) + body)
    time.sleep(100)
"""

REPLIES = {
    # 150,000 distinct integers with one hash: quadratic to put in a set.
    "colliding_set": "{'s': [{'i': hex(k * (2**61 - 1))} for k in range(1, 150_000)]}",
    "colliding_dict": "{'d': [[{'i': hex(k * (2**61 - 1))}, 0] for k in range(1, 150_000)]}",
    # Two 16-million-bit integers: their gcd takes minutes.
    "huge_fraction": "{'fr': [{'i': '3' + 'f' * 4_000_000}, {'i': '5' + 'e' * 4_000_000}]}",
    # A decimal number of 3 million digits: quadratic to convert.
    "long_decimal_number": "json.loads('7' * 3_000_000)",
}


def _raw(value: str) -> str:
    return RAW_REPLY.replace("VALUE", value)


@pytest.mark.parametrize("reply", sorted(REPLIES))
def test_a_reply_built_to_be_slow_to_decode_stays_inside_the_test_budget(sandbox, reply):
    program = _raw(REPLIES[reply])
    if reply == "long_decimal_number":
        program = program.replace(
            'json.dumps({"ok": VALUE})', "'{\"ok\": ' + '7' * 3_000_000 + '}'"
        )
        program = program.replace("VALUE", "0")
    start = time.monotonic()
    report = sandbox.run_tests(program, CHECK, entry_point="double", limits=LIMITS)
    elapsed = time.monotonic() - start
    assert report.status in (Status.FAILED, Status.TIMEOUT), report
    assert report.passed == 0
    assert elapsed < BOUND, f"{reply}: {elapsed:.1f} s"


# The program replaces what its process tells the tests about its globals (the harness code in
# its own process is the program's to change): a manifest far larger than any test reads.
MANIFEST_BOMB = r"""
import sys
harness = sys.modules["__main__"]
def _bomb(ns):
    out = {"double": ["f"]}
    colliding = {"s": [{"i": hex(k * (2**61 - 1))} for k in range(1, 60_000)]}
    for i in range(40):
        out[f"g{i}"] = ["v", colliding]
    for i in range(300):
        out[f"h{i}"] = ["v", list(range(9_999))]
    return out
harness._manifest = _bomb
def double(x):
    return 2 * x
"""


def test_a_manifest_bomb_is_decoded_inside_the_load_budget(sandbox):
    start = time.monotonic()
    report = sandbox.run_tests(MANIFEST_BOMB, CHECK, entry_point="double", limits=LIMITS)
    elapsed = time.monotonic() - start
    assert report.status is not Status.INFRA_ERROR, report
    assert elapsed < BOUND, f"{elapsed:.1f} s"


# Stopping the trusted test runner: by pid (found in /proc), by process group, everyone, or
# through a pidfd; at load time or during a test.
STOP_RUNNER = r"""
import os, signal
def _stop():
    me = os.getpid()
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (me,)]
    for pid in pids:
        for how in HOWS:
            try:
                if how == "pid":
                    os.kill(pid, signal.SIGSTOP)
                elif how == "group":
                    os.killpg(pid, signal.SIGSTOP)
                elif how == "everyone":
                    os.kill(-1, signal.SIGSTOP)
                elif how == "pidfd":
                    fd = os.pidfd_open(pid)
                    signal.pidfd_send_signal(fd, signal.SIGSTOP)
                elif how == "tgkill":
                    signal.pthread_kill(pid, signal.SIGSTOP)
            except (OSError, AttributeError, ValueError):
                pass
WHEN
def double(x):
    DURING
    return 2 * x
"""


@pytest.mark.parametrize("how", ["pid", "group", "everyone", "pidfd"])
@pytest.mark.parametrize("when", ["load", "test"])
def test_stopping_the_test_runner_ends_the_job_at_once(single_sandbox, how, when):
    program = STOP_RUNNER.replace("HOWS", repr([how]))
    program = program.replace("WHEN", "_stop()" if when == "load" else "")
    program = program.replace("DURING", "_stop()" if when == "test" else "pass")
    check = "def check(candidate):\n" + "    assert candidate(1) == 2\n" * 3
    start = time.monotonic()
    report = single_sandbox.run_tests(program, check, entry_point="double", limits=LIMITS)
    elapsed = time.monotonic() - start
    # Either the signal never reached the runner (the program is otherwise correct), or the
    # stopped runner is a timeout; never the whole-job deadline, never an infrastructure error.
    assert report.status in (Status.OK, Status.TIMEOUT, Status.FAILED), report
    assert elapsed < BOUND, f"{how} at {when}: {elapsed:.1f} s ({report.status})"
    healthy = single_sandbox.run_tests(
        "def double(x):\n    return 2 * x\n", CHECK, entry_point="double"
    )
    assert healthy.status is Status.OK, healthy


def test_a_runner_stopped_anyway_is_a_timeout_at_once(bwrap_ready, monkeypatch):
    """Where the job's signal guard is missing (a machine without the filter), the harness
    still finds the stopped runner (or the stopped job process, which the program stops first:
    it has the lowest pid of the job) and ends the job as a timeout, at once."""
    import llm_marl.tools.sandbox.process as process
    from llm_marl.tools.sandbox import ProcessSandbox

    source = process.HARNESS_SOURCE
    assert "        if guarded:\n" in source
    monkeypatch.setattr(
        process, "HARNESS_SOURCE", source.replace("        if guarded:\n", "        if False:\n")
    )
    program = (
        STOP_RUNNER.replace("HOWS", "['pid']").replace("WHEN", "").replace("DURING", "_stop()")
    )
    with ProcessSandbox(workers=1, limits=LIMITS) as sandbox:
        start = time.monotonic()
        report = sandbox.run_tests(program, CHECK, entry_point="double")
        elapsed = time.monotonic() - start
    assert report.status is Status.TIMEOUT and "was stopped" in report.error, report
    assert elapsed < BOUND
