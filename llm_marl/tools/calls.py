"""Tool definitions and tool calls: ``@tool`` -> OpenAI schema; calls parsed out of completions.

Define a tool from a typed, documented function; its JSON schema comes from the signature and
the docstring's ``Args:`` section::

    from typing import Literal
    from llm_marl.tools.calls import Toolbox, tool

    @tool
    def search(query: str, k: int = 5, lang: Literal["en", "de"] = "en") -> str:
        \"\"\"Search the web.

        Args:
            query: What to look for.
            k: How many results to return.
            lang: Language of the results.
        \"\"\"
        ...

    search.schema()        # {"type": "function", "function": {"name": "search", ...}}

    box = Toolbox([search])
    results = box.run('Let me look. <tool_call>{"name": "search", "arguments": {"query": 1}}'
                      '</tool_call>')
    results[0].is_error    # True: 'query' must be a string
    results[0].to_message()  # {"role": "tool", "tool_call_id": "call_0", "name": "search",
                             #  "content": "Error: ..."}  -- post it to the agent

Formats parsed (:data:`FORMATS`):

* ``"hermes"``: Hermes / Qwen2.5 / Qwen3 ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  one or several per completion (``"parameters"`` is accepted for ``"arguments"``, and
  ``arguments`` given as a JSON string is decoded);
* ``"mcp"``: MATPO's ``<use_mcp_tool>`` XML (Mo et al. 2025, official prompt in
  ``examples/data_preprocess/prompt_utils.py`` of the MATPO release)::

      <use_mcp_tool>
      <server_name>search_and_browse</server_name>
      <tool_name>search</tool_name>
      <arguments>
      {"query": "..."}
      </arguments>
      </use_mcp_tool>

  ``server_name`` is checked against :attr:`Tool.server` when the tool names one;
* ``"openai"``: the ``tool_calls`` list of an OpenAI-compatible chat message
  (``[{"id", "type": "function", "function": {"name", "arguments": "<json>"}}]``), from API
  policies; pass the message (a mapping or the client's object) instead of a string.

Safety: everything here reads untrusted model output. Parsing never raises on bad input and never
costs more than linear time in the completion's length: only the first ``max_chars`` characters
are read (:data:`DEFAULT_MAX_CHARS`), at most ``max_calls`` calls are parsed
(:data:`DEFAULT_MAX_CALLS`; the rest become one "too many calls" error), one call's body may be at
most ``max_call_chars`` long, and JSON nesting deeper than ``max_depth`` is refused by a linear
scan *before* ``json.loads`` sees it (so the parser cannot recurse without bound). Each malformed
call, unknown tool, duplicate call or argument that does not fit the schema becomes a
:class:`ToolCallError` whose ``to_message()`` is the ``{"role": "tool"}`` message to post back.

What the parser hands out is plain JSON data that is safe downstream:

* **no lone surrogates.** A pure-ASCII completion can write ``"\\ud800"`` in its JSON, which
  ``json.loads`` turns into a lone surrogate; such a string cannot be encoded as UTF-8, so a
  search engine, an HTTP client, a tokenizer or a JSONL writer would raise on it later, outside
  the env. Every string the parser returns (tool names, argument keys and values, ids, the prose
  in ``text``, error messages, tool outputs) has each lone surrogate replaced by U+FFFD
  (:func:`scrub_surrogates`), in linear time. Replacing rather than refusing keeps a call whose
  only flaw is one odd character usable, as a UTF-8 decoder with ``errors="replace"`` would;
* **finite numbers.** A JSON number beyond the float range (``1e999999``) is refused (the
  literals ``NaN``/``Infinity`` are not JSON and are refused too); a float given for an integer
  parameter must be integral and at most 2**53 in magnitude, so ``1e308`` does not become a
  309-digit int;
* **no duplicate keys.** ``{"name": "a", "name": "b"}`` is refused instead of silently keeping
  the last value;
* **bounded depth**, also for arguments an OpenAI message gives as an already decoded object.
"""

from __future__ import annotations

import inspect
import json
import math
import operator
import re
import reprlib
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from llm_marl.errors import InfrastructureError, LLMMarlError
from llm_marl.tools.text import scrub_surrogates

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_CALL_CHARS",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_DEPTH",
    "FORMATS",
    "ParsedCalls",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolDefinitionError",
    "ToolResult",
    "ToolUseError",
    "Toolbox",
    "hermes_tool_listing",
    "json_depth_exceeds",
    "json_string_end",
    "mcp_tool_listing",
    "parse_tool_calls",
    "scrub_surrogates",
    "tool",
    "validate_arguments",
]

FORMATS: tuple[str, ...] = ("hermes", "mcp", "openai")
"""The tool-call formats :func:`parse_tool_calls` understands."""

DEFAULT_MAX_CHARS = 256 * 1024
"""Characters of a completion searched for tool calls; the rest is ignored (``truncated``)."""

DEFAULT_MAX_CALLS = 8
"""Tool calls parsed per completion; further ones become a single ``too_many`` error."""

DEFAULT_MAX_CALL_CHARS = 64 * 1024
"""Characters of one call's body (between its tags, or one OpenAI ``arguments`` string)."""

DEFAULT_MAX_DEPTH = 32
"""Deepest JSON nesting accepted in a call (objects and arrays)."""


def _names(text: str) -> frozenset[str]:
    """The space-separated words of ``text`` (long name lists stay readable)."""
    return frozenset(text.split())


