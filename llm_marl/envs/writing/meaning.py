"""The meaning term of the writing envs' default reward: is the answer about this source, readable,
and (TL;DR) shorter than it? (issue 28, item 6)

The paper's lexical reward reads only form, and the guards only catch copies, padding and
stuffing: the honest summary of another post, or this post's words shuffled, scored as well as
the honest summary of this one. The meaning term multiplies three factors in [0, 1] into a
quality ``q`` (:func:`meaning_quality`):

``relevance``
    The cosine similarity of the answer (both parts) and the source under all-MiniLM-L6-v2,
    mapped linearly from 0 at :attr:`MeaningSpec.relevance_floor` to 1 at
    :attr:`MeaningSpec.relevance_full`. A summary of another post sits near the floor.
``order``
    The share of the answer's distinct adjacent word pairs that a reader finds plausible
    (:func:`plausible_share`), over :attr:`MeaningSpec.order_full` (capped at 1). A pair is
    plausible when it occurs in the source (its phrasing: "my boyfriend", "we propose") or is
    English glue whatever the topic: a preposition before a determiner or an object pronoun
    ("of the", "with him"), a determiner before a content word ("the model"), a subject
    pronoun before an auxiliary ("I am"), an auxiliary before a negation, an auxiliary or a
    determiner ("is not", "have been", "is a"). Mean-pooled embeddings are close to a bag of
    words, so this is what tells the text from its words shuffled: a shuffle breaks nearly all
    of those pairs (on the 500 TL;DR posts, the gold TL;DR's median share is 0.37, its words
    shuffled 0.13).
``compression`` (TL;DR only)
    1 while the answer has at most :attr:`MeaningSpec.compression_full` times the source's words,
    falling linearly to 0 at :attr:`MeaningSpec.compression_zero`: a "summary" as long as the
    post is no summary. arXiv answers expand the abstract, so there is no such factor there.

Why this resists gaming: each factor saturates at a level honest text reaches, so nothing is won
by pushing one of them further (pasting more source phrases raises ``order`` only up to the
cap, and the copy guard stops a paste first); the factors multiply, so a text must be about the
source *and* readable *and* short to score; and glue pairs alone score nothing, because a list of
"of the in a" is about nothing (relevance 0). Every factor is linear in the text's length
(MiniLM reads at most 256 word pieces).

In the env (``guards=True``, the default; ``infos[agent]["meaning"]`` holds the measurements)
the reward is ``q * lexical + meaning_weight * q * present``: the paper's lexical reward is
paid in proportion to ``q`` (component ``meaning_gate`` = ``-(1 - q) * lexical``) and ``q``
itself earns ``meaning_weight`` (component ``meaning``) times ``present``, the shorter part's
whitespace tokens over the lexical token range's minimum, capped at 1 (a team whose second
agent writes nothing does not collect the bonus on the first one's text). A fired guard zeroes both. ``guards=False``
leaves the term off (the presets' paper-exact reward) unless ``reward.meaning_weight`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_marl.envs.writing.guards import reader_words

__all__ = ["ARXIV_MEANING", "TLDR_MEANING", "MeaningSpec", "meaning_quality", "plausible_share"]

_PREPOSITIONS = frozenset(
    """of in on at for with by from to about into over under after before between through during
    without against among around like than""".split()  # noqa: SIM905 - word lists read better as text
)
_DETERMINERS = frozenset(
    """a an the my your his her our their its this that these those some any no every each another""".split()  # noqa: SIM905 - word lists read better as text
)
_OBJECTS = frozenset(
    ["me", "him", "her", "us", "them", "it", "you", "myself", "himself", "herself", "themselves"]
)
_SUBJECTS = frozenset(["i", "he", "she", "we", "they", "it", "you", "there"])
_AUXILIARIES = frozenset(
    """am is are was were be been being have has had do does did will would can could should may
    might must shall""".split()  # noqa: SIM905 - word lists read better as text
)
_NEGATIONS = frozenset(["not", "never", "t"])  # "t": don't, can't split at the apostrophe
_CONJUNCTIONS = frozenset(
    """and or but if so because when while as then also just very""".split()  # noqa: SIM905 - word lists read better as text
)
_FUNCTION = (
    _PREPOSITIONS | _DETERMINERS | _OBJECTS | _SUBJECTS | _AUXILIARIES | _NEGATIONS | _CONJUNCTIONS
)


def _glue(a: str, b: str) -> bool:
    """Whether ``a b`` is a pair English puts together whatever the topic (see the module doc)."""
    if a in _PREPOSITIONS:
        return b in _DETERMINERS or b in _OBJECTS
    if a in _DETERMINERS:
        return b not in _FUNCTION
    if a in _SUBJECTS and b in _AUXILIARIES:
        return True
    return a in _AUXILIARIES and (b in _NEGATIONS or b in _AUXILIARIES or b in _DETERMINERS)


def _bigrams(words: list[str]) -> set[tuple[str, str]]:
    return set(zip(words, words[1:], strict=False))


def plausible_share(answer: str, source: str) -> float:
    """Share of the distinct adjacent word pairs of ``answer`` (read as
    :func:`~llm_marl.envs.writing.guards.reader_text`) that occur in ``source`` or are English
    glue (see the module docstring); 0.0 for fewer than two words. Linear in both lengths."""
    pairs = _bigrams(reader_words(answer))
    if not pairs:
        return 0.0
    known = _bigrams(reader_words(source))
    return sum(1 for p in pairs if p in known or _glue(*p)) / len(pairs)


@dataclass(frozen=True)
class MeaningSpec:
    """The thresholds of one task's meaning term (see the module docstring)."""

    relevance_floor: float
    """MiniLM cosine (answer, source) at or below which the relevance factor is 0."""
    relevance_full: float
    """Cosine at or above which the relevance factor is 1."""
    order_full: float
    """Plausible-pair share at or above which the order factor is 1."""
    compression_full: float | None = None
    """Answer words / source words up to which the compression factor is 1 (None: no factor)."""
    compression_zero: float | None = None
    """Ratio at which the compression factor reaches 0."""


