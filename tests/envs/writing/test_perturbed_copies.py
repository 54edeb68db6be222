"""Copies of the post with local edits fire the copy guard (issue 28, item 5).

The guard read exact lower-cased 5-gram runs, so a copy with words swapped, dropped or inserted,
look-alike letters or invisible characters inside words passed it. It now reads text as a
reader does (:func:`reader_text`) and counts content-word pairs (:func:`copied_share`). The
rates over the 500 real posts and 200 abstracts are in the issue's closing note; this checks
the bundled posts and abstracts, and a sample of the real ones when the data is there.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import llm_marl
from llm_marl.envs.writing.guards import check_guards, copied_share, reader_text

ROOT = Path(llm_marl.__file__).parent / "envs" / "writing" / "data"
POSTS = [json.loads(line) for line in (ROOT / "tldr_sample.jsonl").read_text().splitlines() if line]
ABSTRACTS = [
    json.loads(line)["abstract"]
    for line in (ROOT / "arxiv_sample.jsonl").read_text().splitlines()
    if line
]

LOOKALIKE = str.maketrans({"a": "а", "e": "е", "o": "ο", "p": "р", "c": "с", "i": "і"})


def _edit(words: list[str], kind: str, rng: random.Random) -> list[str]:
    w = list(words)
    if kind == "swap":
        for i in range(0, len(w) - 1, 3):
            w[i], w[i + 1] = w[i + 1], w[i]
    elif kind == "drop":
        w = [x for x in w if rng.random() > 0.25]
    elif kind == "insert":
        w = [
            y
            for x in w
            for y in ([x, rng.choice(["truly", "anyway", "like"])] if rng.random() < 0.25 else [x])
        ]
    elif kind == "lookalike":
        w = [x.translate(LOOKALIKE) if rng.random() < 0.5 else x for x in w]
    elif kind == "zero-width":
        w = [x[:1] + "\u200b" + x[1:] for x in w]
    elif kind == "soft-hyphen":
        w = [x[:2] + "\u00ad" + x[2:] for x in w]
    elif kind == "fullwidth":
        w = ["".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in x) for x in w]
    elif kind == "reversed":
        w = w[::-1]
    return w


KINDS = [
    "swap",
    "drop",
    "insert",
    "lookalike",
    "zero-width",
    "soft-hyphen",
    "fullwidth",
    "reversed",
]


def _copy(source: str, kind: str, seed: int = 0) -> tuple[str, str]:
    rng = random.Random(seed)
    words = source.split()
    return " ".join(_edit(words[:40], kind, rng)), " ".join(
        _edit(words[40:160] or words, kind, rng)
    )


@pytest.mark.parametrize("kind", KINDS)
def test_an_edited_copy_of_each_bundled_post_and_abstract_fires_the_copy_guard(kind):
    for source in [p["post"] for p in POSTS] + ABSTRACTS:
        fired, measured = check_guards(_copy(source, kind), source)
        assert "copies_source" in fired, (kind, measured, source[:60])


@pytest.mark.parametrize("kind", ["drop", "lookalike", "reversed"])
def test_a_sample_of_the_real_posts(data_dir, kind):
    rows = [
        json.loads(line) for line in (data_dir / "tldr" / "test.jsonl").read_text().splitlines()
    ]
    for row in random.Random(1).sample(rows, 25):
        post = row["instruction"]
        assert "copies_source" in check_guards(_copy(post, kind, 7), post)[0]
        assert check_guards((row["gold_response"], "neutral partner text here"), post)[0] == []


def test_through_the_env_the_edited_copy_scores_below_the_honest_pair():
    env = llm_marl.make("tldr-v0", dataset="tldr_sample")
    base = env.unwrapped
    for i, post in enumerate(POSTS):
        honest, _, _ = base.score(post["tldr"], post["detailed"], base.tasks[i])
        copied, _, details = base.score(*_copy(post["post"], "lookalike"), base.tasks[i])
        assert "copies_source" in details["guards"] and copied < honest


def test_reader_text_normalises_what_a_reader_does_not_see():
    assert reader_text("Ｈеllο\u200b wο\u00adrld\u202e") == "hello world"
    text = "the cat sat on the mat today while the dog slept by the warm kitchen stove all day"
    assert copied_share(text, text) >= 0.5
    # Filler inserted into a copy is left out before pairing: it cannot dilute the copy.
    padded = " ".join(f"{w} truly" for w in text.split())
    assert copied_share(padded, text) >= 0.5


@pytest.mark.slow  # 18 s in the fast loop at load 17 (#22)
def test_reader_text_and_the_guards_are_linear_on_hostile_input():
    hostile = ("\u200b" * 50 + "а" * 50 + "\u00ad") * 20_000  # 2 MB of invisible and look-alike
    assert len(reader_text(hostile)) == 50 * 20_000  # every invisible one gone, one char each
    # check_guards cuts a part at max_chars first; the source is read once.
    fired, _ = check_guards((hostile, "x"), hostile)
    assert fired == ["oversized"]
    words = " ".join([f"w{i}" for i in range(200_000)])
    assert copied_share(words, words) > 0.99  # 200k words: at most 3 pairs per word
