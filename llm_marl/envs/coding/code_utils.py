"""Reading Python code out of model completions, and the static checks of the code reward.

Completions are noisy: prose around the code, Markdown fences, a ``<think>`` block, an unclosed
fence when generation hit its token limit, example calls at the bottom. This module turns one
completion into a list of top-level :class:`Block` s (imports, functions, classes, simple
assignments) and answers the questions the reward asks about them (is ``aux`` defined with a
``return``? does the main function call ``aux``? is it a thin wrapper of ``aux``? does it
discard ``aux``'s result?).

Which blocks go into the program
    Imports, function and class definitions, and simple assignments at the top level (module
    constants). Other top-level statements (``print(...)``, example asserts, an
    ``if __name__ == "__main__":`` block) are dropped: they are the model's own examples, and
    running them could fail or stall a correct solution. A definition or import that does not
    parse is *kept*, so that the assembled program fails to parse and the syntax term of the
    reward sees it; prose that does not parse is dropped.

Cost on the host (completions are untrusted)
    Every parser here is linear in its input and bounded: :func:`extract_code` reads at most
    :data:`MAX_COMPLETION_CHARS` characters (one pass of ``str.find``, no backtracking regular
    expression), :func:`split_blocks` at most :data:`MAX_CODE_CHARS` (one ``ast.parse`` of the
    whole code; when it does not parse, a one-pass lexer cuts it into top-level chunks, chunks
    that cannot be kept are classified by their first line without parsing, and the others are
    parsed in groups, so prose costs no parse beyond the first and no character is parsed more
    than three times: whole, in its group, alone). :meth:`Submission.from_completion` gives a longer completion no code at all (``oversized``
    is set): it is scored as an answer without a function, never truncated into something else.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from llm_marl.tools.pyparse import parse_python

BlockKind = Literal["import", "def", "class", "assign", "other"]

MAX_COMPLETION_CHARS = 1_000_000
"""Longest completion read for code (characters); a longer one counts as containing no code."""
MAX_CODE_CHARS = 50_000
"""Longest extracted code split into blocks (characters, ~12k tokens); longer code is not read."""

_FENCE = "```"
_FENCE_TAG_RE = re.compile(r"[ \t]*([A-Za-z0-9_+#.-]*)")
# A closing fence: a line that starts, after spaces or tabs, with three backticks. ``^`` only
# matches at line starts and ``[ \t]*`` gives back at most the indent, so a search is linear.
_CLOSING_FENCE_RE = re.compile(r"^[ \t]*```", re.M)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython", "pycon"}
_DEF_RE = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")
_CLASS_RE = re.compile(r"^class\s+([A-Za-z_]\w*)")
_IMPORT_RE = re.compile(r"^(?:import\s+[A-Za-z_]|from\s+[A-Za-z_.][\w.]*\s+import\b)")
_CONTINUATION_RE = re.compile(r"^(?:else\b|elif\b|except\b|finally\b|case\b|[)\]}])")


@dataclass(frozen=True)
class Block:
    """One top-level statement of a submission."""

    kind: BlockKind
    """``import``, ``def`` (function), ``class``, ``assign`` (a module constant) or ``other``."""
    name: str | None
    """The defined name for ``def``/``class`` blocks, else ``None``."""
    source: str
    """The statement's source text (decorators included)."""
    node: ast.stmt | None = field(default=None, compare=False, repr=False)
    """The parsed statement; ``None`` when the block does not parse."""

    @property
    def parses(self) -> bool:
        return self.node is not None

    @property
    def kept(self) -> bool:
        """Whether the block goes into the assembled program (see the module docstring)."""
        return self.kind != "other"


