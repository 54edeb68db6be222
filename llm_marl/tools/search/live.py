"""Live web search engines over HTTP: Serper (Google), Brave and SearXNG.

Example::

    from llm_marl.tools.search import SerperSearch

    engine = SerperSearch(cache="runs/search-cache")       # key from $SERPER_API_KEY
    engine.search("Frank Rosenblatt award 2010", k=5)       # -> list[SearchResult]

    # Later, exactly the same answers, offline and without a key:
    SerperSearch(cache="runs/search-cache", cache_mode="replay").search(...)

Every engine has:

* **a deadline for the whole search** (``timeout``, seconds): connecting, waiting, reading,
  every retry and every back-off wait fit in it -- a server that hangs or trickles a byte at a
  time cannot stall an episode for longer;
* **retries with exponential back-off** (``retries`` extra attempts, ``backoff`` * 2^n seconds)
  on connection failures, timeouts of one attempt, HTTP 429 and 5xx, and garbled or truncated
  bodies; a ``Retry-After`` header is obeyed when it fits in the deadline;
* **an on-disk response cache** (:class:`~llm_marl.tools.search.cache.ResponseCache`) so that a
  run can be replayed exactly (``cache_mode="replay"``).

Every failure raises :class:`~llm_marl.errors.InfrastructureError` with what happened: 5xx or 429
after the retries, the deadline, a body that is not JSON, JSON of the wrong shape, an HTTP 4xx
(a bad key or request: not retried), a missing cache entry in replay mode. A search that finds
nothing returns ``[]``: that is an answer, not a failure.

Request and response shapes (from each API's public documentation):

* Serper: ``POST {base}/search`` with header ``X-API-KEY`` and JSON ``{"q", "num"}``;
  results in ``organic[]`` with ``title``, ``link``, ``snippet``. Key: ``$SERPER_API_KEY``.
* Brave: ``GET {base}/res/v1/web/search?q=...&count=...`` (``count`` at most 20) with header
  ``X-Subscription-Token``; results in ``web.results[]`` with ``title``, ``url``,
  ``description`` (which may hold ``<strong>`` tags, removed here). Key: ``$BRAVE_API_KEY``.
* SearXNG: ``GET {base}/search?q=...&format=json`` (the instance must enable the JSON format);
  results in ``results[]`` with ``title``, ``url``, ``content``. No key; the instance URL comes
  from ``base_url`` or ``$SEARXNG_URL``.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_marl.errors import ConfigError, InfrastructureError
from llm_marl.tools.http import HttpError, http_request, retry_after_seconds
from llm_marl.tools.search.base import MAX_QUERY_CHARS, SearchResult
from llm_marl.tools.search.cache import CACHE_MODES, ResponseCache
from llm_marl.tools.text import scrub_surrogates

__all__ = ["BraveSearch", "LiveSearchEngine", "SearXNGSearch", "SerperSearch"]

_RETRY_STATUSES = {429, 500, 502, 503, 504}
_TAG = re.compile(r"<[^<>]{0,200}>")


class _Retryable(Exception):
    """One attempt failed in a way another attempt may fix."""

    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


class LiveSearchEngine:
    """The request loop shared by the live engines; subclasses say how to ask and how to read.

    Args:
        api_key: The key; None reads the engine's environment variable. Not needed in replay
            mode.
        base_url: The API's base URL (tests point it at a fake server on 127.0.0.1).
        timeout: Deadline in seconds for one whole ``search`` call, retries included.
        retries: Extra attempts after the first.
        backoff: First back-off wait in seconds (doubled each retry, capped by the deadline).
        cache: A :class:`ResponseCache` or its directory; None: no cache.
        cache_mode: One of ``"use"``, ``"replay"``, ``"refresh"``, ``"off"`` (see
            :mod:`~llm_marl.tools.search.cache`).
        max_bytes: Largest response body accepted.
        sleep: The function used to wait between attempts (tests replace it).
    """

    name = "live"
    key_env: str | None = None
    default_base_url: str | None = None
    max_k = 100

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 20.0,
        retries: int = 3,
        backoff: float = 0.5,
        cache: ResponseCache | str | Path | None = None,
        cache_mode: str = "use",
        max_bytes: int = 4 * 1024 * 1024,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if cache_mode not in CACHE_MODES:
            raise ConfigError(f"cache_mode must be one of {CACHE_MODES}, got {cache_mode!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ConfigError("timeout must be > 0, retries and backoff >= 0")
        self.cache = ResponseCache(cache) if isinstance(cache, (str, Path)) else cache
        if cache_mode == "replay" and self.cache is None:
            raise ConfigError("cache_mode='replay' needs a cache directory (cache=...)")
        self.cache_mode = cache_mode if self.cache is not None else "off"
        self.api_key = api_key if api_key is not None else self._key_from_env()
        if self.key_env and not self.api_key and self.cache_mode != "replay":
            raise ConfigError(
                f"{type(self).__name__} needs an API key: set ${self.key_env} or pass api_key= "
                f"(or replay a recorded run with cache_mode='replay')"
            )
        base = base_url or self._base_from_env() or self.default_base_url
        if not base:
            raise ConfigError(
                f"{type(self).__name__} needs base_url= (or its environment variable)"
            )
        if not re.match(r"^https?://", base):
            raise ConfigError(f"base_url must start with http:// or https://, got {base!r}")
        self.base_url = base.rstrip("/")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_bytes = int(max_bytes)
        self._sleep = sleep

    def _key_from_env(self) -> str | None:
        return os.environ.get(self.key_env) if self.key_env else None

    def _base_from_env(self) -> str | None:
        return None

    # Subclasses: the request (method, url, params, json body) and the headers with the key.
    def _request(self, query: str, k: int) -> dict[str, Any]:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        return {}

    def _results(self, payload: Any) -> list[SearchResult]:
        """Results from the decoded JSON; raise ValueError if its shape is wrong."""
        raise NotImplementedError

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """The ``k`` best results for ``query`` (first 1,000 characters), best first.

        Raises:
            InfrastructureError: The engine failed (see the module docstring).
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        # HTTP clients encode the query as UTF-8, which a lone surrogate (a JSON "\\ud800"
        # escape in the agent's call, or a string from user code) makes raise: replace them.
        query = scrub_surrogates(query[:MAX_QUERY_CHARS]).strip()
        if not query:
            return []
        k = min(k, self.max_k)
        request = {"engine": self.name, **self._request(query, k)}
        payload: Any = None
        if self.cache is not None and self.cache_mode in ("use", "replay"):
            payload = self.cache.get(request)
            if payload is None and self.cache_mode == "replay":
                raise InfrastructureError(
                    f"{self.name}: no cached response for {query!r} in {self.cache.path} "
                    f"(cache_mode='replay' never asks the engine; record the run first)"
                )
        if payload is not None:
            return self._checked_results(payload)[:k]
        payload = self._fetch(request, query)
        results = self._checked_results(payload)
        if self.cache is not None and self.cache_mode in ("use", "refresh"):
            self.cache.put(request, payload)
        return results[:k]

    def _checked_results(self, payload: Any) -> list[SearchResult]:
        try:
            return self._results(payload)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise InfrastructureError(
                f"{self.name}: the response does not have the expected shape ({e}); "
                f"got {json.dumps(payload)[:200]}"
            ) from None

    def _fetch(self, request: dict[str, Any], query: str) -> Any:
        end = time.monotonic() + self.timeout
        attempts = self.retries + 1
        last = "no attempt made"
        for attempt in range(attempts):
            remaining = end - time.monotonic()
            if remaining <= 0:
                break
            try:
                return self._attempt(request, remaining)
            except _Retryable as e:
                last = str(e)
                if attempt == attempts - 1:
                    break
                wait = e.wait if e.wait is not None else self.backoff * (2**attempt)
                remaining = end - time.monotonic()
                if wait >= remaining:
                    if e.wait is not None:
                        last += f" (Retry-After {e.wait:g} s does not fit in the deadline)"
                    break
                self._sleep(wait)
        raise InfrastructureError(
            f"{self.name}: search for {query[:80]!r} failed after the retries and within "
            f"{self.timeout:g} s: {last}"
        )

    def _attempt(self, request: dict[str, Any], remaining: float) -> Any:
        try:
            response = http_request(
                request["method"],
                request["url"],
                timeout=remaining,
                max_bytes=self.max_bytes,
                headers={"Accept": "application/json", **self._headers()},
                params=request.get("params"),
                json_body=request.get("json"),
            )
        except HttpError as e:
            raise _Retryable(f"{e.kind}: {e}") from None
        if response.status in _RETRY_STATUSES:
            raise _Retryable(
                f"HTTP {response.status}", retry_after_seconds(response.headers.get("retry-after"))
            )
        if response.status != 200:
            detail = response.body[:200].decode("utf-8", "replace")
            raise InfrastructureError(
                f"{self.name}: HTTP {response.status} from {request['url']} (not retried: check "
                f"the API key and the request): {detail}"
            )
        if not response.complete:
            raise InfrastructureError(
                f"{self.name}: response larger than {self.max_bytes} bytes from {request['url']}"
            )
        try:
            return json.loads(response.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise _Retryable(f"the body is not valid JSON ({str(e)[:80]})") from None


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{field!r} must be a string, got {type(value).__name__}")
    # A response's JSON may escape lone surrogates; the agent's conversation must stay UTF-8.
    return scrub_surrogates(value)


def _items(payload: Any, *path: str, required: bool) -> list[Any]:
    """``payload[path...]`` as a list; absent -> [] unless ``required``."""
    node = payload
    for i, key in enumerate(path):
        if not isinstance(node, dict):
            where = ".".join(path[:i]) or "the response"
            raise ValueError(f"{where} must be a JSON object")
        if key not in node:
            if required:
                raise ValueError(f"missing {'.'.join(path[: i + 1])!r}")
            return []
        node = node[key]
    if not isinstance(node, list):
        raise ValueError(f"{'.'.join(path)!r} must be a list")
    return node


def _result(item: Any, title: str, url: str, snippet: str) -> SearchResult:
    if not isinstance(item, dict):
        raise ValueError("each result must be a JSON object")
    link = _text(item.get(url), url)
    if not link:
        raise ValueError(f"a result has no {url!r}")
    return SearchResult(
        title=_text(item.get(title), title),
        url=link,
        snippet=html.unescape(_TAG.sub("", _text(item.get(snippet), snippet))),
    )


class SerperSearch(LiveSearchEngine):
    """Google results through serper.dev (``$SERPER_API_KEY``). See :class:`LiveSearchEngine`
    for the arguments; ``gl``/``hl`` set the country and language."""

    name = "serper"
    key_env = "SERPER_API_KEY"
    default_base_url = "https://google.serper.dev"
    max_k = 100

    def __init__(self, *, gl: str | None = None, hl: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gl = gl
        self.hl = hl

    def _request(self, query: str, k: int) -> dict[str, Any]:
        body: dict[str, Any] = {"q": query, "num": k}
        if self.gl:
            body["gl"] = self.gl
        if self.hl:
            body["hl"] = self.hl
        return {"method": "POST", "url": f"{self.base_url}/search", "json": body}

    def _headers(self) -> dict[str, str]:
        return {"X-API-KEY": self.api_key or "", "Content-Type": "application/json"}

    def _results(self, payload: Any) -> list[SearchResult]:
        return [
            _result(i, "title", "link", "snippet")
            for i in _items(payload, "organic", required=False)
        ]


class BraveSearch(LiveSearchEngine):
    """Brave Search web results (``$BRAVE_API_KEY``). See :class:`LiveSearchEngine`."""

    name = "brave"
    key_env = "BRAVE_API_KEY"
    default_base_url = "https://api.search.brave.com"
    max_k = 20

    def _request(self, query: str, k: int) -> dict[str, Any]:
        return {
            "method": "GET",
            "url": f"{self.base_url}/res/v1/web/search",
            "params": {"q": query, "count": k},
        }

    def _headers(self) -> dict[str, str]:
        return {"X-Subscription-Token": self.api_key or ""}

    def _results(self, payload: Any) -> list[SearchResult]:
        if not isinstance(payload, dict):
            raise ValueError("the response must be a JSON object")
        return [
            _result(i, "title", "url", "description")
            for i in _items(payload, "web", "results", required=False)
        ]


class SearXNGSearch(LiveSearchEngine):
    """A SearXNG instance's JSON API (``base_url`` or ``$SEARXNG_URL``; no key). The instance
    must list ``json`` under ``search.formats`` in its settings. See :class:`LiveSearchEngine`."""

    name = "searxng"
    key_env = None
    max_k = 100

    def _base_from_env(self) -> str | None:
        return os.environ.get("SEARXNG_URL")

    def _request(self, query: str, k: int) -> dict[str, Any]:
        # SearXNG returns one page (~20 results) whatever k is; search() keeps the first k.
        return {
            "method": "GET",
            "url": f"{self.base_url}/search",
            "params": {"q": query, "format": "json"},
        }

    def _results(self, payload: Any) -> list[SearchResult]:
        return [
            _result(i, "title", "url", "content") for i in _items(payload, "results", required=True)
        ]
