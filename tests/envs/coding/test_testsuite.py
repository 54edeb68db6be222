"""A coding task's tests as the env uses them: suite, task code, shown units, feedback split."""

from __future__ import annotations

import pytest

from llm_marl.envs.coding.testsuite import (
    TestFormatError,
    build_suite,
    repair_test_source,
    shown_units,
    split_units,
    task_tests,
)

CHECK = """
METADATA = {'author': 'x'}


def check(candidate):
    import random
    rng = random.Random(0)
    assert candidate(1) == 2
    assert candidate(2) == 4, "message"
    for _ in range(3):
        v = rng.randint(0, 9)
        assert candidate(v) == 2 * v
"""
PROMPT = 'def double(x):\n    """Twice x.\n    >>> double(1)\n    2\n    """\n'


def _run(suite, fn) -> list[bool]:
    """Run a suite the way the sandbox's test runner does (this is our own test code)."""
    ns: dict = {}
    exec(suite.setup, ns)
    exec(suite.check_source, ns)
    records: dict[int, bool] = {}
    check = ns["_llm_marl_check_factory_"](
        lambda i, e: records.__setitem__(i, e is None), BaseException
    )
    check(fn)
    return [records.get(i, False) for i in range(len(suite))]


def test_units_are_the_statements_holding_asserts():
    suite = build_suite(CHECK, "double", PROMPT)
    assert suite.tests[0] == "assert candidate(1) == 2"
    assert suite.tests[2].startswith("for _ in range(3):")
    assert _run(suite, lambda v: 2 * v) == [True, True, True]


def test_units_fail_independently_and_setup_runs_in_place():
    suite = build_suite(CHECK, "double", PROMPT)
    assert _run(suite, lambda v: 5 if v == 2 else 2 * v) == [True, False, True]
    assert "METADATA" in suite.setup and "import math" in suite.setup


def test_task_code_is_in_the_tests_namespace_after_the_program():
    prompt = (
        "import math\n\ndef poly(xs, x):\n    return sum(c * math.pow(x, i) for i, c in "
        "enumerate(xs))\n\ndef find_zero(xs):\n    '''Find x with poly(xs, x) == 0.'''\n"
    )
    test = "def check(candidate):\n    assert abs(poly([1, 1], candidate([1, 1]))) < 1e-6\n"
    suite = build_suite(test, "find_zero", prompt)
    assert "def poly" in suite.setup and "def find_zero" not in suite.setup
    # The setup defines poly after the program's names are bound: a program `poly` is replaced.
    ns = {"poly": lambda xs, x: 0.0}
    exec(suite.setup, ns)
    assert ns["poly"]([1, 1], 2.0) == 3.0


def test_mangled_isclose_is_repaired():
    test = "def check(candidate):\n    assert math.candidate(candidate(2), 4.0, rel_tol=0.001)\n"
    assert "math.isclose(candidate(2)" in repair_test_source(test)
    suite = build_suite(test, "f", "def f(x):\n    pass\n")
    assert _run(suite, lambda x: x * 2.0) == [True]


@pytest.mark.parametrize(
    "test, message",
    [
        ("def check(candidate)\n    assert 1", "does not parse"),
        ("def other(candidate):\n    assert candidate(1)\n", "no `check"),
        ("def check():\n    assert True\n", "candidate function"),
        ("def check(candidate):\n    x = 1\n", "no test can fail"),
        ("def check(candidate):\n    assert True\n    assert 1 == 1\n", "no test can fail"),
    ],
)
def test_malformed_tests_raise(test, message):
    with pytest.raises(TestFormatError, match=message):
        build_suite(test, "f", "def f():\n    pass\n")


def test_split_is_a_partition_and_deterministic():
    fb, sc = split_units(8, 0.25, "task/1")
    assert len(fb) == 2 and len(sc) == 6
    assert sorted(fb + sc) == list(range(8))
    assert split_units(8, 0.25, "task/1") == (fb, sc)
    draws = {tuple(split_units(8, 0.25, f"task/{i}")[0]) for i in range(20)}
    assert len(draws) > 1, "a different task id gives (in general) a different draw"


