"""A coding task's tests as the env uses them: its suite, which units its prompt shows, and which
units give feedback or score.

Splitting ``check(candidate)`` into test units is :class:`llm_marl.tools.sandbox.TestSuite`'s job
(the one splitter): every top-level statement of ``check`` holding an ``assert`` that can fail is
one unit, scored separately; units that cannot fail (``assert True``, which 36 HumanEval tasks
have) are not units at all. This module decides what the env does with the units.

Names the task defines
    The prompt's imports and given functions (``poly`` in HumanEval/32, ``encode_cyclic`` in /38),
    plus ``import math`` (the reference harness gives tests ``math``), are the suite's task code:
    the tests use the task's definitions even if the program redefines them.
Shown units (``score_on``)
    A unit is *shown* when the prompt gives away its answer: the prompt calls the entry point
    with the same argument values (``>>> f(1, 2)``), or every argument value of the unit's call
    and the value it is compared with appear as literals in the prompt (``Input: arr = [1, 2],
    k = 3 ... Output: [2]``). The rule compares values (``[1.0, 2]`` matches ``[1, 2]``) and errs
    on the side of "shown". With ``score_on="hidden"`` only units that are not shown score, so
    hard-coding the prompt's examples earns nothing; a task whose every unit is shown then
    scores on all of them (``TaskTests.scored_on`` says which).
Feedback and scoring units
    In multi-turn episodes some units are shown to the agents as feedback. By default (the
    official code's way, ``shown_first``) they are the first units of ``check`` and *every*
    unit still scores, the shown ones included. With a held-out split (``feedback_fraction``)
    the feedback units score nothing and the scoring units are never shown. The feedback units run as a job of their own
    (:attr:`TaskTests.feedback_suite`, see :meth:`~llm_marl.tools.sandbox.TestSuite.subset`),
    so a program that remembers its inputs cannot print a scoring unit's input into the
    feedback. :func:`split_units` draws the feedback units with a RNG seeded by
    the task id (a stable CRC32), so the partition is the same in every episode and process;
    with ``score_on="hidden"`` it draws the prompt's shown units first.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import random
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl.envs.coding import code_utils as cu
from llm_marl.tools.pyparse import parse_python

SCORE_ON = ("all", "hidden")
TEST_PRELUDE = "import math"
"""Task code every test namespace gets: the reference harness gives tests ``math``."""

# MBPP tests in the CoMLRL copy were converted with a blanket rename that turned
# ``math.isclose(`` into ``math.candidate(``; the original call is unambiguous, so restore it.
_MANGLED_ISCLOSE = re.compile(r"\bmath\.candidate\(")
_MAX_PROMPT_CHARS = 200_000
"""Only this much of a prompt is read for examples (prompts are dataset text, but bounded)."""
_MAX_LITERAL_SPAN = 2_000
_MAX_LITERAL_DEPTH = 4
_MAX_LITERALS = 5_000
"""At most this many literal values and calls are read out of one prompt."""
_NO_VALUE = object()


class TestFormatError(ValueError):
    """A task's ``test`` source is not a usable ``check(candidate)`` definition."""

    __test__ = False  # not a pytest test class


def repair_test_source(test: str) -> str:
    """Fix known damage in published test files (see ``_MANGLED_ISCLOSE``)."""
    return _MANGLED_ISCLOSE.sub("math.isclose(", test)


@functools.lru_cache(maxsize=4096)
def build_suite(test: str, entry_point: str, prompt: str) -> Any:
    """The sandbox :class:`~llm_marl.tools.sandbox.TestSuite` of a task (see the module docstring).

    Raises :class:`TestFormatError` if ``test`` does not parse, defines no ``check`` function,
    or holds no assert that can fail.
    """
    from llm_marl.tools.sandbox.suite import TestSuite

    task_code = "\n".join(p for p in (TEST_PRELUDE, cu.task_preamble(prompt, entry_point)) if p)
    try:
        return TestSuite.from_check(repair_test_source(test), entry_point, task_code=task_code)
    except ValueError as err:
        message = str(err)
        if "defines no function" in message:
            message = "the test code defines no `check(candidate)` function"
        elif "is not valid Python: " in message:
            message = "the test code does not parse: " + message.split(": ", 1)[1]
        raise TestFormatError(message) from err


