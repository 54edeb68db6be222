"""Issue 28, item 14: units that cannot fail, decided by running them, not by reading them.

The static rule (a unit counts if it reads the program) let through units whose assertion holds
whatever the program does: proxy uses of the result, ``or True``-style disjunctions, comparisons
that only touch the value. A wrong program passed 7 of 8. Now a suite is run against probe
programs whose functions return a sentinel (a string no task expects, ``None``, ``0``): a unit
that passes against all of them is not scored, on the raw sandbox API and in the envs alike.
"""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.tools.sandbox import Status, TestSuite

CANNOT_FAIL = [
    "assert candidate(1) or True",
    "assert (candidate(2), True)[1]",
    "assert candidate(3) == candidate(3)",
    "assert type(candidate(4))",
    "assert str(candidate(5)) or repr(candidate(5))",
    "assert [candidate(6)]",
    "assert len([candidate(7)]) == 1",
    "assert candidate(8) is not NotImplemented",
    "assert candidate(9) in (candidate(9), 1)",
]
REAL = "assert candidate(10) == 20"
CHECK = "def check(candidate):\n    r = candidate(11)\n    assert r == r\n" + "".join(
    f"    {unit}\n" for unit in [*CANNOT_FAIL, REAL]
)
WRONG = "def double(x):\n    return -1\n"
RIGHT = "def double(x):\n    return 2 * x\n"


def test_units_that_pass_against_every_probe_are_not_scored(sandbox):
    report = sandbox.run_tests(WRONG, CHECK, entry_point="double")
    assert report.total == 1 and report.passed == 0, [t.source for t in report.tests]
    assert report.status is Status.FAILED
    right = sandbox.run_tests(RIGHT, CHECK, entry_point="double")
    assert right.status is Status.OK and right.total == 1


def test_probing_keeps_every_real_unit_and_lists_the_rest(sandbox):
    suite = TestSuite.from_check(CHECK, "double")
    probed = sandbox.failable(suite)
    assert probed.tests == (REAL,)
    assert set(CANNOT_FAIL) | {"assert r == r"} <= set(probed.unscored)
    assert sandbox.failable(probed) is probed  # probed once


def test_assert_lists_are_probed_too(sandbox):
    tests = ["assert add(1, 2) or True", "assert add(1, 2) == add(1, 2)", "assert add(1, 2) == 3"]
    report = sandbox.run_tests("def add(a, b):\n    return 0\n", tests)
    assert report.total == 1 and report.passed == 0


def test_a_suite_where_nothing_can_fail_is_refused(sandbox):
    check = "def check(candidate):\n    assert candidate(1) or True\n"
    with pytest.raises(ValueError, match="no test can fail"):
        sandbox.run_tests(RIGHT, check, entry_point="double")


def test_the_env_scores_only_units_that_can_fail(sandbox):
    task = {
        "task_id": "Probe/0",
        "prompt": 'def double(x):\n    """Return 2 * x."""\n',
        "test": CHECK,
        "entry_point": "double",
    }
    env = llm_marl.make("humaneval_single-v0", tasks=[task], sandbox=sandbox)
    env.reset(seed=0, options={"task_id": "Probe/0"})
    _, rewards, _, _, infos = env.step({"coder": WRONG})
    assert infos["coder"]["tests_total"] == 1 and infos["coder"]["tests_passed"] == 0


def test_the_bundled_tasks_lose_no_unit(process_sandbox):
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox=process_sandbox)
    for task in env.unwrapped.tasks:
        suite = TestSuite.from_check(task["test"], task["entry_point"])
        assert process_sandbox.failable(suite).tests == suite.tests, task["task_id"]
