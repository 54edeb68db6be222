"""Live search engines against a fake server on 127.0.0.1: shapes, retries, deadline, cache.

No test sends traffic anywhere but the FakeWeb server it starts. Deadline tests check that a
search gives up near its deadline, with a wide margin (a functional bound, not a speed test).
"""

from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest

from llm_marl.errors import ConfigError, InfrastructureError
from llm_marl.tools.search import (
    BraveSearch,
    ResponseCache,
    SearchEngine,
    SearchResult,
    SearXNGSearch,
    SerperSearch,
)
from tests.tools.fakeweb import FakeWeb, Reply

HITS = [("First", "https://a.example/1", "one"), ("Second", "https://b.example/2", "two")]

ENGINES = {
    "serper": (
        SerperSearch,
        "/search",
        lambda hits: {
            "organic": [
                {"title": t, "link": u, "snippet": s, "position": i}
                for i, (t, u, s) in enumerate(hits)
            ]
        },
    ),
    "brave": (
        BraveSearch,
        "/res/v1/web/search",
        lambda hits: {
            "type": "search",
            "web": {"results": [{"title": t, "url": u, "description": s} for t, u, s in hits]},
        },
    ),
    "searxng": (
        SearXNGSearch,
        "/search",
        lambda hits: {
            "query": "q",
            "results": [{"title": t, "url": u, "content": s} for t, u, s in hits],
        },
    ),
}


