"""MAGRPO's level-gated lexical reward, level by level, against hand-computed values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl.envs.writing.lexical import (
    ARXIV,
    LEVEL_NAMES,
    TLDR,
    jaccard,
    lexical_reward,
    transition_categories,
    transition_scale,
    unique_words,
    whitespace_tokens,
)


def words(n: int, stem: str = "w") -> str:
    """``n`` distinct words with no transition phrase inside (``w0 w1 ...`` style)."""
    return " ".join(f"{stem}{i:03d}" for i in range(n))


def test_level1_needs_both_parts_in_the_token_range():
    assert lexical_reward(words(7), words(20)).levels == (0.0, 0.0, 0.0, 0.0)
    assert lexical_reward(words(8), words(257)).stopped_at == 1
    assert lexical_reward("", words(20)).reward == 0.0
    assert lexical_reward(words(8), words(8)).levels[0] == 0.5  # ratio 1.0 stops at level 2
    assert lexical_reward(words(8), words(8)).stopped_at == 2
    assert lexical_reward(words(127), words(200), ARXIV).stopped_at == 1


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [(1.0, None), (1.1, 0.0), (1.35, 0.5), (1.6, 1.0), (3.2, 1.0), (4.1, 0.5), (5.0, 0.0)],
)
def test_level2_length_ratio_bands_tldr(ratio, expected):
    part1 = words(10)  # 10 * 4 chars + 9 spaces = 49 characters
    assert len(part1) == 49
    target = round(49 * ratio)
    part2 = (words(12, "x") + " " + "y" * 400)[:target]
    score = lexical_reward(part1, part2)
    if expected is None:
        assert score.stopped_at == 2 and score.levels[1] == 0.0
    else:
        assert score.length_ratio == pytest.approx(target / 49)
        assert score.levels[1] == pytest.approx(TLDR.length_ratio.score(target / 49))
        assert score.levels[1] == pytest.approx(expected, abs=0.03)


def test_level2_arxiv_bands():
    band = ARXIV.length_ratio
    assert band.score(0.79) is None and band.score(2.01) is None
    assert band.score(1.05) == pytest.approx(0.5)
    assert band.score(1.45) == 1.0
    assert band.score(1.8) == pytest.approx(0.5)


def test_level3_unique_words_tldr():
    # part 2 repeats part 1's 10 words: 1.0x unique words -> stop at level 3.
    p1 = words(10)
    score = lexical_reward(p1, " ".join([p1] * 3))
    assert score.stopped_at == 3 and score.levels[2] == 0.0 and score.unique_ratio == 1.0
    # 20 distinct words over 10: 2.0x -> 0.5; 15 over 10 -> 1.5x -> (1.5-1.3)/0.7*0.5.
    two = lexical_reward(p1, words(19, "q") + " " + "z" * 30)
    assert two.unique_ratio == 2.0 and two.levels[2] == 0.5
    mid = lexical_reward(p1, words(14, "q") + " " + "z" * 60)
    assert mid.unique_ratio == 1.5
    assert mid.levels[2] == pytest.approx((1.5 - 1.3) / 0.7 * 0.5)


def test_level3_arxiv_band_and_stopwords_counted():
    band = ARXIV.unique_ratio
    assert band.score(0.6) == pytest.approx(0.25)
    assert band.score(1.0) == 0.5
    assert band.score(1.5) == pytest.approx(0.25)
    assert band.score(1.8) is None
    # The official code counts stop words as unique words (its docstring says otherwise).
    assert unique_words("The the a A of") == 3


def test_level4_style_tldr_exact():
    p1 = "alpha beta gamma delta epsilon zeta eta theta"  # 8 tokens, 44 chars
    # part 2: 21 distinct words, shares "alpha" with part 1, one connective ("however":
    # contrast + concession) -> 2 categories.
    p2 = "however alpha " + words(18, "k") + " zz"
    score = lexical_reward(p1, p2)
    assert score.stopped_at is None
    assert set(score.transition_categories) == {"contrast", "concession"}
    overlap = 1 / (8 + 21 - 1)
    assert score.jaccard == pytest.approx(overlap)
    expected4 = 0.4 * 0.45 + 0.6 * min(overlap, 0.03) / 0.03
    assert score.levels[3] == pytest.approx(expected4)
    assert score.reward == pytest.approx(sum(score.levels))
    assert list(score.components()) == list(LEVEL_NAMES)


def test_transitions_are_substrings_as_in_the_official_code():
    # "has" contains "as" (time), "thus" contains "thu"... "phase" -> "as": substring semantics.
    assert "time" in transition_categories("phase")
    assert transition_categories("zzz") == ()
    assert transition_scale(0) == 0.0
    assert transition_scale(1) == 0.4
    assert transition_scale(12) == pytest.approx(0.95)


def test_arxiv_transitions_read_both_parts_tldr_only_part2():
    body = words(130)
    with_conn = "however " + words(129, "m")
    tl = lexical_reward(words(8), "however " + words(20, "m"))
    assert tl.transition_categories  # found in part 2
    tl1 = lexical_reward("however " + words(7), words(20, "m"))
    assert tl1.transition_categories == ()  # part 1 is not read for TL;DR
    ax = lexical_reward(with_conn, body + " " + "n" * 120, ARXIV)
    assert ax.stopped_at is None and "contrast" in ax.transition_categories


def test_jaccard_ignores_stopwords_and_both_empty_is_one():
    assert jaccard("the a of", "and the") == 1.0
    assert jaccard("cat dog", "dog bird") == pytest.approx(1 / 3)


def test_maximum_is_three():
    assert TLDR.max_reward == ARXIV.max_reward == 3.0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(" \t\n\x0b\x1c\u2003ab.\u00a0"), max_size=80))
def test_bounded_token_count_agrees_with_str_split(text):
    n = len(text.split())
    assert whitespace_tokens(text) == n
    assert whitespace_tokens(text, 5) == min(n, 6)


def test_a_megabyte_answer_is_scored_quickly_and_low():
    huge = "word " * 200_000
    assert lexical_reward(words(10), huge).reward == 0.0
    # Eight enormous "tokens" pass level 1; the length ratio then stops them.
    giant = " ".join(["a" * 125_000] * 8)
    assert lexical_reward(words(10), giant).reward == 0.5
