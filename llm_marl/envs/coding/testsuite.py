"""Split a HumanEval-style ``check(candidate)`` into test units, and those into feedback/scoring.

A task's ``test`` is Python source defining ``check(candidate)`` (plus, sometimes, module-level
constants or helpers). Its body is a list of ``assert`` statements, sometimes with set-up
statements (``import random``, ``lst = ...``) and compound statements holding asserts (a ``for``
loop of random checks).

Test units
    Every top-level statement of ``check``'s body that contains an ``assert`` is one unit; the
    other statements are set-up. Unit *i* runs as ``check`` reduced to the set-up statements that
    come before it plus unit *i* itself, so units pass or fail independently and the score is the
    fraction of units that pass (the MAGRPO reward's "fraction of asserts passed").
Feedback and scoring units
    In multi-turn episodes some units are shown to the agents as feedback; the others score the
    answer and are never shown. :func:`split_units` draws the feedback units with a RNG seeded by
    the task id (a stable CRC32), so the partition is the same in every episode and process.
"""

from __future__ import annotations

import ast
import random
import re
import textwrap
import zlib
from dataclasses import dataclass

CHECK_NAME = "check"
_RUNNER_NAME = "_llm_marl_check"
# MBPP tests in the CoMLRL copy were converted with a blanket rename that turned
# ``math.isclose(`` into ``math.candidate(``; the original call is unambiguous, so restore it.
_MANGLED_ISCLOSE = re.compile(r"\bmath\.candidate\(")


class TestFormatError(ValueError):
    """A task's ``test`` source is not a usable ``check(candidate)`` definition."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class TestUnit:
    """One independently scored test of a task."""

    __test__ = False  # not a pytest test class

    index: int
    """Position among the task's units (0-based)."""
    source: str
    """The statement as written in ``check`` (uses ``candidate``); shown in feedback."""
    script: str
    """Self-contained code to run *after* the program: raises iff the unit fails."""


def repair_test_source(test: str) -> str:
    """Fix known damage in published test files (see ``_MANGLED_ISCLOSE``)."""
    return _MANGLED_ISCLOSE.sub("math.isclose(", test)


def parse_units(test: str, entry_point: str) -> list[TestUnit]:
    """The test units of a task (see the module docstring).

    Raises :class:`TestFormatError` if ``test`` does not parse, defines no ``check`` function,
    or ``check`` holds no ``assert``.
    """
    source = textwrap.dedent(repair_test_source(test))
    try:
        module = ast.parse(source)
    except SyntaxError as err:
        raise TestFormatError(
            f"the test code does not parse: {err.msg} (line {err.lineno})"
        ) from err
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == CHECK_NAME]
    if not checks:
        raise TestFormatError("the test code defines no `check(candidate)` function")
    check = checks[-1]
    if not check.args.args:
        raise TestFormatError("`check` must take the candidate function as its first argument")
    param = check.args.args[0].arg
    preamble = [ast.unparse(n) for n in module.body if n is not check]
    setup: list[str] = []
    units: list[TestUnit] = []
    for stmt in check.body:
        text = ast.unparse(stmt)
        if not any(isinstance(n, ast.Assert) for n in ast.walk(stmt)):
            setup.append(text)
            continue
        body = textwrap.indent("\n".join([*setup, text]), "    ")
        script = "\n".join(
            [
                "import math",  # the reference harness gives tests `math`; some rely on it
                *preamble,
                f"def {_RUNNER_NAME}({param}):",
                body,
                f"{_RUNNER_NAME}({entry_point})",
            ]
        )
        units.append(TestUnit(index=len(units), source=text, script=script + "\n"))
    if not units:
        raise TestFormatError("`check` holds no assert statement")
    return units


def split_units(
    units: list[TestUnit], feedback_fraction: float, task_id: str
) -> tuple[list[TestUnit], list[TestUnit]]:
    """Partition units into ``(feedback, scoring)``.

    ``round(feedback_fraction * n)`` units go to feedback, but at least one when the fraction is
    positive, and never all of them: at least one unit always scores. With
    ``feedback_fraction == 0`` every unit scores and there is no feedback.
    """
    if not 0.0 <= feedback_fraction < 1.0:
        raise ValueError(f"feedback_fraction must be in [0, 1), got {feedback_fraction}")
    n = len(units)
    if feedback_fraction == 0.0 or n < 2:
        return [], list(units)
    k = min(n - 1, max(1, round(feedback_fraction * n)))
    rng = random.Random(zlib.crc32(str(task_id).encode("utf-8")))
    chosen = set(rng.sample(range(n), k))
    feedback = [u for u in units if u.index in chosen]
    scoring = [u for u in units if u.index not in chosen]
    return feedback, scoring
