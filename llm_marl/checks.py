"""Checks of user-given numbers: what "an int" and "a number" mean, and one wording of the error.

Configs and constructors check their arguments where they are given (a bad value raises early,
saying what was expected). The checks they share live here, at the bottom layer, so that tools,
envs and policies all use one definition:

* an int is any integral number, numpy's included, but not a bool (``True`` as a size or a count
  is a bug, not a 1);
* a number is any real number, numpy's included, but not a bool;
* a failed check raises :class:`~llm_marl.errors.ConfigError` (a ``ValueError``) reading
  ``<name> must be <what was expected>, got <the value>``. A NaN is never in range.
"""

from __future__ import annotations

import numbers
from typing import Any, NoReturn, TypeGuard

from llm_marl.errors import ConfigError

__all__ = ["check_int", "check_number", "check_run_seed", "is_int", "is_number"]


def is_int(value: Any) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer (Python or numpy), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (Python or numpy; NaN included), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(
    value: Any, name: str, low: int = 1, high: int | None = None, *, why: str = ""
) -> int:
    """``value`` as an ``int`` if it is an int in ``[low, high]`` (no upper bound by default).

    Raises :class:`~llm_marl.errors.ConfigError` naming ``name`` otherwise: "``<name>`` must be
    an int >= ``low``" (or "an int in [``low``, ``high``]"), with ``why`` in parentheses after
    the bound when given.
    """
    if is_int(value) and low <= int(value) and (high is None or int(value) <= high):
        return int(value)
    bound = f">= {low}" if high is None else f"in [{low}, {high}]"
    _fail(name, f"an int {bound}", why, value)


def check_number(
    value: Any,
    name: str,
    low: float,
    high: float | None = None,
    *,
    open_low: bool = False,
    unit: str = "",
) -> float:
    """``value`` as a ``float`` if it is a number from ``low`` (excluded when ``open_low``) up to
    ``high`` included (no upper bound by default).

    Raises :class:`~llm_marl.errors.ConfigError` naming ``name`` otherwise: "``<name>`` must be
    >= ``low``" (``> low`` when ``open_low``), or "in [``low``, ``high``]" (``(low, high]``),
    followed by ``unit`` (``" seconds"``).
    """
    above = is_number(value) and (value > low if open_low else value >= low)
    if above and (high is None or value <= high):
        return float(value)
    if high is None:
        expected = f"{'>' if open_low else '>='} {low}"
    else:
        expected = f"in {'(' if open_low else '['}{low}, {high}]"
    _fail(name, expected + unit, "", value)


def _fail(name: str, expected: str, why: str, value: Any) -> NoReturn:
    reason = f" ({why})" if why else ""
    raise ConfigError(f"{name} must be {expected}{reason}, got {value!r}")


def check_run_seed(value: Any, name: str = "seed") -> int:
    """``value`` as an ``int`` if it is a run's base seed (of training, an evaluation, a
    ``collect`` call): an int in ``[0, 2**32)``, numpy's seeding range. Raises
    :class:`~llm_marl.errors.ConfigError` otherwise: a negative seed would fail only later, in
    the envs' resets, episode by episode."""
    if is_int(value) and 0 <= int(value) < 2**32:
        return int(value)
    raise ConfigError(f"{name} must be an int in [0, 2**32), got {value!r}")
