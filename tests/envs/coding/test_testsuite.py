"""Splitting check(candidate) into test units and units into feedback / scoring sets."""

from __future__ import annotations

import pytest

from llm_marl.envs.coding.testsuite import (
    TestFormatError,
    parse_units,
    repair_test_source,
    split_units,
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


def _run(unit, fn):
    """Run a unit's script the way the sandbox runner does: in a namespace holding the program."""
    ns = {"double": fn}
    exec(unit.script, ns)


def test_units_are_the_statements_holding_asserts():
    units = parse_units(CHECK, "double")
    assert [u.index for u in units] == [0, 1, 2]
    assert units[0].source == "assert candidate(1) == 2"
    assert units[2].source.startswith("for _ in range(3):")
    for unit in units:
        _run(unit, lambda v: 2 * v)  # a correct function passes every unit


def test_units_fail_independently():
    units = parse_units(CHECK, "double")

    def wrong(v):
        return 5 if v == 2 else 2 * v

    outcomes = []
    for unit in units:
        try:
            _run(unit, wrong)
        except AssertionError:
            outcomes.append(False)
        else:
            outcomes.append(True)
    assert outcomes[:2] == [True, False]


def test_setup_before_a_unit_runs_with_it_and_module_constants_are_kept():
    units = parse_units(CHECK, "double")
    assert "rng = random.Random(0)" in units[2].script
    assert "METADATA" in units[0].script


def test_mangled_isclose_is_repaired():
    test = "def check(candidate):\n    assert math.candidate(candidate(2), 4.0, rel_tol=0.001)\n"
    assert "math.isclose(candidate(2)" in repair_test_source(test)
    (unit,) = parse_units(test, "f")
    exec(unit.script, {"f": lambda x: x * 2.0})


@pytest.mark.parametrize(
    "test, message",
    [
        ("def check(candidate)\n    assert 1", "does not parse"),
        ("def other(candidate):\n    assert candidate(1)\n", "no `check"),
        ("def check():\n    assert True\n", "first argument"),
        ("def check(candidate):\n    x = 1\n", "no assert"),
    ],
)
def test_malformed_tests_raise(test, message):
    with pytest.raises(TestFormatError, match=message):
        parse_units(test, "f")


def _units(n):
    test = "def check(candidate):\n" + "".join(
        f"    assert candidate({i}) == {i}\n" for i in range(n)
    )
    return parse_units(test, "f")


def test_split_is_a_partition_and_deterministic():
    units = _units(8)
    fb, sc = split_units(units, 0.25, "task/1")
    assert len(fb) == 2 and len(sc) == 6
    assert sorted(u.index for u in fb + sc) == list(range(8))
    assert split_units(units, 0.25, "task/1") == (fb, sc)
    # A different task id gives (in general) a different draw.
    draws = {tuple(u.index for u in split_units(units, 0.25, f"task/{i}")[0]) for i in range(20)}
    assert len(draws) > 1


def test_split_keeps_at_least_one_feedback_and_one_scoring_unit():
    assert [len(x) for x in split_units(_units(5), 0.01, "t")] == [1, 4]
    assert [len(x) for x in split_units(_units(5), 0.99, "t")] == [4, 1]
    assert [len(x) for x in split_units(_units(1), 0.5, "t")] == [0, 1]
    assert [len(x) for x in split_units(_units(5), 0.0, "t")] == [0, 5]
    with pytest.raises(ValueError, match="feedback_fraction"):
        split_units(_units(3), 1.0, "t")
