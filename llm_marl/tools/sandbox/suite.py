"""Test suites: the one splitter of test code into individually scored tests (on the host).

Three shapes are supported:

* a list of assert statements (MBPP style), each string scored separately and run against the
  program's functions by name: ``["assert add(1, 2) == 3", "assert add(0, 0) == 0"]``
  (:meth:`TestSuite.from_asserts`);
* a test module whose top-level statements holding an ``assert`` are the tests and whose other
  statements are setup (:meth:`TestSuite.from_source`);
* a HumanEval-style ``def check(candidate): ...`` module plus the program's entry point name
  (:meth:`TestSuite.from_check`). Every top-level statement of ``check`` that contains an
  ``assert`` is one scored test; the other statements (setup such as ``import math`` or
  ``expected = [1, 2]``) run in place, in order, and the module-level code of the test file runs
  first. ``check`` is rewritten so that a failing assert is recorded and the next statements
  still run, which gives the fraction of asserts passed instead of stopping at the first failure.

Tests that cannot fail are not scored
    A test counts only if its outcome can depend on the program: it reads the candidate (the
    first parameter of ``check``), a name bound from it earlier in ``check`` (``r = candidate(1)``
    then ``assert r == 2``), or a name that neither the test code, the task code nor Python's
    builtins define (a program global, e.g. ``assert add(1, 2) == 3``). ``assert True``,
    ``assert 1 == 1`` or ``assert math.sqrt(4) == 2`` cannot fail, and uses of the candidate that
    never call it (``assert candidate``, ``assert candidate is not None``,
    ``assert callable(candidate)``) always see the same sandbox proxy, so they cannot fail
    either. Such units are listed in :attr:`TestSuite.unscored`; inside ``check`` they still run
    in place (their side effects may matter to later statements) but an error they raise is
    ignored and they are never recorded. Anything else that reads the program's values is
    scored, even a weak check such as ``assert abs(candidate(x)) >= 0`` (it fails on ``NaN``, on
    a string, or when the candidate raises). The rule is static and errs on the side of scoring.

Names the task defines are the task's
    ``task_code`` (e.g. the imports and helper functions a HumanEval prompt gives, such as
    ``poly`` in HumanEval/32) runs in the tests' namespace, with the test module's own top-level
    code, *after* the program's names are bound there, so the tests always use the task's
    definitions, never a program's redefinition of them. A ``check`` that reads a name neither
    the test code nor the task code defines (other than the entry point and standard modules,
    which the test runner imports itself) is refused with ``ValueError``: without the task's
    code such a name could only come from the program, which could then redefine the task
    (an identity ``encode_cyclic`` passing HumanEval/38, a ``poly`` returning 0 passing /32).

Input bounds
    Test sources are trusted dataset text, but parsing them still costs linear time: each source
    is parsed once with :func:`ast.parse` and every test's text is cut out through a table of line
    offsets built once (``ast.get_source_segment`` re-splits the whole source on every call, which
    made 5,000 asserts take minutes). Sources longer than :data:`MAX_TEST_SOURCE_CHARS`
    characters in total are refused with ``ValueError``.

Parsing happens on the host: a malformed *test* is a bug in the dataset and raises ``ValueError``
here instead of scoring the program as wrong.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import json
import re
import sys
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from llm_marl.tools.pyparse import parse_python

MAX_TEST_SOURCE_CHARS = 8_000_000
"""Largest test code (all sources of one suite together, task code included) that is parsed."""

# Name of the factory that wraps the rewritten ``check`` and of its two parameters: the record
# callback and ``BaseException`` (passed in so that nothing the test module binds can change what
# is caught).
_FACTORY = "_llm_marl_check_factory_"
_RECORD = "_llm_marl_record_"
_CATCH = "_llm_marl_base_exception_"
_EXC = "_llm_marl_exc_"

_BUILTIN_NAMES = frozenset(dir(builtins))
# Builtins that, given the candidate proxy itself (not a value it returned), always answer the
# same: the proxy is one fixed object of the test runner.
_CONSTANT_ON_PROXY = frozenset(
    {"callable", "id", "type", "isinstance", "issubclass", "hasattr", "repr", "str", "bool"}
)
_LINE_END = re.compile(r"\r\n|\r|\n")
# Standard modules a check may use without importing them (the reference harness ran checks
# where the program's imports were visible): the test runner imports them itself.
_STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ()))


@dataclass(frozen=True)
class TestSuite:
    """Tests ready to send to a sandbox; build with :meth:`from_asserts`, :meth:`from_source` or
    :meth:`from_check`.

    Attributes:
        tests: source text of each scored test, in order (for reports).
        setup: test code run before the tests, after the program's names are bound in the
            tests' namespace (task code, imports, helpers, constants).
        entry_point: name of the program function passed to ``check`` (check-style only).
        check_source: the rewritten ``check`` factory (check-style only; internal).
        unscored: source text of the units that cannot fail (see the module docstring); they
            are not in ``tests`` and never count.
    """

    tests: tuple[str, ...]
    setup: str = ""
    entry_point: str | None = None
    check_source: str | None = None
    unscored: tuple[str, ...] = ()
    origin: tuple[str, ...] | None = None
    """How a check-style suite was built (source, entry point, check name, task code), so that
    :meth:`subset` can rebuild it with fewer units."""
    sentinel: str | None = None
    """A cooperation probe's value: the test runner counts the entry point's calls that return
    it unchanged (:attr:`TestReport.sentinel_returns`); see ``dataclasses.replace``."""
    probed: bool = False
    """The units that pass whatever the program returns were found by running the suite against
    probe programs and left out (``PooledSandbox.failable``)."""
    origin_units: tuple[int, ...] | None = None
    """For a check-style suite that holds only some of its source's units (a subset, or probed):
    their indices among all the source's units."""

    __test__ = False  # not a pytest test class

    def __len__(self) -> int:
        return len(self.tests)

    def subset(self, indices: Sequence[int]) -> tuple[TestSuite, tuple[int, ...]]:
        """A suite that runs only the units ``indices`` (of :attr:`tests`), for a job whose
        program must see nothing of the other units (e.g. feedback units apart from scoring
        units), and the indices of the units it holds, in order.

        For a ``check``-style suite, a statement of ``check`` that is not a unit but calls the
        program (``r = candidate(5)``) runs only when every unit that reads what it binds is in
        the subset; a selected unit that reads such a statement's names while another unit does
        too is left out (it could not run without calling the program on the other unit's
        input). Statements that never read the program always run.

        Raises:
            ValueError: an index out of range, or no unit left.
        """
        chosen = sorted(set(indices))
        if any(not 0 <= i < len(self.tests) for i in chosen):
            raise ValueError(f"unit indices must be in [0, {len(self.tests)}), got {chosen}")
        if self.origin is not None:
            source, entry_point, check_name, task_code = self.origin
            # Units are numbered among all the units of the source (origin_units: which ones
            # this suite holds).
            own = self.origin_units or tuple(range(len(self.tests)))
            position = {unit: i for i, unit in enumerate(own)}
            kept: list[int] = []
            suite = TestSuite.from_check(
                source,
                entry_point,
                check_name,
                task_code,
                units=frozenset(own[i] for i in chosen),
                _kept=kept,
            )
            suite = dataclasses.replace(
                suite,
                origin_units=tuple(kept),
                probed=self.probed,
                unscored=self.unscored,
                sentinel=self.sentinel,
            )
            return suite, tuple(position[unit] for unit in kept)
        if not chosen:
            raise ValueError("a subset needs at least one unit")
        tests = tuple(self.tests[i] for i in chosen)
        suite = TestSuite(tests=tests, setup=self.setup, probed=self.probed, unscored=self.unscored)
        return suite, tuple(chosen)

    def program_names(self) -> tuple[str, ...]:
        """The names the tests read from the program: the entry point and every name the test
        code reads but neither it nor the task code nor Python's builtins define."""
        names = {self.entry_point} if self.entry_point else set()
        sources = [self.setup, *self.tests]
        if self.origin is not None:
            sources = [self.origin[0], self.origin[3]]
        modules = [_parse(src, "test source") for src in sources if src]
        facts = [_scan(m) for m in modules]
        bound: set[str] = set().union(*(f.stored for f in facts)) if facts else set()
        for f in facts:
            names |= _free_names(f, bound)
        return tuple(sorted(n for n in names if n.isidentifier()))

    @classmethod
    def from_asserts(cls, asserts: Sequence[str], setup: str = "") -> TestSuite:
        """One scored test per string; each runs with the program's globals and real builtins.

        Strings that cannot fail (no name from the program, see the module docstring) are left
        out and listed in :attr:`unscored`.

        Raises:
            ValueError: ``asserts`` is empty, not a list of strings, holds a syntax error, is
                longer than :data:`MAX_TEST_SOURCE_CHARS`, or no string can fail.
        """
        if isinstance(asserts, str) or not isinstance(asserts, Sequence):
            raise ValueError(
                "asserts must be a list of assert statements (strings); for a whole test "
                "module use TestSuite.from_source(...) or TestSuite.from_check(...)"
            )
        sources = tuple(asserts)
        if not sources:
            raise ValueError("a test suite needs at least one test")
        for i, src in enumerate(sources):
            if not isinstance(src, str):
                raise ValueError(f"test {i} is {type(src).__name__}, expected a string")
        if not isinstance(setup, str):
            raise ValueError(f"setup must be a str, got {type(setup).__name__}")
        _check_size(sum(map(len, sources)) + len(setup))
        setup_module = (
            _parse(setup, "test setup") if setup else ast.Module(body=[], type_ignores=[])
        )
        modules = [_parse(src, f"test {i}") for i, src in enumerate(sources)]
        scored: list[str] = []
        unscored: list[str] = []
        setup_names = _scan(setup_module).stored
        for src, module in zip(sources, modules):
            facts = _scan(module)
            free = _free_names(facts, setup_names | facts.stored)
            (scored if facts.reads(free, frozenset()) else unscored).append(src)
        if not scored:
            raise ValueError(_NOTHING_CAN_FAIL)
        return cls(tests=tuple(scored), setup=setup, unscored=tuple(unscored))

    @classmethod
    def from_source(cls, source: str) -> TestSuite:
        """Split a test module: each top-level statement holding an ``assert`` is a test, the
        other top-level statements (imports, helpers) are setup and run first. Statements that
        cannot fail are left out (listed in :attr:`unscored`)."""
        _check_size(len(source))
        module = _parse(source, "test source")
        text = _Source(source)
        whole = _scan(module)
        free = _free_names(whole, whole.stored)
        tests: list[str] = []
        unscored: list[str] = []
        setup: list[str] = []
        for node in module.body:
            facts = _scan(node)
            if not facts.has_assert:
                setup.append(text.segment(node))
            elif facts.reads(free, frozenset()):
                tests.append(text.segment(node))
            else:
                unscored.append(text.segment(node))
        if not tests:
            raise ValueError(
                "the test source holds no assert statement" if not unscored else _NOTHING_CAN_FAIL
            )
        return cls(tests=tuple(tests), setup="\n".join(setup), unscored=tuple(unscored))

    @classmethod
    def from_check(
        cls,
        source: str,
        entry_point: str,
        check_name: str = "check",
        task_code: str = "",
        *,
        units: AbstractSet[int] | None = None,
        _kept: list[int] | None = None,
    ) -> TestSuite:
        """Split a HumanEval-style ``def check(candidate)`` into one test per assert.

        Args:
            source: the test module (imports, constants such as ``METADATA``, ``def check``).
            entry_point: the program's function that ``check`` receives as its argument.
            check_name: name of the checking function.
            task_code: trusted code of the task itself (a prompt's imports and given helper
                functions) that the tests may use; it runs in the tests' namespace after the
                program's names, so a program cannot replace what it defines.
            units: only these units (indices among all units); see :meth:`subset`.

        Raises:
            ValueError: syntax error, no ``check`` function, no valid entry point name, input
                longer than :data:`MAX_TEST_SOURCE_CHARS`, or no test that can fail.
        """
        if not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise ValueError(f"entry_point must be a function name, got {entry_point!r}")
        if not isinstance(task_code, str):
            raise ValueError(f"task_code must be a str, got {type(task_code).__name__}")
        _check_size(len(source) + len(task_code))
        module = _parse(source, "test source")
        task_module = _parse(task_code, "task code") if task_code else None
        task_names = _scan(task_module).stored if task_module is not None else set()
        if entry_point in task_names:
            raise ValueError(
                f"task_code defines {entry_point!r}, the function under test: leave the entry "
                f"point's stub out of the task code"
            )
        text = _Source(source)
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
        if not check.args.args and not check.args.posonlyargs:
            raise ValueError(f"`{check_name}` must take the candidate function as its argument")
        param = (check.args.posonlyargs + check.args.args)[0].arg
        setup_nodes = [
            node for node in module.body if node not in checks and not _is_call_of(node, check_name)
        ]
        whole = _scan(module)
        # Names the tests read that neither they nor the task define: the entry point, standard
        # modules (imported for the tests, below), and nothing else -- a task's own helper
        # (poly, encode_cyclic) must come from the task's code, never from the program.
        free = set(_free_names(whole, whole.stored | task_names)) - {entry_point}
        modules = sorted(n for n in free if n in _STDLIB_MODULES)
        foreign = sorted(free - set(modules))
        if foreign:
            raise ValueError(
                f"the tests read {', '.join(foreign)}, which neither the test code nor the task "
                f"code defines: pass the task's code (TestSuite.from_check(test, entry_point, "
                f"task_code=<the prompt's imports and helpers>)) so that the tests use the "
                f"task's own definitions, never a program's"
            )
        program = {entry_point, param}
        proxies = {param}
        tests: list[str] = []
        unscored: list[str] = []
        body: list[ast.stmt] = []
        # (kind, statement, facts, reads the program, unit index) per statement of check.
        plan: list[tuple[str, ast.stmt, _Facts, bool, int]] = []
        n_units = 0
        for stmt in check.body:
            facts = _scan(stmt)
            reads = facts.reads(program, proxies)
            if reads:
                _taint(stmt, facts.stored, program, proxies)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)):
                # Rebound from trusted values only: the names no longer hold program values.
                program.difference_update(facts.stored)
                proxies.difference_update(facts.stored)
            if not facts.has_assert:
                plan.append(("plain", stmt, facts, reads, -1))
            elif reads:
                plan.append(("unit", stmt, facts, reads, n_units))
                n_units += 1
            else:
                plan.append(("unscored", stmt, facts, reads, -1))
        runs = _subset_plan(plan, units) if units is not None else None
        for position, (kind, stmt, _, reads, unit) in enumerate(plan):
            if runs is not None:
                if kind == "unit" and unit not in runs[True]:
                    continue
                if kind != "unit" and reads and position not in runs[False]:
                    continue
            if kind == "unit" and _kept is not None:
                _kept.append(unit)
            if kind == "plain":
                body.append(stmt)
            elif kind == "unit":
                tests.append(text.segment(stmt))
                body.append(_recorded(stmt, len(tests) - 1))
            else:
                unscored.append(text.segment(stmt))
                body.append(_silenced(stmt))
        no_assert = n_units == 0 and not unscored and (units is None or 0 in units)
        if no_assert and _scan(check).reads(program, proxies):
            # No assert at all: the whole check body is one test (it passes if it returns).
            tests.append(text.segment(check))
            body = [_recorded_block(check.body, 0)]
            if _kept is not None:
                _kept.append(0)
        if not tests:
            raise ValueError(_NOTHING_CAN_FAIL if units is None else "no unit left in the subset")
        check.body = body
        check.decorator_list = []
        extra: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}
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
            lineno=1,  # ast.unparse looks up a type comment by line
            col_offset=0,
            **extra,
        )
        factory_module = ast.Module(body=[factory], type_ignores=[])  # unparsed, never compiled
        imports = "".join(f"import {name}\n" for name in modules)
        setup = "\n".join(p for p in (imports.strip("\n"), task_code.strip("\n")) if p)
        module_setup = "\n".join(text.segment(node) for node in setup_nodes)
        setup = "\n".join(part for part in (setup, module_setup) if part)
        return cls(
            tests=tuple(tests),
            setup=setup,
            entry_point=entry_point,
            check_source=ast.unparse(factory_module),
            unscored=tuple(unscored),
            origin=(source, entry_point, check_name, task_code),
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
        if self.sentinel is not None:
            spec["sentinel"] = self.sentinel
        if self.check_source is not None:
            spec["check"] = self.check_source
            spec["factory"] = _FACTORY
        else:
            spec["tests"] = list(self.tests)
        return json.dumps(spec, ensure_ascii=True).encode("ascii")


_NOTHING_CAN_FAIL = (
    "no test can fail: none reads the program (the candidate, a value computed from it, or a "
    "name only the program defines), so the suite would score every program the same"
)


@functools.lru_cache(maxsize=4096)
def _coerce_source(source: str, entry_point: str | None) -> TestSuite:
    _check_size(len(source))
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


def _check_size(chars: int) -> None:
    if chars > MAX_TEST_SOURCE_CHARS:
        raise ValueError(
            f"the test code is {chars:,} characters long, more than the {MAX_TEST_SOURCE_CHARS:,} "
            f"a suite may hold; split the task's tests"
        )


def _parse(source: str, what: str) -> ast.Module:
    try:
        return parse_python(source)
    except SyntaxError as e:
        raise ValueError(f"{what} is not valid Python: {e}") from e
    except (RecursionError, MemoryError) as e:
        raise ValueError(f"{what} is nested too deeply for the Python parser") from e


class _Source:
    """Cuts statements out of a source through a line-offset table built once (linear)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0] + [m.end() for m in _LINE_END.finditer(source)]

    def _line(self, lineno: int) -> str:
        start = self.starts[lineno - 1]
        end = self.starts[lineno] if lineno < len(self.starts) else len(self.source)
        return self.source[start:end]

    def _offset(self, lineno: int, col_bytes: int) -> int:
        """Character offset of (line, UTF-8 byte column), as ``ast`` reports positions."""
        line = self._line(lineno)
        col = len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + col

    def segment(self, node: ast.AST) -> str:
        """The node's source text, a compound statement's inner lines dedented to its column."""
        lineno = getattr(node, "lineno", None)
        end_lineno = getattr(node, "end_lineno", None)
        if lineno is None or end_lineno is None:
            return ast.unparse(node)
        start = self._offset(lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self._offset(end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        text = _LINE_END.sub("\n", self.source[start:end])
        indent = node.col_offset  # type: ignore[attr-defined]
        if indent and "\n" in text:
            lines = text.split("\n")
            text = "\n".join(
                [lines[0]]
                + [line[indent:] if line[:indent].isspace() else line for line in lines[1:]]
            )
        return text


def _subset_plan(
    plan: list[tuple[str, ast.stmt, _Facts, bool, int]], units: AbstractSet[int]
) -> dict[bool, set[int]]:
    """What runs in a subset of ``units``: ``{True: units kept, False: positions (in ``plan``)
    of the program-reading statements kept}``; statements that do not read the program always
    run.

    One backward pass: ``need[name]`` is the set of units that read ``name`` later, directly or
    through another program-reading statement; such a statement feeds the units that need a name
    it binds, and runs only when it feeds some unit and every unit it feeds is selected. A
    selected unit fed by a statement that does not run is left out (it would fail for want of
    that statement's values)."""
    need: dict[str, set[int]] = {}
    feeds: dict[int, set[int]] = {}
    for position in range(len(plan) - 1, -1, -1):
        kind, stmt, facts, reads, unit = plan[position]
        if kind == "unit":
            deps = {unit}
        else:
            deps = set()
            for stored in facts.stored:
                deps |= need.get(stored, set())
            if not isinstance(stmt, ast.AugAssign):
                # A rebinding: what is read after it does not come from before it.
                for stored in facts.stored:
                    need.pop(stored, None)
            if not reads:
                continue
            feeds[position] = deps
        for load, _ in facts.loads:
            need.setdefault(load.id, set()).update(deps)
    kept_units = set(units)
    positions: set[int] = set()
    for position, deps in feeds.items():
        if deps and deps <= units:
            positions.add(position)
        else:
            kept_units -= deps
    positions = {p for p in positions if feeds[p] <= kept_units}
    return {True: kept_units, False: positions}


def _is_call_of(node: ast.stmt, name: str) -> bool:
    """A top-level ``check(...)`` call: the harness calls check itself."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == name
    )


# ------------------------------------------------------------------ can a test fail?
class _Facts:
    """What one pass over a node found: names read (with their parent node), names bound
    anywhere inside it (assignments, loops, defs, imports, arguments...), whether it asserts."""

    __slots__ = ("loads", "stored", "has_assert")

    def __init__(self) -> None:
        self.loads: list[tuple[ast.Name, ast.AST | None]] = []
        self.stored: set[str] = set()
        self.has_assert = False

    def reads(self, program: AbstractSet[str], proxies: AbstractSet[str]) -> bool:
        """Whether the node reads a program-provided name in a way whose result can vary.

        ``proxies`` are names bound to the candidate proxy itself; reading one only to test its
        identity or truth, or to pass it to a builtin in :data:`_CONSTANT_ON_PROXY`, gives the
        same answer for every program.
        """
        for name, parent in self.loads:
            if name.id not in program:
                continue
            if name.id in proxies and _constant_use(name, parent, proxies, program):
                continue
            return True
        return False


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _scan(node: ast.AST) -> _Facts:
    """One iterative pass over ``node`` (linear in its size; no recursion, no re-walks)."""
    facts = _Facts()
    stack: list[tuple[ast.AST, ast.AST | None]] = [(node, None)]
    while stack:
        n, parent = stack.pop()
        if isinstance(n, ast.Name):
            if isinstance(n.ctx, ast.Load):
                facts.loads.append((n, parent))
            else:
                facts.stored.add(n.id)
            continue
        if isinstance(n, ast.Assert):
            facts.has_assert = True
        elif isinstance(n, _SCOPES):
            facts.stored.add(n.name)
        elif isinstance(n, ast.arg):
            facts.stored.add(n.arg)
        elif isinstance(n, ast.alias):
            facts.stored.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            facts.stored.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            facts.stored.update(n.names)
        for field in n._fields:
            value = getattr(n, field, None)
            if isinstance(value, ast.AST):
                stack.append((value, n))
            elif isinstance(value, list):
                stack.extend((item, n) for item in value if isinstance(item, ast.AST))
    return facts


def _free_names(facts: _Facts, trusted: AbstractSet[str]) -> frozenset[str]:
    """Names read that the test code, the task code (``trusted``) and the builtins never bind:
    they can only come from the program. (A star import makes any name trusted.)"""
    if "*" in trusted:
        return frozenset()
    return frozenset(
        name.id
        for name, _ in facts.loads
        if name.id not in trusted and name.id not in _BUILTIN_NAMES
    )


def _constant_use(
    name: ast.Name, parent: ast.AST | None, proxies: AbstractSet[str], program: AbstractSet[str]
) -> bool:
    if isinstance(parent, ast.Assert) and parent.test is name:
        return True
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return True
    if isinstance(parent, ast.Compare) and all(
        isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops
    ):
        operands = [parent.left, *parent.comparators]
        return all(
            isinstance(o, ast.Constant) or (isinstance(o, ast.Name) and o.id in proxies)
            for o in operands
        )
    return (
        isinstance(parent, ast.Call)
        and any(arg is name for arg in parent.args)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in _CONSTANT_ON_PROXY
        and parent.func.id not in program
    )


def _taint(stmt: ast.stmt, stored: set[str], program: set[str], proxies: set[str]) -> None:
    """Names a statement that reads the program binds now hold program-dependent values; a plain
    alias of the candidate (``f = candidate``) is the proxy itself."""
    if (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Name)
        and stmt.value.id in proxies
        and all(isinstance(t, ast.Name) for t in stmt.targets)
    ):
        proxies.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    program.update(stored)


# ------------------------------------------------------------------ rewriting check
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


def _silenced(stmt: ast.stmt) -> ast.stmt:
    """``try: <stmt> except BaseException: pass``: an unscored unit runs but never counts."""
    block = ast.Try(
        body=[stmt],
        handlers=[
            ast.ExceptHandler(
                type=ast.Name(id=_CATCH, ctx=ast.Load()), name=None, body=[ast.Pass()]
            )
        ],
        orelse=[],
        finalbody=[],
    )
    return ast.copy_location(block, stmt)