_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}
# Schema keywords that only describe (never constrain) and are ignored by validation.
_ANNOTATION_KEYWORDS = {"description", "title", "default", "examples", "format", "$schema"}
_VALIDATION_KEYWORDS = _names(
    "type enum const items properties required additionalProperties anyOf minimum maximum "
    "exclusiveMinimum exclusiveMaximum minLength maxLength minItems maxItems"
)


class ToolDefinitionError(LLMMarlError, TypeError):
    """A function or schema cannot be turned into a tool (raised when the tool is defined)."""


class ToolUseError(LLMMarlError, ValueError):
    """Raise this from a tool's function when the *agent* used the tool wrongly in a way the
    schema cannot express (a page number past the last page, a URL the agent may not fetch).

    :meth:`Toolbox.execute` turns it into an error message for the agent. Any other exception
    from a tool propagates: an :class:`~llm_marl.errors.InfrastructureError` truncates the
    episode, and anything else is a bug in the tool, which must not be scored as the agent's.
    """


# --------------------------------------------------------------------------------------------
# Tool definitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool an agent can call: its OpenAI function schema and, optionally, its function.

    Attributes:
        name: The function name the agent calls (``[A-Za-z0-9_-]``, at most 64 characters).
        description: What the tool does, shown to the agent.
        parameters: JSON schema of the arguments (``{"type": "object", "properties": ...}``).
            Only the subset in ``_VALIDATION_KEYWORDS`` constrains values; it is checked when
            the tool is defined.
        fn: The Python function run by :meth:`Toolbox.execute` (None for tools the env handles
            itself, such as a planner's ``delegate``).
        server: MATPO's MCP ``server_name`` for this tool. When set, a ``<use_mcp_tool>`` call
            naming another server is an error; when None any server name is accepted.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    server: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name or ""):
            raise ToolDefinitionError(
                f"tool name {self.name!r} must be 1-64 characters of letters, digits, '_' or '-'"
            )
        _check_schema(self.parameters, f"tool {self.name!r} parameters")
        if self.parameters.get("type") != "object":
            raise ToolDefinitionError(
                f"tool {self.name!r}: parameters must be a JSON schema of type 'object'"
            )

    def schema(self) -> dict[str, Any]:
        """The OpenAI tool schema: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _plain(self.parameters),
            },
        }

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (no validation: this is the trusted, Python side)."""
        if self.fn is None:
            raise ToolDefinitionError(f"tool {self.name!r} has no function to call")
        return self.fn(*args, **kwargs)

    @classmethod
    def from_schema(
        cls,
        schema: Mapping[str, Any],
        fn: Callable[..., Any] | None = None,
        *,
        server: str | None = None,
    ) -> Tool:
        """A tool from an OpenAI tool schema (``{"type": "function", "function": {...}}``) or
        from its inner ``function`` object. Raises :class:`ToolDefinitionError` if the schema
        uses keywords validation cannot enforce."""
        inner = schema.get("function", schema) if schema.get("type") == "function" else schema
        if not isinstance(inner, Mapping) or "name" not in inner:
            raise ToolDefinitionError(f"not an OpenAI tool schema: {_short(schema)}")
        params = inner.get("parameters") or {"type": "object", "properties": {}}
        return cls(
            name=str(inner["name"]),
            description=str(inner.get("description", "")),
            parameters=params,
            fn=fn,
            server=server,
        )

    def signature_hint(self) -> str:
        """``search(query: string, k?: integer)``: a one-line reminder put in error messages."""
        props = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        parts = []
        for name, sub in props.items():
            mark = "" if name in required else "?"
            parts.append(f"{name}{mark}: {_type_name(sub)}")
        return f"{self.name}({', '.join(parts)})"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    server: str | None = None,
) -> Any:
    """Turn a typed, documented function into a :class:`Tool` (usable as ``@tool`` or
    ``@tool(name=..., server=...)``).

    The description is the docstring's text before its first section; each parameter's
    description comes from the ``Args:`` section (Google style; ``:param x:`` also works) or
    from ``Annotated[T, "description"]``. Parameters with defaults are optional and the default
    goes in the schema. Supported annotations: ``str``, ``int``, ``float``, ``bool``,
    ``Literal[...]`` (of str/int/bool), ``Optional[T]`` / ``T | None``, unions of these,
    ``list[T]``, ``dict[str, T]``, ``Annotated[T, ...]``.

    Raises:
        ToolDefinitionError: At decoration time, for a missing docstring, a parameter without an
            annotation or with an unsupported one, ``*args``/``**kwargs``/positional-only
            parameters, a default that is not JSON, or an ``Args:`` entry naming no parameter.
    """

    def build(f: Callable[..., Any]) -> Tool:
        return _tool_from_function(f, name=name, description=description, server=server)

    return build if fn is None else build(fn)


