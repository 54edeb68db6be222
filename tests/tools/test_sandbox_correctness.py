"""Scoring correctness, run on every backend (ProcessSandbox and, marked docker, DockerSandbox)."""

from __future__ import annotations

import threading

import pytest

from llm_marl.tools.sandbox import Limits, RunJob, Status, TestJob, TestSuite

ADD_CHECK = """
import math

def check(candidate):
    big = 10 ** 6
    assert candidate(1, 2) == 3
    assert candidate(-1, 1) == 0
    assert candidate(big, big) == 2 * big
    for a, b in [(0, 0), (2, 5), (7, -3)]:
        assert candidate(a, b) == a + b
    assert math.isclose(candidate(0.1, 0.2), 0.3)
"""


def test_correct_solution_passes_every_assert(sandbox):
    report = sandbox.run_tests("def add(a, b):\n    return a + b\n", ADD_CHECK, entry_point="add")
    assert report.status is Status.OK, report
    assert (report.passed, report.total) == (5, 5)
    assert report.fraction == 1.0 and report.all_passed
    assert report.tests[3].source.startswith("for a, b in")


def test_partially_correct_solution_scores_the_fraction(sandbox):
    # Wrong for negative numbers only: asserts 2 and 4 (the loop holds -3) fail.
    program = "def add(a, b):\n    return abs(a) + abs(b)\n"
    report = sandbox.run_tests(program, ADD_CHECK, entry_point="add")
    assert report.status is Status.FAILED
    assert [t.passed for t in report.tests] == [True, False, True, False, True]
    assert report.fraction == pytest.approx(3 / 5)
    assert report.tests[1].error.startswith("AssertionError")


def test_setup_lines_in_check_run_before_the_asserts(sandbox):
    tests = """
def check(candidate):
    expected = {"a": 1, "b": 2}
    keys = sorted(expected)
    assert candidate(keys[0]) == expected["a"]
    helper = lambda k: expected[k] * 10
    assert candidate("b") * 10 == helper("b")
"""
    program = "def lookup(k):\n    return {'a': 1, 'b': 2}[k]\n"
    report = sandbox.run_tests(program, tests, entry_point="lookup")
    assert report.status is Status.OK, report
    assert report.total == 2


def test_syntax_error_fails_with_the_error_text(sandbox):
    report = sandbox.run_tests("def add(a, b)\n    return a + b\n", ADD_CHECK, entry_point="add")
    assert report.status is Status.FAILED
    assert report.passed == 0 and report.total == 5
    assert "SyntaxError" in report.error
    assert all("failed to load" in t.error for t in report.tests)


def test_exception_in_the_solution_fails_each_test_with_its_text(sandbox):
    program = "def add(a, b):\n    return (a + b) / 0\n"
    report = sandbox.run_tests(program, ADD_CHECK, entry_point="add")
    assert report.status is Status.FAILED
    assert report.passed == 0
    assert all("ZeroDivisionError" in t.error for t in report.tests)


def test_exception_at_import_fails(sandbox):
    report = sandbox.run_tests("raise RuntimeError('boom')\n", ADD_CHECK, entry_point="add")
    assert report.status is Status.FAILED
    assert "RuntimeError: boom" in report.error


def test_missing_entry_point_fails_clearly(sandbox):
    report = sandbox.run_tests("def plus(a, b):\n    return a + b\n", ADD_CHECK, entry_point="add")
    assert report.status is Status.FAILED and report.passed == 0
    assert "add" in report.error


def test_list_of_asserts_is_scored_per_assert(sandbox):
    program = "def square(x):\n    return x * x if x < 3 else 0\n"
    asserts = ["assert square(1) == 1", "assert square(2) == 4", "assert square(3) == 9"]
    report = sandbox.run_tests(program, asserts)
    assert [t.passed for t in report.tests] == [True, True, False]
    assert report.fraction == pytest.approx(2 / 3)


def test_tests_can_expect_exceptions_from_the_program(sandbox):
    program = (
        "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n"
    )
    tests = """
def check(candidate):
    try:
        candidate(-1)
        assert False, "no error"
    except ValueError as e:
        assert "negative" in str(e)
    assert candidate(4) == 2.0
"""
    report = sandbox.run_tests(program, tests, entry_point="root")
    assert report.status is Status.OK, report


def test_values_keep_their_types_across_the_boundary(sandbox):
    program = """
from collections import Counter, OrderedDict

def f(kind):
    return {
        "tuple": (1, 2), "list": [1, 2], "set": {1, 2}, "dict": {1: "a", (2, 3): [4]},
        "float": 0.1 + 0.2, "big": 2 ** 100, "bytes": b"\\x00\\xff", "none": None,
        "counter": Counter("aab"), "gen": (i * i for i in range(4)), "nan": float("nan"),
        "complex": 1 + 2j, "frozen": frozenset({3}), "ordered": OrderedDict(a=1),
    }[kind]
"""
    asserts = [
        "assert f('tuple') == (1, 2) and type(f('tuple')) is tuple",
        "assert f('list') == [1, 2] and f('list') != (1, 2)",
        "assert f('set') == {1, 2}",
        "assert f('dict') == {1: 'a', (2, 3): [4]}",
        "assert f('float') == 0.1 + 0.2",
        "assert f('big') == 2 ** 100",
        "assert f('bytes') == bytes([0, 255])",
        "assert f('none') is None",
        "assert f('counter') == {'a': 2, 'b': 1}",
        "assert list(f('gen')) == [0, 1, 4, 9]",
        "assert f('nan') != f('nan')",
        "assert f('complex') == 1 + 2j",
        "assert f('frozen') == frozenset({3})",
        "assert f('ordered') == {'a': 1}",
    ]
    report = sandbox.run_tests(program, asserts)
    assert report.status is Status.OK, [t for t in report.tests if not t.passed]


