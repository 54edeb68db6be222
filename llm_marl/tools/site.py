"""Serve a corpus as a small website on 127.0.0.1: the offline web that agents browse.

Example::

    from llm_marl.tools.search import LocalSearch, load_corpus
    from llm_marl.tools.site import LocalSite

    with LocalSite(load_corpus("corpus.jsonl")) as site:
        engine = LocalSearch(site.documents)       # results carry this site's URLs
        browser = site.browser()                   # may reach 127.0.0.1; failures of the site
        hit = engine.search("Shirley Temple")[0]   # itself raise InfrastructureError
        print(browser.browse(hit.url).render())

Pages are real HTML fetched over real HTTP and read by the real parser (:mod:`.browse`), so the
offline environment exercises exactly the code a live one does:

* ``/doc/<id>``: one page per document -- the title as ``<h1>``, the text as paragraphs, then
  "Related pages": links to documents sharing a group with it (HotpotQA: the paragraphs given
  with the same question) and to documents whose title its text mentions; with the navigation,
  header, footer, script and style a real page has (which the browser drops);
* ``/`` (``/?page=N``): an index of all documents, 100 per page;
* anything else: 404. Only ``GET`` and ``HEAD``.

The server runs in a daemon thread and stops when the ``with`` block ends, when :meth:`stop` is
called, when the object is garbage-collected or the interpreter exits, and -- if ``idle_timeout``
is set -- after that many seconds without a request. It listens on a loopback address only.
"""

from __future__ import annotations

import html
import ipaddress
import re
import threading
import time
import weakref
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from llm_marl.tools.browse import BrowseConfig, Browser
from llm_marl.tools.search.corpus import Document, check_documents, with_urls

__all__ = ["LocalSite"]

INDEX_PAGE_SIZE = 100
_WORD = re.compile(r"\w+")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    site: _SiteState


class _SiteState:
    """What the request handler needs; kept apart from LocalSite so that the server thread holds
    no reference to the LocalSite (which lets it be garbage-collected, and so stopped)."""

    def __init__(self, documents: list[Document], name: str, max_links: int) -> None:
        self.documents = documents
        self.by_id = {d.id: i for i, d in enumerate(documents)}
        self.name = name
        self.max_links = max_links
        self.last_request = time.monotonic()
        self._groups: dict[str, list[int]] = {}
        for i, doc in enumerate(documents):
            for g in doc.groups:
                self._groups.setdefault(g, []).append(i)
        # Titles as word tuples, for "mentions": at most 8 words, at least 4 characters.
        self._titles: dict[tuple[str, ...], list[int]] = {}
        for i, doc in enumerate(documents):
            words = tuple(w.lower() for w in _WORD.findall(doc.title))
            if 0 < len(words) <= 8 and len(doc.title.strip()) >= 4:
                self._titles.setdefault(words, []).append(i)
        self._longest = max((len(t) for t in self._titles), default=0)
        self._related: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def related(self, i: int) -> list[int]:
        """Documents sharing a group with document ``i``, then documents its text mentions."""
        with self._lock:
            cached = self._related.get(i)
        if cached is not None:
            return cached
        doc = self.documents[i]
        out: dict[int, None] = {}
        for g in doc.groups:
            for j in self._groups.get(g, []):
                if j != i:
                    out[j] = None
        words = [w.lower() for w in _WORD.findall(doc.text[:20_000])]
        for start in range(len(words)):
            for n in range(1, min(self._longest, len(words) - start) + 1):
                for j in self._titles.get(tuple(words[start : start + n]), ()):
                    if j != i:
                        out[j] = None
        result = list(out)[: self.max_links]
        with self._lock:
            self._related[i] = result
        return result


def _page(site: str, title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)} - {html.escape(site)}</title>"
        "<style>body{font-family:sans-serif;max-width:50em;margin:auto}</style>"
        "<script>window.offlineWeb = true;</script></head><body>"
        f'<nav><a href="/">{html.escape(site)}</a> | <a href="/">All pages</a></nav>'
        f"<header><p>{html.escape(site)}: an offline copy of a document collection</p></header>"
        f"<main><article>{body}</article></main>"
        "<footer><p>Served locally by llm_marl for offline experiments.</p></footer>"
        "</body></html>"
    )


def _paragraphs(text: str) -> str:
    blocks = [b.strip() for b in re.split(r"\n\s*\n|\n", text) if b.strip()]
    return "".join(f"<p>{html.escape(b)}</p>" for b in blocks) or "<p></p>"


def _doc_path(doc_id: str) -> str:
    return "/doc/" + quote(doc_id, safe="")


