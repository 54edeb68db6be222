"""Every tool result an agent reads is bounded (issue 28, item 2).

``max_tool_output_tokens`` counted whitespace-separated words, so a title, snippet or URL without
spaces was one "token" and one result put megabytes into the next prompt. Now every result is
bounded in characters (and in the agent's tokenizer tokens when the env is given a tokenizer),
each field of a search result is bounded on its own (one huge title cannot push out the other
results), and a browser's page cache is bounded in bytes.
"""

from __future__ import annotations

import re

import pytest

import llm_marl
from llm_marl.envs.search.env import cap_tokens
from llm_marl.tools.browse import Browser, browse_tool
from llm_marl.tools.calls import Toolbox
from llm_marl.tools.search import Document, SearchResult, format_results, search_tool
from tests.tools.fakeweb import FakeWeb, Reply

from .scripted import hermes, mcp

BIG = 2_000_000
WALL = "x" * BIG  # no whitespace: one "word"


class HostileEngine:
    """A live engine whose results carry megabytes in one field."""

    name = "hostile"

    def __init__(self, field: str) -> None:
        self.field = field

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        fields = {"title": "t", "url": "https://example.com/a", "snippet": "s"}
        if self.field == "spaced":  # many short words: the word count binds, not the chars
            fields["snippet"] = "word " * 400_000
        else:
            fields[self.field] += WALL
        return [SearchResult(**fields) for _ in range(k)]


def _worker_tool_messages(env) -> list[str]:
    return [m["content"] for m in env.unwrapped.conversation("worker") if m["role"] == "tool"]


def _delegate_and_search(env, query="anything", k=5):
    env.reset(seed=0)
    env.step({"planner": mcp("delegate", subtask="find it")})
    env.step({"worker": hermes("search", query=query, k=k)})


@pytest.mark.parametrize("field", ["title", "url", "snippet", "spaced"])
def test_a_live_engine_result_is_bounded_in_characters(field):
    env = llm_marl.make("websearch-v0", engine=HostileEngine(field))
    _delegate_and_search(env)
    (message,) = _worker_tool_messages(env)
    assert len(message) <= 8 * 512 + 200, len(message)
    assert "Results for" in message and "cut" in message


def test_one_huge_field_does_not_push_out_the_other_results():
    text = format_results("q", [SearchResult("t" + WALL, "u", "s"), SearchResult("t2", "u2", "s2")])
    assert len(text) < 5_000 and "2. t2" in text and "URL: u2" in text
    assert len(format_results("q" * BIG, [])) < 1_000  # the echoed query too


def test_a_corpus_document_with_a_huge_title_and_text_is_bounded():
    docs = [
        Document("a", "Title" + WALL[:500_000], "body " + WALL[:500_000], "https://example.com/a"),
        Document("b", "Other", "plain words " * 100_000, "https://example.com/b"),
    ]
    env = llm_marl.make("websearch-v0", corpus=docs)
    try:
        _delegate_and_search(env, query="body plain", k=2)
        urls = re.findall(r"URL: (\S+)", _worker_tool_messages(env)[0])
        assert len(urls) == 2
        env.step({"worker": "".join(hermes("browse", url=u[:2000]) for u in urls)})
        messages = _worker_tool_messages(env)
        assert len(messages) == 3 and not any(m.startswith("Error") for m in messages), messages
        for message in messages:
            assert len(message) <= 8 * 512 + 200, len(message)
    finally:
        env.close()


def test_the_workers_report_is_bounded_in_characters():
    env = llm_marl.make("websearch-v0", engine=HostileEngine("title"))
    env.reset(seed=0)
    env.step({"planner": mcp("delegate", subtask="find it")})
    env.step({"worker": WALL})
    report = env.unwrapped.conversation("planner")[-1]
    assert report["role"] == "tool" and len(report["content"]) <= 8 * 512 + 200


def test_tool_output_is_bounded_in_the_agents_tokenizer_tokens(tiny_lm_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_path)
    for engine in (HostileEngine("snippet"), HostileEngine("spaced")):
        env = llm_marl.make(
            "websearch-v0",
            engine=engine,
            max_tool_output_tokens=100,
            tokenizer=tok,
        )
        _delegate_and_search(env)
        (message,) = _worker_tool_messages(env)
        # The note is counted in the bound (a merge at the seam may add a token or two).
        assert 90 <= len(tok(message, add_special_tokens=False)["input_ids"]) <= 100 + 2


def test_cap_tokens_bounds_characters_and_words():
    assert cap_tokens("a b c", 10) == "a b c"
    assert len(cap_tokens(WALL, 512)) <= 8 * 512 + 100
    assert len(cap_tokens(WALL, 512, max_chars=1000)) <= 1100
    assert cap_tokens("word " * 1000, 3).startswith("word word word\n")


@pytest.mark.parametrize("where", ["title", "text"])
def test_browse_output_is_bounded_through_a_toolbox(where):
    title, body = ("T" + WALL[:300_000], "short") if where == "title" else ("T", WALL[:300_000])
    with FakeWeb() as web:
        web.route("/p", Reply(body=f"<title>{title}</title><p>{body}</p>"))
        browser = Browser(allowed_networks=("127.0.0.1/32",), timeout=5, page_chars=3000)
        box = Toolbox([browse_tool(browser)])
        (result,) = box.run(hermes("browse", url=web.url("/p")))
        assert not result.is_error and len(result.content) <= 3000 + 1000, len(result.content)


def test_the_browser_cache_is_bounded_in_bytes():
    with FakeWeb() as web:
        for i in range(6):
            web.route(f"/{i}", Reply(body=f"<p>{'y' * 200_000}{i}</p>"))
        browser = Browser(
            allowed_networks=("127.0.0.1/32",), timeout=5, max_text_chars=10**6, cache_bytes=500_000
        )
        for i in range(6):
            assert browser.browse(web.url(f"/{i}")).ok
            assert browser.cache_bytes() <= 500_000
        assert browser.browse(web.url("/5"), 2).ok and web.count("/5") == 1  # newest kept
        assert browser.browse(web.url("/0")).ok and web.count("/0") == 2  # oldest dropped
        # A document larger than the whole cache is served, not kept.
        web.route("/huge", Reply(body=f"<p>{'z' * 900_000}</p>"))
        assert browser.browse(web.url("/huge")).ok and browser.cache_bytes() <= 500_000


def test_search_tool_output_through_a_toolbox_is_bounded():
    box = Toolbox([search_tool(HostileEngine("url"))])
    (result,) = box.run(hermes("search", query="q", k=10))
    assert len(result.content) < 40_000, len(result.content)
