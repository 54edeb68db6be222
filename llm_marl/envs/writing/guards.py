"""Checks that stop two-part writing from gaming MAGRPO's lexical reward.

The paper's reward (:mod:`~llm_marl.envs.writing.lexical`) reads only the *form* of the two
parts: token counts, a length ratio, a distinct-word ratio, transition phrases and word overlap.
It never looks at the post, so text of the right shape earns up to 3.0 whatever it says. These
guards catch the cheap ways to get that shape without summarising; when one fires, the env's
guarded reward is 0 (``infos[agent]["guards"]`` names it). Each runs in time linear in the text.

``oversized``
    A part longer than ``max_chars`` characters (default 6,000: 256 tokens of long words). A few
    huge "tokens" pass level 1 otherwise. Checked first; the other guards read at most that much.
``repetition``
    More than ``max_repeated`` (default 0.3) of a part's word 4-grams repeat an earlier 4-gram of
    the same part (one sentence written again and again; a padded part).
``copies_source``
    A part's share of content-word pairs found in the source (its content words that occur in
    the source, each with the next three, unordered, function words left out, over
    ``pairs + 12``: :func:`copied_share`) above ``max_copied`` (default 0.55): pasting the post
    or the abstract is not summarising it, and a copy with local edits (words reordered, dropped
    or inserted) keeps most of its pairs where it would lose most of its 5-grams. Words the
    source lacks are left out before pairing, so filler inserted into a copy does not dilute
    it. Figures on the 500 TL;DR posts and 200 abstracts: ``benchmarks/writing_meaning.py``
    (see :mod:`llm_marl.envs.writing.env`).
``copies_partner``
    More than ``max_shared`` (default 0.6) of the shorter part's word 5-grams (of
    :func:`reader_text`) appear in the other part: one agent repeating the other.

All guards read the text as a reader does (:func:`reader_text`): NFKC-normalised, format
characters (zero-width, soft hyphen, bidi controls) removed, look-alike Cyrillic and Greek
letters folded onto Latin ones, case-folded.
``transition_stuffing``
    More than ``max_transition_density`` (default 0.3) of a part's words (plus 10, so one
    connective in a short part is not stuffing) belong to transition phrases (whole-word matches), or more than ``max_transition_run`` (default 3) transition
    phrases follow each other with only punctuation between them: a list of connectives instead
    of prose (level 4 pays for each *category* of connective found, wherever it is).

Thresholds are :class:`GuardConfig` fields. They were checked against honest text: none fires on
the 500 gold TL;DRs of ``$LLM_MARL_DATA_DIR/tldr`` nor on our bundled references (tests).

Known gaps (heuristics, not a proof): a part that mixes a pasted share of the source below
``max_copied`` with invented filler words, or an answer of the right shape about another text,
passes every guard. The env's meaning term (on with the guards,
:mod:`~llm_marl.envs.writing.meaning`) is what tells an answer about another post, or shuffled
words, from one about this post; nothing here judges faithfulness (the optional LLM judge is
the tool for that).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from llm_marl.checks import check_int, check_number
from llm_marl.envs.settings import coerce_settings
from llm_marl.envs.writing.lexical import TRANSITION_WORDS

__all__ = [
    "GuardConfig",
    "check_guards",
    "copied_share",
    "ngram_containment",
    "reader_text",
    "reader_words",
    "repeated_fraction",
    "transition_use",
]

_WORD_RE = re.compile(r"\w+")
_PHRASES = sorted({p for ps in TRANSITION_WORDS.values() for p in ps}, key=len, reverse=True)
_TRANSITION_RE = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in _PHRASES) + r")\b")
_GAP_RE = re.compile(r"[^\w]*")


@dataclass(frozen=True)
class GuardConfig:
    """Thresholds of the guards (see the module docstring)."""

    max_chars: int = 6000
    """A part longer than this many characters fires ``oversized``."""
    max_repeated: float = 0.3
    """Share of a part's word 4-grams that may repeat an earlier one."""
    max_copied: float = 0.55
    """Share of a part's content-word pairs (:func:`copied_share`) that may occur in the source."""
    max_shared: float = 0.6
    """Share of the shorter part's word 5-grams that may appear in the other part."""
    max_transition_density: float = 0.3
    """Share of a part's words that may belong to transition phrases."""
    max_transition_run: int = 3
    """How many transition phrases may follow each other with only punctuation between them."""

    def __post_init__(self) -> None:
        check_int(self.max_chars, "max_chars")
        check_int(self.max_transition_run, "max_transition_run")
        for name in ("max_repeated", "max_copied", "max_shared", "max_transition_density"):
            check_number(getattr(self, name), name, 0, 1)

    @classmethod
    def coerce(cls, value: GuardConfig | dict[str, Any] | None) -> GuardConfig:
        """``None`` (the defaults), an instance, or a dict of its fields."""
        return coerce_settings(cls, value, "guard")


