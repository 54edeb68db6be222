"""The shape of ``llm_marl.tools.calls``: one job per module, no import cycle, the old names kept,
and tool schemas equal to what ``transformers.utils.get_json_schema`` makes of the same function."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import get_json_schema

import llm_marl.tools.calls as calls
from llm_marl.tools.browse import Browser, browse_tool
from llm_marl.tools.calls import tool
from llm_marl.tools.search.base import search_tool

ORDER = ("limits", "validation", "schema", "parsing", "toolbox")
"""Each module may import only the ones before it."""

PUBLIC = [
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
"""Every name ``llm_marl.tools.calls`` exported when it was one module."""


def _siblings(module: str) -> set[str]:
    path = Path(calls.__file__).parent / f"{module}.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            calls.__name__ + "."
        ):
            found.add(node.module.rpartition(".")[2])  # type: ignore[union-attr]
    return found


def test_each_module_imports_only_the_ones_below_it() -> None:
    assert sorted(p.stem for p in Path(calls.__file__).parent.glob("[!_]*.py")) == sorted(ORDER)
    for i, module in enumerate(ORDER):
        assert _siblings(module) <= set(ORDER[:i]), module


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_is_still_importable_from_the_package(name: str) -> None:
    assert name in calls.__all__
    value = getattr(importlib.import_module("llm_marl.tools.calls"), name)
    assert value is not None


def _our_tools() -> list[Any]:
    def lookup(key: str, limit: int = 3, exact: bool = False) -> str:
        """Look a key up.

        Args:
            key: The key.
            limit: How many entries.
            exact: Only exact matches.
        """
        return key

    return [search_tool(object()), browse_tool(Browser()), tool(lookup)]  # type: ignore[arg-type]


@pytest.mark.parametrize("made", _our_tools(), ids=lambda t: t.name)
def test_our_schemas_are_what_transformers_makes_of_the_function(made: Any) -> None:
    """Ours add what transformers leaves out (defaults, bounds, no extra arguments); the rest,
    description, types, argument descriptions and required ones, is the same."""
    theirs = get_json_schema(made.fn)["function"]
    ours = made.schema()["function"]
    assert ours["description"] == theirs["description"]
    assert ours["parameters"]["required"] == theirs["parameters"]["required"]
    assert ours["parameters"]["additionalProperties"] is False
    extras = {"default", "minimum", "maximum", "minLength"}
    for name, prop in ours["parameters"]["properties"].items():
        same = {k: v for k, v in prop.items() if k not in extras}
        assert same == theirs["parameters"]["properties"][name], name