class Sleeps(list):
    """Records back-off waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def web():
    with FakeWeb() as server:
        yield server


def make(name, web, **kw):
    cls, path, payload = ENGINES[name]
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("timeout", 5)
    if name != "searxng":
        kw.setdefault("api_key", "secret-key")
    return cls(base_url=web.base_url, **kw), path, payload


@pytest.fixture(params=sorted(ENGINES))
def name(request):
    return request.param


def test_results_and_request_shape(web, name):
    engine, path, payload = make(name, web)
    web.route(path, Reply(json=payload(HITS)))
    results = engine.search("who won", k=2)
    assert isinstance(engine, SearchEngine)
    assert results == [SearchResult(t, u, s) for t, u, s in HITS]
    req = web.requests[0]
    if name == "serper":
        assert req.method == "POST" and req.headers["x-api-key"] == "secret-key"
        assert json.loads(req.body) == {"q": "who won", "num": 2}
    elif name == "brave":
        assert req.method == "GET" and req.headers["x-subscription-token"] == "secret-key"
        assert "q=who+won" in req.query and "count=2" in req.query
    else:
        assert req.method == "GET" and "format=json" in req.query and "q=who+won" in req.query
    assert "application/json" in req.headers["accept"]


def test_k_limits_the_results(web, name):
    engine, path, payload = make(name, web)
    web.route(path, Reply(json=payload(HITS * 3)))
    assert len(engine.search("q", k=1)) == 1


def test_brave_snippets_lose_their_markup(web):
    engine, path, _ = make("brave", web)
    web.route(
        path,
        Reply(
            json={
                "web": {
                    "results": [
                        {
                            "title": "T",
                            "url": "https://x",
                            "description": "a <strong>bold</strong> &amp; b",
                        }
                    ]
                }
            }
        ),
    )
    assert engine.search("q")[0].snippet == "a bold & b"


@pytest.mark.parametrize(
    "engine_name, payload",
    [
        ("serper", {"organic": []}),
        ("serper", {"searchParameters": {"q": "x"}}),  # no organic results at all
        ("brave", {"type": "search"}),  # no web section
        ("brave", {"web": {"results": []}}),
        ("searxng", {"results": []}),
    ],
)
def test_no_results_is_an_empty_list_not_an_error(web, engine_name, payload):
    engine, path, _ = make(engine_name, web)
    web.route(path, Reply(json=payload))
    assert engine.search("zxqv") == []


def test_empty_query_asks_nobody(web, name):
    engine, path, _ = make(name, web)
    assert engine.search("   ") == [] and web.requests == []
    with pytest.raises(ValueError):
        engine.search("q", k=0)


# -- retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried(web, name, status):
    engine, path, payload = make(name, web, backoff=0.25)
    web.route(path, Reply(status=status), Reply(status=status), Reply(json=payload(HITS)))
    assert len(engine.search("q")) == 2
    assert web.count(path) == 3
    assert engine._sleep == [0.25, 0.5]  # exponential back-off


def test_5xx_after_all_retries_raises(web, name):
    engine, path, _ = make(name, web, retries=2, backoff=0)
    web.route(path, Reply(status=500, body="boom"))
    with pytest.raises(InfrastructureError, match="HTTP 500"):
        engine.search("q")
    assert web.count(path) == 3


def test_429_obeys_retry_after(web, name):
    engine, path, payload = make(name, web)
    web.route(path, Reply(status=429, headers={"Retry-After": "2"}), Reply(json=payload(HITS)))
    assert len(engine.search("q")) == 2
    assert engine._sleep == [2.0]


def test_429_retry_after_as_a_date(web):
    engine, path, payload = make("serper", web)
    when = formatdate(time.time() + 3, usegmt=True)
    web.route(path, Reply(status=429, headers={"Retry-After": when}), Reply(json=payload(HITS)))
    engine.search("q")
    assert 0.5 < engine._sleep[0] <= 4


def test_429_retry_after_past_the_deadline_fails_at_once(web, name):
    engine, path, _ = make(name, web, timeout=3)
    web.route(path, Reply(status=429, headers={"Retry-After": "120"}))
    with pytest.raises(InfrastructureError, match="Retry-After 120 s does not fit"):
        engine.search("q")
    assert engine._sleep == [] and web.count(path) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(web, name, status):
    engine, path, _ = make(name, web)
    web.route(path, Reply(status=status, json={"message": "Unauthorized."}))
    with pytest.raises(InfrastructureError, match=f"HTTP {status}.*not retried"):
        engine.search("q")
    assert web.count(path) == 1


# -- broken responses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body="<html>Bad gateway</html>"),
        Reply(body='{"organic": [', headers={"Content-Type": "application/json"}),
        Reply(body=b"\xff\xfe\x00garbage", headers={"Content-Type": "application/json"}),
        Reply(body="", headers={"Content-Type": "application/json"}),
        Reply(body='{"organic": []}', content_length=5000),  # truncated: the body is shorter
        Reply(raw=b"HELLO THERE\r\n\r\n"),  # not HTTP
        Reply(raw=b""),  # connection closed without a word
    ],
    ids=["html", "cut-json", "binary", "empty", "truncated", "not-http", "closed"],
)
def test_garbage_is_retried_then_raises(web, reply):
    engine, path, _ = make("serper", web, retries=1, backoff=0)
    web.route(path, reply)
    with pytest.raises(InfrastructureError, match="serper: search for 'q' failed"):
        engine.search("q")
    assert web.count(path) == 2


def test_garbage_then_good_recovers(web):
    engine, path, payload = make("serper", web, backoff=0)
    web.route(path, Reply(body="not json"), Reply(json=payload(HITS)))
    assert len(engine.search("q")) == 2


@pytest.mark.parametrize(
    "engine_name, payload",
    [
        ("serper", []),
        ("serper", {"organic": {"title": "x"}}),
        ("serper", {"organic": ["a string"]}),
        ("serper", {"organic": [{"title": "no link"}]}),
        ("serper", {"organic": [{"title": 5, "link": "https://x"}]}),
        ("brave", {"web": {"results": "none"}}),
        ("brave", {"web": [1, 2]}),
        ("searxng", {"answers": []}),  # results missing
        ("searxng", {"results": [{"url": None, "title": "t"}]}),
    ],
)
def test_wrong_schema_raises_without_retry(web, engine_name, payload):
    engine, path, _ = make(engine_name, web)
    web.route(path, Reply(json=payload))
    with pytest.raises(InfrastructureError, match="expected shape"):
        engine.search("q")
    assert web.count(path) == 1


def test_oversized_response(web):
    engine, path, _ = make("serper", web, max_bytes=1000)
    web.route(path, Reply(stream_bytes=50_000, headers={"Content-Type": "application/json"}))
    with pytest.raises(InfrastructureError, match="larger than 1000 bytes"):
        engine.search("q")


# -- the deadline -----------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "reply",
    [
        Reply(delay=30),  # hangs before answering
        Reply(json={"organic": []}, trickle=0.2),  # headers and body one byte at a time
        Reply(
            body='{"organic": []}' + " " * 200,
            trickle=0.05,
            headers={"Content-Type": "application/json"},
        ),
    ],
    ids=["hang", "trickle", "slow-body"],
)
def test_deadline_covers_the_whole_search(web, reply):
    engine, path, _ = make("serper", web, timeout=0.75, retries=5, backoff=0.1, sleep=time.sleep)
    web.route(path, reply)
    start = time.monotonic()
    with pytest.raises(InfrastructureError, match="within 0.75 s"):
        engine.search("q")
    # Whole-request deadline: not 6 attempts x a per-read timeout. Wide margin for slow CI.
    assert time.monotonic() - start < 3


def test_deadline_includes_backoff(web):
    engine, path, _ = make("serper", web, timeout=1.0, retries=10, backoff=0.4, sleep=time.sleep)
    web.route(path, Reply(status=503))
    start = time.monotonic()
    with pytest.raises(InfrastructureError, match="HTTP 503"):
        engine.search("q")
    assert time.monotonic() - start < 5
    assert web.count(path) < 11


# -- the response cache -----------------------------------------------------------------------


def test_cache_replays_exactly(web, name, tmp_path, monkeypatch):
    for var in ("SERPER_API_KEY", "BRAVE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    engine, path, payload = make(name, web, cache=tmp_path / "cache")
    web.route(path, Reply(json=payload(HITS)))
    first = engine.search("who won", k=2)
    assert engine.search("who won", k=2) == first
    assert web.count(path) == 1  # the second answer came from disk
    web.stop()
    # Replay needs neither the server nor a key (no key variable is set in tests).
    replayed = ENGINES[name][0](
        base_url=web.base_url, cache=tmp_path / "cache", cache_mode="replay"
    )
    assert replayed.search("who won", k=2) == first
    with pytest.raises(InfrastructureError, match="no cached response"):
        replayed.search("another question", k=2)
    stored = "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert "secret-key" not in stored


def test_cache_modes(web, tmp_path):
    engine, path, payload = make("serper", web, cache=tmp_path, cache_mode="refresh")
    web.route(path, Reply(json=payload(HITS[:1])), Reply(json=payload(HITS)))
    assert len(engine.search("q")) == 1
    assert len(engine.search("q")) == 2  # refresh always asks, and overwrites
    use, _, _ = make("serper", web, cache=tmp_path)
    assert len(use.search("q")) == 2 and web.count(path) == 2
    off, _, _ = make("serper", web, cache=tmp_path, cache_mode="off")
    off.search("q")
    assert web.count(path) == 3
    assert len(ResponseCache(tmp_path)) == 1


def test_failures_are_not_cached(web, tmp_path):
    engine, path, payload = make("serper", web, cache=tmp_path, retries=0)
    web.route(path, Reply(json={"organic": "bad"}), Reply(json=payload(HITS)))
    with pytest.raises(InfrastructureError):
        engine.search("q")
    assert len(engine.search("q")) == 2


def test_corrupt_cache_entry_is_refetched(web, tmp_path):
    engine, path, payload = make("serper", web, cache=tmp_path)
    web.route(path, Reply(json=payload(HITS)))
    engine.search("q")
    for entry in tmp_path.rglob("*.json"):
        entry.write_text("{broken")
    assert len(engine.search("q")) == 2 and web.count(path) == 2


# -- configuration ----------------------------------------------------------------------------


def test_configuration_errors(monkeypatch, tmp_path):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.delenv("SEARXNG_URL", raising=False)
    with pytest.raises(ConfigError, match="SERPER_API_KEY"):
        SerperSearch()
    with pytest.raises(ConfigError, match="BRAVE_API_KEY"):
        BraveSearch()
    with pytest.raises(ConfigError, match="base_url"):
        SearXNGSearch()
    with pytest.raises(ConfigError, match="cache_mode"):
        SerperSearch(api_key="k", cache_mode="sometimes")
    with pytest.raises(ConfigError, match="needs a cache"):
        SerperSearch(api_key="k", cache_mode="replay")
    with pytest.raises(ConfigError, match="http"):
        SearXNGSearch(base_url="ftp://x")
    monkeypatch.setenv("SERPER_API_KEY", "from-env")
    assert SerperSearch().api_key == "from-env"
    monkeypatch.setenv("SEARXNG_URL", "http://127.0.0.1:1/")
    assert SearXNGSearch().base_url == "http://127.0.0.1:1"