def _make_handler(state: _SiteState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "llm-marl-site/0.1"
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def _send(self, status: int, body: str, head_only: bool) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head_only:
                self.wfile.write(data)

        def _handle(self, head_only: bool) -> None:
            state.last_request = time.monotonic()
            if len(self.path) > 4096:
                self._send(414, _page(state.name, "Too long", "<h1>URI too long</h1>"), head_only)
                return
            parts = urlsplit(self.path)
            if parts.path == "/":
                self._send(200, self._index(parts.query), head_only)
                return
            if parts.path.startswith("/doc/"):
                i = state.by_id.get(unquote(parts.path[len("/doc/") :]))
                if i is not None:
                    self._send(200, self._document(i), head_only)
                    return
            self._send(404, _page(state.name, "Not found", "<h1>Page not found</h1>"), head_only)

        def _document(self, i: int) -> str:
            doc = state.documents[i]
            body = f"<h1>{html.escape(doc.title or doc.id)}</h1>{_paragraphs(doc.text)}"
            links = state.related(i)
            if links:
                items = "".join(
                    f'<li><a href="{_doc_path(state.documents[j].id)}">'
                    f"{html.escape(state.documents[j].title or state.documents[j].id)}</a></li>"
                    for j in links
                )
                body += f"<h2>Related pages</h2><ul>{items}</ul>"
            return _page(state.name, doc.title or doc.id, body)

        def _index(self, query: str) -> str:
            try:
                page = max(1, int(parse_qs(query).get("page", ["1"])[0]))
            except ValueError:
                page = 1
            pages = max(1, -(-len(state.documents) // INDEX_PAGE_SIZE))
            page = min(page, pages)
            chunk = state.documents[(page - 1) * INDEX_PAGE_SIZE : page * INDEX_PAGE_SIZE]
            items = "".join(
                f'<li><a href="{_doc_path(d.id)}">{html.escape(d.title or d.id)}</a></li>'
                for d in chunk
            )
            more = f'<p><a href="/?page={page + 1}">Next page</a></p>' if page < pages else ""
            body = f"<h1>All pages ({page} of {pages})</h1><ul>{items}</ul>{more}"
            return _page(state.name, "All pages", body)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            self._handle(head_only=False)

        def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
            self._handle(head_only=True)

    return Handler


def _stop_server(server: _Server, thread: threading.Thread, done: threading.Event) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
    done.set()


class LocalSite:
    """A corpus served as a website on a loopback address (see the module docstring).

    Args:
        documents: The corpus; ids must be unique.
        host: An IPv4 loopback address to listen on (``127.0.0.1`` by default).
        port: The port; 0 picks a free one.
        name: The site's name, shown on every page.
        max_links: Most "Related pages" links per page.
        idle_timeout: Stop after this many seconds without a request (None: never).

    Raises:
        ValueError: ``host`` is not a loopback address.
        DataError: The corpus is empty or has duplicate ids.
    """

    def __init__(
        self,
        documents: Iterable[Document],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "Offline Web",
        max_links: int = 20,
        idle_timeout: float | None = None,
    ) -> None:
        address = ipaddress.ip_address(host)
        if address.version != 4 or not address.is_loopback:
            raise ValueError(f"LocalSite listens on IPv4 loopback addresses only, not {host!r}")
        self._docs = check_documents(documents)
        self.host = host
        self.port = port
        self.name = name
        self.max_links = max_links
        self.idle_timeout = idle_timeout
        self._server: _Server | None = None
        self._stopped = threading.Event()
        self._finalizer: Any = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> LocalSite:
        """Start serving (idempotent). Returns self."""
        if self._server is not None:
            return self
        state = _SiteState(self._docs, self.name, self.max_links)
        server = _Server((self.host, self.port), _make_handler(state))
        server.site = state
        self.port = server.server_address[1]
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            daemon=True,
            name=f"llm-marl-site-{self.port}",
        )
        thread.start()
        self._server = server
        self._stopped = threading.Event()
        self._finalizer = weakref.finalize(self, _stop_server, server, thread, self._stopped)
        if self.idle_timeout is not None:
            watchdog = threading.Thread(
                target=_idle_watch,
                args=(weakref.ref(self), state, self.idle_timeout),
                daemon=True,
                name=f"llm-marl-site-idle-{self.port}",
            )
            watchdog.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()
        self._server = None

    @property
    def running(self) -> bool:
        """True while the server is serving."""
        return self._server is not None and not self._stopped.is_set()

    def __enter__(self) -> LocalSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the server must be started)."""
        if self._server is None:
            raise RuntimeError("the site is not running: use `with LocalSite(...) as site:`")
        return f"http://{self.host}:{self.port}"

    def url_for(self, doc_id: str) -> str:
        """The URL of a document's page."""
        return self.base_url + _doc_path(doc_id)

    @property
    def documents(self) -> list[Document]:
        """The corpus with each document's ``url`` set to its page on this site."""
        return with_urls(self._docs, {d.id: self.url_for(d.id) for d in self._docs})

    def browse_config(self, **overrides: Any) -> BrowseConfig:
        """A :class:`~llm_marl.tools.browse.BrowseConfig` that may reach this site, and treats
        its failures as infrastructure failures (plus ``overrides``)."""
        fields: dict[str, Any] = {
            "allowed_networks": (f"{self.host}/32",),
            "allowed_ports": (self.port,),  # not every other service on 127.0.0.1
            "infrastructure_origins": (self.base_url,),
        }
        fields.update(overrides)
        return BrowseConfig(**fields)

    def browser(self, **overrides: Any) -> Browser:
        """A :class:`~llm_marl.tools.browse.Browser` with :meth:`browse_config`."""
        return Browser(self.browse_config(**overrides))


def _idle_watch(site_ref: weakref.ref[LocalSite], state: _SiteState, idle: float) -> None:
    while True:
        time.sleep(min(idle, 1.0) / 2)
        site = site_ref()
        if site is None or not site.running:
            return
        if time.monotonic() - state.last_request > idle:
            site.stop()
            return
        del site
