"""Answer extraction of the web-search envs reads untrusted replies: same result as the regex it
replaced, in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl.envs.search.answers import MAX_ANSWER_CHARS, extract_answer

# The definition the scan must agree with (quadratic on unclosed openers, so only for small text).
_REGEX = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _by_regex(text: str) -> str:
    matches = list(_REGEX.finditer(text))
    chosen = matches[-1].group(1) if matches else text
    return chosen.strip()[:MAX_ANSWER_CHARS]


_PIECES = st.sampled_from(["<answer>", "</answer>", "<answer", "answer>", "x", " y ", "\n", "<"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_the_scan_agrees_with_the_lazy_regex(text):
    assert extract_answer(text) == _by_regex(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>a</answer> then <answer>b</answer>", "b"),
        ("<answer>a</answer></answer>", "a"),  # a stray closer pairs with nothing
        ("<answer><answer>a</answer>", "<answer>a"),  # the first opener takes the first closer
        ("<answer>a</answer><answer>unclosed", "a"),
        ("no tags at all", "no tags at all"),
        ("\\boxed{b} and <answer>a</answer>", "b"),  # a closed box wins
    ],
)
def test_tag_pairing(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.timeout(60)  # a hang guard only: the quadratic regex needed minutes here
@pytest.mark.parametrize(
    "text",
    [
        "<answer>" * 50_000,  # 400K chars of unclosed openers: 22 s for 128K with the regex
        "<answer>" * 50_000 + "</answer>",
        "<answer>x</answer>" * 30_000 + "<answer>" * 30_000,
        "</answer>" * 50_000,
    ],
)
def test_hostile_replies_are_read_in_one_pass(text):
    assert len(extract_answer(text)) <= MAX_ANSWER_CHARS
