"""Tests of the bracket scanner behind the grader's splitting and matching (grading/brackets.py).

The three callers use different backslash escapes on purpose; these tests pin each convention,
so a later merge of the callers cannot change grading silently.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl.tools.grading.brackets import (
    bracket_unit,
    matching_close,
    split_at_top_level,
    split_top_level,
)
from llm_marl.tools.grading.normalize import split_top_level as reexported
from llm_marl.tools.grading.parse import _split_relations, parse_answer

# Strings rich in what the scanner reacts to: backslashes, both kinds of braces, brackets,
# separators and the starts of relation commands.
_PIECES = ["\\", "\\\\", "{", "}", "\\{", "\\}", "(", ")", "[", "]", "\\(", "\\)", ",", ";"]
_PIECES += ["\\cup", "\\le", "\\left", "<", "<=", "=", "x", "1", " "]
hostile = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@pytest.mark.parametrize(
    ("text", "index", "unit"),
    [
        ("\\{", 0, (1, 2)),
        ("\\}", 0, (-1, 2)),
        ("(", 0, (1, 1)),
        ("]", 0, (-1, 1)),
        ("\\(", 0, (0, 1)),  # without the escape, "\" is a plain character and "(" opens
        ("a\\", 1, (0, 1)),  # a final backslash escapes nothing
        ("x", 0, (0, 1)),
    ],
)
def test_bracket_unit_without_escapes(text, index, unit):
    assert bracket_unit(text, index, "") == unit


def test_bracket_unit_escape_is_a_neutral_pair():
    assert bracket_unit("\\(", 0, "(") == (0, 2)
    assert bracket_unit("\\\\", 0, "\\") == (0, 2)
    assert bracket_unit("\\{", 0, "{") == (1, 2)  # set braces stay brackets whatever the escapes


@pytest.mark.parametrize(
    ("text", "seps", "parts"),
    [
        ("1, 2, 3", (",",), ["1", " 2", " 3"]),
        ("(1,2),[3,4)", (",",), ["(1,2)", "[3,4)"]),
        ("\\{1,2\\},3", (",",), ["\\{1,2\\}", "3"]),
        ("f(a,{b,c}),d", (",", ";"), ["f(a,{b,c})", "d"]),
        ("a;b,c", (",", ";"), ["a", "b", "c"]),
        ("[0,1]\\cup[2,3]", ("\\cup",), ["[0,1]", "[2,3]"]),
        # "\\" is one unit for the list splitter: the "\cup" inside "\\cup" is no separator
        ("a\\\\cup b", ("\\cup",), ["a\\\\cup b"]),
        ("a\\\\\\cup b", ("\\cup",), ["a\\\\", " b"]),
        ("x)", (",",), ["x)"]),
    ],
)
def test_split_top_level(text, seps, parts):
    assert split_top_level(text, seps) == parts


def test_split_top_level_keeps_its_old_home():
    assert reexported is split_top_level


def test_relations_split_without_the_backslash_escape():
    # The relation splitter sees the "\le" after a row break: unlike the list splitter.
    assert _split_relations("a\\\\le b") == (["a\\", " b"], ["<="])
    assert _split_relations("x\\le 1") == (["x", " 1"], ["<="])
    assert _split_relations("\\left(1<2\\right)") == (["\\left(1<2\\right)"], [])
    assert _split_relations("a<=b=c") == (["a", "b", "c"], ["<=", "="])
    assert _split_relations("\\<x") == (["\\<x"], [])
    assert _split_relations("f(a=b)") == (["f(a=b)"], [])


@pytest.mark.parametrize(
    ("text", "start", "close"),
    [
        ("(1,2)", 0, 4),
        ("\\{1,\\{2\\}\\}", 0, 9),
        ("(\\))", 0, 3),  # "\)" is a TeX command, not a bracket, when matching
        ("[a\\]]", 0, 4),
        ("(\\\\)", 0, 3),
        ("((1)", 0, None),
        (")(", 0, None),  # a closer that leaves the depth below zero matches nothing
        ("x(1)", 1, 3),
    ],
)
def test_matching_close(text, start, close):
    assert matching_close(text, start) == close


def test_matching_close_decides_set_and_tuple_readings():
    assert parse_answer("\\{1,2\\}")[0][0] == "list"
    assert parse_answer("(1,2)")[0][0] == "seq"
    # "(1),(2)" starts and ends with brackets that do not match each other: not one tuple
    assert parse_answer("(1),(2)")[0][0] == "list"


@settings(max_examples=150, deadline=None)
@given(hostile, st.sampled_from([(",",), (",", ";"), ("\\cup",)]))
def test_split_parts_and_separators_rebuild_the_string(text, seps):
    parts, found = split_at_top_level(
        text, lambda s, i: next((p for p in seps if s.startswith(p, i)), None), escapes="\\"
    )
    assert len(parts) == len(found) + 1
    assert all(sep in seps for sep in found)
    rebuilt = parts[0] + "".join(sep + part for sep, part in zip(found, parts[1:], strict=True))
    assert rebuilt == text
    assert parts == split_top_level(text, seps)


@settings(max_examples=150, deadline=None)
@given(hostile, st.integers(min_value=0, max_value=40))
def test_matching_close_lands_on_a_closing_unit(text, start):
    close = matching_close(text, start)
    if close is not None:
        assert start <= close < len(text)
        assert text[close] in ")]}" or text.startswith("\\}", close)


def test_scans_are_linear_on_hostile_input():
    # 200 000 characters of nesting and escapes: a quadratic scan would not finish in the suite
    text = "\\{(" * 40_000 + "\\\\" * 20_000
    assert split_top_level(text, (",",)) == [text]
    assert matching_close(text, 0) is None
    assert _split_relations(text) == ([text], [])
