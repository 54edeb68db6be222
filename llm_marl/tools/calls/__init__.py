"""Tool definitions and tool calls: ``@tool`` -> OpenAI schema; calls parsed out of completions.

One job per module: :mod:`~llm_marl.tools.calls.limits` (the bounds on untrusted output, the
bounded JSON reader), :mod:`~llm_marl.tools.calls.schema` (``Tool``, ``@tool``, prompt listings),
:mod:`~llm_marl.tools.calls.validation` (arguments against a schema),
:mod:`~llm_marl.tools.calls.parsing` (calls out of a completion) and
:mod:`~llm_marl.tools.calls.toolbox` (running them); every name below is importable from here.

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
costs more than linear time in the completion's length. :class:`CallLimits` bounds what is read:
only the first ``max_chars`` characters, at most ``max_calls`` calls (the rest become one "too
many calls" error), at most ``max_call_chars`` of one call's body; JSON nesting deeper than
``max_depth`` is refused by a linear scan *before* ``json.loads`` sees it (so the parser cannot
recurse without bound). Each malformed call, unknown tool, duplicate call or argument that does
not fit the schema becomes a :class:`ToolCallError` whose ``to_message()`` is the
``{"role": "tool"}`` message to post back.

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

from llm_marl.tools.calls.limits import (
    FORMATS,
    CallLimits,
    json_depth_exceeds,
    json_string_end,
)
from llm_marl.tools.calls.parsing import ParsedCalls, ToolCall, ToolCallError, parse_tool_calls
from llm_marl.tools.calls.schema import (
    Tool,
    ToolDefinitionError,
    hermes_tool_listing,
    mcp_tool_listing,
    tool,
)
from llm_marl.tools.calls.toolbox import Toolbox, ToolResult, ToolUseError
from llm_marl.tools.calls.validation import validate_arguments
from llm_marl.tools.text import scrub_surrogates

__all__ = [
    "CallLimits",
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
