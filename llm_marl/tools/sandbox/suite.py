"""Test suites: split test code into individually scored tests (on the host, with ``ast``).

Two shapes are supported:

* a list of assert statements (MBPP style), each string scored separately and run against the
  program's functions by name: ``["assert add(1, 2) == 3", "assert add(0, 0) == 0"]``;
* a HumanEval-style ``def check(candidate): ...`` module plus the program's entry point name.
  Every top-level statement of ``check`` that contains an ``assert`` is one scored test; the
  other statements (setup such as ``import math`` or ``expected = [1, 2]``) run in place, in
  order, and the module-level code of the test file runs first.  ``check`` is rewritten so that
  a failing assert is recorded and the next statements still run, which gives the fraction of
  asserts passed instead of stopping at the first failure.

Parsing happens on the host: a malformed *test* is a bug in the dataset and raises
``ValueError`` here instead of scoring the program as wrong.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

# Name of the factory that wraps the rewritten ``check`` and of its two parameters: the record
# callback and ``BaseException`` (passed in so that nothing the test module binds can change what
# is caught).
_FACTORY = "_llm_marl_check_factory_"
_RECORD = "_llm_marl_record_"
_CATCH = "_llm_marl_base_exception_"
_EXC = "_llm_marl_exc_"


@dataclass(frozen=True)
class TestSuite:
    """Tests ready to send to a sandbox; build with :meth:`from_asserts` or :meth:`from_check`.

    Attributes:
        tests: source text of each scored test, in order (for reports).
        setup: module-level test code run before the tests (imports, helpers, constants).
        entry_point: name of the program function passed to ``check`` (check-style only).
        check_source: the rewritten ``check`` factory (check-style only; internal).
    """

    tests: tuple[str, ...]
    setup: str = ""
    entry_point: str | None = None
    check_source: str | None = None

    __test__ = False  # not a pytest test class

    def __len__(self) -> int:
        return len(self.tests)

    @classmethod
    def from_asserts(cls, asserts: Sequence[str], setup: str = "") -> TestSuite:
        """One scored test per string; each runs with the program's globals and real builtins.

        Raises:
            ValueError: ``asserts`` is empty, not a list of strings, or holds a syntax error.
        """
        if isinstance(asserts, str) or not isinstance(asserts, Sequence):
            raise ValueError(
                "asserts must be a list of assert statements (strings); for a whole test "
                "module use TestSuite.from_source(...) or TestSuite.from_check(...)"
            )
        tests = tuple(asserts)
        if not tests:
            raise ValueError("a test suite needs at least one test")
        for i, src in enumerate(tests):
            if not isinstance(src, str):
                raise ValueError(f"test {i} is {type(src).__name__}, expected a string")
            _parse(src, f"test {i}")
        if setup:
            _parse(setup, "test setup")
        return cls(tests=tests, setup=setup)

    @classmethod
    def from_source(cls, source: str) -> TestSuite:
        """Split a test module: each top-level statement holding an ``assert`` is a test, the
        other top-level statements (imports, helpers) are setup and run first."""
        module = _parse(source, "test source")
        tests: list[str] = []
        setup: list[str] = []
        for node in module.body:
            text = _segment(source, node)
            (tests if _has_assert(node) else setup).append(text)
        if not tests:
            raise ValueError("the test source holds no assert statement")
        return cls(tests=tuple(tests), setup="\n".join(setup))

    @classmethod
    def from_check(cls, source: str, entry_point: str, check_name: str = "check") -> TestSuite:
        """Split a HumanEval-style ``def check(candidate)`` into one test per assert.

        Args:
            source: the test module (imports, constants such as ``METADATA``, ``def check``).
            entry_point: the program's function that ``check`` receives as its argument.
            check_name: name of the checking function.

        Raises:
            ValueError: syntax error, no ``check`` function, or no valid entry point name.
        """
        if not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise ValueError(f"entry_point must be a function name, got {entry_point!r}")
        module = _parse(source, "test source")
        checks = [
            node
            for node in module.body
            if isinstance(node, ast.FunctionDef) and node.name == check_name
        ]
        if not checks:
            raise ValueError(
                f"the test source defines no function {check_name!r}; pass check_name=... or "
                f"use TestSuite.from_asserts / from_source for plain asserts"
            )
        check = checks[-1]
        setup_nodes = [
            node for node in module.body if node not in checks and not _is_call_of(node, check_name)
        ]
        tests: list[str] = []
        body: list[ast.stmt] = []
        for stmt in check.body:
            if _has_assert(stmt):
                tests.append(_segment(source, stmt))
                body.append(_recorded(stmt, len(tests) - 1))
            else:
                body.append(stmt)
        if not tests:
            # No assert at all: the whole check body is one test (it passes if it returns).
            tests.append(_segment(source, check))
            body = [_recorded_block(check.body, 0)]
        check.body = body
        check.decorator_list = []
        extra = {"type_params": []} if sys.version_info >= (3, 12) else {}
        factory = ast.FunctionDef(
            name=_FACTORY,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg=_RECORD), ast.arg(arg=_CATCH)],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            body=[check, ast.Return(value=ast.Name(id=check.name, ctx=ast.Load()))],
            decorator_list=[],
            returns=None,
            type_comment=None,
            **extra,
        )
        factory_module = ast.Module(body=[factory], type_ignores=[])
        ast.fix_missing_locations(factory_module)
        setup = "\n".join(_segment(source, node) for node in setup_nodes)
        return cls(
            tests=tuple(tests),
            setup=setup,
            entry_point=entry_point,
            check_source=ast.unparse(factory_module),
        )

    @classmethod
    def coerce(
        cls, tests: TestSuite | Sequence[str] | str, entry_point: str | None = None
    ) -> TestSuite:
        """Accept a suite, a list of asserts, or test source (``check`` style when it defines
        ``check``; then ``entry_point`` is required).  Parsing of strings is cached."""
        if isinstance(tests, TestSuite):
            return tests
        if isinstance(tests, str):
            return _coerce_source(tests, entry_point)
        return cls.from_asserts(list(tests))

    def to_wire(self) -> bytes:
        """The JSON the in-sandbox test runner reads (see ``harness._runner_main``)."""
        spec: dict[str, object] = {"setup": self.setup, "entry_point": self.entry_point}
        if self.check_source is not None:
            spec["check"] = self.check_source
            spec["factory"] = _FACTORY
        else:
            spec["tests"] = list(self.tests)
        return json.dumps(spec, ensure_ascii=True).encode("ascii")


@functools.lru_cache(maxsize=4096)
def _coerce_source(source: str, entry_point: str | None) -> TestSuite:
    module = _parse(source, "test source")
    defines_check = any(
        isinstance(node, ast.FunctionDef) and node.name == "check" for node in module.body
    )
    if defines_check:
        if entry_point is None:
            raise ValueError(
                "the tests define check(candidate): pass entry_point=<name of the program's "
                "function under test>"
            )
        return TestSuite.from_check(source, entry_point)
    return TestSuite.from_source(source)


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"{what} is not valid Python: {e}") from e


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node)
    if text is None:
        return ast.unparse(node)
    # A compound statement's segment keeps its inner indentation; dedent its first line's.
    indent = getattr(node, "col_offset", 0)
    if indent and "\n" in text:
        lines = text.split("\n")
        text = "\n".join(
            [lines[0]] + [line[indent:] if line[:indent].isspace() else line for line in lines[1:]]
        )
    return text


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _is_call_of(node: ast.stmt, name: str) -> bool:
    """A top-level ``check(...)`` call: the harness calls check itself."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == name
    )


def _record_call(index: int, exc: ast.expr) -> ast.stmt:
    return ast.Expr(
        value=ast.Call(
            func=ast.Name(id=_RECORD, ctx=ast.Load()),
            args=[ast.Constant(value=index), exc],
            keywords=[],
        )
    )


def _recorded_block(body: list[ast.stmt], index: int) -> ast.stmt:
    """``try: <body> except BaseException as e: record(i, e) else: record(i, None)``."""
    return ast.Try(
        body=body,
        handlers=[
            ast.ExceptHandler(
                type=ast.Name(id=_CATCH, ctx=ast.Load()),
                name=_EXC,
                body=[_record_call(index, ast.Name(id=_EXC, ctx=ast.Load()))],
            )
        ],
        orelse=[_record_call(index, ast.Constant(value=None))],
        finalbody=[],
    )


def _recorded(stmt: ast.stmt, index: int) -> ast.stmt:
    return ast.copy_location(_recorded_block([stmt], index), stmt)
