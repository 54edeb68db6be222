"""Host-side pieces that need no sandbox: test splitting, the value codec, the verdict parser."""

from __future__ import annotations

import collections
import json
from fractions import Fraction

import pytest

from llm_marl.tools.sandbox import Limits, Status, TestSuite
from llm_marl.tools.sandbox.harness import decode_value, encode_value
from llm_marl.tools.sandbox.verdict import make_test_report as build_report

CHECK = '''
import math
METADATA = {"author": "x"}

def helper(v):
    return v * 2

def check(candidate):
    """docstring"""
    table = [(1, 2), (2, 4)]
    assert candidate(1) == 2
    for a, b in table:
        assert candidate(a) == b, (a, b)
    if True:
        x = candidate(3)
    assert x == helper(3)

check(double)
'''


def test_from_check_splits_asserts_and_keeps_setup():
    suite = TestSuite.from_check(CHECK, "double")
    assert suite.tests == (
        "assert candidate(1) == 2",
        "for a, b in table:\n    assert candidate(a) == b, (a, b)",
        "assert x == helper(3)",
    )
    assert suite.entry_point == "double"
    assert "import math" in suite.setup and "def helper" in suite.setup
    assert "check(double)" not in suite.setup  # the harness calls check itself
    assert "def check" not in suite.setup
    namespace: dict = {}
    exec(suite.check_source, namespace)  # the rewritten factory is valid Python
    records = []
    check = namespace["_llm_marl_check_factory_"](
        lambda i, e: records.append((i, e)), BaseException
    )
    exec(suite.setup, check.__globals__)
    check(lambda v: 2 * v if v != 2 else 0)
    assert [(i, type(e).__name__ if e else None) for i, e in records] == [
        (0, None),
        (1, "AssertionError"),
        (2, None),
    ]


def test_check_without_asserts_is_one_test():
    suite = TestSuite.from_check("def check(candidate):\n    candidate(1)\n", "f")
    assert len(suite) == 1


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: TestSuite.from_check("def check(c):\n    assert c(", "f"), "not valid Python"),
        (
            lambda: TestSuite.from_check("def test(c):\n    assert c(1)\n", "f"),
            "no function 'check'",
        ),
        (
            lambda: TestSuite.from_check("def check(c):\n    assert c(1)\n", "not a name"),
            "entry_point",
        ),
        (lambda: TestSuite.from_asserts([]), "at least one test"),
        (lambda: TestSuite.from_asserts("assert x"), "list of assert"),
        (lambda: TestSuite.from_asserts([1]), "expected a string"),
        (lambda: TestSuite.from_source("x = 1\n"), "no assert"),
        (lambda: TestSuite.coerce("def check(c):\n    assert c(1)\n"), "entry_point"),
    ],
)
def test_malformed_tests_raise_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_coerce_accepts_every_shape():
    assert TestSuite.coerce(["assert f(1)"]).tests == ("assert f(1)",)
    assert TestSuite.coerce("assert f(1)\nassert f(2)\n").tests == ("assert f(1)", "assert f(2)")
    assert TestSuite.coerce(CHECK, "double").entry_point == "double"
    suite = TestSuite.from_asserts(["assert f(1)"])
    assert TestSuite.coerce(suite) is suite
    assert json.loads(suite.to_wire())["tests"] == ["assert f(1)"]


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -(2**70),
        1.5,
        float("inf"),
        "é\x00\ud800",
        b"\x00\xff",
        bytearray(b"ab"),
        [1, (2, 3)],
        (),
        {1: "a", (1, 2): [3]},
        {1, 2},
        frozenset({"x"}),
        1 + 2j,
        range(1, 9, 2),
        collections.deque([1, 2]),
        Fraction(1, 3),
        [[[[]]]],
    ],
)
def test_codec_round_trips_plain_values(value):
    wire = json.loads(json.dumps(encode_value(value)))
    back = decode_value(wire)
    assert back == value and type(back) is type(value)