@dataclass(frozen=True)
class Submission:
    """One agent's completion, read as code."""

    text: str
    """The raw completion."""
    code: str
    """The code extracted from it (fences and prose removed, dedented)."""
    blocks: tuple[Block, ...]
    """Its top-level statements, in order."""
    oversized: bool = False
    """The completion or its code was longer than the caps (see the module docstring), so it was
    not read: ``code`` is empty and there are no blocks."""

    @classmethod
    def from_completion(cls, text: str) -> Submission:
        """Read a completion; never raises on its content and costs linear time (see the module
        docstring), a completion over the caps giving an empty, ``oversized`` submission."""
        if not isinstance(text, str):
            raise TypeError(f"a completion must be a str, got {type(text).__name__}")
        if len(text) > MAX_COMPLETION_CHARS:
            return cls(text=text, code="", blocks=(), oversized=True)
        code = extract_code(text)
        if len(code) > MAX_CODE_CHARS:
            return cls(text=text, code="", blocks=(), oversized=True)
        return cls(text=text, code=code, blocks=tuple(split_blocks(code)))

    def function(self, name: str) -> Block | None:
        """The last top-level definition of function ``name`` (the one Python keeps), if any."""
        found = [b for b in self.blocks if b.kind == "def" and b.name == name]
        return found[-1] if found else None

    def defines(self, name: str) -> bool:
        return self.function(name) is not None

    def defines_with_return(self, name: str) -> bool:
        """``name`` is defined at the top level and returns a value somewhere in its body."""
        block = self.function(name)
        return block is not None and has_value_return(block)

    def program_parts(self, drop: Iterable[str] = ()) -> list[str]:
        """Sources of the kept blocks, leaving out definitions of the names in ``drop``."""
        dropped = set(drop)
        return [
            b.source
            for b in self.blocks
            if b.kept and not (b.kind in ("def", "class") and b.name in dropped)
        ]

    def defined_names(self) -> list[str]:
        return [b.name for b in self.blocks if b.kind in ("def", "class") and b.name]


# ---------------------------------------------------------------------- extraction
def extract_code(text: str) -> str:
    """The Python code in a completion.

    Rules, in order: drop ``<think>...</think>`` blocks (and everything before a lone
    ``</think>``, and everything after an unclosed ``<think>``); if the text has Markdown fences,
    keep the content of the Python (or untagged) fenced blocks, joined — a fence opens at
    three backticks and its info string runs to the end of that line, it closes at a line that
    starts (after spaces or tabs) with three backticks, and an unclosed final fence runs to the
    end of the text; otherwise keep the whole text. The result is dedented (code written at a
    uniform indent is still code). Prose lines outside definitions are removed later, by
    :func:`split_blocks`.

    Linear in ``len(text)``; raises ``ValueError`` beyond :data:`MAX_COMPLETION_CHARS`.
    """
    if not isinstance(text, str):
        raise TypeError(f"a completion must be a str, got {type(text).__name__}")
    if len(text) > MAX_COMPLETION_CHARS:
        raise ValueError(
            f"the completion is {len(text):,} characters long, more than the "
            f"{MAX_COMPLETION_CHARS:,} read for code"
        )
    text = text.lstrip("\ufeff")
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    cut = text.find("<think>")  # no closing tag after it any more: thinking ran to the end
    if cut >= 0:
        text = text[:cut]
    if _FENCE in text:
        blocks = _fenced_blocks(text)
        chosen = [body for tag, body in blocks if tag in _PYTHON_TAGS] or [b for _, b in blocks]
        # A stray ``` with nothing after it: drop the fence markers themselves.
        text = "\n\n".join(chosen) if chosen else text.replace(_FENCE, "")
    return textwrap.dedent(text.replace("\r\n", "\n").replace("\t", "    ")).strip("\n")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(tag, body)`` of every fenced block, in one left-to-right pass: each search starts where
    the previous block ended, so every character is looked at a bounded number of times, however
    many backticks there are."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        start = text.find(_FENCE, pos)
        if start < 0:
            return blocks
        newline = text.find("\n", start + 3)
        if newline < 0:  # an opening fence needs a line of its own: none can follow
            return blocks
        match = _FENCE_TAG_RE.match(text, start + 3, newline)
        tag = match.group(1).lower() if match else ""
        body_start = newline + 1
        close = _CLOSING_FENCE_RE.search(text, body_start)
        if close is None:  # unclosed: runs to the end of the text
            blocks.append((tag, text[body_start:]))
            return blocks
        blocks.append((tag, text[body_start : max(body_start, close.start() - 1)]))
        pos = close.end()


