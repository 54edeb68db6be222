"""Search backends and their cache given strings with lone surrogates (defence in depth).

The tool-call parser already replaces lone surrogates, but a query can reach an engine by other
paths (function policies, user code), and a hostile server can escape surrogates in its JSON.
Nothing here may raise UnicodeEncodeError, and nothing handed back may hold a lone surrogate.
"""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qs

import pytest

from llm_marl.tools.calls import Toolbox
from llm_marl.tools.search import (
    BraveSearch,
    Document,
    LocalSearch,
    ResponseCache,
    SearchResult,
    SearXNGSearch,
    SerperSearch,
    search_tool,
)
from tests.tools.fakeweb import FakeWeb, Reply

DOCS = [
    Document("a", "Tamsen Prize", "The Tamsen Prize is a poetry award."),
    Document("b", "Janet Waldo", "Janet Waldo was a radio and voice actress."),
]

QUERIES = ["Tamsen \ud800 Prize", "\udfff Tamsen", "Tamsen\udc80", "\ud83d\ude00 Tamsen"]


def _encodes(result: SearchResult) -> None:
    for text in (result.title, result.url, result.snippet):
        text.encode("utf-8")


@pytest.mark.parametrize("query", QUERIES)
def test_local_search_takes_lone_surrogates(query):
    engine = LocalSearch(DOCS, cache_dir=False)
    results = engine.search(query, 2)
    assert results and results[0].doc_id == "a"  # the other words still count
    for r in results:
        _encodes(r)


@pytest.mark.parametrize("query", ["\ud800", "\ud800 \udc00", "\udfff" * 50])
def test_local_search_query_of_surrogates_only_finds_nothing(query):
    assert LocalSearch(DOCS, cache_dir=False).search(query) == []


def test_local_corpus_with_lone_surrogates_builds_and_answers(tmp_path):
    docs = [
        *DOCS,
        Document("c", "Odd \ud800 title", "Zebra text \udc00 here.", url="http://x/\udfff"),
    ]
    for cache_dir in (False, tmp_path):
        engine = LocalSearch(docs, cache_dir=cache_dir)
        [hit] = engine.search("zebra", 1)
        assert hit.doc_id == "c"
        _encodes(hit)
        assert hit.title == "Odd \ufffd title" and "\ufffd" in hit.snippet


def test_search_tool_called_directly_with_a_surrogate():
    # A function policy may call the tool's function without going through the parser.
    box = Toolbox([search_tool(LocalSearch(DOCS, cache_dir=False))])
    call = box.parse(
        r'<tool_call>{"name": "search", "arguments": {"query": "Tamsen \ud800"}}</tool_call>'
    ).calls[0]
    assert call.arguments["query"] == "Tamsen \ufffd"
    out = box.execute(call)
    assert not out.is_error and "Tamsen Prize" in out.content
    out.content.encode("utf-8")
    direct = box.tools["search"].fn("Tamsen \ud800")  # type: ignore[misc]
    assert "Tamsen Prize" in direct


ENGINES = {
    "serper": (SerperSearch, "/search", {"organic": [{"title": "T", "link": "http://a/"}]}),
    "brave": (BraveSearch, "/res/v1/web/search", {"web": {"results": [{"url": "http://a/"}]}}),
    "searxng": (SearXNGSearch, "/search", {"results": [{"url": "http://a/"}]}),
}


@pytest.fixture
def web():
    with FakeWeb() as server:
        yield server


def _engine(name, web, **kw):
    cls, path, payload = ENGINES[name]
    if name != "searxng":
        kw["api_key"] = "k"
    return cls(base_url=web.base_url, retries=0, backoff=0, timeout=5, **kw), path, payload


def _sent_query(name, request) -> str:
    if name == "serper":
        return json.loads(request.body)["q"]
    return parse_qs(request.query)["q"][0]


@pytest.mark.parametrize("name", sorted(ENGINES))
@pytest.mark.parametrize("cached", [False, True])
def test_live_engines_send_replacement_characters(web, name, cached, tmp_path):
    engine, path, payload = _engine(name, web, cache=tmp_path if cached else None)
    web.route(path, Reply(json=payload))
    results = engine.search("bad \ud800 query", 3)
    assert len(results) == 1
    assert _sent_query(name, web.requests[0]) == "bad \ufffd query"
    if cached:  # answered from the cache the second time
        assert engine.search("bad \ud800 query", 3) == results
        assert web.count(path) == 1


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_live_results_with_escaped_surrogates_are_scrubbed_and_cached(web, name, tmp_path):
    cls, path, _ = ENGINES[name]
    item = {"title": "T \ud800", "link": "http://a/\udc00", "url": "http://a/\udc00"}
    item |= {"snippet": "s \udfff", "description": "s \udfff", "content": "s \udfff"}
    payload = {"organic": [item], "web": {"results": [item]}, "results": [item]}
    web.route(path, Reply(json=payload))  # json.dumps writes the surrogates as \\udXXX escapes
    engine, _, _ = _engine(name, web, cache=tmp_path)
    [result] = engine.search("q", 3)
    assert result == SearchResult("T \ufffd", "http://a/\ufffd", "s \ufffd")
    web.stop()
    replay = cls(base_url=web.base_url, cache=tmp_path, cache_mode="replay")
    assert replay.search("q", 3) == [result]


def test_cache_round_trips_lone_surrogates_exactly(tmp_path):
    cache = ResponseCache(tmp_path)
    request = {"engine": "x", "q": "a \ud800"}
    response = {"results": ["\udc00", {"k\udfff": "v"}]}
    cache.put(request, response)
    assert cache.get(request) == response
    for file in tmp_path.rglob("*.json"):
        file.read_bytes().decode("utf-8")  # the entry is valid UTF-8
    # Different surrogates, different entries; no entry for a request never stored.
    assert ResponseCache.key(request) != ResponseCache.key({"engine": "x", "q": "a \ud801"})
    assert cache.get({"engine": "x", "q": "a \ufffd"}) is None


def test_cache_keys_of_ordinary_requests_are_unchanged():
    # Existing caches must stay valid: the key of a request without surrogates is what it was.
    request = {"engine": "serper", "json": {"q": "Zürich 🙂", "num": 3}, "method": "POST"}
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert ResponseCache.key(request) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_cache_entries_without_surrogates_keep_their_text(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put({"q": "Zürich"}, {"title": "Zürich 🙂"})
    [file] = tmp_path.rglob("*.json")
    assert "Zürich 🙂" in file.read_text(encoding="utf-8")  # still readable, not escaped
