"""Tool definitions: :class:`Tool` (an OpenAI function schema and, optionally, its function),
``@tool`` (a typed, documented function made into one) and the tool listings of prompts."""

from __future__ import annotations

import inspect
import json
import re
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from llm_marl.errors import LLMMarlError
from llm_marl.tools.calls.limits import short
from llm_marl.tools.calls.validation import (
    ANNOTATION_KEYWORDS,
    JSON_TYPES,
    VALIDATION_KEYWORDS,
    check_value,
    json_type_of,
    type_name,
)


class ToolDefinitionError(LLMMarlError, TypeError):
    """A function or schema cannot be turned into a tool (raised when the tool is defined)."""


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool an agent can call: its OpenAI function schema and, optionally, its function.

    Attributes:
        name: The function name the agent calls (``[A-Za-z0-9_-]``, at most 64 characters).
        description: What the tool does, shown to the agent.
        parameters: JSON schema of the arguments (``{"type": "object", "properties": ...}``).
            Only the subset in ``VALIDATION_KEYWORDS`` constrains values; it is checked when
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
            raise ToolDefinitionError(f"not an OpenAI tool schema: {short(schema)}")
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
            parts.append(f"{name}{mark}: {type_name(sub)}")
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
            problem = check_value(param.default, prop, pname)
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
        kinds = {json_type_of(v) for v in values}
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


def _check_schema(schema: Any, where: str, depth: int = 0) -> None:
    """Refuse schemas that validation could not enforce (so validation means what it says)."""
    if depth > 16:
        raise ToolDefinitionError(f"{where}: schema nested deeper than 16 levels")
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"{where}: a schema must be a JSON object, got {short(schema)}")
    unknown = set(schema) - VALIDATION_KEYWORDS - ANNOTATION_KEYWORDS
    if unknown:
        raise ToolDefinitionError(
            f"{where}: unsupported schema keywords {sorted(unknown)}; validation understands "
            f"{sorted(VALIDATION_KEYWORDS)}"
        )
    types_ = schema.get("type")
    if types_ is not None:
        for t in [types_] if isinstance(types_, str) else list(types_):
            if t not in JSON_TYPES:
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