def test_split_keeps_at_least_one_feedback_and_one_scoring_unit():
    assert [len(x) for x in split_units(5, 0.01, "t")] == [1, 4]
    assert [len(x) for x in split_units(5, 0.99, "t")] == [4, 1]
    assert [len(x) for x in split_units(1, 0.5, "t")] == [0, 1]
    assert [len(x) for x in split_units(5, 0.0, "t")] == [0, 5]
    with pytest.raises(ValueError, match="feedback_fraction"):
        split_units(3, 1.0, "t")


def test_split_draws_preferred_units_first_and_leaves_one_other_to_score():
    for seed in range(10):
        fb, sc = split_units(6, 0.5, f"t/{seed}", prefer=[1, 4])
        assert {1, 4} <= set(fb) and len(fb) == 3
    fb, sc = split_units(3, 0.9, "t", prefer=[0])
    assert 0 in fb and any(i != 0 for i in sc)


PROMPT_EXAMPLES = '''def pick(arr, k):
    """Return the k largest numbers of arr, sorted.

    Example 1:
        Input: arr = [-3, -4, 5], k = 3
        Output: [-4, -3, 5]
    >>> pick([4, -4, 4], 2)
    [4, 4]
    pick([7, 8], 1) == [8]
    """
'''


@pytest.mark.parametrize(
    "unit, shown",
    [
        ("assert candidate([-3, -4, 5], 3) == [-4, -3, 5]", True),  # Input/Output prose
        ("assert candidate([4, -4, 4], 2) == [4, 4]", True),  # doctest call
        ("assert candidate([4.0, -4, 4], 2) == [4, 4]", True),  # equal values
        ("assert pick([7, 8], 1) == [8]", True),  # by name
        ("assert candidate([7, 8], k=1) == [8]", True),  # same values (keyword or not)
        ("assert candidate([8, 7], 1) == [8]", False),  # an argument the prompt never shows
        ("assert candidate([-3, -4, 5], 2) == [-3, 5]", False),
        ("assert candidate([1, 2, 3], 1) == [3]", False),
        ("for a in [[1]]:\n    assert candidate(a, 1) == [1]", False),  # no literal call
    ],
)
def test_shown_units(unit, shown):
    assert shown_units([unit], "candidate", "pick", PROMPT_EXAMPLES) == (shown,)


def test_booleans_only_match_booleans():
    prompt = "def f(n):\n    '''f(1) is the first, then 2.'''\n"
    # `True` must not be read as the `1` of the prompt.
    assert shown_units(["assert candidate(2) == True"], "candidate", "f", prompt) == (False,)


def test_hidden_scoring_leaves_out_the_prompt_examples():
    test = (
        "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 10\n"
        "    assert candidate(7) == 14\n"
    )
    every = task_tests(test, "double", PROMPT, "t", 0.0, "all")
    hidden = task_tests(test, "double", PROMPT, "t", 0.0, "hidden")
    assert every.shown == hidden.shown == (True, False, False)
    assert every.scoring == (0, 1, 2) and every.scored_on == "all"
    assert hidden.scoring == (1, 2) and hidden.scored_on == "hidden"
    # Multi-turn: the shown unit is the first feedback unit drawn.
    multi = task_tests(test, "double", PROMPT, "t", 0.25, "hidden")
    assert multi.feedback == (0,) and multi.scoring == (1, 2)


def test_a_task_whose_every_unit_is_shown_scores_on_all():
    test = "def check(candidate):\n    assert candidate(1) == 2\n"
    tests = task_tests(test, "double", PROMPT, "t", 0.0, "hidden")
    assert tests.scoring == (0,) and tests.scored_on == "all"
    with pytest.raises(ValueError, match="score_on"):
        task_tests(test, "double", PROMPT, "t", 0.0, "some")