@dataclass(frozen=True)
class TaskTests:
    """A task's suite and how the env uses its units (indices into ``suite.tests``)."""

    suite: Any
    """The :class:`~llm_marl.tools.sandbox.TestSuite`, one test per unit, run as a whole."""
    shown: tuple[bool, ...]
    """Per unit: the prompt gives its answer away (see the module docstring)."""
    feedback: tuple[int, ...]
    """Units shown to the agents as feedback (multi-turn only)."""
    scoring: tuple[int, ...]
    """Units that score."""
    scored_on: str
    """``"hidden"`` when only units the prompt does not show score, else ``"all"``."""
    feedback_suite: Any = None
    """The feedback units alone, run as a job of their own so that the program never sees a
    scoring unit's input while it produces feedback (``None`` without feedback units)."""
    feedback_units: tuple[int, ...] = ()
    """Indices (into ``suite.tests``) of the units of ``feedback_suite``, in its order: the
    feedback units that can run without calling the program on a scoring unit's input."""

    def sources(self, indices: Sequence[int]) -> list[str]:
        return [self.suite.tests[i] for i in indices]


@functools.lru_cache(maxsize=4096)
def task_tests(
    test: str,
    entry_point: str,
    prompt: str,
    task_id: str,
    feedback_fraction: float,
    score_on: str,
    shown_first: int | None = None,
    suite: Any = None,
) -> TaskTests:
    """Suite, shown units and feedback/scoring split of a task (cached: env copies share it).

    ``shown_first`` (the official way): the first ``shown_first`` units (0: all of them) give
    feedback and every unit scores; ``feedback_fraction`` is then unused. ``None``: the units
    are split by :func:`split_units` (feedback units do not score).

    ``suite``: the task's suite as a sandbox refined it (``PooledSandbox.failable``: units that
    pass whatever the program returns left out); default :func:`build_suite`'s.
    """
    if score_on not in SCORE_ON:
        raise ValueError(f"score_on must be one of {SCORE_ON}, got {score_on!r}")
    if suite is None:
        suite = build_suite(test, entry_point, prompt)
    shown = shown_units(suite.tests, _check_param(test), entry_point, prompt)
    prefer = [i for i, s in enumerate(shown) if s] if score_on == "hidden" else []
    n = len(suite.tests)
    if shown_first is not None:
        feedback, remaining = list(range(min(shown_first or n, n))), list(range(n))
    else:
        feedback, remaining = split_units(n, feedback_fraction, task_id, prefer)
    scored_on = score_on
    scoring = [i for i in remaining if not (score_on == "hidden" and shown[i])]
    if not scoring:  # every unit is in the prompt (or feedback): score on all that are left
        scoring, scored_on = list(remaining), "all"
    feedback_suite, feedback_units = None, ()
    if feedback:
        # ValueError: every feedback unit needs a scoring unit's call, so none can run alone.
        with contextlib.suppress(ValueError):
            feedback_suite, feedback_units = suite.subset(feedback)
    return TaskTests(
        suite,
        tuple(shown),
        tuple(feedback),
        tuple(scoring),
        scored_on,
        feedback_suite,
        tuple(feedback_units),
    )


