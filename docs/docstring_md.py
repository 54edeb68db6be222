"""Our docstrings' reStructuredText habits, written as Markdown for the env pages.

The env module docstrings are plain text in a small, regular subset of reST: paragraphs,
definition items (a term on its own line, its body indented below it), numbered and bulleted
lists, ``::`` literal blocks, doctests, ``Title`` / ``-----`` section titles, Google-style
``Args:`` sections, ````code```` and Sphinx roles. :func:`markdown` turns that subset into
Markdown: terms become headings (so a page gets a table of contents), doctests and literal
blocks become fenced code, roles become links (:mod:`docstrings`), and ``<`` outside code is
escaped so that text such as ``<Problem>`` is shown, not taken for HTML.
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
from collections.abc import Callable

from docstrings import ROLE_RE, Resolver, convert

ITEM_RE = re.compile(r"(\d+\.|[*+-]) ")
"""A list item's first line."""
INLINE_RE = re.compile(rf"(?P<sphinx>{ROLE_RE.pattern})|(?P<code>``.+?``|`[^`\n]+`)", re.DOTALL)
UNDERLINE_RE = re.compile(r"(-{3,}|={3,})")
GOOGLE_SECTIONS = {"Args:", "Arguments:", "Raises:", "Returns:", "Yields:", "Note:", "Example:"}
"""Google-style section titles: a labelled list or paragraph, not a heading."""


def markdown(doc: str, resolve: Resolver, level: int = 2) -> str:
    """``doc`` (a cleaned docstring) as Markdown; terms become headings of ``level``."""
    lines = doc.splitlines()
    top = level  # reST section titles stay at this level; the definitions below them go one down
    blocks: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            text = "\n".join(para)
            if text.endswith("::"):  # reST's "introduces a literal block"
                text = text[:-1]
            blocks.append(inline(text, resolve))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.strip():
            flush()
            i += 1
        elif line.startswith(">>>"):
            flush()
            j = _until(lines, i, lambda x: not x.strip())
            blocks.append("```pycon\n" + "\n".join(lines[i:j]) + "\n```")
            i = j
        elif _indent(line) and para:  # a wrapped list item or paragraph
            para.append(line)
            i += 1
        elif _indent(line):  # an indented block on its own: a literal block
            j = _block_end(lines, i)
            code = textwrap.dedent("\n".join(lines[i:j])).strip("\n")
            blocks.append(f"```{'python' if _parses(code) else 'text'}\n{code}\n```")
            i = j
        elif UNDERLINE_RE.fullmatch(nxt.strip()) and not para:  # a reST section title
            blocks.append(f"{'#' * top} {inline(line, resolve)}")
            level = top + 1
            i += 2
        elif nxt.strip() and _indent(nxt) and not para and not ITEM_RE.match(line):
            j = _block_end(lines, i + 1)
            body = textwrap.dedent("\n".join(lines[i + 1 : j]))
            blocks.append(_definition(line, body, resolve, level))
            i = j
        else:
            is_item = bool(ITEM_RE.match(line))
            if para and is_item != bool(ITEM_RE.match(para[0])):
                flush()  # Markdown needs a blank line between a list and a paragraph
            para.append(line)
            i += 1
    flush()
    return "\n\n".join(blocks) + "\n"


def _definition(term: str, body: str, resolve: Resolver, level: int) -> str:
    """A definition item: a heading (its parenthesised remark as the first line) and its body,
    or, for a Google-style section, a bold label and a list of the names it documents."""
    if term.strip() in GOOGLE_SECTIONS:
        label = f"**{term.strip().rstrip(':')}**"
        if term.strip() in ("Args:", "Arguments:", "Raises:"):
            return label + "\n\n" + _google_list(body, resolve)
        return label + "\n\n" + markdown(body, resolve, level + 1)
    match = re.fullmatch(r"(?P<title>[^(]+?) \((?P<remark>.+)\)", term.strip())
    title, remark = (match["title"], match["remark"]) if match else (term.strip(), "")
    parts = [f"{'#' * level} {inline(title, resolve)}"]
    if remark:
        parts.append(f"*({inline(remark, resolve)})*")
    parts.append(markdown(body, resolve, level + 1).rstrip("\n"))
    return "\n\n".join(parts)


def _google_list(body: str, resolve: Resolver) -> str:
    """``name: text`` entries (continuations indented) as a bulleted list."""
    entries: list[str] = []
    for line in body.splitlines():
        if line.strip() and not _indent(line):
            name, _, text = line.partition(":")
            entries.append(f"`{name.strip()}`: {text.strip()}")
        elif entries:
            entries[-1] += " " + line.strip()
    return "\n".join(f"- {inline(entry, resolve)}" for entry in entries)


def inline(text: str, resolve: Resolver) -> str:
    """Roles as links, code spans kept, ``<`` and ``>`` elsewhere escaped."""
    out: list[str] = []
    pos = 0
    for match in INLINE_RE.finditer(text):
        out.append(html.escape(text[pos : match.start()], quote=False))
        if match["sphinx"]:
            out.append(convert(match[0], resolve))
        else:  # reST's ``code`` is Markdown's `code` (kept double where it holds a backtick)
            code = match[0]
            inner = code[2:-2] if code.startswith("``") else code[1:-1]
            out.append(code if "`" in inner else f"`{inner}`")
        pos = match.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" ")) if line.strip() else 0


def _until(lines: list[str], start: int, stop: Callable[[str], bool]) -> int:
    j = start
    while j < len(lines) and not stop(lines[j]):
        j += 1
    return j


def _block_end(lines: list[str], start: int) -> int:
    """The end of the indented block at ``start``: the next unindented line (blank lines inside
    the block belong to it when indented lines follow them)."""
    j = start
    while j < len(lines):
        if lines[j].strip() and not _indent(lines[j]):
            break
        j += 1
    while j > start and not lines[j - 1].strip():
        j -= 1
    return j


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True
