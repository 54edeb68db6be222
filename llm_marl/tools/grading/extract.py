"""Pull the final answer out of a model completion.

Order of precedence (the first rule that finds something wins):

1. the last *complete* ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces are matched; a box cut
   off by truncation is ignored and the one before it is used), or ``\\boxed 5`` without braces;
2. the last of the answer markers ``#### X`` (GSM8K), ``Final Answer: X``,
   ``The final answer is X``, ``the answer is X``, ``Answer: X`` (case-insensitive). The answer
   runs to the end of its line; ``$...$`` around it is unwrapped and a closing sentence
   (``. I hope it is correct.``) is cut off;
3. with ``fallback=True`` (the default) the last number in the text (``-3``, ``1,234``, ``2.5``,
   ``3/4``). ``fallback=False`` returns ``None`` instead, for callers that want to require a
   formatted answer (and put a format penalty on its absence).

Everything here is plain string scanning in linear time: no regex with nested quantifiers, so a
hostile completion cannot make extraction slow.
"""

from __future__ import annotations

import re

__all__ = ["extract_answer", "last_boxed"]

# "The final answer is", "final answer:", "the answer is", "answer:" ... and GSM8K's "####".
_MARKER_RE = re.compile(
    r"(?:####|final\s+answer\s*(?:is|:)|the\s+answer\s+is|\banswer\s*:)",
    re.IGNORECASE,
)
# A sentence after the answer on the same line ("$5$. I hope it is correct.").
_TRAILING_SENTENCE_RE = re.compile(r"\.\s+[A-Z].*$")
_LAST_NUMBER_RE = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+")


def _brace_pairs(text: str) -> dict[int, int]:
    """Map the index of every ``{`` to its matching ``}`` (escaped braces skipped), in one pass."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2  # skip the escaped character: ``\{`` and ``\}`` are literal braces
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def _box_content(text: str, start: int, command: str, pairs: dict[int, int]) -> str | None:
    """The argument of the box command that starts at ``start``, or None if it is incomplete."""
    i = start + len(command)
    n = len(text)
    # ``\boxedx`` is not a box; ``\boxed{`` and ``\boxed 5`` are.
    if i < n and text[i].isalpha():
        return None
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] == "{":
        close = pairs.get(i)
        if close is None:
            return None
        return text[i + 1 : close]
    # ``\boxed 5`` (TeX allows an unbraced single token): take the next word.
    j = i
    while j < n and not text[j].isspace() and text[j] not in "$\\":
        j += 1
    word = text[i:j].rstrip(".,;")
    return word or None


_BOX_RE = re.compile(r"\\(?:boxed|fbox)")


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text`` (None if there is none).

    Linear time: braces are matched once for the whole text.
    """
    starts = [m.start() for m in _BOX_RE.finditer(text)]
    if not starts:
        return None
    pairs = _brace_pairs(text)
    for start in reversed(starts):
        command = "\\boxed" if text.startswith("\\boxed", start) else "\\fbox"
        content = _box_content(text, start, command, pairs)
        if content is not None:
            return content.strip()
    return None  # only truncated or malformed boxes


def _after_marker(text: str) -> str | None:
    """The answer following the last answer marker, or None."""
    last = None
    for m in _MARKER_RE.finditer(text):
        last = m
    if last is None:
        return None
    # Markdown emphasis around the marker or the answer ("**Answer:** 12", "is **12**.")
    # is presentation: stars are dropped at both ends.
    rest = text[last.end() :].lstrip(" \t:*")
    line = rest.split("\n", 1)[0].strip()
    if not line and "\n" in rest:
        # "Final Answer:\n42": the answer is on the next non-empty line.
        for candidate in rest.split("\n"):
            if candidate.strip():
                line = candidate.strip()
                break
    if line.startswith("$"):
        # "$x$. I hope ..." or "$$x$$": take what the first math span encloses.
        inner = line.lstrip("$")
        close = inner.find("$")
        line = inner[:close] if close >= 0 else inner
    else:
        line = _TRAILING_SENTENCE_RE.sub("", line)
    line = line.strip(" \t*").rstrip(".").strip(" \t*")
    boxed = last_boxed(line)
    if boxed is not None:
        return boxed
    return line or None


def extract_answer(text: str, *, fallback: bool = True) -> str | None:
    """Return the final answer written in a model completion, or None if there is none.

    Args:
        text: the completion.
        fallback: when no box and no answer marker is present, return the last number in the
            text (True, the default) or None (False).

    Returns:
        The answer as written (not normalised; see :func:`normalize_answer`), or None.

    >>> extract_answer(r"so $x = \\boxed{\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
    >>> extract_answer("She pays 3 + 4 = 7 dollars.\\n#### 7")
    '7'
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_answer expects a str completion, got {type(text).__name__}")
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    marked = _after_marker(text)
    if marked is not None:
        return marked
    if not fallback:
        return None
    last = None
    for m in _LAST_NUMBER_RE.finditer(text):
        last = m
    if last is None:
        return None
    return re.sub(r"\s+", "", last.group(0))
