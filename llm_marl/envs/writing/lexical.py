"""MAGRPO's level-gated lexical reward for two-part writing, as the official code computes it.

Source: OpenMLRL ``LLM_Collab_Writing``, ``rewards/tldr_rewards.py`` (``tldr_combined_reward``)
and ``rewards/arxiv_rewards.py`` (``arxiv_combined_reward``), commit 45c74e5. This is our own
implementation of the same arithmetic; :data:`TLDR` and :data:`ARXIV` hold the two settings.
Part 1 is the first agent's text (TL;DR: the concise summary; arXiv: background and motivation),
part 2 the second agent's (the detailed summary; methodology and implications).

Levels (each one is reached only if the previous one did not stop; maximum 3.0)
    1. Structure, 0.5: both parts have ``token_range`` whitespace tokens (TL;DR 8-256, arXiv
       128-256). Otherwise the reward is 0 and nothing else is scored.
    2. Length ratio, up to 1.0: ``r = len(part2) / len(part1)`` in characters. 1.0 inside the
       optimal band (TL;DR [1.6, 3.2], arXiv [1.3, 1.6]), linear to 0 at the acceptable band's
       ends (TL;DR 1.1 and 5.0, arXiv 0.8 and 2.0); outside the acceptable band: stop.
    3. Unique words, up to 0.5: ``u = unique(part2) / unique(part1)`` where ``unique`` counts the
       distinct lower-cased ``\\w+`` words, stop words included (the official code's docstring says
       "excluding stopwords", its code does not exclude them; we follow the code). TL;DR: 0.5 for
       ``u >= 2.0``, linear from 0 at 1.3; arXiv: 0.5 on [0.7, 1.3], linear to 0 at 0.5 and 1.7.
       Outside: stop (also when part 1 has no word at all).
    4. Style, up to 1.0: ``0.4 * t + 0.6 * j``. ``t`` counts the categories of transition phrases
       (12 categories) found as *substrings* of the lower-cased text (TL;DR: part 2; arXiv:
       part 1 + part 2, concatenated without a separator): 0 with none, else
       ``min(0.4 + 0.05 * (n - 1), 1.0)``. ``j`` is the Jaccard overlap of the two parts' word
       sets with the stop words removed (1.0 when both are empty), capped and rescaled:
       ``min(J, cap) / cap`` with cap 0.03 (TL;DR) or 0.23 (arXiv).

Every level is one reward component (:meth:`LexicalScore.components`); the raw measurements
(token counts, ratios, categories, Jaccard) are in :class:`LexicalScore` too.

Cost: linear in the length of the texts (one ``str.split``, one regex scan per part, and a fixed
number of substring searches), so a 1 MB answer costs milliseconds; an answer far outside the
token range stops at level 1 after counting its tokens.

Known weakness, kept on purpose because presets reproduce the paper: the reward looks only at the
form of the two texts, never at the post. Any two texts of the right shape score up to 3.0,
whatever they say; :mod:`llm_marl.envs.writing.guards` adds the checks that make it hard to game.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ARXIV",
    "STOPWORDS",
    "TLDR",
    "TRANSITION_WORDS",
    "LexicalScore",
    "LexicalSpec",
    "jaccard",
    "lexical_reward",
    "transition_categories",
    "unique_words",
    "whitespace_tokens",
]

# The official code's stop-word list (used only by the Jaccard overlap of level 4).
STOPWORDS = frozenset(
    """a all also an and any are as at bad be been being both but by can could did do does each
    few first for from good great had has have he her here him his how i if in is it its just last
    left little long low many may me might more most much must my new no not now of old on only
    or other our own right same shall should so some such than that the their them then there
    these they this those to too us very was we were what when where which who why will with
    would you your""".split()  # noqa: SIM905 - 121 words read better as text
)

# The official code's 12 categories of transition phrases (a phrase may be in several).
TRANSITION_WORDS: dict[str, tuple[str, ...]] = {
    "elaboration": (
        "furthermore", "moreover", "additionally", "also", "besides", "in addition",
        "what is more", "not only", "as well as", "along with", "coupled with", "together with",
        "likewise", "similarly", "equally important", "by the same token", "in the same way",
        "correspondingly", "in like manner", "comparatively", "analogously",
    ),
    "examples": (
        "for example", "for instance", "specifically", "particularly", "namely", "such as",
        "including", "especially", "in particular", "to illustrate", "as an illustration",
        "case in point", "to demonstrate", "as evidence", "to exemplify", "notably", "markedly",
        "chiefly", "mainly", "primarily", "above all", "most importantly",
    ),
    "explanation": (
        "that is", "in other words", "to put it simply", "to clarify", "indeed", "in fact",
        "actually", "clearly", "obviously", "to put it another way", "to rephrase",
        "more precisely", "specifically speaking", "what this means is", "the point is",
        "essentially", "basically", "fundamentally", "at its core", "in essence", "simply put",
        "stated differently",
    ),
    "cause_effect": (
        "therefore", "thus", "consequently", "as a result", "hence", "accordingly",
        "for this reason", "due to this", "because of this", "so", "then", "thereby", "wherefore",
        "thence", "ergo", "as a consequence", "in consequence", "it follows that", "this leads to",
        "this results in", "this causes", "this brings about", "owing to", "on account of",
        "thanks to", "resulting from",
    ),
    "contrast": (
        "however", "nevertheless", "nonetheless", "on the other hand", "in contrast", "while",
        "whereas", "although", "even though", "despite this", "but", "yet", "still", "conversely",
        "on the contrary", "rather", "instead", "alternatively", "otherwise", "in opposition",
        "by contrast", "contrarily", "notwithstanding", "regardless", "all the same", "even so",
        "be that as it may", "in any case", "at any rate",
    ),
    "sequence": (
        "first", "second", "third", "next", "then", "after that", "finally", "lastly",
        "initially", "subsequently", "meanwhile", "to begin with", "to start with",
        "in the beginning", "at first", "at the outset", "primarily", "secondly", "thirdly",
        "following this", "afterward", "later", "later on", "in the meantime", "simultaneously",
        "concurrently", "at the same time", "in conclusion", "to conclude", "ultimately",
        "in the end", "to summarize", "in summary",
    ),
    "emphasis": (
        "indeed", "certainly", "surely", "undoubtedly", "without doubt", "definitely",
        "absolutely", "positively", "unquestionably", "indubitably", "of course", "naturally",
        "obviously", "clearly", "evidently", "manifestly", "undeniably", "admittedly", "granted",
        "to be sure", "in fact", "as a matter of fact", "notably", "significantly",
    ),
    "summary": (
        "in summary", "in conclusion", "to summarize", "to conclude", "in short", "in brief",
        "briefly", "to sum up", "on the whole", "overall", "all in all", "in essence",
        "essentially", "basically", "fundamentally", "in the final analysis", "after all",
        "ultimately", "in the end", "when all is said and done", "the bottom line is",
    ),
    "comparison": (
        "similarly", "likewise", "in the same way", "equally", "just as", "comparable to",
        "in comparison", "by the same token", "correspondingly", "in like manner",
        "along the same lines", "in similar fashion", "analogously", "by analogy", "just like",
        "much like", "as with",
    ),
    "concession": (
        "although", "though", "even though", "while", "whereas", "despite", "in spite of",
        "regardless of", "notwithstanding", "admittedly", "granted", "even if",
        "be that as it may", "nevertheless", "nonetheless", "however", "yet", "still",
        "all the same",
    ),
    "condition": (
        "if", "unless", "provided that", "assuming that", "supposing that", "in case",
        "in the event that", "on condition that", "given that", "as long as", "so long as",
        "only if", "even if", "whether or not", "should", "were", "had", "otherwise", "or else",
    ),
    "time": (
        "when", "while", "as", "after", "before", "until", "since", "during", "meanwhile",
        "simultaneously", "at the same time", "concurrently", "previously", "formerly", "earlier",
        "later", "afterward", "subsequently", "eventually", "finally", "recently", "lately",
        "nowadays", "currently", "presently", "immediately",
    ),
}  # fmt: skip

_WORD_RE = re.compile(r"\b\w+\b")
LEVEL_NAMES = ("level1_structure", "level2_length_ratio", "level3_unique_words", "level4_style")
"""The reward components, one per level, in order."""


@dataclass(frozen=True)
class Band:
    """A piecewise-linear score: ``full`` inside ``[opt_lo, opt_hi]``, falling linearly to 0 at
    ``acc_lo`` and ``acc_hi``; ``None`` (the level stops the reward) outside ``[acc_lo, acc_hi]``.
    """

    acc_lo: float
    opt_lo: float
    opt_hi: float
    acc_hi: float
    full: float

    def score(self, x: float) -> float | None:
        if self.opt_lo <= x <= self.opt_hi:
            return self.full
        if self.acc_lo <= x < self.opt_lo:
            return self.full * ((x - self.acc_lo) / (self.opt_lo - self.acc_lo))
        if self.opt_hi < x <= self.acc_hi:
            return self.full * (1.0 - (x - self.opt_hi) / (self.acc_hi - self.opt_hi))
        return None


@dataclass(frozen=True)
class LexicalSpec:
    """The thresholds of one task's lexical reward (see the module docstring)."""

    name: str
    token_range: tuple[int, int]
    """Whitespace tokens each part must have (inclusive) for level 1."""
    length_ratio: Band
    """Level 2 on ``len(part2) / len(part1)`` (characters)."""
    unique_ratio: Band
    """Level 3 on the ratio of distinct words, part 2 over part 1."""
    transitions_in: Literal["part2", "both"]
    """Where level 4 looks for transition phrases: part 2 only, or part 1 + part 2."""
    jaccard_cap: float
    """Level 4's Jaccard overlap is ``min(J, cap) / cap``."""
    structure_reward: float = 0.5
    transition_weight: float = 0.4
    jaccard_weight: float = 0.6

    @property
    def max_reward(self) -> float:
        return (
            self.structure_reward
            + self.length_ratio.full
            + self.unique_ratio.full
            + self.transition_weight
            + self.jaccard_weight
        )


