"""Resource attacks (CPU, processes, memory, output) on every backend: each is stopped at its
limit, scored, and leaves nothing behind for the next job."""

from __future__ import annotations

import time
from dataclasses import replace

from llm_marl.tools.sandbox import Limits, Status


def _bounded(limits: Limits, seconds: float) -> float:
    """Wall-clock bound for a job that hits the time limit: the limit plus slack."""
    return limits.timeout + seconds


# --------------------------------------------------------------------------- resource attacks


def test_infinite_loop_times_out_within_the_limit(sandbox, double):
    # Every test of run_tests below loops forever: 0.5 s each, not the pool's 2 s per test.
    limits = replace(sandbox.limits, timeout=1.5, test_timeout=0.5)
    start = time.monotonic()
    result = sandbox.run("while True:\n    pass\n", limits=limits)
    elapsed = time.monotonic() - start
    assert result.status is Status.TIMEOUT
    assert elapsed < _bounded(limits, 2.0)
    report = sandbox.run_tests(
        "def double(x):\n    while True:\n        pass\n",
        double.check,
        entry_point="double",
        limits=limits,
    )
    assert report.status is Status.TIMEOUT and report.passed == 0
    assert "time limit" in report.tests[0].error


def test_fork_bomb_is_contained_and_cleaned_up(single_sandbox):
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    limits = replace(single_sandbox.limits, timeout=1.5)
    start = time.monotonic()
    result = single_sandbox.run(bomb, limits=limits)
    assert result.status is Status.TIMEOUT
    assert time.monotonic() - start < _bounded(limits, 5.0)
    # The next job on the same worker sees no survivor: only the supervisor (PID 1), its own
    # job process (its parent) and itself run.
    after = single_sandbox.run(
        "import os\nours = {1, os.getppid(), os.getpid()}\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in ours))"
    )
    assert after.status is Status.OK
    strays = eval(after.stdout)
    assert strays == [], strays


def test_memory_bomb_hits_the_memory_limit(sandbox, double):
    result = sandbox.run("x = bytearray(2 ** 34)\n")
    assert result.status is Status.MEMORY
    grow = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n")
    assert grow.status is Status.MEMORY
    report = sandbox.run_tests(
        "def double(x):\n    blob = [0] * (10 ** 10)\n    return 2 * x\n",
        double.check,
        entry_point="double",
    )
    assert report.status is Status.MEMORY and report.passed == 0


def test_huge_output_is_truncated_and_stopped(sandbox):
    start = time.monotonic()
    result = sandbox.run("while True:\n    print('x' * 1000)\n")
    assert result.status is Status.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert len(result.stdout.encode()) == sandbox.limits.output_bytes
    assert time.monotonic() - start < _bounded(sandbox.limits, 0.0)
    err = sandbox.run("import sys\nsys.stderr.write('e' * 10 ** 6)\n")
    assert err.status is Status.OUTPUT_LIMIT and err.stderr_truncated
