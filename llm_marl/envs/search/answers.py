"""Answers of the web-search envs: extraction from a completion, exact match and token F1.

Normalisation is the SQuAD / HotpotQA one (lower-case, drop punctuation and the articles
``a an the``, collapse whitespace). Every function here reads untrusted model output and runs in
time linear in its length.

>>> extract_answer("I think so. \\\\boxed{Chief of Protocol}")
'Chief of Protocol'
>>> extract_answer("<answer> Paris </answer>")
'Paris'
>>> exact_match("the Chief of protocol.", ["Chief of Protocol"])
1.0
>>> round(token_f1("Chief of Protocol of the US", ["Chief of Protocol"]), 3)
0.75
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = ["exact_match", "extract_answer", "normalize_answer", "token_f1"]

MAX_ANSWER_CHARS = 2000
"""Extracted answers are cut to this length (a gold answer is a few words)."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_OPEN, _CLOSE = "<answer>", "</answer>"


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` if its braces close (one linear scan; an
    unclosed last box means no boxed answer, so hostile text cannot make this quadratic)."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 0
    begin = start + len("\\boxed{")
    for i in range(begin, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return text[begin:i]
            depth -= 1
    return None


def _last_answer_tag(text: str) -> str | None:
    """The content of the last ``<answer>...</answer>``, pairing each opener with the first closer
    after it, left to right (what ``re.finditer(r"<answer>(.*?)</answer>", DOTALL)`` gives).

    Two ``str.find`` calls per pair, each resuming where the last stopped: linear. The lazy regex
    rescans to the end of the text from every unclosed opener, so a reply of 16,000 ``<answer>``
    tags took 22 s."""
    last, pos = None, 0
    while (start := text.find(_OPEN, pos)) != -1:
        end = text.find(_CLOSE, start + len(_OPEN))
        if end == -1:  # no closer after this opener, so none after any later one either
            break
        last, pos = text[start + len(_OPEN) : end], end + len(_CLOSE)
    return last


def extract_answer(text: str) -> str:
    """The final answer in a completion: the last ``\\boxed{...}`` (MATPO's format), else the
    last ``<answer>...</answer>``, else the whole text; stripped and cut to
    :data:`MAX_ANSWER_CHARS`."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed.strip()[:MAX_ANSWER_CHARS]
    last = _last_answer_tag(text)
    if last is not None:
        return last.strip()[:MAX_ANSWER_CHARS]
    return text.strip()[:MAX_ANSWER_CHARS]


def _raw(text: str) -> str:
    """Lower-cased with whitespace collapsed: how a gold that normalises to "" is compared."""
    return " ".join(text.lower().split())


def _same(prediction: str, pred: str, gold: str) -> bool:
    """Whether ``prediction`` (normalised: ``pred``) answers ``gold``.

    A gold of punctuation and articles only (FRAMES' ``"....-"``, ``"The"``) normalises to
    ``""``, as does an empty or punctuation-only prediction: such a gold is compared raw, so
    that only its own text matches it. A gold that is blank even raw matches nothing.
    """
    normalised = normalize_answer(gold)
    if normalised:
        return pred == normalised
    raw = _raw(gold)
    return bool(raw) and _raw(prediction) == raw


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold answer, else 0.0 (a gold that
    normalises to nothing is compared raw, lower-cased with spaces collapsed)."""
    pred = normalize_answer(prediction)
    return float(any(_same(prediction, pred, g) for g in golds))


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """Best token-level F1 between the prediction and any gold answer (HotpotQA's metric); a
    gold that normalises to nothing scores 1.0 or 0.0, as :func:`exact_match` compares it."""
    normalised = normalize_answer(prediction)
    pred = normalised.split()
    best = 0.0
    for gold in golds:
        ref = normalize_answer(gold).split()
        if not ref:
            best = max(best, float(_same(prediction, normalised, gold)))
            continue
        common = Counter(pred) & Counter(ref)
        same = sum(common.values())
        if not pred or not ref:
            best = max(best, float(pred == ref))
            continue
        if same == 0:
            continue
        precision, recall = same / len(pred), same / len(ref)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
