"""Counterfeit answers that a writing reward must rank below an honest one (issue 28, items 5-6).

For one task, :func:`probe_answers` builds the honest answer and the counterfeits, each as the
two parts the env scores:

``honest``
    The gold text (TL;DR: the gold TL;DR of the post), cut into two parts as the single-agent
    env cuts a text without ``[PARAGRAPH_SPLIT]`` (:func:`~llm_marl.envs.writing.env.split_single`).
``other``
    The honest answer of another task (the next one), scored on this task.
``shuffled``
    The honest answer's words in a random order.
``random``
    As many words, drawn at random from the words of all the tasks' sources.
``swap``, ``drop``, ``insert``, ``lookalike``, ``zero-width``, ``reversed``, ``mixed``
    Copies of the source with local edits (issue 28, item 5): adjacent words swapped, a quarter
    dropped, filler inserted after a quarter, half the words in look-alike letters, a zero-width
    space inside every word, the words reversed, and swap + drop + insert + look-alike in turn.
    Part 1 is the first 40 edited words, part 2 the next 120.

``benchmarks/writing_meaning.py`` scores every class on the 500 TL;DR posts and 200 arXiv tasks
and reports how often the honest answer wins; ``tests/envs/writing/test_meaning.py`` does so on
a sample.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["COPY_KINDS", "PROBE_KINDS", "edited_copy", "edit_words", "probe_answers"]

_LOOKALIKE = str.maketrans({"a": "а", "e": "е", "o": "ο", "p": "р", "c": "с", "i": "і"})
_FILLER = ("truly", "anyway", "like")

COPY_KINDS = ("swap", "drop", "insert", "lookalike", "zero-width", "reversed", "mixed")
"""The perturbed-copy classes of issue 28, item 5."""

PROBE_KINDS = ("other", "shuffled", "random", *COPY_KINDS)
"""Every counterfeit class of :func:`probe_answers`, in report order."""


def edit_words(words: Sequence[str], kind: str, rng: random.Random) -> list[str]:
    """``words`` with the local edits of one of :data:`COPY_KINDS`."""
    w = list(words)
    if kind == "swap":
        for i in range(0, len(w) - 1, 3):
            w[i], w[i + 1] = w[i + 1], w[i]
    elif kind == "drop":
        w = [x for x in w if rng.random() > 0.25]
    elif kind == "insert":
        w = [y for x in w for y in ([x, rng.choice(_FILLER)] if rng.random() < 0.25 else [x])]
    elif kind == "lookalike":
        w = [x.translate(_LOOKALIKE) if rng.random() < 0.5 else x for x in w]
    elif kind == "zero-width":
        w = [x[:1] + "\u200b" + x[1:] for x in w]
    elif kind == "reversed":
        w = w[::-1]
    elif kind == "mixed":
        for step in ("swap", "drop", "insert", "lookalike"):
            w = edit_words(w, step, rng)
    else:
        raise ValueError(f"unknown copy kind {kind!r}; use one of {COPY_KINDS}")
    return w


def edited_copy(source: str, kind: str, seed: int) -> tuple[str, str]:
    """A two-part copy of ``source`` with the edits of ``kind`` (40 words, then 120)."""
    rng = random.Random(seed)
    words = source.split()
    return (
        " ".join(edit_words(words[:40], kind, rng)),
        " ".join(edit_words(words[40:160] or words, kind, rng)),
    )


def probe_answers(
    sources: Sequence[str], golds: Sequence[str], first_share: float, seed: int = 0
) -> list[dict[str, tuple[str, str]]]:
    """For each task ``i`` (``sources[i]`` with gold ``golds[i]``), the honest answer and every
    class of :data:`PROBE_KINDS` as ``{class: (part1, part2)}`` (see the module docstring)."""
    from llm_marl.envs.writing.env import split_single

    if len(sources) != len(golds) or len(sources) < 2:
        raise ValueError("probe_answers needs as many golds as sources, and at least two tasks")
    pool = [w for s in sources for w in s.split()]

    def parts(text: str) -> tuple[str, str]:
        head, tail, _ = split_single(text, first_share)
        return head, tail

    out = []
    for i, (source, gold) in enumerate(zip(sources, golds, strict=True)):
        rng = random.Random(seed * 1_000_003 + i)
        words = gold.split()
        shuffled = list(words)
        rng.shuffle(shuffled)
        answers = {
            "honest": parts(gold),
            "other": parts(golds[(i + 1) % len(golds)]),
            "shuffled": parts(" ".join(shuffled)),
            "random": parts(" ".join(rng.choice(pool) for _ in words)),
        }
        for kind in COPY_KINDS:
            answers[kind] = edited_copy(source, kind, seed * 1_000_003 + i)
        out.append(answers)
    return out