# Letters that look like Latin ones (Cyrillic, Greek, a few others), folded onto them: a copy
# written with look-alikes reads the same to a reader and must read the same to the guards.
_CONFUSABLES = str.maketrans(
    {
        **dict.fromkeys("аᴀα", "a"),
        "в": "b",
        **dict.fromkeys("сϲ", "c"),
        "ԁ": "d",
        **dict.fromkeys("еєε", "e"),
        "ғ": "f",
        "ɡ": "g",
        **dict.fromkeys("һн", "h"),
        **dict.fromkeys("іıɩι", "i"),
        "ј": "j",
        **dict.fromkeys("кκ", "k"),
        "ӏ": "l",
        "м": "m",
        **dict.fromkeys("пη", "n"),
        **dict.fromkeys("оοσ", "o"),
        **dict.fromkeys("рρ", "p"),
        "ԛ": "q",
        "г": "r",
        "ѕ": "s",
        **dict.fromkeys("тτ", "t"),
        **dict.fromkeys("υμ", "u"),
        **dict.fromkeys("νѵ", "v"),
        **dict.fromkeys("ԝω", "w"),
        **dict.fromkeys("хχ", "x"),
        **dict.fromkeys("уγ", "y"),
        "ᴢ": "z",
        "А": "A",
        "В": "B",
        "С": "C",
        "Е": "E",
        "Н": "H",
        "І": "I",
        "Ј": "J",
        "К": "K",
        "М": "M",
        "О": "O",
        "Р": "P",
        "Ѕ": "S",
        "Т": "T",
        "Х": "X",
        "У": "Y",
        "Α": "A",
        "Β": "B",
        "Ε": "E",
        "Ζ": "Z",
        "Η": "H",
        "Ι": "I",
        "Κ": "K",
        "Μ": "M",
        "Ν": "N",
        "Ο": "O",
        "Ρ": "P",
        "Τ": "T",
        "Υ": "Y",
        "Χ": "X",
    }
)


def reader_text(text: str) -> str:
    """``text`` as a reader sees it: NFKC-normalised, without format characters (zero-width
    spaces and joiners, soft hyphens, bidi controls), look-alike letters folded onto Latin
    ones, case-folded. Linear in the length of ``text``."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.translate(_CONFUSABLES).casefold()


def reader_words(text: str) -> list[str]:
    """The ``\\w+`` words of :func:`reader_text` (what every guard counts)."""
    return _WORD_RE.findall(reader_text(text))


_words = reader_words


PAIR_WINDOW = 3
"""Word pairs of :func:`copied_share` join each word with the next ``PAIR_WINDOW`` words."""


def _pairs(words: list[str]) -> set[tuple[str, str]]:
    """Unordered pairs of words at most :data:`PAIR_WINDOW` apart: a local reordering, a dropped
    or an inserted word keeps most of them (an n-gram loses n)."""
    out: set[tuple[str, str]] = set()
    for i, a in enumerate(words):
        for b in words[i + 1 : i + 1 + PAIR_WINDOW]:
            out.add((a, b) if a <= b else (b, a))
    return out


_FUNCTION_WORDS = frozenset(
    """a an the and or but if so to of in on at for with by from as is are was were be been am i me
    my we our you your he him his she her it its they them their this that these those not no do
    did does have has had will would can could just very really""".split()  # noqa: SIM905 - word lists read better as text
)


def _content_words(text: str) -> list[str]:
    """The words of :func:`reader_text` without function words: pairs of function words occur
    in any two English texts and would make every summary look copied."""
    return [w for w in _words(text) if w not in _FUNCTION_WORDS]


def copied_share(text: str, source: str) -> float:
    """Share of the content-word pairs of ``text`` (see :func:`_pairs`, over
    :func:`reader_text`, words absent from ``source`` left out) that also occur in ``source``:
    high for a copy with local edits (reordered, dropped or inserted words, look-alike or
    invisible characters), low for a summary. Linear in the texts' lengths (at most
    ``PAIR_WINDOW`` pairs per word)."""
    words = _content_words(source)
    return _containment(text, _pairs(words), frozenset(words))


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def repeated_fraction(text: str, n: int = 4) -> float:
    """Share of the word ``n``-grams of ``text`` that repeat an earlier one (0 if none)."""
    grams = _ngrams(_words(text), n)
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def ngram_containment(text: str, other: str, n: int = 5) -> float:
    """Share of the distinct word ``n``-grams of ``text`` that also occur in ``other``."""
    grams = set(_ngrams(_words(text), n))
    if not grams:
        return 0.0
    return len(grams & set(_ngrams(_words(other), n))) / len(grams)


TRANSITION_PRIOR_WORDS = 10
"""Words added to a part's length in the transition density (see :func:`transition_use`)."""