def split_blocks(code: str) -> list[Block]:
    """Split code into top-level :class:`Block` s.

    Code that parses is split by the AST. Code that does not is cut into chunks at lines that
    start a new top-level statement (column 0, outside brackets and triple-quoted strings); each
    chunk keeps its own parse result, so one broken function does not hide the others. Chunks
    whose first line cannot start a kept block (prose, calls, ``if``...) are ``other`` without
    being parsed; the rest are parsed together in groups of at most :data:`_GROUP_CHARS`
    characters, and one by one only inside a group that does not parse.

    Linear in ``len(code)``; raises ``ValueError`` beyond :data:`MAX_CODE_CHARS`.
    """
    if len(code) > MAX_CODE_CHARS:
        raise ValueError(
            f"the code is {len(code):,} characters long, more than the {MAX_CODE_CHARS:,} read"
        )
    if not code.strip():
        return []
    module = _parse(code)
    if module is not None:
        return _module_blocks(module, code)
    return _Grouper().blocks(_chunks(code))


class _Grouper:
    """Parses runs of candidate chunks together. The run length adapts: it doubles (up to
    :data:`_GROUP_CHARS`) after a run that parses and halves after one that does not, so code
    that is mostly fine costs a few parses, and code that is mostly broken soon costs one parse
    per chunk and no more (each character is parsed at most three times in all)."""

    def __init__(self) -> None:
        self.limit = _GROUP_CHARS
        self.out: list[Block] = []

    def blocks(self, chunks: Iterable[str]) -> list[Block]:
        group: list[str] = []
        size = 0
        for chunk in chunks:
            if not _may_be_kept(chunk):
                self._flush(group)
                group, size = [], 0
                self.out.append(Block("other", None, chunk))
                continue
            if group and size + len(chunk) > self.limit:
                self._flush(group)
                group, size = [], 0
            group.append(chunk)
            size += len(chunk) + 1
        self._flush(group)
        return self.out

    def _flush(self, chunks: list[str]) -> None:
        if not chunks:
            return
        if len(chunks) > 1:
            joined = "\n".join(chunks)
            module = _parse(joined)
            if module is not None:
                self.out.extend(_module_blocks(module, joined))
                self.limit = min(_GROUP_CHARS, 2 * self.limit)
                return
            self.limit //= 2
        self.out.extend(block for chunk in chunks for block in _chunk_blocks(chunk))


_GROUP_CHARS = 4_000
"""Largest run of consecutive chunks parsed in one ``ast.parse`` when the whole code does not
parse (see :class:`_Grouper`)."""
_KEPT_HEAD_RE = re.compile(
    r"(?:@|(?:async[ \t]+)?def[ \t]|class[ \t]|import[ \t]|from[ \t]"
    r"|[^\W\d]\w*[ \t]*(?:,[ \t]*[^\W\d]\w*[ \t]*)*(?::|=(?!=))"
    r"|[(\[][ \t]*[^\W\d])"
)
"""First lines that may start a kept block: decorators, definitions, imports, assignments to
names (``a = ...``, ``a, b = ...``, ``a: int = ...``, ``(a, b) = ...``)."""


def _may_be_kept(chunk: str) -> bool:
    return _KEPT_HEAD_RE.match(chunk.lstrip("\n")) is not None


_PARSE_FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError)
"""What ``ast.parse`` raises on bad input: syntax errors, NUL bytes (``ValueError`` on older
Pythons), and nesting too deep for the parser (``RecursionError``/``MemoryError`` from its
stack limit, e.g. ``1+1+...`` a hundred thousand times)."""


_COMPLETION_FILE = "<llm_marl completion>"
# Parsing model output emits SyntaxWarnings ("invalid decimal literal" for ``1abc``...) that say
# nothing to the user; silence them for our parses only (matched by the pseudo file name), with
# a filter installed once rather than catch_warnings, which is not thread-safe.
for _category in (SyntaxWarning, DeprecationWarning):
    warnings.filterwarnings("ignore", category=_category, module=re.escape(_COMPLETION_FILE))