TLDR_MEANING = MeaningSpec(
    # 0.05, not 0.1: one of the 500 gold TL;DRs sits at cosine 0.089 with its own post, and no
    # term may zero an honest summary.
    relevance_floor=0.05,
    relevance_full=0.7,
    order_full=0.5,
    compression_full=1.0,
    compression_zero=2.0,
)
"""TL;DR: a summary of the post (see the figures in :mod:`llm_marl.envs.writing.env`)."""

ARXIV_MEANING = MeaningSpec(relevance_floor=0.1, relevance_full=0.7, order_full=0.2)
"""arXiv: an introduction that expands the abstract (no compression factor)."""


def _ramp(x: float, lo: float, hi: float) -> float:
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


def meaning_quality(
    relevance: float, answer: str, source: str, spec: MeaningSpec
) -> tuple[float, dict[str, Any]]:
    """``(q, measurements)``: the product of the relevance, order and compression factors of
    ``answer`` about ``source``, given the answer's MiniLM ``relevance`` (cosine) to it."""
    share = plausible_share(answer, source)
    factors = {
        "relevance": _ramp(relevance, spec.relevance_floor, spec.relevance_full),
        "order": min(1.0, share / spec.order_full),
        "compression": 1.0,
    }
    ratio = len(reader_words(answer)) / max(1, len(reader_words(source)))
    if spec.compression_full is not None and spec.compression_zero is not None:
        factors["compression"] = 1.0 - _ramp(ratio, spec.compression_full, spec.compression_zero)
    quality = factors["relevance"] * factors["order"] * factors["compression"]
    return quality, {
        "quality": quality,
        "cosine": relevance,
        "plausible_share": share,
        "compression_ratio": ratio,
        "factors": factors,
    }