def split_units(
    n: int, feedback_fraction: float, task_id: str, prefer: Sequence[int] = ()
) -> tuple[list[int], list[int]]:
    """Partition unit indices ``0..n-1`` into ``(feedback, scoring)``.

    ``round(feedback_fraction * n)`` units go to feedback, but at least one when the fraction is
    positive, and never all of them: at least one unit always scores. With
    ``feedback_fraction == 0`` every unit scores and there is no feedback. Units in ``prefer``
    are drawn first (and never the last unit outside it); the draw is seeded by ``task_id``.
    """
    if not 0.0 <= feedback_fraction < 1.0:
        raise ValueError(f"feedback_fraction must be in [0, 1), got {feedback_fraction}")
    if feedback_fraction == 0.0 or n < 2:
        return [], list(range(n))
    k = min(n - 1, max(1, round(feedback_fraction * n)))
    rng = random.Random(zlib.crc32(str(task_id).encode("utf-8")))
    if not prefer:
        chosen = set(rng.sample(range(n), k))
    else:
        first = sorted(set(prefer))
        preferred = set(first)
        rest = [i for i in range(n) if i not in preferred]
        chosen = set(rng.sample(first, min(k, len(first))))
        extra = min(k - len(chosen), max(0, len(rest) - 1))
        chosen |= set(rng.sample(rest, extra))
    feedback = [i for i in range(n) if i in chosen]
    scoring = [i for i in range(n) if i not in chosen]
    return feedback, scoring