def test_codec_reduces_subclasses_and_materialises_iterators():
    assert type(decode_value(encode_value(collections.Counter("aab")))) is dict
    assert decode_value(encode_value(collections.OrderedDict(a=1))) == {"a": 1}
    Point = collections.namedtuple("Point", "x y")
    assert decode_value(encode_value(Point(1, 2))) == (1, 2)

    class Sneaky(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    back = decode_value(encode_value(Sneaky(5)))
    assert type(back) is int and back == 5 and back != 6
    assert list(decode_value(encode_value(x * x for x in range(3)))) == [0, 1, 4]
    assert decode_value(encode_value({"a": 1}.keys())) == {"a": 1}.keys()


def test_codec_rejects_objects_and_cycles():
    class Anything:
        def __eq__(self, other):
            return True

    with pytest.raises(TypeError, match="cannot cross the sandbox boundary"):
        encode_value(Anything())
    with pytest.raises(TypeError):
        encode_value(lambda: 1)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="nested"):
        encode_value(cycle)
    with pytest.raises(ValueError):
        decode_value({"t": [1], "d": []})


def _facts(aux: str, **extra) -> dict:
    facts = {
        "aux": aux,
        "stdout": "",
        "stderr": "",
        "duration": 0.1,
        "timed_out": False,
        "output_exceeded": None,
        "runner_exit": {"code": 0, "signal": None, "swept": False},
        "program_exit": {"code": 0, "signal": None, "swept": True},
    }
    facts.update(extra)
    return facts


def _rec(kind: str, i: int = 0, ok: bool = True, err: str = "", et: str = "") -> str:
    return json.dumps({"k": kind, "i": i, "ok": ok, "err": err, "et": et}) + "\n"


SUITE = TestSuite.from_asserts(["assert f(1)", "assert f(2)", "assert f(3)"])


def test_verdict_requires_an_explicit_pass_per_test():
    aux = _rec("L") + _rec("T", 0) + _rec("T", 1, False, "AssertionError", "AssertionError")
    report = build_report(_facts(aux), SUITE, Limits())
    assert [t.passed for t in report.tests] == [True, False, False]
    assert report.status is Status.FAILED
    assert "stopped early" in report.tests[2].error


@pytest.mark.parametrize(
    "aux",
    [
        _rec("L") + _rec("T", 0) + _rec("T", 0) + _rec("T", 1) + _rec("T", 2) + _rec("D"),
        _rec("L") + _rec("T", 1) + _rec("T", 0) + _rec("T", 2) + _rec("D"),
        _rec("T", 0) + _rec("T", 1) + _rec("T", 2) + _rec("D"),
        _rec("L") + "passed\n" + _rec("T", 0) + _rec("T", 1) + _rec("T", 2) + _rec("D"),
        _rec("L") + _rec("T", 0) + _rec("T", 1) + _rec("T", 2) + _rec("D") + _rec("T", 2),
        _rec("L") + _rec("T", 0) + _rec("T", 1) + _rec("T", 2) + _rec("T", 3) + _rec("D"),
    ],
    ids=["duplicate", "out-of-order", "no-load", "junk-line", "after-end", "extra-test"],
)
def test_garbled_records_never_pass(aux):
    report = build_report(_facts(aux), SUITE, Limits())
    assert report.passed == 0
    assert report.status is Status.FAILED
    assert "rejected" in report.error


def test_limits_take_precedence_over_failures_and_keep_partial_results():
    aux = _rec("L") + _rec("T", 0)
    report = build_report(_facts(aux, timed_out=True), SUITE, Limits(timeout=2))
    assert report.status is Status.TIMEOUT and report.passed == 1
    assert "time limit" in report.tests[1].error
    memory = _rec("L") + _rec("T", 0, False, "MemoryError", "MemoryError")
    assert build_report(_facts(memory), SUITE, Limits()).status is Status.MEMORY
