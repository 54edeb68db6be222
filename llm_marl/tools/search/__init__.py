"""Search engines for agents: BM25 over a local corpus (offline) and live web search APIs.

Quick start::

    from llm_marl.tools.search import LocalSearch, load_corpus, search_tool

    engine = LocalSearch(load_corpus("corpus.jsonl"))      # JSONL of title/url/text
    engine.search("Who portrayed Corliss Archer?", k=3)    # -> [SearchResult(title, url, ...)]
    search = search_tool(engine)                           # a Tool for a Toolbox

Engines (all satisfy :class:`SearchEngine`: ``search(query, k) -> list[SearchResult]``):

* :class:`LocalSearch`: BM25 (tantivy) over a corpus, built once and cached on disk by content
  hash; deterministic, no network.
* :class:`SerperSearch`, :class:`BraveSearch`, :class:`SearXNGSearch`: live APIs over
  ``requests``, with a deadline for the whole call, retries with back-off and an on-disk
  response cache for exact replay (:class:`ResponseCache`). Failures raise
  :class:`~llm_marl.errors.InfrastructureError`; no results is ``[]``.
"""

from llm_marl.tools.search.base import SearchEngine, SearchResult, format_results, search_tool
from llm_marl.tools.search.cache import CACHE_MODES, ResponseCache
from llm_marl.tools.search.corpus import Document, corpus_fingerprint, load_corpus, with_urls
from llm_marl.tools.search.live import BraveSearch, LiveSearchEngine, SearXNGSearch, SerperSearch
from llm_marl.tools.search.local import LocalSearch, default_cache_dir

__all__ = [
    "CACHE_MODES",
    "BraveSearch",
    "Document",
    "LiveSearchEngine",
    "LocalSearch",
    "ResponseCache",
    "SearXNGSearch",
    "SearchEngine",
    "SearchResult",
    "SerperSearch",
    "corpus_fingerprint",
    "default_cache_dir",
    "format_results",
    "load_corpus",
    "search_tool",
    "with_urls",
]