_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|References)\s*:\s*$"
)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google-style (or ``:param x:``) docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in lines:
        sphinx = re.match(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$", line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current = None
            continue
        if section is None:
            summary.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            if not line.strip():
                continue
            this_indent = len(line) - len(line.lstrip())
            entry = re.match(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry and (current is None or this_indent <= indent):
                current = entry.group(1)
                indent = this_indent
                params[current] = entry.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "sphinx" and current is not None and line.strip():
            if line.lstrip().startswith(":"):
                current = None
            else:
                params[current] = (params[current] + " " + line.strip()).strip()
    text = "\n".join(summary).strip()
    return text, params


def _tool_from_function(
    fn: Callable[..., Any], *, name: str | None, description: str | None, server: str | None
) -> Tool:
    label = getattr(fn, "__qualname__", repr(fn))
    if not callable(fn):
        raise ToolDefinitionError(f"@tool needs a function, got {type(fn).__name__}")
    doc = inspect.getdoc(fn) or ""
    summary, param_docs = _parse_docstring(doc) if doc else ("", {})
    summary = description if description is not None else summary
    if not summary:
        raise ToolDefinitionError(
            f"{label}: a tool needs a description; write a docstring (its first paragraph is "
            f"shown to the agent) or pass @tool(description=...)"
        )
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise ToolDefinitionError(f"{label}: cannot resolve type annotations: {e}") from e
    sig = inspect.signature(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in sig.parameters.items():
        where = f"{label}, parameter {pname!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args and **kwargs cannot be tool parameters")
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{where}: positional-only parameters cannot be passed by name"
            )
        if pname not in hints:
            raise ToolDefinitionError(f"{where}: needs a type annotation")
        annotation = hints[pname]
        prop = _annotation_schema(annotation, where)
        if pname in param_docs and param_docs[pname]:
            prop = {**prop, "description": param_docs[pname]}
        if param.default is param.empty:
            required.append(pname)
        else:
            try:
                json.dumps(param.default, allow_nan=False)
            except (TypeError, ValueError):
                raise ToolDefinitionError(
                    f"{where}: default {param.default!r} is not JSON-serialisable"
                ) from None
            problem = _validate(param.default, prop, pname)
            if problem is not None:
                raise ToolDefinitionError(
                    f"{where}: default {param.default!r} does not fit: {problem}"
                )
            prop = {**prop, "default": param.default}
        properties[pname] = prop
    unknown = sorted(set(param_docs) - set(sig.parameters))
    if unknown:
        raise ToolDefinitionError(
            f"{label}: the docstring documents {unknown}, which are not parameters"
        )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return Tool(
        name=name or fn.__name__, description=summary, parameters=parameters, fn=fn, server=server
    )


def _annotation_schema(annotation: Any, where: str) -> dict[str, Any]:
    """JSON schema of one parameter annotation, or :class:`ToolDefinitionError`."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        schema = _annotation_schema(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if annotation is type(None):
        return {"type": "null"}
    if origin is Literal:
        values = list(args)
        if not values or not all(isinstance(v, (str, int, bool)) for v in values):
            raise ToolDefinitionError(f"{where}: Literal values must be str, int or bool")
        kinds = {_json_type_of(v) for v in values}
        if len(kinds) == 1:
            return {"type": kinds.pop(), "enum": values}
        return {"enum": values}
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        subs = [_annotation_schema(m, where) for m in members]
        if len(subs) == 1 and nullable and isinstance(subs[0].get("type"), str):
            merged = {**subs[0], "type": [subs[0]["type"], "null"]}
            if "enum" in merged:
                merged["enum"] = [*merged["enum"], None]
            return merged
        if nullable:
            subs.append({"type": "null"})
        return subs[0] if len(subs) == 1 else {"anyOf": subs}
    if origin in (list, Sequence) or annotation is list:
        if len(args) != 1:
            raise ToolDefinitionError(f"{where}: write list[T] with the element type")
        return {"type": "array", "items": _annotation_schema(args[0], where)}
    if origin in (dict, Mapping) or annotation is dict:
        if len(args) != 2 or args[0] is not str:
            raise ToolDefinitionError(f"{where}: write dict[str, T] (JSON object keys are strings)")
        return {"type": "object", "additionalProperties": _annotation_schema(args[1], where)}
    raise ToolDefinitionError(
        f"{where}: unsupported annotation {annotation!r}; use str, int, float, bool, Literal[...], "
        f"Optional[T], list[T] or dict[str, T]"
    )


def _json_type_of(value: Any) -> str:
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


def _check_schema(schema: Any, where: str, depth: int = 0) -> None:
    """Refuse schemas that validation could not enforce (so validation means what it says)."""
    if depth > 16:
        raise ToolDefinitionError(f"{where}: schema nested deeper than 16 levels")
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"{where}: a schema must be a JSON object, got {_short(schema)}")
    unknown = set(schema) - _VALIDATION_KEYWORDS - _ANNOTATION_KEYWORDS
    if unknown:
        raise ToolDefinitionError(
            f"{where}: unsupported schema keywords {sorted(unknown)}; validation understands "
            f"{sorted(_VALIDATION_KEYWORDS)}"
        )
    types_ = schema.get("type")
    if types_ is not None:
        for t in [types_] if isinstance(types_, str) else list(types_):
            if t not in _JSON_TYPES:
                raise ToolDefinitionError(f"{where}: unknown type {t!r}")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            _check_schema(sub, f"{where}.{key}", depth + 1)
    for pname, sub in (schema.get("properties") or {}).items():
        _check_schema(sub, f"{where}.{pname}", depth + 1)
    for i, sub in enumerate(schema.get("anyOf") or []):
        _check_schema(sub, f"{where}.anyOf[{i}]", depth + 1)


def _plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists (schemas may be given as any Mapping)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _type_name(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"])
    t = schema.get("type", "any")
    if t == "array":
        items = schema.get("items")
        return f"array of {_type_name(items)}" if isinstance(items, Mapping) else "array"
    return " | ".join(t) if isinstance(t, list) else str(t)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _describe(value: Any) -> str:
    kind = _json_type_of(value)
    article = "an" if kind[:1] in ("a", "e", "i", "o", "u") else "a"
    text = _short(value, 40)
    return f"{article} {kind} ({text})"


def _json_short(value: Any, limit: int = 40) -> str:
    """``value`` as (the start of) its JSON text; a value JSON cannot write is described by
    :func:`_short` instead (validation may be handed any object by a direct caller)."""
    try:
        text = json.dumps(value, default=str)
    except Exception:  # unserialisable, too deep, or a str() that raises: describe it instead
        return _short(value, limit)
    return _short(text, limit)


# A float given for an integer must be exactly an integer a float can hold: beyond 2**53 floats
# skip integers, and 1e308 would otherwise become a 309-digit int in the tool's hands.
_MAX_EXACT_INT = 2**53


def _validate(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """None when ``value`` fits ``schema``, else what is wrong (for the agent to read)."""
    if isinstance(value, float) and not math.isfinite(value):
        # Whatever the schema says: no tool is written to receive inf or nan.
        return f"{path!r} must be a finite number, got {value!r}"
    if "anyOf" in schema:
        problems = [_validate(value, sub, path) for sub in schema["anyOf"]]
        if all(p is not None for p in problems):
            return f"{path!r} must be {_type_name(schema)}, got {_describe(value)}"
    if "const" in schema and not _json_equal(value, schema["const"]):
        return f"{path!r} must be {json.dumps(schema['const'])}, got {_describe(value)}"
    if "enum" in schema and not any(_json_equal(value, v) for v in schema["enum"]):
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        return f"{path!r} must be one of {allowed}; got {_json_short(value)}"
    types_ = schema.get("type")
    if types_ is not None:
        names = [types_] if isinstance(types_, str) else list(types_)
        if not any(_is_type(value, t) for t in names):
            return f"{path!r} must be {' or '.join(names)}, got {_describe(value)}"
    problem = _bound_problem(value, schema, path)
    if problem is not None:
        return problem
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                problem = _validate(item, items, f"{path}[{i}]")
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
                problem = _validate(item, props[key], sub_path)
            elif extra is False:
                allowed = ", ".join(repr(k) for k in props) or "none"
                return f"unknown argument {sub_path!r} (allowed: {allowed})"
            elif isinstance(extra, Mapping):
                problem = _validate(item, extra, sub_path)
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
    expected: Any = _JSON_TYPES[name]
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
                raise _NotJSON(f"object keys must be strings, got {_describe(key)}")
            clean = scrub_surrogates(key)
            if clean in out:
                raise _NotJSON(f"duplicate key {_short(clean, 40)!r}")
            out[clean] = _plain_json(item, levels - 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain_json(item, levels - 1) for item in value]
    raise _NotJSON(f"a {_short(type(value).__name__, 40)} is not JSON data")


def validate_arguments(
    arguments: Any, tool: Tool, *, max_depth: int = DEFAULT_MAX_DEPTH
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
        return None, f"arguments must be a JSON object, got {_describe(arguments)}"
    try:
        plain = _plain_json(arguments, max_depth)
    except _TooDeep:
        return None, f"arguments are nested deeper than {max_depth} levels"
    except _NotJSON as e:
        return None, f"arguments are not plain JSON data: {e}"
    except Exception as e:  # a caller's own Mapping may raise anything while it is read
        return None, f"arguments could not be read ({_short(type(e).__name__, 40)})"
    problem = _validate(plain, tool.parameters, "")
    if problem is not None:
        return None, problem
    return _coerce(plain, tool.parameters), None


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One well-formed, validated call.

    Attributes:
        name: The tool's name.
        arguments: The validated arguments (a fresh dict; safe to pass as ``**kwargs``).
        id: ``tool_call_id`` for the reply: the API's id for ``"openai"``, else ``call_<i>``
            with ``i`` the call's position in the completion.
        format: ``"hermes"``, ``"mcp"`` or ``"openai"``.
        server: The MCP ``server_name`` the call named (``"mcp"`` only).
    """

    name: str
    arguments: dict[str, Any]
    id: str
    format: str
    server: str | None = None


@dataclass(frozen=True)
class ToolCallError:
    """A call that cannot be run, and the message telling the agent why.

    Attributes:
        kind: ``"malformed"`` (unparseable: bad JSON, missing tags or fields, unclosed block,
            nesting too deep, body too long), ``"unknown_tool"``, ``"bad_arguments"``,
            ``"server_mismatch"``, ``"duplicate"`` (same name and arguments as an earlier call
            in the same completion) or ``"too_many"`` (calls past ``max_calls``).
        message: The text for the agent, starting with ``"Error: "``.
        id: ``tool_call_id`` for the reply (as :attr:`ToolCall.id`).
        name: The tool name if one could be read, else None.
        format: The format of the block.
    """

    kind: str
    message: str
    id: str
    name: str | None
    format: str

    def to_message(self) -> dict[str, str]:
        """The ``{"role": "tool", ...}`` chat message reporting this error to the agent."""
        return {
            "role": "tool",
            "tool_call_id": self.id,
            "name": self.name or "",
            "content": self.message,
        }


_FORMAT_KINDS = {"malformed", "unknown_tool", "bad_arguments", "server_mismatch"}


@dataclass(frozen=True)
class ParsedCalls:
    """Everything :func:`parse_tool_calls` found, in the order it appears in the completion.

    Attributes:
        items: Each block as a :class:`ToolCall` or a :class:`ToolCallError`.
        text: The completion with the tool-call blocks removed (the agent's prose).
        truncated: True when the completion was longer than ``max_chars`` and its tail was
            not searched.
    """

    items: tuple[ToolCall | ToolCallError, ...] = ()
    text: str = ""
    truncated: bool = False

    @property
    def calls(self) -> list[ToolCall]:
        """The valid calls, in order."""
        return [item for item in self.items if isinstance(item, ToolCall)]

    @property
    def errors(self) -> list[ToolCallError]:
        """The errors, in order."""
        return [item for item in self.items if isinstance(item, ToolCallError)]

    def format_score(self, *, count_unclosed: bool = True) -> float:
        """Share of the tool-call blocks that parse and fit their tool's schema; 1.0 when the
        completion has no blocks.

        This is MATPO's tool-format score (``check_mcp_format`` in the official
        ``verl/workers/reward_manager/tool.py``): malformed blocks, unknown tools, wrong server
        names and bad arguments count as failures; duplicates count as well-formed, and blocks
        past ``max_calls`` are not counted. An unclosed block counts as a failure, as the
        official unit test (``test_mcp_format.py``, "bad xml format" -> 0.0) expects; the
        official code finds blocks with a regex that needs the closing tag, so it sees no block
        there and scores 1.0 -- pass ``count_unclosed=False`` to reproduce the code instead.
        """
        good = bad = 0
        for item in self.items:
            if isinstance(item, ToolCall) or item.kind == "duplicate":
                good += 1
            elif item.kind in _FORMAT_KINDS:
                if not count_unclosed and item.message.startswith(_UNCLOSED_PREFIX):
                    continue
                bad += 1
        return 1.0 if good + bad == 0 else good / (good + bad)


_UNCLOSED_PREFIX = "Error: unclosed"

_OPENERS = {"hermes": "<tool_call>", "mcp": "<use_mcp_tool>"}
_CLOSERS = {"hermes": "</tool_call>", "mcp": "</use_mcp_tool>"}


_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""What follows a JSON string's opening quote, up to and with its closing quote (or the end of
the text): a backslash escapes the next character, whatever it is. Unrolled, so it never
backtracks."""
_NESTING = re.compile(r'["\[\]{}]')


def json_string_end(text: str, start: int) -> int:
    """The index just past the JSON string whose opening quote is ``text[start]`` (or the end of
    the text, if it never closes). One regex match: linear in the string's length.

    The scanners of JSON embedded in model output skip strings with it, so the brackets and
    braces a string holds (code, LaTeX) never count as structure.
    """
    match = _STRING_REST.match(text, start + 1)
    assert match is not None  # every text matches: the last alternative is the end of the text
    return match.end()


def json_depth_exceeds(text: str, max_depth: int) -> bool:
    """Whether JSON ``text`` nests objects/arrays deeper than ``max_depth``.

    One linear pass that skips string contents (with escapes, :func:`json_string_end`), so that
    ``json.loads`` is only ever given input it can parse without deep recursion. Malformed text
    may pass; ``json.loads`` then rejects it.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return False  # cannot nest deeper than it has brackets (a fast path in C)
    depth = 0
    pos = 0
    while (found := _NESTING.search(text, pos)) is not None:
        ch, pos = found.group(), found.end()
        if ch == '"':
            pos = json_string_end(text, found.start())
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        else:
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """``json.loads``' float parser, refusing numbers beyond the float range (``1e999999``
    would otherwise reach a tool as inf)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {_short(text, 40)} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object builder, refusing duplicate keys: with a plain dict the last one
    would silently win (``{"name": "a", "name": "b"}`` would call b). Linear: the set of keys
    is only built when the dict came out shorter than the pairs."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_short(key, 40)!r}")
            seen.add(key)
    return obj


def _load_json(text: str, max_depth: int) -> tuple[Any, str | None]:
    """(value, None) or (None, problem). Never raises, never recurses past ``max_depth``.

    Refuses what :func:`json.loads` alone lets through: ``NaN``/``Infinity``, numbers out of
    the float range, duplicate keys. Strings are not scrubbed here: :func:`validate_arguments`
    and :class:`_Collector` do it for everything they hand out.
    """
    if json_depth_exceeds(text, max_depth):
        return None, f"JSON nested deeper than {max_depth} levels"
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except (ValueError, RecursionError) as e:
        return None, f"invalid JSON ({_short(str(e), 80)})"
    return value, None


def _strip_fence(text: str) -> str:
    """Drop a Markdown code fence some models put around the JSON (```json ... ```)."""
    t = text.strip()
    if t.startswith("```") and t.endswith("```") and len(t) >= 6:
        t = t[3:-3]
        newline = t.find("\n")
        if newline != -1 and t[:newline].strip().isalpha():
            t = t[newline + 1 :]
    return t.strip()


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` limits (depth, items, lengths), and dicts shown in their own order: the
    stock ``repr_dict`` sorts every key first, more than linear work for a huge dict."""

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        parts = []
        for i, (key, item) in enumerate(x.items()):
            if i == self.maxdict:
                parts.append("...")
                break
            parts.append(f"{self.repr1(key, level - 1)}: {self.repr1(item, level - 1)}")
        return "{" + ", ".join(parts) + "}"


