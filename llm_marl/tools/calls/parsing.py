"""Tool calls found in a completion: the Hermes, MCP and OpenAI formats parsed in linear time into
:class:`ToolCall` s and :class:`ToolCallError` s (:func:`parse_tool_calls`); never raises on bad
input."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl.tools.calls.limits import FORMATS, CallLimits, load_json, short
from llm_marl.tools.calls.schema import Tool, ToolDefinitionError
from llm_marl.tools.calls.validation import describe, validate_arguments
from llm_marl.tools.text import scrub_surrogates


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


def _strip_fence(text: str) -> str:
    """Drop a Markdown code fence some models put around the JSON (```json ... ```)."""
    t = text.strip()
    if t.startswith("```") and t.endswith("```") and len(t) >= 6:
        t = t[3:-3]
        newline = t.find("\n")
        if newline != -1 and t[:newline].strip().isalpha():
            t = t[newline + 1 :]
    return t.strip()


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
            arguments, problem = load_json(args_text, self.max_depth)
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
                f"unknown tool {short(name, 64)!r}; available tools: {known}",
                fmt,
                name=name,
                id_=id_,
            )
            return
        if fmt == "mcp" and tool_.server is not None and server != tool_.server:
            self.error(
                "server_mismatch",
                f"tool {name!r} is served by {tool_.server!r}, not {short(server or '', 64)!r}",
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
    value, problem = load_json(_strip_fence(body), col.max_depth)
    if problem is not None:
        col.error("malformed", f"<tool_call> does not hold a JSON object: {problem}", "hermes")
        return
    if not isinstance(value, dict):
        col.error(
            "malformed",
            f'a <tool_call> must hold {{"name": ..., "arguments": {{...}}}}, got {describe(value)}',
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


def tool_map(tools: Iterable[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:
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
    limits: CallLimits = CallLimits(),
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
        limits: How much of the completion is read (:class:`CallLimits`): text past
            ``max_chars`` is not searched (``truncated`` says so), calls past ``max_calls``
            become one ``too_many`` error.

    Returns:
        A :class:`ParsedCalls`. Time and memory are linear in ``min(len(text), limits.max_chars)``.
    """
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown tool-call formats {sorted(unknown)}; choose from {FORMATS}")
    max_chars = limits.max_chars
    col = _Collector(tool_map(tools), limits.max_calls, limits.max_depth)
    if isinstance(completion, str):
        content: Any = completion
        tool_calls = None
    else:
        content = _get(completion, "content")
        tool_calls = _get(completion, "tool_calls")
    if _truthy(tool_calls) and "openai" in formats:
        _parse_openai(tool_calls, col, limits.max_call_chars)
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
    text = _parse_text(window, formats, col, limits.max_call_chars)
    col.finish(col.items[-1].format if col.items else "hermes")
    return ParsedCalls(items=tuple(col.items), text=text, truncated=truncated)
