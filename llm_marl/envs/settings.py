"""Settings dataclasses (reward weights, guard thresholds) given as an instance, a dict or None.

Env constructors take ``reward=``/``guards=`` in any of these forms, so that a config file or a
command line can pass a plain dict; :func:`coerce_settings` turns it into the dataclass and
rejects a misspelt field instead of ignoring it.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from llm_marl.errors import ConfigError

_C = TypeVar("_C")


def coerce_settings(cls: type[_C], value: _C | dict[str, Any] | None, what: str) -> _C:
    """A settings dataclass from ``None`` (its defaults), an instance, or a dict of its fields.

    Args:
        cls: the settings dataclass.
        value: what the user passed.
        what: the argument in words (``"reward"``), for the messages.

    Raises:
        ConfigError: a dict with a field ``cls`` does not have (the message names the known ones).
        TypeError: ``value`` is of another type.
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(f"unknown {what} settings {unknown}; known: {sorted(known)}")
        return cls(**value)
    raise TypeError(f"{what} must be a {cls.__name__}, a dict or None, got {type(value).__name__}")