def _parse(code: str) -> ast.Module | None:
    try:
        return parse_python(code, filename=_COMPLETION_FILE)
    except _PARSE_FAILURES:
        return None


def _module_blocks(module: ast.Module, code: str) -> list[Block]:
    lines = code.split("\n")
    blocks = []
    for node in module.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        source = "\n".join(lines[start - 1 : node.end_lineno])
        blocks.append(_classify(node, source))
    return blocks


def _classify(node: ast.stmt, source: str) -> Block:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return Block("import", None, source, node)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return Block("def", node.name, source, node)
    if isinstance(node, ast.ClassDef):
        return Block("class", node.name, source, node)
    if isinstance(node, ast.Assign) and all(_is_name_target(t) for t in node.targets):
        return Block("assign", None, source, node)
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return Block("assign", None, source, node)
    return Block("other", None, source, node)


def _is_name_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_is_name_target(e) for e in target.elts)
    return False


def _chunk_blocks(chunk: str) -> list[Block]:
    module = _parse(chunk)
    if module is None:
        first = chunk.lstrip("\n").split("\n", 1)[0]
        header = first
        if first.startswith("@"):  # a decorated definition: classify by its def/class line
            header = next((ln for ln in chunk.split("\n") if not ln.startswith("@")), first)
        if m := _DEF_RE.match(header):
            return [Block("def", m.group(1), chunk)]
        if m := _CLASS_RE.match(header):
            return [Block("class", m.group(1), chunk)]
        if _IMPORT_RE.match(first):
            return [Block("import", None, chunk)]
        return [Block("other", None, chunk)]  # prose, or a broken top-level statement
    return _module_blocks(module, chunk)


def _chunks(code: str) -> list[str]:
    """Cut code into top-level statements with a small lexer (strings, brackets, comments)."""
    chunks: list[list[str]] = []
    in_triple: str | None = None
    depth = 0
    continued = False
    for line in code.split("\n"):
        at_top = in_triple is None and depth <= 0 and not continued
        starts = (
            at_top
            and line[:1].strip() != ""
            and not line.startswith("#")
            and not _CONTINUATION_RE.match(line)
        )
        if starts or not chunks:
            chunks.append([line])
        else:
            chunks[-1].append(line)
        in_triple, depth, continued = _scan_line(line, in_triple, max(depth, 0))
    return ["\n".join(c) for c in chunks if "\n".join(c).strip()]


def _scan_line(line: str, in_triple: str | None, depth: int) -> tuple[str | None, int, bool]:
    """Lexer state after ``line``: open triple quote, bracket depth, trailing backslash."""
    i, n = 0, len(line)
    while i < n:
        if in_triple is not None:
            end = line.find(in_triple, i)
            if end < 0:
                return in_triple, depth, False
            i, in_triple = end + 3, None
            continue
        ch = line[i]
        if ch == "#":
            break
        if line.startswith(('"""', "'''"), i):
            in_triple = line[i : i + 3]
            i += 3
            continue
        if ch in "'\"":
            j = i + 1
            while j < n and line[j] != ch:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        i += 1
    return in_triple, depth, line.rstrip().endswith("\\") and in_triple is None


# ---------------------------------------------------------------------- static checks
def has_value_return(block: Block) -> bool:
    """Whether a function block parses and returns a value (``return <expr>``) in its own body.

    A definition that does not parse is not "properly defined" (the structure terms of the
    reward need both), so unparseable output never earns a structure reward.
    """
    if block.node is None:
        return False
    return any(isinstance(n, ast.Return) and n.value is not None for n in _own_nodes(block.node))


def calls(block: Block | None, name: str) -> bool:
    """Whether the function calls ``name(...)`` anywhere in its body (nested scopes too)."""
    if block is None or block.node is None:
        return False
    return any(_is_call_to(n, name) for n in ast.walk(block.node))