# ------------------------------------------------------------------ shown units
def shown_units(
    sources: Sequence[str], param: str, entry_point: str, prompt: str
) -> tuple[bool, ...]:
    """Per unit source: whether the prompt shows its answer (see the module docstring).

    Linear in the prompt and bounded: only its first ``_MAX_PROMPT_CHARS`` characters are read,
    one pass pairs their brackets, and at most ``_MAX_LITERALS`` literal values are read, from
    bracket spans of at most ``_MAX_LITERAL_SPAN`` characters and ``_MAX_LITERAL_DEPTH`` levels.
    """
    calls, literals = _prompt_examples(prompt, entry_point)
    out = []
    for source in sources:
        try:
            unit = parse_python(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            out.append(False)
            continue
        out.append(
            any(_call_shown(c, calls, literals) for c in _unit_calls(unit, param, entry_point))
        )
    return tuple(out)


def _check_param(test: str) -> str:
    try:
        module = parse_python(repair_test_source(test))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "candidate"
    for node in reversed(module.body):
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            return node.args.args[0].arg
    return "candidate"


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_VALUE


def _unit_calls(
    unit: ast.AST, param: str, entry_point: str
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    """``(args, kwargs, expected)`` of each call of the candidate with literal arguments;
    ``expected`` is the literal it is compared with (``==``, ``is``, ``assert f(x)`` /
    ``assert not f(x)``), or ``_NO_VALUE``."""
    parents: dict[int, ast.AST] = {}
    for parent in ast.walk(unit):
        for child in ast.iter_child_nodes(parent):
            parents[id(child)] = parent
    for node in ast.walk(unit):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in (param, entry_point)
        ):
            continue
        args = tuple(_literal(a) for a in node.args)
        kwargs = {k.arg: _literal(k.value) for k in node.keywords if k.arg}
        if _NO_VALUE in args or _NO_VALUE in kwargs.values() or len(kwargs) != len(node.keywords):
            continue
        yield args, kwargs, _expected(node, parents)


def _expected(call: ast.Call, parents: dict[int, ast.AST]) -> Any:
    node: ast.AST = call
    parent = parents.get(id(node))
    # Look through wrappers such as tuple(...), list(...), sorted(...), round(...).
    while isinstance(parent, ast.Call) and node in parent.args and len(parent.args) == 1:
        node, parent = parent, parents.get(id(parent))
    if (
        isinstance(parent, ast.Compare)
        and len(parent.ops) == 1
        and isinstance(parent.ops[0], (ast.Eq, ast.Is))
    ):
        return _literal(parent.comparators[0] if parent.left is node else parent.left)
    if isinstance(parent, ast.Assert) and parent.test is node:
        return True
    if (
        isinstance(parent, ast.UnaryOp)
        and isinstance(parent.op, ast.Not)
        and isinstance(parents.get(id(parent)), ast.Assert)
    ):
        return False
    return _NO_VALUE


def _call_shown(
    call: tuple[tuple[Any, ...], dict[str, Any], Any],
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
    literals: list[Any],
) -> bool:
    args, kwargs, expected = call
    if any(_same(args, a) and _same(kwargs, k) for a, k in calls):
        return True
    values = [*args, *kwargs.values()]
    if not values or not all(_contains(literals, v) for v in values):
        return False
    if expected is not _NO_VALUE:
        return _contains(literals, expected)
    # No known expected value: only distinctive arguments count as shown.
    return any(not isinstance(v, (int, float, bool)) or abs(v) > 10 for v in values)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _contains(values: list[Any], value: Any) -> bool:
    """``value in values`` by equality, except that booleans only match booleans."""
    is_bool = type(value) is bool
    return any((type(v) is bool) == is_bool and _same(v, value) for v in values)


def _prompt_examples(
    prompt: str, entry_point: str
) -> tuple[list[tuple[tuple[Any, ...], dict[str, Any]]], list[Any]]:
    """Literal calls of the entry point in the prompt, and the literal values it shows."""
    prompt = prompt[:_MAX_PROMPT_CHARS]
    pairs = _bracket_pairs(prompt)
    literals: list[Any] = []
    for start, end, depth in pairs:
        if len(literals) >= _MAX_LITERALS:
            break
        if depth < _MAX_LITERAL_DEPTH and end - start <= _MAX_LITERAL_SPAN:
            value = _eval_text(prompt[start : end + 1])
            if value is not _NO_VALUE:
                literals.append(value)
                if type(value) is tuple:
                    literals.extend(value)  # a call's argument list: each argument is shown
    for m in _SCALAR_RE.finditer(prompt):
        if len(literals) >= 2 * _MAX_LITERALS:
            break
        value = _eval_text(m.group(0))
        if value is not _NO_VALUE:
            literals.append(value)
    closes = {start: end for start, end, _ in pairs}
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for m in re.finditer(rf"\b{re.escape(entry_point)}[ \t]*(?=\()", prompt):
        if len(calls) >= _MAX_LITERALS:
            break
        close = closes.get(m.end())
        if close is None or close - m.end() > _MAX_LITERAL_SPAN:
            continue
        try:
            node = parse_python("f" + prompt[m.end() : close + 1], mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if isinstance(node, ast.Call):
            args = tuple(_literal(a) for a in node.args)
            kwargs = {k.arg: _literal(k.value) for k in node.keywords if k.arg}
            if _NO_VALUE not in args and _NO_VALUE not in kwargs.values():
                calls.append((args, kwargs))
    return calls, literals


_SCALAR_RE = re.compile(
    r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])"
    r"|'[^'\n]{0,200}'|\"[^\"\n]{0,200}\"|\b(?:True|False|None)\b"
)
_OPEN = {"(": ")", "[": "]", "{": "}"}


def _bracket_pairs(text: str) -> list[tuple[int, int, int]]:
    """``(start, end, depth)`` of matched bracket pairs, found with one stack pass."""
    stack: list[tuple[int, str]] = []
    pairs = []
    for i, ch in enumerate(text):
        if ch in _OPEN:
            stack.append((i, _OPEN[ch]))
        elif ch in ")]}":
            if stack and stack[-1][1] == ch:
                start, _ = stack.pop()
                pairs.append((start, i, len(stack)))
            else:
                stack.clear()  # prose with stray brackets: start afresh
    return pairs


def _eval_text(text: str) -> Any:
    try:
        # Parsed through parse_python: a bare literal_eval(str) builds its AST unlocked, and
        # on CPython 3.11 that raced the env threads' parses (SystemError: AST constructor
        # recursion depth mismatch, out of a reference solution's check).
        return ast.literal_eval(parse_python(text.strip(), mode="eval"))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_VALUE