TLDR = LexicalSpec(
    name="tldr",
    token_range=(8, 256),
    length_ratio=Band(1.1, 1.6, 3.2, 5.0, 1.0),
    unique_ratio=Band(1.3, 2.0, math.inf, math.inf, 0.5),
    transitions_in="part2",
    jaccard_cap=0.03,
)
"""``tldr_combined_reward`` of the official code."""

ARXIV = LexicalSpec(
    name="arxiv",
    token_range=(128, 256),
    length_ratio=Band(0.8, 1.3, 1.6, 2.0, 1.0),
    unique_ratio=Band(0.5, 0.7, 1.3, 1.7, 0.5),
    transitions_in="both",
    jaccard_cap=0.23,
)
"""``arxiv_combined_reward`` of the official code (its docstring's bands differ; the code's are
these)."""


@dataclass(frozen=True)
class LexicalScore:
    """The lexical reward of one pair of parts, with what it measured."""

    levels: tuple[float, float, float, float]
    """The four level rewards (0.0 for levels not reached)."""
    stopped_at: int | None
    """The level that stopped the reward (1-4), or None when all four were scored."""
    tokens: tuple[int, int]
    length_ratio: float | None
    unique_ratio: float | None
    transition_categories: tuple[str, ...]
    jaccard: float | None

    @property
    def reward(self) -> float:
        return float(sum(self.levels))

    def components(self) -> dict[str, float]:
        """One reward component per level (they sum to :attr:`reward`)."""
        return dict(zip(LEVEL_NAMES, self.levels, strict=True))