def transition_use(text: str) -> tuple[float, int]:
    """``(density, longest run)`` of whole-word transition phrases in ``text``: the share of its
    words inside them, and the most that follow each other with only punctuation between."""
    words = len(_words(text))
    if not words:
        return 0.0, 0
    # A short part with one long connective ("at the same time") is not stuffing: the density
    # counts TRANSITION_PRIOR_WORDS more words (a stuffed part is long or a run anyway).
    words += TRANSITION_PRIOR_WORDS
    lower = reader_text(text)
    covered = run = longest = 0
    last_end = -1
    for match in _TRANSITION_RE.finditer(lower):
        covered += len(match.group(0).split())
        between = lower[last_end : match.start()] if last_end >= 0 else "x"
        run = run + 1 if _GAP_RE.fullmatch(between) is not None else 1
        longest = max(longest, run)
        last_end = match.end()
    return covered / words, longest


def check_guards(
    parts: tuple[str, str], source: str, config: GuardConfig | None = None
) -> tuple[list[str], dict[str, float]]:
    """The guards that fire on ``parts`` given the ``source`` text, and what they measured."""
    config = config or GuardConfig()
    if max(len(p) for p in parts) > config.max_chars:
        return ["oversized"], {"max_part_chars": float(max(len(p) for p in parts))}
    # The source is ours (a post, an abstract), not the model's: it may be long, and is read once.
    source_words = _content_words(source)
    source_pairs, vocabulary = _pairs(source_words), frozenset(source_words)
    measured = {
        "repeated": max(repeated_fraction(p) for p in parts),
        "copied": max(_containment(p, source_pairs, vocabulary) for p in parts),
        "shared": _shared(parts),
    }
    uses = [transition_use(p) for p in parts]
    measured["transition_density"] = max(u[0] for u in uses)
    measured["transition_run"] = float(max(u[1] for u in uses))
    fired = []
    if measured["repeated"] > config.max_repeated:
        fired.append("repetition")
    if measured["copied"] > config.max_copied:
        fired.append("copies_source")
    if measured["shared"] > config.max_shared:
        fired.append("copies_partner")
    if (
        measured["transition_density"] > config.max_transition_density
        or measured["transition_run"] > config.max_transition_run
    ):
        fired.append("transition_stuffing")
    return fired, measured


PRIOR_PAIRS = 12
"""Pairs added to the denominator of :func:`copied_share`: a short honest TL;DR has few pairs,
and a handful found in the post must not read as a copy (a pasted part has many)."""


def _containment(text: str, pairs: set[tuple[str, str]], vocabulary: frozenset[str]) -> float:
    # Words the source lacks are dropped first: inserted filler must not dilute a copy.
    own = _pairs([w for w in _content_words(text) if w in vocabulary])
    return len(own & pairs) / (len(own) + PRIOR_PAIRS)


def _shared(parts: tuple[str, str]) -> float:
    # 5-grams here: an honest detailed part restates the concise one in its words, which
    # word pairs would count as copying; a partner's copy shares whole phrases.
    shorter, longer = sorted(parts, key=lambda p: len(_words(p)))
    return ngram_containment(shorter, longer)
