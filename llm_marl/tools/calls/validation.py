"""Arguments checked against a tool's JSON schema: the subset of JSON Schema that constrains
(:data:`VALIDATION_KEYWORDS`), plain-JSON copies with lone surrogates replaced, and one short
message for the agent when a value does not fit (:func:`validate_arguments`)."""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from llm_marl.tools.calls.limits import CallLimits, short
from llm_marl.tools.text import scrub_surrogates


class HasParameters(Protocol):
    """What validation reads of a tool: the JSON schema of its arguments."""

    @property
    def parameters(self) -> Mapping[str, Any]: ...


def _names(text: str) -> frozenset[str]:
    """The space-separated words of ``text`` (long name lists stay readable)."""
    return frozenset(text.split())


JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


# Schema keywords that only describe (never constrain) and are ignored by validation.
ANNOTATION_KEYWORDS = {"description", "title", "default", "examples", "format", "$schema"}


VALIDATION_KEYWORDS = _names(
    "type enum const items properties required additionalProperties anyOf minimum maximum "
    "exclusiveMinimum exclusiveMaximum minLength maxLength minItems maxItems"
)


def json_type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def type_name(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(type_name(s) for s in schema["anyOf"])
    t = schema.get("type", "any")
    if t == "array":
        items = schema.get("items")
        return f"array of {type_name(items)}" if isinstance(items, Mapping) else "array"
    return " | ".join(t) if isinstance(t, list) else str(t)


def describe(value: Any) -> str:
    kind = json_type_of(value)
    article = "an" if kind[:1] in ("a", "e", "i", "o", "u") else "a"
    text = short(value, 40)
    return f"{article} {kind} ({text})"


def _json_short(value: Any, limit: int = 40) -> str:
    """``value`` as (the start of) its JSON text; a value JSON cannot write is described by
    :func:`short` instead (validation may be handed any object by a direct caller)."""
    try:
        text = json.dumps(value, default=str)
    except Exception:  # unserialisable, too deep, or a str() that raises: describe it instead
        return short(value, limit)
    return short(text, limit)


# A float given for an integer must be exactly an integer a float can hold: beyond 2**53 floats
# skip integers, and 1e308 would otherwise become a 309-digit int in the tool's hands.
_MAX_EXACT_INT = 2**53


def check_value(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """None when ``value`` fits ``schema``, else what is wrong (for the agent to read)."""
    if isinstance(value, float) and not math.isfinite(value):
        # Whatever the schema says: no tool is written to receive inf or nan.
        return f"{path!r} must be a finite number, got {value!r}"
    if "anyOf" in schema:
        problems = [check_value(value, sub, path) for sub in schema["anyOf"]]
        if all(p is not None for p in problems):
            return f"{path!r} must be {type_name(schema)}, got {describe(value)}"
    if "const" in schema and not _json_equal(value, schema["const"]):
        return f"{path!r} must be {json.dumps(schema['const'])}, got {describe(value)}"
    if "enum" in schema and not any(_json_equal(value, v) for v in schema["enum"]):
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        return f"{path!r} must be one of {allowed}; got {_json_short(value)}"
    types_ = schema.get("type")
    if types_ is not None:
        names = [types_] if isinstance(types_, str) else list(types_)
        if not any(_is_type(value, t) for t in names):
            return f"{path!r} must be {' or '.join(names)}, got {describe(value)}"
    problem = _bound_problem(value, schema, path)
    if problem is not None:
        return problem
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                problem = check_value(item, items, f"{path}[{i}]")
                if problem is not None:
                    return problem
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                return (
                    f"missing required argument {key!r}"
                    if path == ""
                    else (f"{path!r} is missing {key!r}")
                )
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub_path = f"{path}.{key}" if path else key
            if key in props:
                problem = check_value(item, props[key], sub_path)
            elif extra is False:
                allowed = ", ".join(repr(k) for k in props) or "none"
                return f"unknown argument {sub_path!r} (allowed: {allowed})"
            elif isinstance(extra, Mapping):
                problem = check_value(item, extra, sub_path)
            else:
                problem = None
            if problem is not None:
                return problem
    return None


# JSON Schema's bound keywords by what they bound: (keyword, broken when, what the agent reads).
_Bounds = tuple[tuple[str, Callable[[Any, Any], bool], str], ...]


_LENGTH_BOUNDS: _Bounds = (
    ("minLength", operator.lt, "must be at least {bound} characters long"),
    ("maxLength", operator.gt, "must be at most {bound} characters long"),
)


_NUMBER_BOUNDS: _Bounds = (
    ("minimum", operator.lt, "must be >= {bound}, got {got}"),
    ("maximum", operator.gt, "must be <= {bound}, got {got}"),
    ("exclusiveMinimum", operator.le, "must be > {bound}, got {got}"),
    ("exclusiveMaximum", operator.ge, "must be < {bound}, got {got}"),
)


_ITEM_BOUNDS: _Bounds = (
    ("minItems", operator.lt, "must have at least {bound} items"),
    ("maxItems", operator.gt, "must have at most {bound} items"),
)


def _bound_problem(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """The first length, number or item-count bound of ``schema`` that ``value`` breaks."""
    measure: Any
    bounds: _Bounds
    if isinstance(value, str):
        measure, bounds = len(value), _LENGTH_BOUNDS
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        measure, bounds = value, _NUMBER_BOUNDS
    elif isinstance(value, list):
        measure, bounds = len(value), _ITEM_BOUNDS
    else:
        return None
    for keyword, broken, message in bounds:
        if keyword in schema and broken(measure, schema[keyword]):
            return f"{path!r} " + message.format(bound=schema[keyword], got=measure)
    return None


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        if isinstance(value, float):  # JSON Schema: 3.0 is an integer (if it is exact)
            return math.isfinite(value) and value.is_integer() and abs(value) <= _MAX_EXACT_INT
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected: Any = JSON_TYPES[name]
    return isinstance(value, expected)


def _json_equal(a: Any, b: Any) -> bool:
    # True == 1 in Python but not in JSON.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """Integral floats where the schema wants integers (``3.0`` -> ``3``), recursively."""
    types_ = schema.get("type")
    names = [types_] if isinstance(types_, str) else list(types_ or [])
    if isinstance(value, float) and "integer" in names and "number" not in names:
        return int(value)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_coerce(v, schema["items"]) for v in value]
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {
            k: _coerce(v, props[k] if k in props else extra if isinstance(extra, Mapping) else {})
            for k, v in value.items()
        }
    return value


class _NotJSON(ValueError):
    """A value that is not plain, finite, shallow-enough JSON data."""


class _TooDeep(_NotJSON):
    """Containers nested deeper than allowed."""


def _plain_json(value: Any, levels: int) -> Any:
    """A copy of ``value`` as plain JSON data with its strings scrubbed of surrogates.

    Raises :class:`_NotJSON` for a non-finite float, a non-string key, two keys that are equal
    once scrubbed, a value of a non-JSON type, or containers nested deeper than ``levels``.
    One pass over the value; recursion is bounded by ``levels``.
    """
    if isinstance(value, str):
        return scrub_surrogates(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJSON(f"the number {value!r} is not finite")
        return value
    if isinstance(value, (Mapping, list, tuple)) and levels <= 0:
        raise _TooDeep()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJSON(f"object keys must be strings, got {describe(key)}")
            clean = scrub_surrogates(key)
            if clean in out:
                raise _NotJSON(f"duplicate key {short(clean, 40)!r}")
            out[clean] = _plain_json(item, levels - 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain_json(item, levels - 1) for item in value]
    raise _NotJSON(f"a {short(type(value).__name__, 40)} is not JSON data")


def validate_arguments(
    arguments: Any, tool: HasParameters, *, max_depth: int = CallLimits.max_depth
) -> tuple[dict[str, Any] | None, str | None]:
    """Check ``arguments`` against ``tool.parameters``.

    Returns ``(arguments, None)`` -- a fresh copy made of plain JSON data, with lone surrogates
    replaced by U+FFFD and integral floats coerced to int where an integer is expected -- or
    ``(None, problem)`` with a short description of what is wrong. Arguments that are not plain
    JSON (a non-finite float, a non-string key, an object of another type, nesting deeper than
    ``max_depth``) are a problem too, so that anything accepted can be passed on, logged and
    tokenized. Never raises.
    """
    if not isinstance(arguments, dict):
        return None, f"arguments must be a JSON object, got {describe(arguments)}"
    try:
        plain = _plain_json(arguments, max_depth)
    except _TooDeep:
        return None, f"arguments are nested deeper than {max_depth} levels"
    except _NotJSON as e:
        return None, f"arguments are not plain JSON data: {e}"
    except Exception as e:  # a caller's own Mapping may raise anything while it is read
        return None, f"arguments could not be read ({short(type(e).__name__, 40)})"
    problem = check_value(plain, tool.parameters, "")
    if problem is not None:
        return None, problem
    return _coerce(plain, tool.parameters), None
