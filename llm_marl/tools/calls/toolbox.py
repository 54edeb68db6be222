"""Running tools: :class:`Toolbox` parses a completion's calls, runs the valid ones and turns
every outcome into a :class:`ToolResult` to post to the agent."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl.errors import InfrastructureError, LLMMarlError
from llm_marl.tools.calls.limits import DEFAULT_MAX_OUTPUT_CHARS, FORMATS, CallLimits
from llm_marl.tools.calls.parsing import ParsedCalls, ToolCall, parse_tool_calls, tool_map
from llm_marl.tools.calls.schema import Tool, ToolDefinitionError
from llm_marl.tools.text import scrub_surrogates


class ToolUseError(LLMMarlError, ValueError):
    """Raise this from a tool's function when the *agent* used the tool wrongly in a way the
    schema cannot express (a page number past the last page, a URL the agent may not fetch).

    :meth:`Toolbox.execute` turns it into an error message for the agent. Any other exception
    from a tool propagates: an :class:`~llm_marl.errors.InfrastructureError` truncates the
    episode, and anything else is a bug in the tool, which must not be scored as the agent's.
    """


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
        limits: How much of a completion :meth:`parse` reads (:class:`CallLimits`).
        max_output_chars: Cut each tool's output, and each error message a tool raises, to this
            many characters (default :data:`DEFAULT_MAX_OUTPUT_CHARS`; None: no cut), with a
            note saying how much was cut.

    Example::

        box = Toolbox([search, browse], formats=("mcp",), limits=CallLimits(max_calls=1))
        infos["tools"] = box.schemas()
        for result in box.run(completion):
            messages.append(result.to_message())
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        formats: Sequence[str] = FORMATS,
        limits: CallLimits = CallLimits(),
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        self.tools = tool_map(tools)
        unknown = set(formats) - set(FORMATS)
        if unknown:
            raise ValueError(f"unknown tool-call formats {sorted(unknown)}; choose from {FORMATS}")
        self.formats = tuple(formats)
        self.limits = limits
        self.max_output_chars = max_output_chars

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI tool schemas (what ``infos[agent]["tools"]`` holds)."""
        return [t.schema() for t in self.tools.values()]

    def parse(self, completion: Any) -> ParsedCalls:
        """:func:`parse_tool_calls` with this toolbox's tools and limits."""
        return parse_tool_calls(completion, self.tools, formats=self.formats, limits=self.limits)

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
            # An error message is tool output too: it may echo a megabyte URL or page.
            message = self._bounded(f"Error: {e}")
            return ToolResult(call.id, call.name, message, True, call)
        except InfrastructureError:
            raise
        return ToolResult(call.id, call.name, self._bounded(_as_text(output)), False, call)

    def _bounded(self, content: str) -> str:
        """``content`` cut to :attr:`max_output_chars` (with a note) and made encodable: it goes
        into the agent's conversation (a tool may echo a string built elsewhere, or text
        decoded from JSON escapes)."""
        limit = self.max_output_chars
        if limit is not None and len(content) > limit:
            content = content[:limit] + f"\n[... {len(content) - limit} more characters cut]"
        return scrub_surrogates(content)

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