POLY = """
import math

def poly(xs, x):
    return sum(c * math.pow(x, i) for i, c in enumerate(xs))
"""


def test_tests_use_the_task_helpers_given_as_task_code(sandbox):
    # HumanEval/32-style: the check calls a helper from the prompt (poly) on the result; the
    # helper comes from the task's code, never from the program (issue 28, item 15).
    program = (
        POLY
        + """
def find_zero(xs):
    lo, hi = -100.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if poly(xs, lo) * poly(xs, mid) <= 0:
            hi = mid
        else:
            lo = mid
    return lo
"""
    )
    tests = """
def check(candidate):
    import math
    import random
    rng = random.Random(42)
    for _ in range(20):
        coeffs = [rng.randint(1, 5), rng.randint(1, 5)]
        solution = candidate(coeffs)
        assert math.fabs(poly(coeffs, solution)) < 1e-4
"""
    with pytest.raises(ValueError, match="poly.*task_code"):
        sandbox.run_tests(program, tests, entry_point="find_zero")
    suite = TestSuite.from_check(tests, "find_zero", task_code=POLY)
    report = sandbox.run_tests(program, suite)
    assert report.status is Status.OK, report


def test_state_persists_between_calls_within_one_job(sandbox):
    program = "calls = []\ndef f(x):\n    calls.append(x)\n    return len(calls)\n"
    report = sandbox.run_tests(program, ["assert f(0) == 1", "assert f(0) == 2"])
    assert report.status is Status.OK


def test_main_block_does_not_run_in_test_mode(sandbox):
    program = "def f():\n    return 1\nif __name__ == '__main__':\n    input()\n"
    report = sandbox.run_tests(program, ["assert f() == 1"])
    assert report.status is Status.OK, report


def test_program_output_is_captured_in_test_mode(sandbox):
    report = sandbox.run_tests("print('loading')\ndef f():\n    return 1\n", ["assert f() == 1"])
    assert report.stdout == "loading\n"


def test_run_reads_stdin_and_reports_exit_codes(sandbox):
    result = sandbox.run("import sys\nprint(input()[::-1])\nsys.exit(3)\n", stdin="abc\n")
    assert result.status is Status.FAILED
    assert result.stdout == "cba\n" and result.exit_code == 3
    ok = sandbox.run("print(__name__)")
    assert ok.status is Status.OK and ok.stdout == "__main__\n" and ok.exit_code == 0


def test_run_reports_uncaught_exceptions_on_stderr(sandbox):
    result = sandbox.run("def f():\n    raise KeyError('k')\nf()\n")
    assert result.status is Status.FAILED and result.exit_code == 1
    assert "Traceback" in result.stderr and "KeyError: 'k'" in result.stderr
    assert "main.py" in result.stderr


def test_each_job_gets_a_fresh_working_directory(sandbox):
    sandbox.run("open('leftover.txt', 'w').write('x')")
    result = sandbox.run("import os\nprint(sorted(os.listdir('.')))")
    assert result.stdout == "['main.py']\n"


def test_batches_keep_order_and_are_thread_safe(sandbox):
    jobs = [TestJob(f"def f():\n    return {i}\n", [f"assert f() == {i}"]) for i in range(12)]
    wrong = [TestJob(f"def f():\n    return {i}\n", [f"assert f() == {i + 1}"]) for i in range(12)]
    results: dict[str, list] = {}

    def work(name, batch):
        results[name] = sandbox.run_tests_batch(batch)

    threads = [
        threading.Thread(target=work, args=(n, b)) for n, b in (("ok", jobs), ("bad", wrong))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results["ok"]] == [Status.OK] * 12
    assert [r.status for r in results["bad"]] == [Status.FAILED] * 12
    runs = sandbox.run_batch([RunJob(f"print({i})") for i in range(6)])
    assert [r.stdout for r in runs] == [f"{i}\n" for i in range(6)]


def test_per_job_limits_override_the_default(sandbox):
    result = sandbox.run("import time\ntime.sleep(2)\n", limits=Limits(timeout=0.5))
    assert result.status is Status.TIMEOUT
    assert result.duration < 1.5


def test_prebuilt_suite_and_from_source(sandbox):
    suite = TestSuite.from_source("import math\nassert f(16) == math.sqrt(16)\nassert f(4) == 3\n")
    report = sandbox.run_tests("def f(x):\n    return x ** 0.5\n", suite)
    assert [t.passed for t in report.tests] == [True, False]
