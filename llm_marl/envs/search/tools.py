"""The agents' web: a search engine and a browser over a corpus, started on first use.

:class:`OfflineWeb` serves a corpus as a :class:`~llm_marl.tools.site.LocalSite` on 127.0.0.1
and searches it with :class:`~llm_marl.tools.search.LocalSearch` whose results carry the site's
URLs, so the agents browse real HTML over real HTTP with the real parser. Nothing starts until an
agent first calls a tool (making an env is cheap); :meth:`close` stops the site.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from llm_marl.tools.browse import Browser, Page
from llm_marl.tools.search import Document, LocalSearch, SearchEngine, SearchResult
from llm_marl.tools.site import LocalSite

__all__ = ["LiveWeb", "OfflineWeb", "shared_index"]

_INDEXES: dict[int, LocalSearch] = {}
_INDEX_LOCK = threading.Lock()


def shared_index(corpus: Sequence[Document]) -> LocalSearch:
    """One :class:`LocalSearch` per corpus object (env copies of one run share it)."""
    with _INDEX_LOCK:
        index = _INDEXES.get(id(corpus))
        if index is None or index.documents[0].id != corpus[0].id:
            index = LocalSearch(corpus)
            _INDEXES[id(corpus)] = index
        return index


class OfflineWeb:
    """Search + browse over a local corpus served on 127.0.0.1 (see the module docstring)."""

    name = "offline"

    def __init__(self, corpus: Sequence[Document], *, page_chars: int = 2000) -> None:
        self.corpus = corpus
        self.page_chars = page_chars
        self._site: LocalSite | None = None
        self._engine: LocalSearch | None = None
        self._browser: Browser | None = None
        self._lock = threading.Lock()

    def _start(self) -> tuple[LocalSearch, Browser]:
        with self._lock:
            # Started once: a site that dies later is an infrastructure failure (its URLs are
            # in the agents' conversations), never silently replaced by one on another port.
            if self._site is None:
                site = LocalSite(self.corpus).start()
                self._engine = shared_index(self.corpus).with_documents(site.documents)
                self._browser = site.browser(page_chars=self.page_chars)
                self._site = site
            assert self._engine is not None and self._browser is not None
            return self._engine, self._browser

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        return self._start()[0].search(query, k)

    def browse(self, url: str, page: int = 1) -> Page:
        return self._start()[1].browse(url, page)

    def close(self) -> None:
        with self._lock:
            if self._site is not None:
                self._site.stop()
                self._site = None


class LiveWeb:
    """A user's search engine (e.g. :class:`~llm_marl.tools.search.SerperSearch`) and a
    :class:`~llm_marl.tools.browse.Browser` of the public web."""

    name = "live"

    def __init__(self, engine: SearchEngine, browser: Browser | None = None) -> None:
        self.engine = engine
        self.browser = browser or Browser()

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        return self.engine.search(query, k)

    def browse(self, url: str, page: int = 1) -> Page:
        return self.browser.browse(url, page)

    def close(self) -> None:
        pass
