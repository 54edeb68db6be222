"""A Toolbox bounds every result by default, error messages included (issue 28, item 2, round 3).

Before, ``Toolbox.max_output_chars`` defaulted to None (a user's tool returning 5 MB posted
5 MB), and a :class:`ToolUseError` message was never cut (a tool echoing a huge URL or page in
its error). Now both are cut to ``DEFAULT_MAX_OUTPUT_CHARS`` unless the toolbox says otherwise.
"""

from __future__ import annotations

import pytest

from llm_marl.tools.calls import Toolbox, ToolUseError, tool
from llm_marl.tools.calls.limits import DEFAULT_MAX_OUTPUT_CHARS


def _call(name: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {{"q": "x"}}}}</tool_call>'


def big_text(q: str) -> str:
    """Return a lot of text.

    Args:
        q: anything.
    """
    return "y" * 5_000_000


def many_small(q: str) -> list[dict[str, str]]:
    """Return many small results that add up.

    Args:
        q: anything.
    """
    return [{"title": f"t{i}", "url": f"http://e/{i}", "snippet": "s" * 40} for i in range(50_000)]


def echoes_in_error(q: str) -> str:
    """Fail, echoing a huge page in the message.

    Args:
        q: anything.
    """
    raise ToolUseError("cannot read http://e/" + "a" * 3_000_000)


def surrogate_error(q: str) -> str:
    """Fail with a lone surrogate in the message.

    Args:
        q: anything.
    """
    raise ToolUseError("bad \ud800 " * 100_000)


@pytest.mark.parametrize("fn", [big_text, many_small, echoes_in_error, surrogate_error])
def test_every_result_is_bounded_by_default(fn):
    box = Toolbox([tool(fn)])
    [result] = box.run(_call(fn.__name__))
    assert len(result.content) <= DEFAULT_MAX_OUTPUT_CHARS + 100
    assert "more characters cut" in result.content
    result.content.encode("utf-8")  # encodable


def test_a_toolbox_may_raise_or_lift_the_bound():
    [cut] = Toolbox([tool(echoes_in_error)], max_output_chars=200).run(_call("echoes_in_error"))
    assert cut.is_error and len(cut.content) <= 300 and cut.content.startswith("Error: cannot")
    [whole] = Toolbox([tool(big_text)], max_output_chars=None).run(_call("big_text"))
    assert len(whole.content) == 5_000_000