def discards_result(block: Block | None, name: str) -> bool:
    """Whether the function calls ``name(...)`` as a bare statement, throwing its value away."""
    if block is None or block.node is None:
        return False
    return any(isinstance(n, ast.Expr) and _is_call_to(n.value, name) for n in ast.walk(block.node))


def is_thin_wrapper(block: Block | None, name: str) -> bool:
    """Whether the function only forwards to ``name``.

    Thin wrapper (the MAGRPO code reward's definition): after dropping the docstring and
    ``pass``, the body is either one ``return <expr>`` whose expression calls ``name``, or
    ``v = name(...)`` followed by ``return v``.
    """
    if block is None or not isinstance(block.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = [
        s
        for s in block.node.body
        if not isinstance(s, ast.Pass)
        and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) == 1:
        stmt = body[0]
        return (
            isinstance(stmt, ast.Return)
            and stmt.value is not None
            and any(_is_call_to(n, name) for n in ast.walk(stmt.value))
        )
    if len(body) == 2:
        first, second = body
        return (
            isinstance(first, ast.Assign)
            and len(first.targets) == 1
            and isinstance(first.targets[0], ast.Name)
            and _is_call_to(first.value, name)
            and isinstance(second, ast.Return)
            and isinstance(second.value, ast.Name)
            and second.value.id == first.targets[0].id
        )
    return False


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _own_nodes(func: ast.stmt) -> Iterable[ast.AST]:
    """Nodes of a function's body, not descending into nested functions, lambdas or classes."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    stack: list[ast.AST] = [n for n in getattr(func, "body", []) if not isinstance(n, scopes)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, scopes))


# ---------------------------------------------------------------------- the task's side
def task_preamble(prompt: str, entry_point: str) -> str:
    """What the task gives every program: the prompt's imports, constants and given functions.

    HumanEval prompts import names (``from typing import List``) and sometimes define functions
    the solution or the tests rely on (``poly`` in HumanEval/32, ``encode_cyclic`` in /38); the
    entry point's own stub (signature + docstring) is left out — the agents write it.
    """
    blocks = split_blocks(textwrap.dedent(prompt))
    parts = [
        b.source
        for b in blocks
        if b.parses and b.kept and not (b.kind == "def" and b.name == entry_point)
    ]
    return "\n\n".join(parts)


def signature(prompt: str, entry_point: str) -> str | None:
    """The ``def name(args) -> ret:`` line of the entry point in the prompt, if it can be read."""
    module = _parse(textwrap.dedent(prompt))
    if module is None:
        return _signature_text(prompt, entry_point)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            return f"def {entry_point}({ast.unparse(node.args)}){returns}:"
    return None


_SIGNATURE_CHARS = 4_000
"""Longest signature read out of a prompt that does not parse."""


def _signature_text(prompt: str, entry_point: str) -> str | None:
    """``def name(...) ...:`` as written, found with one linear scan (no backtracking)."""
    m = re.search(rf"^[ \t]*def[ \t]+{re.escape(entry_point)}[ \t]*\(", prompt, re.M)
    if m is None:
        return None
    depth, i, end = 1, m.end(), min(len(prompt), m.end() + _SIGNATURE_CHARS)
    while i < end and depth:
        depth += {"(": 1, ")": -1}.get(prompt[i], 0)
        i += 1
    line_end = prompt.find("\n", i)
    colon = prompt.find(":", i, end if line_end < 0 else min(line_end, end))
    if depth or colon < 0:
        return None
    return prompt[m.start() : colon + 1].strip()


def syntax_error(code: str) -> str | None:
    """``None`` if ``code`` parses, else a one-line description with the line number."""
    try:
        parse_python(code, filename=_COMPLETION_FILE)
    except SyntaxError as err:
        where = f"line {err.lineno}" + (f", column {err.offset}" if err.offset else "")
        text = (err.text or "").strip()
        return f"SyntaxError: {err.msg} ({where})" + (f": {text}" if text else "")
    except ValueError as err:
        return f"SyntaxError: {err}"
    except (RecursionError, MemoryError):
        return "SyntaxError: the code is nested too deeply for the Python parser"
    return None