def whitespace_tokens(text: str, limit: int | None = None) -> int:
    """Whitespace-separated tokens, as the official ``count_tokens``; with ``limit``, counting
    stops at ``limit + 1`` (enough to know a text is over a range)."""
    if limit is None:
        return len(text.split())
    count = 0
    for _ in re.finditer(r"\S+", text):
        count += 1
        if count > limit:
            break
    return count


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


def unique_words(text: str) -> int:
    """Distinct lower-cased ``\\w+`` words (stop words included, as the official level 3)."""
    return len(set(_words(text)))


def jaccard(text1: str, text2: str) -> float:
    """Jaccard overlap of the two texts' word sets, stop words removed (1.0 if both empty)."""
    set1 = set(_words(text1)) - STOPWORDS
    set2 = set(_words(text2)) - STOPWORDS
    if not set1 and not set2:
        return 1.0
    return len(set1 & set2) / len(set1 | set2)


def transition_categories(text: str) -> tuple[str, ...]:
    """Categories with at least one phrase occurring as a substring of ``text.lower()``."""
    lower = text.lower()
    return tuple(c for c, phrases in TRANSITION_WORDS.items() if any(p in lower for p in phrases))


def transition_scale(num_categories: int) -> float:
    """Level 4's transition score in [0, 1]: 0.4 for one category, +0.05 per extra one."""
    if num_categories <= 0:
        return 0.0
    return min(0.4 + min((num_categories - 1) * 0.05, 0.6), 1.0)


def lexical_reward(part1: str, part2: str, spec: LexicalSpec = TLDR) -> LexicalScore:
    """Score two parts with MAGRPO's level-gated lexical reward (see the module docstring)."""
    lo, hi = spec.token_range
    tokens = (whitespace_tokens(part1, hi), whitespace_tokens(part2, hi))
    levels = [0.0, 0.0, 0.0, 0.0]

    def done(stopped: int | None, **measured: object) -> LexicalScore:
        fields: dict[str, object] = {
            "length_ratio": None,
            "unique_ratio": None,
            "transition_categories": (),
            "jaccard": None,
            **measured,
        }
        return LexicalScore(tuple(levels), stopped, tokens, **fields)  # type: ignore[arg-type]

    if not all(lo <= t <= hi for t in tokens):
        return done(1)
    levels[0] = spec.structure_reward
    if not part1:  # unreachable with a token range starting >= 1; kept as the official guard
        return done(2)
    ratio = len(part2) / len(part1)
    level2 = spec.length_ratio.score(ratio)
    if level2 is None:
        return done(2, length_ratio=ratio)
    levels[1] = level2
    u1, u2 = unique_words(part1), unique_words(part2)
    uratio = u2 / u1 if u1 > 0 else 0.0
    level3 = spec.unique_ratio.score(uratio) if u1 > 0 else None
    if level3 is None:
        return done(3, length_ratio=ratio, unique_ratio=uratio)
    levels[2] = level3
    styled = part2 if spec.transitions_in == "part2" else part1 + part2
    categories = transition_categories(styled)
    overlap = jaccard(part1, part2)
    levels[3] = spec.transition_weight * transition_scale(len(categories)) + spec.jaccard_weight * (
        min(overlap, spec.jaccard_cap) / spec.jaccard_cap
    )
    return done(
        None,
        length_ratio=ratio,
        unique_ratio=uratio,
        transition_categories=categories,
        jaccard=overlap,
    )
