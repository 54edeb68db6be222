"""What every search engine returns, the protocol they share, and the agent-facing tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from llm_marl.tools.calls import Tool, ToolUseError, tool

__all__ = ["SearchEngine", "SearchResult", "clip", "format_results", "search_tool"]

MAX_QUERY_CHARS = 1000
"""Queries are cut to this many characters before they reach any engine."""

MAX_TITLE_CHARS = 300
"""Longest title an agent reads in a result list or a page header (longer ones are cut)."""
MAX_URL_CHARS = 2048
"""Longest URL an agent reads in a result list (a browser refuses longer ones anyway)."""
MAX_SNIPPET_CHARS = 1000
"""Longest snippet an agent reads per result: live engines' snippets are the engine's choice."""
MAX_ECHO_CHARS = 200
"""The query is echoed in the result list's first line up to this many characters."""


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, with a note saying how many were cut.

    Each field is bounded on its own so that one huge title (or URL, or snippet, with or
    without spaces) cannot fill a result list and push out the other results.
    """
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}[... {len(text) - max_chars} characters cut]"


@dataclass(frozen=True)
class SearchResult:
    """One hit, best first in a result list.

    Attributes:
        title: The page or paragraph title.
        url: Where to read the whole document (``browse`` it).
        snippet: A short extract, plain text.
        score: The engine's relevance score when it gives one (BM25 for :class:`LocalSearch`).
        doc_id: The corpus document id (:class:`LocalSearch` only).
    """

    title: str
    url: str
    snippet: str
    score: float | None = None
    doc_id: str | None = None


@runtime_checkable
class SearchEngine(Protocol):
    """Anything that answers ``search(query, k)`` with a ranked list of :class:`SearchResult`.

    Implementations: :class:`~llm_marl.tools.search.LocalSearch` (BM25 over a corpus, offline),
    :class:`~llm_marl.tools.search.SerperSearch`, :class:`~llm_marl.tools.search.BraveSearch`,
    :class:`~llm_marl.tools.search.SearXNGSearch`. A query that matches nothing returns ``[]``;
    a failure of the engine itself raises :class:`~llm_marl.errors.InfrastructureError`.
    """

    name: str

    def search(self, query: str, k: int = 10) -> list[SearchResult]:
        """The ``k`` best results for ``query``, best first."""
        ...


def format_results(query: str, results: list[SearchResult]) -> str:
    """The text an agent reads for a result list (numbered title, URL and snippet), each field
    bounded (:data:`MAX_TITLE_CHARS`, :data:`MAX_URL_CHARS`, :data:`MAX_SNIPPET_CHARS`)."""
    echo = clip(query, MAX_ECHO_CHARS)
    if not results:
        return f"No results for {echo!r}."
    blocks = [f"Results for {echo!r}:"]
    for i, r in enumerate(results, 1):
        title = clip(r.title, MAX_TITLE_CHARS)
        url = clip(r.url, MAX_URL_CHARS)
        snippet = clip(r.snippet, MAX_SNIPPET_CHARS)
        blocks.append(f"{i}. {title}\nURL: {url}\n{snippet}".rstrip())
    return "\n\n".join(blocks)


def search_tool(
    engine: SearchEngine,
    *,
    name: str = "search",
    default_k: int | None = None,
    max_k: int = 10,
    server: str | None = None,
) -> Tool:
    """A :class:`~llm_marl.tools.calls.Tool` that searches ``engine`` and formats the results.

    The agent passes ``query`` (non-empty) and optionally ``k`` (1..``max_k``, default
    ``default_k``, else ``min(5, max_k)``). An empty query is
    the agent's mistake (a :class:`~llm_marl.tools.calls.ToolUseError`, reported to it); an
    engine failure raises :class:`~llm_marl.errors.InfrastructureError`.

    Example::

        box = Toolbox([search_tool(LocalSearch(docs)), browse_tool(Browser())])
    """
    if default_k is None:
        default_k = min(5, max_k)
    if not 1 <= default_k <= max_k:
        raise ValueError(f"need 1 <= default_k <= max_k, got {default_k} and {max_k}")
    default = default_k

    def run(query: str, k: int = default) -> str:
        """Search for documents. Returns numbered results with title, URL and snippet.

        Args:
            query: What to search for, in keywords or a question.
            k: How many results to return.
        """
        if not query.strip():
            raise ToolUseError("the query is empty; say what to search for")
        return format_results(query, engine.search(query[:MAX_QUERY_CHARS], k))

    made = tool(run, name=name, server=server)
    params: dict[str, Any] = dict(made.parameters)
    props = dict(params["properties"])
    props["k"] = {**props["k"], "minimum": 1, "maximum": max_k}
    props["query"] = {**props["query"], "minLength": 1}
    params["properties"] = props
    return Tool(made.name, made.description, params, fn=run, server=server)
