"""The bounds on untrusted model output (:class:`CallLimits`: how much of a completion is read,
how many calls, how long and how deep one call may be); the bounded JSON reader
(:func:`load_json`: depth checked by a linear scan before ``json.loads``, finite numbers, unique
keys) and bounded descriptions of any value for error messages (:func:`short`)."""

from __future__ import annotations

import json
import math
import re
import reprlib
from dataclasses import dataclass
from typing import Any

from llm_marl.checks import check_int
from llm_marl.tools.text import scrub_surrogates

FORMATS: tuple[str, ...] = ("hermes", "mcp", "openai")
"""The tool-call formats :func:`parse_tool_calls` understands."""


@dataclass(frozen=True)
class CallLimits:
    """How much of one completion :func:`~llm_marl.tools.calls.parse_tool_calls` reads (the
    parser of a :class:`~llm_marl.tools.calls.Toolbox` too): the four bounds travel together.

    Example: ``Toolbox(tools, limits=CallLimits(max_calls=1))`` runs one call per completion.
    """

    max_chars: int = 256 * 1024
    """Characters of a completion searched for tool calls; the rest is ignored (``truncated``)."""

    max_calls: int = 8
    """Tool calls parsed per completion; further ones become a single ``too_many`` error."""

    max_call_chars: int = 64 * 1024
    """Characters of one call's body (between its tags, or one OpenAI ``arguments`` string)."""

    max_depth: int = 32
    """Deepest JSON nesting accepted in a call (objects and arrays)."""

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_calls", "max_call_chars", "max_depth"):
            check_int(getattr(self, name), f"CallLimits.{name}")


DEFAULT_MAX_OUTPUT_CHARS = 64 * 1024
"""Characters of one tool result a :class:`~llm_marl.tools.calls.Toolbox` posts by default
(its output or its error message): one call cannot put megabytes into the next prompt."""


_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""What follows a JSON string's opening quote, up to and with its closing quote (or the end of
the text): a backslash escapes the next character, whatever it is. Unrolled, so it never
backtracks."""


_NESTING = re.compile(r'["\[\]{}]')


def json_string_end(text: str, start: int) -> int:
    """The index just past the JSON string whose opening quote is ``text[start]`` (or the end of
    the text, if it never closes). One regex match: linear in the string's length.

    The scanners of JSON embedded in model output skip strings with it, so the brackets and
    braces a string holds (code, LaTeX) never count as structure.
    """
    match = _STRING_REST.match(text, start + 1)
    assert match is not None  # every text matches: the last alternative is the end of the text
    return match.end()


def json_depth_exceeds(text: str, max_depth: int) -> bool:
    """Whether JSON ``text`` nests objects/arrays deeper than ``max_depth``.

    One linear pass that skips string contents (with escapes, :func:`json_string_end`), so that
    ``json.loads`` is only ever given input it can parse without deep recursion. Malformed text
    may pass; ``json.loads`` then rejects it.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return False  # cannot nest deeper than it has brackets (a fast path in C)
    depth = 0
    pos = 0
    while (found := _NESTING.search(text, pos)) is not None:
        ch, pos = found.group(), found.end()
        if ch == '"':
            pos = json_string_end(text, found.start())
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """``json.loads``' float parser, refusing numbers beyond the float range (``1e999999``
    would otherwise reach a tool as inf)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {short(text, 40)} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object builder, refusing duplicate keys: with a plain dict the last one
    would silently win (``{"name": "a", "name": "b"}`` would call b). Linear: the set of keys
    is only built when the dict came out shorter than the pairs."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {short(key, 40)!r}")
            seen.add(key)
    return obj


def load_json(text: str, max_depth: int) -> tuple[Any, str | None]:
    """(value, None) or (None, problem). Never raises, never recurses past ``max_depth``.

    Refuses what :func:`json.loads` alone lets through: ``NaN``/``Infinity``, numbers out of
    the float range, duplicate keys. Strings are not scrubbed here: :func:`validate_arguments`
    and :class:`_Collector` do it for everything they hand out.
    """
    if json_depth_exceeds(text, max_depth):
        return None, f"JSON nested deeper than {max_depth} levels"
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except (ValueError, RecursionError) as e:
        return None, f"invalid JSON ({short(str(e), 80)})"
    return value, None


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` limits (depth, items, lengths), and dicts shown in their own order: the
    stock ``repr_dict`` sorts every key first, more than linear work for a huge dict."""

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        parts = []
        for i, (key, item) in enumerate(x.items()):
            if i == self.maxdict:
                parts.append("...")
                break
            parts.append(f"{self.repr1(key, level - 1)}: {self.repr1(item, level - 1)}")
        return "{" + ", ".join(parts) + "}"


_REPR = _BoundedRepr()


_REPR.maxlevel = 3


_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 4


_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80


def short(value: Any, limit: int = 60) -> str:
    """At most ``limit`` characters describing ``value`` (for error messages): bounded in depth
    and size whatever ``value`` is, never raises, and free of lone surrogates."""
    try:
        text = value[: limit + 1] if isinstance(value, str) else _REPR.repr(value)
    except Exception:  # a hostile __repr__ (or an int too long to print) may raise anything
        text = f"<{type(value).__name__}>"
    text = scrub_surrogates(text[: limit + 1].replace("\n", " "))
    return text if len(text) <= limit else text[: limit - 3] + "..."
