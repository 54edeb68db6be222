"""Tool definitions (@tool -> schema) and tool-call parsing: formats, validation, bad input.

The adversarial tests feed multi-megabyte hostile completions; they carry a generous
``pytest.mark.timeout`` as a hang guard only (speed is measured in benchmarks/search.py).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_marl.errors import ConfigError, InfrastructureError, LLMMarlError
from llm_marl.tools.calls import (
    CallLimits,
    Tool,
    Toolbox,
    ToolCall,
    ToolCallError,
    ToolDefinitionError,
    ToolUseError,
    hermes_tool_listing,
    json_depth_exceeds,
    json_string_end,
    mcp_tool_listing,
    parse_tool_calls,
    tool,
    validate_arguments,
)

# ---------------------------------------------------------------------------------------------
# Tools used throughout
# ---------------------------------------------------------------------------------------------


@tool
def search(query: str, k: int = 5, lang: Literal["en", "de"] = "en") -> str:
    """Search the web.

    Args:
        query: What to look for.
        k: How many results
            to return.
        lang: Language of the results.
    """
    return f"{query}|{k}|{lang}"


@tool(server="browsing")
def browse(url: str, page: int = 1) -> str:
    """Read a page.

    Args:
        url: The address.
        page: Page number.
    """
    return f"page {page} of {url}"


# MATPO's Serper search tool, as its prompt lists it (schema written here by us).
GOOGLE = Tool(
    name="google_search",
    description="Web search.",
    parameters={
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "gl": {"type": "string"},
            "hl": {"type": "string"},
            "num": {"type": "number"},
        },
        "required": ["q", "gl", "hl"],
    },
    server="tool-google-search",
)

TOOLS = [search, browse]


def hermes(name: str, arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def mcp(server: str, name: str, arguments: str) -> str:
    return (
        f"<use_mcp_tool>\n<server_name>{server}</server_name>\n<tool_name>{name}</tool_name>\n"
        f"<arguments>\n{arguments}\n</arguments>\n</use_mcp_tool>"
    )


def only(parsed) -> ToolCall | ToolCallError:
    assert len(parsed.items) == 1, parsed.items
    return parsed.items[0]


def error_kind(completion: Any, tools=TOOLS, **kw) -> str:
    item = only(parse_tool_calls(completion, tools, **kw))
    assert isinstance(item, ToolCallError), item
    assert item.message.startswith("Error: ")
    return item.kind


# ---------------------------------------------------------------------------------------------
# @tool -> schema
# ---------------------------------------------------------------------------------------------


def test_schema_from_signature_and_docstring():
    schema = search.schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Search the web."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    assert params["properties"]["query"] == {"type": "string", "description": "What to look for."}
    assert params["properties"]["k"] == {
        "type": "integer",
        "description": "How many results to return.",
        "default": 5,
    }
    assert params["properties"]["lang"]["enum"] == ["en", "de"]
    assert params["properties"]["lang"]["type"] == "string"
    json.dumps(schema)  # plain JSON


def test_annotation_kinds():
    @tool
    def f(
        a: str,
        b: int,
        c: float,
        d: bool,
        e: Optional[int] = None,  # noqa: UP045 - the typing spelling is supported too
        g: list[str] | None = None,
        h: Literal[1, 2, 3] = 1,
        i: dict[str, float] | None = None,
        j: Union[int, str] = 0,  # noqa: UP007
        m: Annotated[str, "annotated description"] = "",
        n: list[list[int]] | None = None,
        o: Optional[Literal["x", "y"]] = None,  # noqa: UP045
    ) -> None:
        """Every supported kind."""

    props = f.parameters["properties"]
    assert props["a"]["type"] == "string"
    assert props["b"]["type"] == "integer"
    assert props["c"]["type"] == "number"
    assert props["d"]["type"] == "boolean"
    assert props["e"]["type"] == ["integer", "null"]
    assert props["g"]["type"] == ["array", "null"] and props["g"]["items"] == {"type": "string"}
    assert props["h"] == {"type": "integer", "enum": [1, 2, 3], "default": 1}
    assert props["i"]["type"] == ["object", "null"]
    assert props["i"]["additionalProperties"] == {"type": "number"}
    assert props["j"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert props["m"]["description"] == "annotated description"
    assert props["n"]["items"] == {"type": "array", "items": {"type": "integer"}}
    assert props["o"]["enum"] == ["x", "y", None]
    assert f.parameters["required"] == ["a", "b", "c", "d"]
    # And the validator accepts what the schema describes.
    ok, problem = validate_arguments(
        {"a": "", "b": 1, "c": 1, "d": True, "e": None, "o": None, "j": "s", "n": [[1]]}, f
    )
    assert problem is None and ok is not None


def test_sphinx_docstring_and_overrides():
    @tool(name="lookup", description="Look something up.", server="kb")
    def f(key: str) -> str:
        """Ignored summary.

        :param key: The key to look up.
        """
        return key.upper()

    assert f.name == "lookup" and f.server == "kb"
    assert f.description == "Look something up."
    assert f.parameters["properties"]["key"]["description"] == "The key to look up."
    assert f("a") == "A"  # a Tool still calls like the function


def test_future_annotations_are_resolved():
    ns: dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "def f(x: int, y: list[str] | None = None) -> str:\n"
        "    '''Doc.'''\n"
        "    return ''\n",
        ns,
    )
    t = tool(ns["f"])
    assert t.parameters["properties"]["x"] == {"type": "integer"}


class Custom:
    pass


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(x):\n    '''Doc.'''", "needs a type annotation"),
        ("def f(x: int):\n    pass", "needs a description"),
        ("def f(*args: int):\n    '''Doc.'''", "*args"),
        ("def f(**kw: int):\n    '''Doc.'''", "**kwargs"),
        ("def f(x: int, /):\n    '''Doc.'''", "positional-only"),
        ("def f(x: Any):\n    '''Doc.'''", "unsupported annotation"),
        ("def f(x: set[int]):\n    '''Doc.'''", "unsupported annotation"),
        ("def f(x: tuple[int, int]):\n    '''Doc.'''", "unsupported annotation"),
        ("def f(x: Custom):\n    '''Doc.'''", "unsupported annotation"),
        ("def f(x: list):\n    '''Doc.'''", "element type"),
        ("def f(x: dict[int, str]):\n    '''Doc.'''", "dict[str, T]"),
        ("def f(x: Literal[1.5]):\n    '''Doc.'''", "Literal values"),
        ("def f(x: Custom = None):\n    '''Doc.'''", "unsupported annotation"),
        ("def f(x: int = Custom()):\n    '''Doc.'''", "not JSON"),
        ("def f(x: int = 'one'):\n    '''Doc.'''", "does not fit"),
        (
            "def f(x: int):\n    '''Doc.\n\n    Args:\n        y: Not a parameter.\n    '''",
            "not parameters",
        ),
    ],
)
def test_unsupported_definitions_fail_at_decoration(source, message):
    ns: dict[str, Any] = {"Any": Any, "Custom": Custom, "Literal": Literal}
    exec(source, ns)
    with pytest.raises(ToolDefinitionError, match=message.replace("*", r"\*").replace("[", r"\[")):
        tool(ns["f"])


def test_definition_errors_are_llm_marl_errors():
    assert issubclass(ToolDefinitionError, LLMMarlError) and issubclass(
        ToolDefinitionError, TypeError
    )


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "semi;colon", "ünï"])
def test_bad_tool_names(name):
    with pytest.raises(ToolDefinitionError, match="tool name"):
        Tool(name=name, description="d", parameters={"type": "object", "properties": {}})


def test_from_schema_round_trip_and_unsupported_keywords():
    again = Tool.from_schema(search.schema(), search.fn)
    assert again.schema() == search.schema()
    assert Tool.from_schema(search.schema()["function"]).name == "search"
    for bad in (
        {"type": "string", "pattern": "^a"},
        {"$ref": "#/defs/x"},
        {"oneOf": [{"type": "string"}]},
        {"type": "strng"},
    ):
        with pytest.raises(ToolDefinitionError):
            Tool.from_schema(
                {"name": "t", "parameters": {"type": "object", "properties": {"x": bad}}}
            )
    with pytest.raises(ToolDefinitionError, match="type 'object'"):
        Tool.from_schema({"name": "t", "parameters": {"type": "string"}})
    with pytest.raises(ToolDefinitionError, match="not an OpenAI tool schema"):
        Tool.from_schema({"description": "no name"})


def test_duplicate_tool_names_rejected():
    with pytest.raises(ToolDefinitionError, match="two tools"):
        Toolbox([search, search])


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------


def test_hermes_single_and_several():
    text = "I will search.\n" + hermes("search", {"query": "a"}) + hermes("browse", {"url": "u"})
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.calls] == ["search", "browse"]
    assert parsed.calls[0].arguments == {"query": "a"}
    assert [c.id for c in parsed.calls] == ["call_0", "call_1"]
    assert all(c.format == "hermes" for c in parsed.calls)
    assert parsed.errors == [] and parsed.text.strip() == "I will search."


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "search", "arguments": {"query": "a"}}',
        '\n  {"name":"search","arguments":{"query":"a"}}  \n',
        '{"name": "search", "parameters": {"query": "a"}}',  # Llama-style key
        '{"name": "search", "arguments": "{\\"query\\": \\"a\\"}"}',  # double-encoded
        '```json\n{"name": "search", "arguments": {"query": "a"}}\n```',  # fenced
    ],
)
def test_hermes_variants_models_emit(body):
    item = only(parse_tool_calls(f"<tool_call>{body}</tool_call>", TOOLS))
    assert isinstance(item, ToolCall) and item.arguments == {"query": "a"}


def test_hermes_after_qwen3_thinking():
    text = "<think>\nThe user wants a search.\n</think>\n\n" + hermes("search", {"query": "q"})
    assert [c.name for c in parse_tool_calls(text, TOOLS).calls] == ["search"]


def test_mcp_format_as_in_the_matpo_prompt():
    text = "Plan: look it up.\n\n" + mcp("browsing", "browse", '{\n "url": "http://x.org/a"\n}')
    item = only(parse_tool_calls(text, TOOLS))
    assert isinstance(item, ToolCall)
    assert (item.name, item.server, item.format) == ("browse", "browsing", "mcp")
    assert item.arguments == {"url": "http://x.org/a"}


def test_mcp_server_name_free_when_tool_names_none():
    item = only(parse_tool_calls(mcp("anything", "search", '{"query": "x"}'), TOOLS))
    assert isinstance(item, ToolCall) and item.server == "anything"


def test_openai_tool_calls_dicts_and_objects():
    msg = {
        "content": "thinking",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"query": "x"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "browse", "arguments": {"url": "u"}},
            },
        ],
    }
    parsed = parse_tool_calls(msg, TOOLS)
    assert [(c.id, c.name, c.format) for c in parsed.calls] == [
        ("c1", "search", "openai"),
        ("c2", "browse", "openai"),
    ]
    obj = SimpleNamespace(
        content=None,
        tool_calls=[
            SimpleNamespace(
                id="z", function=SimpleNamespace(name="search", arguments='{"query": "y"}')
            )
        ],
    )
    assert parse_tool_calls(obj, TOOLS).calls[0].arguments == {"query": "y"}


def test_message_without_tool_calls_parses_its_content():
    msg = {"role": "assistant", "content": hermes("search", {"query": "x"}), "tool_calls": None}
    assert parse_tool_calls(msg, TOOLS).calls[0].name == "search"


def test_formats_can_be_restricted():
    text = hermes("search", {"query": "a"}) + mcp("s", "search", '{"query": "b"}')
    only_mcp = parse_tool_calls(text, TOOLS, formats=("mcp",))
    assert [c.arguments["query"] for c in only_mcp.calls] == ["b"]
    assert "<tool_call>" in only_mcp.text  # left alone
    with pytest.raises(ValueError, match="unknown tool-call formats"):
        parse_tool_calls(text, TOOLS, formats=("xml",))


def test_no_calls():
    parsed = parse_tool_calls("The answer is 42.", TOOLS)
    assert parsed.items == () and parsed.text == "The answer is 42."
    assert parse_tool_calls("", TOOLS).items == ()
    assert parse_tool_calls(None, TOOLS).items == ()
    assert parse_tool_calls({"content": None}, TOOLS).items == ()


# ---------------------------------------------------------------------------------------------
# Bad input: malformed, unknown, duplicate, wrong arguments
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion",
    [
        "<tool_call>{not json}</tool_call>",
        "<tool_call></tool_call>",
        '<tool_call>{"name": "search", "arguments": {"query": "a"}</tool_call>',  # unbalanced
        '<tool_call>["search", {"query": "a"}]</tool_call>',  # not an object
        '<tool_call>{"arguments": {"query": "a"}}</tool_call>',  # no name
        '<tool_call>{"name": 7, "arguments": {}}</tool_call>',  # name not a string
        '<tool_call>{"name": "search", "arguments": "{bad"}</tool_call>',  # bad inner JSON
        '<tool_call>{"name": "search", "arguments": {"query": NaN}}</tool_call>',
        '<tool_call>{"name": "search", "arguments": {"query": "a"}}',  # unclosed
        '<tool_call>{"name": "search", "arguments": {"query": "a"}}<tool_call></tool_call>',
        "<use_mcp_tool><tool_name>search</tool_name><arguments>{}</arguments></use_mcp_tool>",
        "<use_mcp_tool><server_name>s</server_name><arguments>{}</arguments></use_mcp_tool>",
        "<use_mcp_tool><server_name>s</server_name><tool_name>search</tool_name></use_mcp_tool>",
        "<use_mcp_tool><server_name>s</server_name><tool_name>search</tool_name>"
        "<arguments>{'query': 'a'}</arguments></use_mcp_tool>",  # Python dict, not JSON
        "<use_mcp_tool><server_name>s</server_name><tool_name>search</tool_name>"
        "<arguments>{}</arguments>",  # unclosed
        {"tool_calls": [{"id": "a", "function": {"name": "search", "arguments": "{oops"}}]},
        {"tool_calls": [{"id": "a"}]},
        {"tool_calls": "search"},
    ],
)
def test_malformed_calls_become_errors(completion):
    assert error_kind(completion) == "malformed"


def test_matpo_xml_misformat_case():
    # The closing tags are written as opening tags (MATPO's "bad xml format" unit test case).
    text = (
        "<use_mcp_tool>\n<server_name>tool-google-search</server_name>\n"
        "<tool_name>google_search</tool_name>\n<arguments>\n"
        '{"q": "x", "gl": "us", "hl": "en"}\n<arguments>\n<use_mcp_tool>\nuser\n'
    )
    parsed = parse_tool_calls(text, [GOOGLE])
    assert only(parsed).kind == "malformed"
    assert parsed.format_score() == 0.0
    assert parsed.format_score(count_unclosed=False) == 1.0  # what the official regex sees


@pytest.mark.parametrize(
    "completion",
    [
        hermes("serach", {"query": "a"}),
        hermes("SEARCH", {"query": "a"}),
        mcp("s", "delete_everything", "{}"),
        {"tool_calls": [{"id": "x", "function": {"name": "nope", "arguments": "{}"}}]},
    ],
)
def test_unknown_tools(completion):
    parsed = parse_tool_calls(completion, TOOLS)
    item = only(parsed)
    assert isinstance(item, ToolCallError) and item.kind == "unknown_tool"
    assert "available tools: browse, search" in item.message


def test_server_mismatch():
    assert error_kind(mcp("not-browsing", "browse", '{"url": "u"}')) == "server_mismatch"


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ({"query": 3}, "'query' must be string"),
        ({"query": None}, "'query' must be string"),
        ({"query": ["a"]}, "'query' must be string"),
        ({"query": "a", "k": "10"}, "'k' must be integer"),
        ({"query": "a", "k": True}, "'k' must be integer"),
        ({"query": "a", "k": 2.5}, "'k' must be integer"),
        ({"query": "a", "lang": "fr"}, "'lang' must be one of"),
        ({"k": 3}, "missing required argument 'query'"),
        ({}, "missing required argument 'query'"),
        ({"query": "a", "qeury": "b"}, "unknown argument 'qeury'"),
        (["a"], "arguments must be a JSON object"),
        (5, "arguments must be a JSON object"),
        ('"a"', "arguments must be a JSON object"),  # double-encoded, not an object
    ],
)
def test_bad_arguments(arguments, fragment):
    item = only(parse_tool_calls(hermes("search", arguments), TOOLS))
    assert isinstance(item, ToolCallError) and item.kind == "bad_arguments", item
    assert fragment in item.message
    assert "Expected search(query: string" in item.message


def test_matpo_bad_cases_score_zero():
    gold = mcp("tool-google-search", "google_search", '{"q": "x", "gl": "us", "hl": "en"}')
    assert parse_tool_calls(gold, [GOOGLE]).format_score() == 1.0
    for bad in (
        mcp("tool-chrome-search", "chrome_search", '{"q": "x", "gl": "us", "hl": "en"}'),
        mcp("tool-google-search", "google_search", '{"q": "x", "gl": "us", "locations": "NY"}'),
        mcp(
            "tool-google-search", "google_search", '{"q": "x", "gl": "us", "hl": "en", "num": "10"}'
        ),
    ):
        assert parse_tool_calls(bad, [GOOGLE]).format_score() == 0.0
    assert parse_tool_calls("no tool use", [GOOGLE]).format_score() == 1.0
    half = gold + mcp("tool-google-search", "google_search", "{}")
    assert parse_tool_calls(half, [GOOGLE]).format_score() == 0.5


def test_integral_floats_are_integers_and_bools_are_not():
    item = only(parse_tool_calls(hermes("search", {"query": "a", "k": 3.0}), TOOLS))
    assert (
        isinstance(item, ToolCall) and item.arguments["k"] == 3 and type(item.arguments["k"]) is int
    )
    lit = Tool.from_schema(
        {"name": "t", "parameters": {"type": "object", "properties": {"x": {"enum": [1, 2]}}}}
    )
    assert validate_arguments({"x": True}, lit)[1] is not None  # True is not 1 in JSON
    assert validate_arguments({"x": 1}, lit)[1] is None


def test_nested_and_constrained_schemas():
    t = Tool.from_schema(
        {
            "name": "t",
            "parameters": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                    "opts": {
                        "type": "object",
                        "properties": {"depth": {"type": "integer", "minimum": 1}},
                        "required": ["depth"],
                        "additionalProperties": False,
                    },
                    "name": {"type": "string", "minLength": 1, "maxLength": 5},
                },
                "required": [],
            },
        }
    )
    assert validate_arguments({"items": [1, 2], "opts": {"depth": 2}, "name": "ab"}, t)[1] is None
    for bad, fragment in [
        ({"items": [1, "2"]}, "'items[1]'"),
        ({"items": [1, 2, 3, 4]}, "at most 3 items"),
        ({"opts": {}}, "'opts' is missing 'depth'"),
        ({"opts": {"depth": 0}}, ">= 1"),
        ({"opts": {"depth": 1, "x": 1}}, "unknown argument 'opts.x'"),
        ({"name": ""}, "at least 1"),
        ({"name": "abcdef"}, "at most 5"),
    ]:
        problem = validate_arguments(bad, t)[1]
        assert problem is not None and fragment in problem, (bad, problem)


def test_duplicates():
    parsed = parse_tool_calls(hermes("search", {"query": "a"}) * 3, TOOLS)
    assert [type(i).__name__ for i in parsed.items] == [
        "ToolCall",
        "ToolCallError",
        "ToolCallError",
    ]
    assert {i.kind for i in parsed.errors} == {"duplicate"}
    assert parsed.format_score() == 1.0  # a duplicate is still well formed
    # Defaults are not filled in before comparing: writing one out makes a different call.
    explicit = hermes("search", {"query": "a"}) + hermes("search", {"query": "a", "k": 5})
    assert len(parse_tool_calls(explicit, TOOLS).calls) == 2


def test_duplicates_across_formats_and_key_order():
    text = (
        hermes("search", {"query": "a", "k": 2})
        + mcp("s", "search", '{"k": 2, "query": "a"}')
        + hermes("search", {"k": 2.0, "query": "a"})
        + hermes("search", {"query": "b", "k": 2})
    )
    parsed = parse_tool_calls(text, TOOLS)
    kinds = [i.kind if isinstance(i, ToolCallError) else "call" for i in parsed.items]
    assert kinds == ["call", "duplicate", "duplicate", "call"]


def test_duplicate_openai_calls():
    call = {"id": "1", "function": {"name": "search", "arguments": '{"query": "a"}'}}
    parsed = parse_tool_calls({"tool_calls": [call, {**call, "id": "2"}]}, TOOLS)
    assert parsed.items[1].kind == "duplicate" and parsed.items[1].id == "2"


def test_too_many_calls():
    text = "".join(hermes("search", {"query": str(i)}) for i in range(CallLimits.max_calls + 5))
    parsed = parse_tool_calls(text, TOOLS)
    assert len(parsed.calls) == CallLimits.max_calls
    assert parsed.items[-1].kind == "too_many" and "5 more ignored" in parsed.items[-1].message
    one = parse_tool_calls(text, TOOLS, limits=CallLimits(max_calls=1))
    assert len(one.calls) == 1 and one.items[-1].kind == "too_many"
    calls = [
        {"id": str(i), "function": {"name": "search", "arguments": {"query": str(i)}}}
        for i in range(20)
    ]
    api = parse_tool_calls({"tool_calls": calls}, TOOLS, limits=CallLimits(max_calls=3))
    assert len(api.calls) == 3 and "17 more ignored" in api.items[-1].message


def test_a_toolbox_parses_within_its_limits():
    text = hermes("search", {"query": "a"}) + hermes("search", {"query": "b"})
    box = Toolbox(TOOLS, limits=CallLimits(max_calls=1))
    assert [c.arguments["query"] for c in box.parse(text).calls] == ["a"]
    assert box.parse(text).items[-1].kind == "too_many"
    assert len(Toolbox(TOOLS).parse(text).calls) == 2


# ---------------------------------------------------------------------------------------------
# Adversarial input: bounded, linear, never raises
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_million_openers():
    text = "<tool_call>" * 1_000_000  # 11 MB
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.truncated
    assert len(parsed.items) == 1 and parsed.items[0].kind == "malformed"
    uncapped = parse_tool_calls(text, TOOLS, limits=CallLimits(max_chars=len(text)))
    assert len(uncapped.items) == 1 and "unclosed" in uncapped.items[0].message


@pytest.mark.timeout(60)
def test_a_million_openers_then_a_closer():
    text = "<tool_call>" * 300_000 + "</tool_call>" + hermes("search", {"query": "a"})
    parsed = parse_tool_calls(text, TOOLS, limits=CallLimits(max_chars=len(text)))
    assert parsed.items[0].kind == "malformed"  # the huge first block
    assert parsed.calls[0].arguments == {"query": "a"}


@pytest.mark.timeout(60)
def test_many_small_blocks_of_both_formats():
    block = hermes("search", {"query": "a"}) + mcp("s", "search", '{"query": "b"}')
    text = block * 50_000  # ~7 MB
    parsed = parse_tool_calls(text, TOOLS, limits=CallLimits(max_chars=len(text)))
    assert len(parsed.items) == CallLimits.max_calls + 1
    assert parsed.items[-1].kind == "too_many"


@pytest.mark.timeout(60)
def test_unclosed_tags_everywhere():
    text = ("<use_mcp_tool><server_name>" + "<tool_name>" * 3 + "x") * 100_000
    parsed = parse_tool_calls(text, TOOLS, limits=CallLimits(max_chars=len(text)))
    assert len(parsed.items) == 1 and parsed.items[0].kind == "malformed"
    text = "<tool_call>{" + '"a": "' * 500_000
    assert error_kind(text, limits=CallLimits(max_chars=len(text))) == "malformed"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("opener, closer", [("[", "]"), ('{"a":', "}")])
def test_deeply_nested_json(opener, closer):
    # Deeper than Python's recursion limit: json.loads would raise RecursionError (or worse).
    deep = opener * 200_000 + "1" + closer * 200_000
    for text in (
        f'<tool_call>{{"name": "search", "arguments": {deep}}}</tool_call>',
        f'<tool_call>{{"name": "search", "arguments": {{"query": {deep}}}}}</tool_call>',
        mcp("s", "search", deep),
    ):
        assert (
            error_kind(text, limits=CallLimits(max_chars=len(text), max_call_chars=len(text)))
            == "malformed"
        )
    # Within the default body cap, only the depth check stands in the way.
    shallow_enough = opener * 40 + "1" + closer * 40
    item = only(
        parse_tool_calls(hermes("search", {"query": "x"}).replace('"x"', shallow_enough), TOOLS)
    )
    assert item.kind == "malformed" and "nested deeper" in item.message


def test_depth_check_skips_strings():
    assert not json_depth_exceeds('{"a": "[[[[[[[[[[[[[[[[[[[["}', 3)
    assert not json_depth_exceeds('{"a": "\\"[[[[[[[["}', 3)
    assert json_depth_exceeds('{"a": [[[1]]]}', 3)
    assert not json_depth_exceeds('{"a": [[1]]}', 3)


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ('"ab" rest', 4),
        ('"a\\"b" rest', 6),  # an escaped quote does not close the string
        ('"a\\\\" rest', 5),  # an escaped backslash does not escape the quote
        ('"a\\\nb"', 6),  # an escape takes any next character, a newline too
        ('"never closed', 13),
        ('"ends in a backslash\\', 21),
    ],
)
def test_json_string_end(text, end):
    assert json_string_end(text, 0) == end
    assert json_string_end("xy" + text, 2) == end + 2


@pytest.mark.timeout(60)
def test_huge_numbers_and_bodies():
    digits = "9" * 100_000
    assert (
        error_kind(f'<tool_call>{{"name": "search", "arguments": {{"k": {digits}}}}}</tool_call>')
        == "malformed"
    )
    big = hermes("search", {"query": "x" * 100_000})
    assert "limit" in only(parse_tool_calls(big, TOOLS)).message
    huge_args = {
        "id": "1",
        "function": {"name": "search", "arguments": '{"query": "' + "x" * 10**6 + '"}'},
    }
    assert error_kind({"tool_calls": [huge_args]}) == "malformed"


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<use_mcp_tool>",
    "</use_mcp_tool>",
    "<server_name>",
    "</server_name>",
    "<tool_name>",
    "search",
    "browse",
    "</tool_name>",
    "<arguments>",
    "</arguments>",
    '{"name": "search", "arguments": {"query": "a"}}',
    '{"query": 1}',
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "\n",
    "text ",
    "\x00",
    "\ud800",
]


@pytest.mark.slow  # fuzz; 11 s in the fast loop at load 17 (#22)
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60), st.integers(1, 4))
def test_fuzz_never_raises(pieces, max_calls):
    text = "".join(pieces)
    parsed = parse_tool_calls(text, TOOLS, limits=CallLimits(max_calls=max_calls))
    assert len(parsed.items) <= max_calls + 1
    for item in parsed.items:
        if isinstance(item, ToolCallError):
            assert item.message.startswith("Error: ")
            json.dumps(item.to_message())
        else:
            assert item.name in ("search", "browse")


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
        max_leaves=10,
    )
)
@pytest.mark.slow  # fuzz; 62 s in the fast loop at load 17 (#22)
def test_fuzz_arguments_never_raise(arguments):
    parsed = parse_tool_calls(hermes("search", arguments), TOOLS)
    item = only(parsed)
    if isinstance(item, ToolCall):
        assert isinstance(item.arguments["query"], str)


# ---------------------------------------------------------------------------------------------
# Running tools
# ---------------------------------------------------------------------------------------------


def test_toolbox_runs_calls_and_reports_errors_in_order():
    box = Toolbox(TOOLS)
    text = (
        hermes("search", {"query": "a", "k": 2})
        + hermes("nope", {})
        + mcp("browsing", "browse", '{"url": "u"}')
    )
    results = box.run(text)
    assert [r.is_error for r in results] == [False, True, False]
    assert results[0].content == "a|2|en"
    assert results[2].content == "page 1 of u"
    messages = [r.to_message() for r in results]
    assert messages[1]["role"] == "tool" and messages[1]["content"].startswith(
        "Error: unknown tool"
    )
    assert [m["tool_call_id"] for m in messages] == ["call_0", "call_1", "call_2"]
    assert box.run("no calls here") == []
    assert [s["function"]["name"] for s in box.schemas()] == ["search", "browse"]


def test_tool_errors_agent_vs_infrastructure():
    @tool
    def picky(n: int) -> str:
        """Fails in various ways.

        Args:
            n: Which failure.
        """
        if n == 1:
            raise ToolUseError("page 9 does not exist")
        if n == 2:
            raise InfrastructureError("search backend down")
        if n == 3:
            raise KeyError("bug")
        return {"n": n}  # type: ignore[return-value]

    box = Toolbox([picky])
    result = box.run(hermes("picky", {"n": 1}))[0]
    assert result.is_error and result.content == "Error: page 9 does not exist"
    with pytest.raises(InfrastructureError):
        box.run(hermes("picky", {"n": 2}))
    with pytest.raises(KeyError):
        box.run(hermes("picky", {"n": 3}))
    assert box.run(hermes("picky", {"n": 4}))[0].content == '{"n": 4}'


def test_output_cap_and_tools_without_functions():
    @tool
    def long() -> str:
        """Long output."""
        return "x" * 1000

    box = Toolbox([long], max_output_chars=100)
    out = box.run(hermes("long", {}))[0].content
    assert out.startswith("x" * 100) and "900 more characters cut" in out
    delegate = Tool.from_schema(
        {
            "name": "delegate",
            "parameters": {"type": "object", "properties": {"subtask": {"type": "string"}}},
        }
    )
    box = Toolbox([delegate])
    call = box.parse(hermes("delegate", {"subtask": "find X"})).calls[0]
    assert call.arguments == {"subtask": "find X"}  # the env runs it itself
    with pytest.raises(ToolDefinitionError, match="no function"):
        box.execute(call)


def test_tool_listings():
    listing = mcp_tool_listing([browse, search])
    assert listing.startswith("## Server name: browsing\n### Tool name: browse\n")
    assert "## Server name: tools\n### Tool name: search" in listing
    assert "Input JSON schema: {'type': 'object'" in listing  # a Python dict, as MATPO prints it
    block = hermes_tool_listing([search])
    assert block.startswith("<tools>\n") and block.endswith("\n</tools>")
    assert json.loads(block.splitlines()[1]) == search.schema()


# ---------------------------------------------------------------------------------------------
# Untrusted text and values: surrogates, non-finite numbers, duplicate keys, hostile objects
# ---------------------------------------------------------------------------------------------


def _calc(x: float, n: int = 1, tags: list[str] | None = None, meta: Any = None) -> str:
    return f"x={x!r} n={n!r} tags={tags!r} meta={meta!r}"


# A float, an integer, a list of strings and an object holding anything (no sub-schema).
calc = Tool(
    name="calc",
    description="Calculate.",
    parameters={
        "type": "object",
        "properties": {
            "x": {"type": "number"},
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object"},
        },
        "required": ["x"],
        "additionalProperties": False,
    },
    fn=_calc,
)

CALC = [calc, search, browse]


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_utf8(parsed) -> None:
    """Everything the parser handed out encodes as UTF-8 (tokenizers and JSONL writers need it)."""
    texts = [parsed.text]
    for item in parsed.items:
        texts += [item.id, item.name or ""]
        if isinstance(item, ToolCall):
            texts += _strings(item.arguments)
        else:
            texts.append(item.message)
    for text in texts:
        text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate


def test_scrub_surrogates():
    from llm_marl.tools.calls import scrub_surrogates

    plain = "ascii only"
    assert scrub_surrogates(plain) is plain
    unicode = "Zürich 🙂"
    assert scrub_surrogates(unicode) is unicode
    assert scrub_surrogates("a\ud800b") == "a\ufffdb"
    assert scrub_surrogates("\udfff") == "\ufffd"
    # Surrogates are replaced one by one, a hand-made pair included: nothing is guessed.
    assert scrub_surrogates("\ud83d\ude00 x") == "\ufffd\ufffd x"
    assert scrub_surrogates("é\udc80" * 3) == "é\ufffd" * 3


# Pure-ASCII completions whose JSON escapes decode to lone surrogates.
SURROGATE_COMPLETIONS = {
    "value": r'<tool_call>{"name": "search", "arguments": {"query": "a \ud800 b"}}</tool_call>',
    "low surrogate": r'<tool_call>{"name": "search", "arguments": {"query": "\udfff"}}</tool_call>',
    "list item": r'<tool_call>{"name": "calc", "arguments": {"x": 1, "tags": ["\udc00", "ok"]}}'
    "</tool_call>",
    "nested key": r'<tool_call>{"name": "calc", "arguments": {"x": 1, "meta": {"k\ud800": 1}}}'
    "</tool_call>",
    "mcp": "<use_mcp_tool><server_name>browsing</server_name><tool_name>browse</tool_name>"
    r'<arguments>{"url": "http://x/\ud800"}</arguments></use_mcp_tool>',
    "openai string": {
        "tool_calls": [
            {"id": "c1", "function": {"name": "search", "arguments": r'{"query": "q \ud800"}'}}
        ]
    },
    "openai decoded dict": {
        "tool_calls": [
            {"id": "c1", "function": {"name": "search", "arguments": {"query": "\ud800"}}}
        ]
    },
}


@pytest.mark.parametrize("completion", SURROGATE_COMPLETIONS.values(), ids=SURROGATE_COMPLETIONS)
def test_lone_surrogates_become_replacement_characters(completion):
    parsed = parse_tool_calls(completion, CALC)
    call = only(parsed)
    assert isinstance(call, ToolCall), call
    _assert_utf8(parsed)
    assert "\ufffd" in json.dumps(call.arguments, ensure_ascii=False)


@pytest.mark.parametrize(
    "completion",
    [
        # Echoed in error messages: a bad type, an unknown tool, an unknown argument, a server.
        r'<tool_call>{"name": "search", "arguments": {"query": "x", "k": "\udfff"}}</tool_call>',
        r'<tool_call>{"name": "\ud800", "arguments": {}}</tool_call>',
        r'<tool_call>{"name": "search", "arguments": {"query": "x", "\ud800": 1}}</tool_call>',
        r'<tool_call>{"name": "search", "arguments": {"query": "x", "lang": "\ud800"}}</tool_call>',
        "<use_mcp_tool><server_name>\ud800</server_name><tool_name>browse</tool_name>"
        '<arguments>{"url": "u"}</arguments></use_mcp_tool>',
        {"tool_calls": [{"id": "\ud800", "function": {"name": "nope\udc00", "arguments": "{}"}}]},
        # Raw surrogates in the text itself (a function policy's output, not JSON escapes).
        'prose \ud800 <tool_call>{"name": "search", "arguments": {"query": 1}}</tool_call>',
        {"content": "think \udc00", "tool_calls": [{"function": {"name": "search"}}]},
    ],
)
def test_error_messages_and_text_never_carry_surrogates(completion):
    parsed = parse_tool_calls(completion, CALC)
    assert parsed.items
    _assert_utf8(parsed)


def test_escaped_surrogate_pairs_still_decode_to_their_character():
    completion = (
        r'<tool_call>{"name": "search", "arguments": {"query": "\ud83d\ude00"}}</tool_call>'
    )
    assert only(parse_tool_calls(completion, CALC)).arguments["query"] == "\U0001f600"


def test_keys_equal_once_scrubbed_are_duplicates():
    completion = (
        r'<tool_call>{"name": "calc", "arguments": {"x": 1, "meta": {"\ud800": 1, "\udc00": 2}}}'
        "</tool_call>"
    )
    item = only(parse_tool_calls(completion, CALC))
    assert isinstance(item, ToolCallError) and item.kind == "bad_arguments"
    assert "duplicate key" in item.message
    item.message.encode("utf-8")


def test_tool_outputs_and_tool_errors_are_scrubbed():
    @tool
    def echo(text: str) -> str:
        """Echo text back, broken.

        Args:
            text: Anything.
        """
        if text == "fail":
            raise ToolUseError("no page \udc80 here")
        return "got \ud800 " + text

    box = Toolbox([echo])
    ok, failed = box.run(hermes("echo", {"text": "x"}) + hermes("echo", {"text": "fail"}))
    assert ok.content == "got \ufffd x" and not ok.is_error
    assert failed.is_error and failed.content == "Error: no page \ufffd here"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ('{"x": 1e999999}', "out of range"),
        ('{"x": -1e999999}', "out of range"),
        ('{"x": 1, "n": 1e999999}', "out of range"),
        ('{"x": 1, "meta": {"deep": [1, 2, 1e400]}}', "out of range"),
        ('{"x": 1.5e308e}', "invalid JSON"),
        ('{"x": NaN}', "NaN is not valid JSON"),
        ('{"x": -Infinity}', "Infinity is not valid JSON"),
    ],
)
def test_numbers_beyond_the_float_range_are_refused(arguments, fragment):
    for completion in (
        f'<tool_call>{{"name": "calc", "arguments": {arguments}}}</tool_call>',
        mcp("s", "calc", arguments),
        {"tool_calls": [{"function": {"name": "calc", "arguments": arguments}}]},
    ):
        item = only(parse_tool_calls(completion, CALC))
        assert isinstance(item, ToolCallError) and item.kind == "malformed", item
        assert fragment in item.message


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        ("3.0", 3),
        ("-7e0", -7),
        ("1e15", 10**15),
        ("9007199254740992.0", 2**53),  # the largest float every integer below is exact for
        ("-9007199254740992.0", -(2**53)),
        ("12345678901234567890123", 12345678901234567890123),  # an int literal stays exact
    ],
)
def test_integral_floats_within_2_53_are_integers(n, expected):
    call = only(
        parse_tool_calls(
            f'<tool_call>{{"name": "calc", "arguments": {{"x": 1, "n": {n}}}}}</tool_call>', CALC
        )
    )
    assert isinstance(call, ToolCall), call
    assert call.arguments["n"] == expected and type(call.arguments["n"]) is int


@pytest.mark.parametrize("n", ["1e308", "-1e308", "9007199254740994.0", "1e16", "2.5", "1e-999999"])
def test_floats_that_are_not_exact_integers_are_refused_for_integers(n):
    completion = f'<tool_call>{{"name": "calc", "arguments": {{"x": 1, "n": {n}}}}}</tool_call>'
    item = only(parse_tool_calls(completion, CALC))
    if n == "1e-999999":  # underflows to 0.0: finite and integral, so it is the integer 0
        assert isinstance(item, ToolCall) and item.arguments["n"] == 0
        return
    assert isinstance(item, ToolCallError) and item.kind == "bad_arguments", item
    assert "'n' must be integer" in item.message


def test_finite_floats_for_numbers_still_pass():
    for x, expected in (("1e308", 1e308), ("-2.5e-300", -2.5e-300), ("1e-999999", 0.0)):
        completion = f'<tool_call>{{"name": "calc", "arguments": {{"x": {x}}}}}</tool_call>'
        assert only(parse_tool_calls(completion, CALC)).arguments["x"] == expected


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_floats_from_decoded_arguments_are_refused(bad):
    # An OpenAI client may hand arguments already decoded (by a lenient JSON parser).
    for arguments in ({"x": bad}, {"x": 1, "meta": {"a": [bad]}}):
        message = {"tool_calls": [{"function": {"name": "calc", "arguments": arguments}}]}
        item = only(parse_tool_calls(message, CALC))
        assert isinstance(item, ToolCallError) and item.kind == "bad_arguments", item
        assert "finite" in item.message
    checked, problem = validate_arguments({"x": bad}, calc)
    assert checked is None and "finite" in (problem or "")


def _deep(levels: int) -> dict[str, Any]:
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(levels):
        cur["a"] = {}
        cur = cur["a"]
    return deep


@pytest.mark.slow  # 36 s in the fast loop at load 17 (#22)
@pytest.mark.parametrize("levels", [40, 5_000, 200_000])
def test_deeply_nested_decoded_arguments_are_refused_not_raised(levels):
    for arguments in (
        {"x": 1, "tags": _deep(levels)},  # wrong type: described in the message
        {"x": 1, "meta": _deep(levels)},  # right type: refused for its depth
        {"x": _deep(levels)},
    ):
        message = {"tool_calls": [{"function": {"name": "calc", "arguments": arguments}}]}
        item = only(parse_tool_calls(message, CALC))
        assert isinstance(item, ToolCallError) and item.kind == "bad_arguments", item
        assert "nested deeper than 32 levels" in item.message


def test_shallow_decoded_arguments_still_pass():
    arguments = {"x": 1, "meta": _deep(20), "tags": ("a", "b")}
    message = {"tool_calls": [{"function": {"name": "calc", "arguments": arguments}}]}
    call = only(parse_tool_calls(message, CALC))
    assert isinstance(call, ToolCall)
    assert call.arguments["tags"] == ["a", "b"]  # plain JSON data: a tuple becomes a list


def test_descriptions_of_odd_values_are_bounded():
    class LoudRepr:
        def __repr__(self) -> str:
            raise RuntimeError("repr raised")

    wide = {f"k{i}": list(range(1000)) for i in range(1000)}
    for value, fragment in (
        (wide, "must be string"),
        (10**5000, "must be string"),  # too long for str(): described without printing it
        (LoudRepr(), "not JSON data"),
        ({1: "non-string key"}, "keys must be strings"),
    ):
        message = {"tool_calls": [{"function": {"name": "search", "arguments": {"query": value}}}]}
        item = only(parse_tool_calls(message, CALC))
        assert isinstance(item, ToolCallError), item
        assert fragment in item.message
        assert len(item.message) < 400


def test_hostile_message_objects_do_not_raise():
    class Boom:
        @property
        def function(self):
            raise RuntimeError("property raised")

    class NoBool(list):
        def __bool__(self) -> bool:
            raise RuntimeError("bool raised")

    class NoStr:
        def __str__(self) -> str:
            raise RuntimeError("str raised")

    class NoEq:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq raised")

        __hash__ = None  # type: ignore[assignment]

    assert error_kind({"tool_calls": [Boom()]}) == "malformed"
    assert error_kind({"tool_calls": NoBool([{"function": {"name": "x"}}])}) == "unknown_tool"
    assert parse_tool_calls({"content": NoStr()}, TOOLS).items == ()
    assert error_kind({"tool_calls": [{"function": {"name": "search", "arguments": NoEq()}}]}) == (
        "bad_arguments"
    )
    deep_list: list[Any] = []
    for _ in range(100_000):
        deep_list = [deep_list]
    assert parse_tool_calls({"content": deep_list}, TOOLS).items == ()


DUPLICATE_KEYS = {
    "name": '{"name": "nope", "name": "search", "arguments": {"query": "x"}}',
    "name same value": '{"name": "search", "name": "search", "arguments": {"query": "x"}}',
    "arguments": '{"name": "search", "arguments": {"query": "x"}, "arguments": {"query": "y"}}',
    "argument": '{"name": "search", "arguments": {"query": "x", "query": "y"}}',
    "nested": '{"name": "calc", "arguments": {"x": 1, "meta": {"a": 1, "b": 2, "a": 3}}}',
    "in a list": '{"name": "calc", "arguments": {"x": 1, "meta": {"l": [{"a": 1, "a": 1}]}}}',
}


@pytest.mark.parametrize("body", DUPLICATE_KEYS.values(), ids=DUPLICATE_KEYS)
def test_duplicate_keys_are_refused(body):
    item = only(parse_tool_calls(f"<tool_call>{body}</tool_call>", CALC))
    assert isinstance(item, ToolCallError) and item.kind == "malformed", item
    assert "duplicate key" in item.message


@pytest.mark.parametrize(
    "completion",
    [
        mcp("browsing", "browse", '{"url": "a", "url": "b"}'),
        {"tool_calls": [{"function": {"name": "browse", "arguments": '{"url": "a", "url": "b"}'}}]},
        # Arguments given as a JSON string inside the object: decoded with the same rule.
        '<tool_call>{"name": "browse", "arguments": "{\\"url\\": \\"a\\", \\"url\\": \\"b\\"}"}'
        "</tool_call>",
    ],
)
def test_duplicate_argument_keys_are_refused_in_every_format(completion):
    item = only(parse_tool_calls(completion, CALC))
    assert isinstance(item, ToolCallError) and item.kind == "malformed", item
    assert "duplicate key 'url'" in item.message


def test_equal_keys_in_different_objects_are_fine():
    body = '{"name": "calc", "arguments": {"x": 1, "meta": {"a": {"x": 1}, "b": {"x": 2}}}}'
    call = only(parse_tool_calls(f"<tool_call>{body}</tool_call>", CALC))
    assert isinstance(call, ToolCall)
    assert call.arguments["meta"] == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.timeout(60)
def test_many_keys_and_a_late_duplicate():
    # The duplicate check is linear: many distinct keys are cheap, a late duplicate is found.
    keys = ", ".join(f'"k{i}": {i}' for i in range(4_000))
    body = f'{{"name": "calc", "arguments": {{"x": 1, "meta": {{{keys}}}}}}}'
    assert isinstance(only(parse_tool_calls(f"<tool_call>{body}</tool_call>", CALC)), ToolCall)
    late = body.replace('"k3999": 3999', '"k0": 3999')
    item = only(parse_tool_calls(f"<tool_call>{late}</tool_call>", CALC))
    assert isinstance(item, ToolCallError) and "duplicate key 'k0'" in item.message


@pytest.mark.parametrize("field", ["max_chars", "max_calls", "max_call_chars", "max_depth"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, "8", True, None])
def test_call_limits_refuse_anything_but_a_positive_int_where_they_are_built(field, bad):
    with pytest.raises(ConfigError, match=f"CallLimits.{field} must be an int >= 1"):
        CallLimits(**{field: bad})