_REPR = _BoundedRepr()
_REPR.maxlevel = 3
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80


def _short(value: Any, limit: int = 60) -> str:
    """At most ``limit`` characters describing ``value`` (for error messages): bounded in depth
    and size whatever ``value`` is, never raises, and free of lone surrogates."""
    try:
        text = value[: limit + 1] if isinstance(value, str) else _REPR.repr(value)
    except Exception:  # a hostile __repr__ (or an int too long to print) may raise anything
        text = f"<{type(value).__name__}>"
    text = scrub_surrogates(text[: limit + 1].replace("\n", " "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Collector:
    """Turns raw (name, arguments) pairs into ToolCall / ToolCallError items."""

    def __init__(self, tools: Mapping[str, Tool], max_calls: int, max_depth: int) -> None:
        self.tools = tools
        self.max_calls = max_calls
        self.max_depth = max_depth
        self.items: list[ToolCall | ToolCallError] = []
        self.seen: set[tuple[str, str]] = set()
        self.extra = 0  # blocks past max_calls

    @property
    def full(self) -> bool:
        return len(self.items) >= self.max_calls

    def next_id(self) -> str:
        return f"call_{len(self.items)}"

    def error(
        self, kind: str, message: str, fmt: str, name: str | None = None, id_: str | None = None
    ) -> None:
        self.items.append(
            ToolCallError(
                kind=kind,
                # Messages quote the agent's text; scrubbing again keeps any new one safe.
                message=f"Error: {scrub_surrogates(message)}",
                id=id_ or self.next_id(),
                name=name,
                format=fmt,
            )
        )

    def add(
        self,
        name: Any,
        arguments: Any,
        fmt: str,
        *,
        server: str | None = None,
        id_: str | None = None,
        args_text: str | None = None,
    ) -> None:
        """Validate one call; ``args_text`` is undecoded JSON (decoded here, depth-checked)."""
        if not isinstance(name, str) or not name.strip():
            self.error("malformed", "tool call has no tool name", fmt, id_=id_)
            return
        name = scrub_surrogates(name.strip())
        if args_text is not None:
            arguments, problem = _load_json(args_text, self.max_depth)
            if problem is not None:
                self.error(
                    "malformed",
                    f"arguments of tool call {name!r} are not valid: {problem}",
                    fmt,
                    name=name,
                    id_=id_,
                )
                return
        tool_ = self.tools.get(name)
        if tool_ is None:
            known = ", ".join(sorted(self.tools)) or "none"
            self.error(
                "unknown_tool",
                f"unknown tool {_short(name, 64)!r}; available tools: {known}",
                fmt,
                name=name,
                id_=id_,
            )
            return
        if fmt == "mcp" and tool_.server is not None and server != tool_.server:
            self.error(
                "server_mismatch",
                f"tool {name!r} is served by {tool_.server!r}, not {_short(server or '', 64)!r}",
                fmt,
                name=name,
                id_=id_,
            )
            return
        checked, problem = validate_arguments(arguments, tool_, max_depth=self.max_depth)
        if problem is not None or checked is None:
            self.error(
                "bad_arguments",
                f"bad arguments for tool {name!r}: {problem}. Expected {tool_.signature_hint()}",
                fmt,
                name=name,
                id_=id_,
            )
            return
        key = (name, json.dumps(checked, sort_keys=True, default=str))
        if key in self.seen:
            self.error(
                "duplicate",
                f"duplicate call: {name!r} was already called with the same arguments in this "
                f"message; it is run once",
                fmt,
                name=name,
                id_=id_,
            )
            return
        self.seen.add(key)
        self.items.append(
            ToolCall(
                name=name, arguments=checked, id=id_ or self.next_id(), format=fmt, server=server
            )
        )

    def finish(self, fmt: str) -> None:
        if self.extra:
            self.error(
                "too_many",
                f"too many tool calls in one message: only the first {self.max_calls} were "
                f"considered, {self.extra} more ignored",
                fmt,
            )


def _tag_text(body: str, tag: str) -> str | None:
    """Text between ``<tag>`` and ``</tag>`` inside ``body`` (first occurrence), or None."""
    start = body.find(f"<{tag}>")
    if start == -1:
        return None
    start += len(tag) + 2
    end = body.find(f"</{tag}>", start)
    return None if end == -1 else body[start:end]


def _parse_hermes(body: str, col: _Collector) -> None:
    value, problem = _load_json(_strip_fence(body), col.max_depth)
    if problem is not None:
        col.error("malformed", f"<tool_call> does not hold a JSON object: {problem}", "hermes")
        return
    if not isinstance(value, dict):
        col.error(
            "malformed",
            'a <tool_call> must hold {"name": ..., "arguments": {...}}, got '
            f"{_describe(value)}",
            "hermes",
        )
        return
    name = value.get("name")
    if "arguments" in value:
        arguments = value["arguments"]
    elif "parameters" in value:
        arguments = value["parameters"]
    else:
        arguments = {}
    if isinstance(arguments, str):  # double-encoded arguments, as some models write them
        col.add(name, None, "hermes", args_text=arguments)
    else:
        col.add(name, arguments, "hermes")


def _parse_mcp(body: str, col: _Collector) -> None:
    def required(tag: str, content: str, name: str | None = None) -> str | None:
        """The text of ``<tag>``; None after reporting the block malformed without it."""
        text = _tag_text(body, tag)
        if text is None:
            col.error("malformed", f"<use_mcp_tool> needs <{tag}>{content}</{tag}>", "mcp", name)
        return text

    tool_name = required("tool_name", "...")
    if tool_name is None:
        return
    server = required("server_name", "...", tool_name.strip() or None)
    if server is None:
        return
    args = required("arguments", "{...}", tool_name.strip() or None)
    if args is None:
        return
    col.add(tool_name, None, "mcp", server=server.strip(), args_text=_strip_fence(args))


def _parse_text(text: str, formats: Sequence[str], col: _Collector, max_call_chars: int) -> str:
    """Scan ``text`` for tagged blocks of the given formats; returns the text outside them.

    Linear: each opener position is found once (``str.find`` from the last position, cached
    per format until passed), each closer is searched once from its opener, and scanning stops
    at an unclosed block (everything after it is inside it).
    """
    active = [f for f in ("hermes", "mcp") if f in formats]
    next_open: dict[str, int] = {f: text.find(_OPENERS[f]) for f in active}
    outside: list[str] = []
    pos = 0
    while True:
        candidates = [(p, f) for f, p in next_open.items() if p != -1]
        if not candidates:
            break
        start, fmt = min(candidates)
        opener, closer = _OPENERS[fmt], _CLOSERS[fmt]
        outside.append(text[pos:start])
        body_start = start + len(opener)
        end = text.find(closer, body_start)
        if end == -1:
            if col.full:
                col.extra += 1
            else:
                col.error(
                    "malformed",
                    f"unclosed {opener}: a tool call must end with {closer}",
                    fmt,
                )
            pos = len(text)
            break
        pos = end + len(closer)
        if col.full:
            col.extra += 1
        else:
            body = text[body_start:end]
            nested = body.find(opener)
            if len(body) > max_call_chars:
                col.error(
                    "malformed",
                    f"tool call body is {len(body)} characters long; the limit is {max_call_chars}",
                    fmt,
                )
            elif nested != -1:
                col.error("malformed", f"{opener} blocks cannot be nested", fmt)
            elif fmt == "hermes":
                _parse_hermes(body, col)
            else:
                _parse_mcp(body, col)
        for f in active:
            if next_open[f] != -1 and next_open[f] < pos:
                next_open[f] = text.find(_OPENERS[f], pos)
    outside.append(text[pos:])
    return "".join(outside)


def _get(obj: Any, key: str) -> Any:
    """``obj.get(key)`` or ``obj.key``; None when absent or when reading it raises (a client's
    message object may have properties that raise: that is a malformed call, not a crash)."""
    try:
        if isinstance(obj, Mapping):
            return obj.get(key)
        return getattr(obj, key, None)
    except Exception:
        return None


def _parse_openai(tool_calls: Any, col: _Collector, max_call_chars: int) -> None:
    if not isinstance(tool_calls, (list, tuple)):
        col.error("malformed", "tool_calls must be a list", "openai")
        return
    for i, call in enumerate(tool_calls):
        if col.full:
            col.extra = len(tool_calls) - i
            return
        raw_id = _get(call, "id")
        id_ = (
            scrub_surrogates(raw_id) if isinstance(raw_id, str) and 0 < len(raw_id) <= 256 else None
        )
        function = _get(call, "function")
        if function is None:
            col.error("malformed", "tool call has no 'function'", "openai", id_=id_)
            continue
        name = _get(function, "name")
        arguments = _get(function, "arguments")
        # isinstance first: ``==`` on an arbitrary object could raise.
        if arguments is None or (isinstance(arguments, str) and not arguments):
            col.add(name, {}, "openai", id_=id_)
        elif isinstance(arguments, str):
            if len(arguments) > max_call_chars:
                col.error(
                    "malformed",
                    f"arguments are {len(arguments)} characters long; the limit is {max_call_chars}",
                    "openai",
                    name=name if isinstance(name, str) else None,
                    id_=id_,
                )
            else:
                col.add(name, None, "openai", id_=id_, args_text=arguments)
        else:
            col.add(name, arguments, "openai", id_=id_)


def _truthy(value: Any) -> bool:
    """``bool(value)``, taking an object whose ``__bool__``/``__len__`` raises as present (its
    calls are then reported malformed rather than raising out of the parser)."""
    try:
        return bool(value)
    except Exception:
        return True


def _tool_map(tools: Iterable[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:
    if isinstance(tools, Mapping):
        return dict(tools)
    out: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise ToolDefinitionError(f"expected Tool objects (use @tool), got {type(t).__name__}")
        if t.name in out:
            raise ToolDefinitionError(f"two tools are named {t.name!r}")
        out[t.name] = t
    return out


def parse_tool_calls(
    completion: Any,
    tools: Iterable[Tool] | Mapping[str, Tool],
    *,
    formats: Sequence[str] = FORMATS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_calls: int = DEFAULT_MAX_CALLS,
    max_call_chars: int = DEFAULT_MAX_CALL_CHARS,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> ParsedCalls:
    """Find, parse and validate the tool calls in one completion. Never raises on bad input.

    Args:
        completion: The completion text, or an OpenAI-style assistant message (a mapping or an
            object with ``content`` and ``tool_calls``). When the message has ``tool_calls`` (and
            ``"openai"`` is in ``formats``) those are the calls and the content is not searched;
            otherwise the content is searched for tagged blocks.
        tools: The tools the agent may call.
        formats: Which of :data:`FORMATS` to accept. Blocks of other formats are left in
            ``text`` untouched.
        max_chars: Only this many leading characters are searched (``truncated`` says so).
        max_calls: At most this many blocks are parsed; the rest become one ``too_many`` error.
        max_call_chars: Longest body of one call.
        max_depth: Deepest JSON nesting accepted.

    Returns:
        A :class:`ParsedCalls`. Time and memory are linear in ``min(len(text), max_chars)``.
    """
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown tool-call formats {sorted(unknown)}; choose from {FORMATS}")
    col = _Collector(_tool_map(tools), max(1, max_calls), max_depth)
    if isinstance(completion, str):
        content: Any = completion
        tool_calls = None
    else:
        content = _get(completion, "content")
        tool_calls = _get(completion, "tool_calls")
    if _truthy(tool_calls) and "openai" in formats:
        _parse_openai(tool_calls, col, max_call_chars)
        col.finish("openai")
        text = content if isinstance(content, str) else ""
        return ParsedCalls(
            items=tuple(col.items),
            text=scrub_surrogates(text[:max_chars]),
            truncated=len(text) > max_chars,
        )
    if not isinstance(content, str):
        try:
            content = "" if content is None else str(content)[: max_chars + 1]
        except Exception:  # str() of a hostile or deeply nested object: nothing to search
            content = ""
    truncated = len(content) > max_chars
    # Scrubbing the window once makes every slice of it (prose, MCP names, argument text) safe.
    window = scrub_surrogates(content[:max_chars])
    text = _parse_text(window, formats, col, max_call_chars)
    col.finish(col.items[-1].format if col.items else "hermes")
    return ParsedCalls(items=tuple(col.items), text=text, truncated=truncated)


# --------------------------------------------------------------------------------------------
# Running tools
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call (or of one unusable block), ready to post to the agent.

    Attributes:
        id: The ``tool_call_id``.
        name: The tool's name ("" when none could be read).
        content: What the tool returned, as text (errors start with ``"Error: "``).
        is_error: True for parse/validation errors and :class:`ToolUseError`.
        call: The call that ran (None for errors found while parsing).
    """

    id: str
    name: str
    content: str
    is_error: bool
    call: ToolCall | None = None

    def to_message(self) -> dict[str, str]:
        """The ``{"role": "tool", ...}`` chat message."""
        return {"role": "tool", "tool_call_id": self.id, "name": self.name, "content": self.content}


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


class Toolbox:
    """A set of tools, the formats their calls may take, and the limits; parses and runs calls.

    Args:
        tools: The :class:`Tool` objects (names must be unique).
        formats: Accepted call formats (see :data:`FORMATS`).
        max_chars, max_calls, max_call_chars, max_depth: Parsing limits
            (see :func:`parse_tool_calls`).
        max_output_chars: Cut each tool's output to this many characters (None: no cut), with a
            note saying how much was cut.

    Example::

        box = Toolbox([search, browse], formats=("mcp",), max_calls=1)
        infos["tools"] = box.schemas()
        for result in box.run(completion):
            messages.append(result.to_message())
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        formats: Sequence[str] = FORMATS,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_call_chars: int = DEFAULT_MAX_CALL_CHARS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_output_chars: int | None = None,
    ) -> None:
        self.tools = _tool_map(tools)
        unknown = set(formats) - set(FORMATS)
        if unknown:
            raise ValueError(f"unknown tool-call formats {sorted(unknown)}; choose from {FORMATS}")
        self.formats = tuple(formats)
        self.max_chars = max_chars
        self.max_calls = max_calls
        self.max_call_chars = max_call_chars
        self.max_depth = max_depth
        self.max_output_chars = max_output_chars

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI tool schemas (what ``infos[agent]["tools"]`` holds)."""
        return [t.schema() for t in self.tools.values()]

    def parse(self, completion: Any) -> ParsedCalls:
        """:func:`parse_tool_calls` with this toolbox's tools and limits."""
        return parse_tool_calls(
            completion,
            self.tools,
            formats=self.formats,
            max_chars=self.max_chars,
            max_calls=self.max_calls,
            max_call_chars=self.max_call_chars,
            max_depth=self.max_depth,
        )

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one validated call.

        A :class:`ToolUseError` from the tool becomes an error result; an
        :class:`~llm_marl.errors.InfrastructureError` (or any other exception: a bug in the
        tool) propagates.
        """
        tool_ = self.tools[call.name]
        if tool_.fn is None:
            raise ToolDefinitionError(
                f"tool {call.name!r} has no function; the env must handle its calls itself"
            )
        try:
            output = tool_.fn(**call.arguments)
        except ToolUseError as e:
            return ToolResult(call.id, call.name, f"Error: {scrub_surrogates(str(e))}", True, call)
        except InfrastructureError:
            raise
        content = _as_text(output)
        if self.max_output_chars is not None and len(content) > self.max_output_chars:
            cut = len(content) - self.max_output_chars
            content = content[: self.max_output_chars] + f"\n[... {cut} more characters cut]"
        # The output goes into the agent's conversation, which must stay encodable (a tool may
        # echo a string built elsewhere, or text decoded from JSON escapes).
        return ToolResult(call.id, call.name, scrub_surrogates(content), False, call)

    def run(self, completion: Any) -> list[ToolResult]:
        """Parse ``completion`` and run its valid calls, in order; errors are results too.

        Returns an empty list when the completion holds no tool call.
        """
        results = []
        for item in self.parse(completion).items:
            if isinstance(item, ToolCall):
                results.append(self.execute(item))
            else:
                results.append(ToolResult(item.id, item.name or "", item.message, True, None))
        return results


# --------------------------------------------------------------------------------------------
# Describing tools in a prompt
# --------------------------------------------------------------------------------------------


def mcp_tool_listing(tools: Iterable[Tool], *, default_server: str = "tools") -> str:
    """The tool list of MATPO's system prompt, for models prompted with ``<use_mcp_tool>``.

    Same layout as ``format_tool_schemas_for_prompt`` in the MATPO release
    (``## Server name: S`` / ``### Tool name: T`` / ``Description: ...`` /
    ``Input JSON schema: ...``), including its choice of printing each schema as a Python dict.
    Tools without :attr:`Tool.server` are listed under ``default_server``.
    """
    lines: list[str] = []
    last: str | None = None
    for t in tools:
        server = t.server or default_server
        if server != last:
            lines.append(f"## Server name: {server}")
            last = server
        lines.append(f"### Tool name: {t.name}")
        lines.append(f"Description: {t.description}")
        lines.append(f"Input JSON schema: {_plain(t.parameters)}")
        lines.append("")
    return "\n".join(lines)


def hermes_tool_listing(tools: Iterable[Tool]) -> str:
    """The ``<tools>`` block Hermes/Qwen chat templates put in the system prompt (one JSON
    schema per line), for tokenizers whose template cannot take ``tools=`` itself."""
    body = "\n".join(json.dumps(t.schema(), ensure_ascii=False) for t in tools)
    return f"<tools>\n{body}\n</tools>"
