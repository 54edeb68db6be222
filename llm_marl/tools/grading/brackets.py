"""Bracket nesting in answer strings: the one scanner behind splitting and bracket matching.

Brackets are ``( [ {`` / ``) ] }`` and the set braces ``\\{`` / ``\\}``. A backslash followed by
one of a caller's ``escapes`` is a two-character unit that is neither a bracket nor a place to
split. The callers differ only in that set, and each set is part of what they return, so it
is a parameter rather than one convention for all:

* :func:`split_top_level` (lists, unions): ``"\\\\"``. A row break or escaped backslash is one
  unit, so ``\\\\cup`` holds no ``\\cup`` separator.
* the relation splitter of :mod:`.parse`: none, so ``a\\\\le b`` splits at its ``\\le``.
* :func:`matching_close`: ``MATCH_ESCAPES``. ``\\\\`` ``\\(`` ``\\)`` ``\\[`` ``\\]`` are
  TeX commands, not brackets.

Every scan is one left-to-right pass: linear in the string, safe on hostile input.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "MATCH_ESCAPES",
    "bracket_unit",
    "matching_close",
    "split_at_top_level",
    "split_top_level",
]

MATCH_ESCAPES = "\\()[]"
"""What :func:`matching_close` skips after a backslash (``\\{`` and ``\\}`` are set braces)."""


def bracket_unit(s: str, i: int, escapes: str) -> tuple[int, int]:
    """The unit of ``s`` that starts at ``i``: ``(change in bracket depth, its length)``.

    ``(0, 1)`` is a plain character, the only kind of unit a separator may start at.
    """
    ch = s[i]
    if ch == "\\" and i + 1 < len(s):
        nxt = s[i + 1]
        if nxt == "{":
            return 1, 2
        if nxt == "}":
            return -1, 2
        if nxt in escapes:
            return 0, 2
    if ch in "([{":
        return 1, 1
    if ch in ")]}":
        return -1, 1
    return 0, 1


def split_at_top_level(
    s: str, find: Callable[[str, int], str | None], escapes: str
) -> tuple[list[str], list[str]]:
    """Split ``s`` at the separators outside every bracket pair: ``(parts, separators)``.

    ``find(s, i)`` returns the separator that starts at ``s[i]``, or None; it is asked at every
    plain character at depth 0, and the scan goes on after the separator it returns.
    """
    parts: list[str] = []
    found: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(s)
    while i < n:
        change, width = bracket_unit(s, i, escapes)
        depth += change
        if depth == 0 and width == 1 and change == 0:
            sep = find(s, i)
            if sep is not None:
                parts.append(s[start:i])
                found.append(sep)
                start = i = i + len(sep)
                continue
        i += width
    parts.append(s[start:])
    return parts, found


def split_top_level(s: str, seps: tuple[str, ...] = (",",)) -> list[str]:
    """Split ``s`` at separators that are outside every bracket pair (``() [] {} \\{ \\}``)."""

    def find(s: str, i: int) -> str | None:
        for sep in seps:
            if s.startswith(sep, i):
                return sep
        return None

    return split_at_top_level(s, find, escapes="\\")[0]


def matching_close(s: str, open_index: int) -> int | None:
    """Index of the bracket closing the one at ``open_index`` (any of ``([`` vs ``)]``)."""
    depth = 0
    i = open_index
    while i < len(s):
        change, width = bracket_unit(s, i, MATCH_ESCAPES)
        depth += change
        if change < 0 and depth == 0:
            return i
        i += width
    return None
