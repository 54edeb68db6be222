"""Fetch a web page for an agent and turn it into readable, paginated text.

Example::

    from llm_marl.tools.browse import Browser, browse_tool

    browser = Browser()                       # public addresses only
    page = browser.browse("https://en.wikipedia.org/wiki/Shirley_Temple")
    print(page.render())                      # "Title ... (page 1 of 7) ..." or "Error: ..."
    browser.browse(page.url, page=2)          # served from the page cache, not fetched again

    tool = browse_tool(browser)               # a Tool for a Toolbox

What is kept: the title, headings (``#`` marks), paragraphs, lists (``-``), tables (cells joined by
``|``), preformatted text, and links written ``[text](absolute URL)`` so the agent can follow
them. What is dropped: scripts, styles, ``noscript``, templates, navigation, page-level headers and
footers (a ``header``/``footer`` inside ``main`` or ``article`` is kept), asides, forms, embedded
objects, and elements marked ``hidden`` or ``aria-hidden="true"``. The text is cut into pages of
``page_chars`` characters at line breaks; the agent asks for page k of n.

Limits (:class:`BrowseConfig`): a deadline for the whole fetch (every redirect hop included), a
byte cap (the body is streamed and reading stops at the cap; a declared ``Content-Length`` over
the cap is refused before reading), at most ``max_redirects`` redirects, each followed by hand and
re-checked, only text content types (HTML, XHTML, plain text, JSON, XML), and at most
``max_tags`` tags parsed (HTML past that is not parsed). HTML is parsed by BeautifulSoup over
lxml: Python's own ``html.parser`` takes quadratic time on hostile input such as ``<a <a <a ...``
and is never used.

Address guard: the host is resolved here and *every* resolved address must be public -- not
private, loopback, link-local, multicast, reserved, unspecified, shared (100.64/10), nor an IPv6
form of one (IPv4-mapped, 6to4, NAT64, Teredo) -- unless it falls in ``allowed_networks``. The
request then connects to the checked address itself (the host name goes only in ``Host``, SNI and
the certificate check), so a DNS answer that changes between check and connect (DNS rebinding)
cannot reach an unchecked address. Proxies from the environment are ignored for the same reason.

Whose fault: :meth:`Browser.browse` *returns* a :class:`Page` with ``error`` set for everything
that follows from the URL the agent chose -- a malformed URL, a scheme other than http(s), a
blocked address, a name that does not resolve, a refused or reset connection, a hang or a trickle
past the deadline, an HTTP error status, a redirect loop or too many redirects, a binary content
type, a page over the byte cap, a page past the last one. The agent reads the message and is
scored. It *raises* :class:`~llm_marl.errors.InfrastructureError` only when our side failed: any
network failure or HTTP 5xx from an origin listed in ``infrastructure_origins`` (the offline web
of a :class:`~llm_marl.tools.site.LocalSite`, which must not go down), or an unexpected error of
the local machine (out of file descriptors, ...). A 404 from such an origin is still the agent's
fault (it made up the URL).
"""

from __future__ import annotations

import codecs
import ipaddress
import re
import socket
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from time import monotonic
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from llm_marl.errors import InfrastructureError
from llm_marl.tools.calls import Tool, ToolUseError, tool
from llm_marl.tools.http import HttpError, http_request

__all__ = [
    "BrowseConfig",
    "Browser",
    "Page",
    "address_allowed",
    "browse_tool",
    "html_to_text",
    "paginate",
]


def _names(text: str) -> frozenset[str]:
    """The space-separated words of ``text`` (long name lists stay readable)."""
    return frozenset(text.split())


TEXT_TYPES = _names(
    "text/html application/xhtml+xml text/plain text/markdown text/csv text/xml "
    "application/xml application/json"
)
"""Content types the browser reads; anything else (images, PDF, archives, ...) is refused."""

_HTML_TYPES = {"text/html", "application/xhtml+xml"}


@dataclass(frozen=True)
class BrowseConfig:
    """Limits and policy of a :class:`Browser`.

    Attributes:
        timeout: Deadline in seconds for one whole fetch: name resolution, every redirect hop,
            headers and body.
        max_bytes: Most body bytes read from one response.
        truncate_oversize: What to do with a body over ``max_bytes``: False (default) refuses the
            page with an error for the agent; True keeps the first ``max_bytes`` bytes and says
            the page was cut.
        max_redirects: Redirects followed per fetch.
        page_chars: Characters per page of text.
        max_tags: Most HTML tags parsed per document (bounds parsing time on huge pages).
        allowed_networks: Networks (CIDR strings) reachable even though the guard would block
            them, e.g. ``("127.0.0.1/32",)`` for a :class:`~llm_marl.tools.site.LocalSite`.
        infrastructure_origins: Origins (``"http://127.0.0.1:8000"``) whose failures are ours,
            raised as :class:`~llm_marl.errors.InfrastructureError` (see the module docstring).
        max_url_chars: Longest URL accepted.
        cache_documents: Fetched documents kept for paging (least recently used dropped).
        user_agent: The ``User-Agent`` header sent.
        tls_verify: Certificate verification for https: True (the default CA bundle) or the
            path of a CA bundle to trust instead.
    """

    timeout: float = 15.0
    max_bytes: int = 2 * 1024 * 1024
    truncate_oversize: bool = False
    max_redirects: int = 5
    page_chars: int = 6000
    max_tags: int = 30_000
    allowed_networks: tuple[str, ...] = ()
    infrastructure_origins: tuple[str, ...] = ()
    max_url_chars: int = 2048
    cache_documents: int = 64
    user_agent: str = "llm-marl-browse/0.1"
    tls_verify: bool | str = True

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.max_bytes <= 0 or self.page_chars <= 0:
            raise ValueError("timeout, max_bytes and page_chars must be positive")
        for net in self.allowed_networks:
            ipaddress.ip_network(net, strict=False)  # raises ValueError on a typo


@dataclass(frozen=True)
class Page:
    """One page of a fetched document, or the reason there is none.

    Attributes:
        url: The URL asked for.
        final_url: Where the document was found (after redirects); ``""`` on error.
        title: The document title (``""`` if none).
        text: The text of this page.
        page: This page's number, from 1.
        pages: How many pages the document has (0 on error).
        error: None, or the message for the agent saying why there is no page.
        truncated: The body was cut at ``max_bytes`` (``truncate_oversize=True`` only).
    """

    url: str
    final_url: str = ""
    title: str = ""
    text: str = ""
    page: int = 1
    pages: int = 0
    error: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the page was fetched (``error`` is None)."""
        return self.error is None

    def render(self) -> str:
        """The text the agent reads: a header line and the page, or ``"Error: ..."``."""
        if self.error is not None:
            return f"Error: {self.error}"
        head = f"{self.title}\n" if self.title else ""
        where = f"URL: {self.final_url} (page {self.page} of {self.pages})"
        cut = "\n[The document was cut at the size limit.]" if self.truncated else ""
        more = (
            f"\n[Page {self.page} of {self.pages}; ask for page {self.page + 1} to read on.]"
            if self.page < self.pages
            else ""
        )
        return f"{head}{where}\n\n{self.text}{cut}{more}"


@dataclass
class _Document:
    final_url: str
    title: str
    pages: list[str]
    truncated: bool


class _AgentError(Exception):
    """The fetch failed because of the URL the agent chose."""


@dataclass
class _Stop(Exception):
    """Raised from check_headers to end a response without reading its body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Address guard
# ---------------------------------------------------------------------------------------------


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    packed = ip.packed
    if packed[:12] == bytes(12) and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(packed[12:])
    return None


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    ):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return _public(inner)
        if ip.is_site_local:
            return False
    return True


def address_allowed(address: str, allowed_networks: Iterable[str] = ()) -> bool:
    """Whether the browser may connect to IP ``address``: a public address, or one inside
    ``allowed_networks``. Anything that is not an IP address is refused."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    for net in allowed_networks:
        network = ipaddress.ip_network(net, strict=False)
        if ip.version == network.version and ip in network:
            return True
    return _public(ip)


def _resolve(host: str, port: int, timeout: float) -> list[str]:
    """The IP addresses of ``host`` (an IP literal resolves to itself), within ``timeout``.

    ``getaddrinfo`` cannot be interrupted, so it runs in a daemon thread that is abandoned (and
    ends by itself with the resolver's own timeout) if it takes longer than ``timeout``.
    """
    literal = host.strip("[]")
    try:
        return [str(ipaddress.ip_address(literal.split("%", 1)[0]))]
    except ValueError:
        pass
    outcome: dict[str, Any] = {}

    def lookup() -> None:
        try:
            outcome["infos"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            outcome["error"] = e

    worker = threading.Thread(target=lookup, daemon=True, name="llm-marl-dns")
    worker.start()
    worker.join(max(timeout, 0.001))
    if worker.is_alive():
        raise _AgentError(f"resolving {host!r} took longer than the time limit")
    if "error" in outcome:
        raise _AgentError(f"could not resolve host {host!r} ({outcome['error']})")
    infos = outcome["infos"]
    ips = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not ips:
        raise _AgentError(f"host {host!r} has no address")
    return ips


# ---------------------------------------------------------------------------------------------
# HTML to text
# ---------------------------------------------------------------------------------------------

_DROP = _names(
    "script style noscript template nav aside form svg math iframe object embed "
    "canvas button select input textarea title base link meta dialog"
)
# Not "head" itself: lxml puts HTML5 elements that follow <title> (<main>, <article>) inside it
# when a page has no <body> tag, and their text must not be lost.
_PAGE_CHROME = frozenset({"header", "footer"})
_BLOCK = _names(
    "p div section article main header footer ul ol li dl dt dd table thead tbody "
    "tfoot tr caption blockquote pre figure figcaption address details summary hr br "
    "h1 h2 h3 h4 h5 h6 body html"
)
_SPACE = re.compile(r"\s+")


class _TextWriter:
    """Collects text as lines; inline text is whitespace-collapsed unless inside ``<pre>``."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.parts: list[str] = []
        self.verbatim = False  # the current line holds <pre> text: keep its indentation

    def write(self, text: str, pre: bool) -> None:
        if pre:
            chunks = text.split("\n")
            for i, chunk in enumerate(chunks):
                if i:
                    self.flush(keep_empty=True)
                self.parts.append(chunk)
                self.verbatim = True
        else:
            collapsed = _SPACE.sub(" ", text)
            if collapsed.strip() or (self.parts and not self.parts[-1].endswith(" ")):
                self.parts.append(collapsed)

    def flush(self, keep_empty: bool = False) -> None:
        line = "".join(self.parts)
        self.parts = []
        line = line.rstrip() if self.verbatim else line.strip()
        self.verbatim = False
        if line or keep_empty:
            self.lines.append(line)

    def text(self) -> str:
        self.flush()
        out: list[str] = []
        for line in self.lines:
            if not line and (not out or not out[-1]):
                continue  # at most one blank line in a row
            out.append(line)
        return "\n".join(out).strip()


def _cut_tags(markup: str, max_tags: int) -> str:
    """``markup`` up to (not including) its ``max_tags``-th ``<`` (a linear scan)."""
    pos = -1
    for _ in range(max_tags):
        pos = markup.find("<", pos + 1)
        if pos == -1:
            return markup
    return markup[:pos]


def html_to_text(markup: str, base_url: str = "", *, max_tags: int = 30_000) -> tuple[str, str]:
    """``(title, text)`` of an HTML document (see the module docstring for what is kept).

    Links become ``[text](absolute URL)`` (relative ones resolved against ``base_url``); the walk
    is iterative, so arbitrarily deep nesting costs no recursion. Linear in ``len(markup)``:
    lxml parses it, and only the first ``max_tags`` tags are parsed.
    """
    from bs4 import BeautifulSoup, Comment, Doctype, NavigableString, Tag
    from bs4 import ProcessingInstruction as PI

    markup = _cut_tags(markup, max_tags)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        soup = BeautifulSoup(markup, "lxml")
    title_tag = soup.find("title")
    title = _SPACE.sub(" ", title_tag.get_text()).strip() if isinstance(title_tag, Tag) else ""
    out = _TextWriter()
    # Stack of (node, entering). On leaving a tag we close what entering opened.
    stack: list[tuple[Any, bool, Any]] = [(soup, True, None)]
    ol_counts: dict[int, int] = {}
    pre_depth = 0
    content_depth = 0  # inside <main> / <article>: headers and footers there are content
    while stack:
        node, entering, info = stack.pop()
        if isinstance(node, NavigableString):
            if isinstance(node, (Comment, Doctype, PI)):
                continue
            out.write(str(node), pre_depth > 0)
            continue
        if not isinstance(node, Tag):
            continue
        name = (node.name or "").lower()
        if entering:
            if name in _DROP or (name in _PAGE_CHROME and content_depth == 0):
                continue
            attrs = node.attrs or {}
            if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
                continue
            opened: dict[str, Any] = {}
            if name in _BLOCK:
                out.flush()
            if name in ("main", "article"):
                content_depth += 1
            if name == "pre":
                pre_depth += 1
            if len(name) == 2 and name[0] == "h" and name[1] in "123456":
                out.parts.append("#" * int(name[1]) + " ")
            elif name == "li":
                parent = node.parent
                if isinstance(parent, Tag) and parent.name == "ol":
                    # Counted per list as we go: looking back at siblings would be quadratic.
                    index = ol_counts.get(id(parent), 0) + 1
                    ol_counts[id(parent)] = index
                    out.parts.append(f"{index}. ")
                else:
                    out.parts.append("- ")
            elif name in ("td", "th"):
                previous = node.find_previous_sibling(["td", "th"])
                if previous is not None:
                    out.parts.append(" | ")
            elif name == "a":
                href = attrs.get("href")
                if isinstance(href, str) and href.strip():
                    target = urljoin(base_url, href.strip()) if base_url else href.strip()
                    if urlsplit(target).scheme in ("http", "https"):
                        opened["link"] = (urldefrag(target)[0], len(out.lines), len(out.parts))
            elif name == "img":
                alt = attrs.get("alt")
                if isinstance(alt, str) and alt.strip():
                    out.parts.append(f"[image: {_SPACE.sub(' ', alt).strip()}]")
            stack.append((node, False, opened))
            for child in reversed(node.contents):
                stack.append((child, True, None))
        else:
            opened = info or {}
            if "link" in opened:
                target, lines_at_start, start = opened["link"]
                if len(out.lines) != lines_at_start:
                    # The link spans blocks: its text is already written; add the target.
                    out.parts.append(f" ({target})")
                else:
                    inner = "".join(out.parts[start:]).strip()
                    if inner:
                        out.parts[start:] = [f"[{inner}]({target})"]
            if name == "pre":
                pre_depth -= 1
            if name in ("main", "article"):
                content_depth -= 1
            if name in _BLOCK:
                out.flush()
                if name in ("p", "table", "ul", "ol", "pre", "blockquote") or name[:1] == "h":
                    out.lines.append("")
    return title, out.text()


def paginate(text: str, page_chars: int) -> list[str]:
    """``text`` cut into pages of at most ``page_chars`` characters, at line breaks where
    possible (a longer line is cut at a space, else mid-word). Always at least one page."""
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        while len(line) > page_chars:
            cut = line.rfind(" ", 0, page_chars)
            cut = cut if cut > page_chars // 2 else page_chars
            head, line = line[:cut], line[cut:].lstrip()
            if current:
                pages.append("\n".join(current))
                current, size = [], 0
            pages.append(head)
        if size + len(line) + 1 > page_chars and current:
            pages.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pages.append("\n".join(current))
    pages = [p.strip("\n") for p in pages if p.strip()]
    return pages or [""]


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})""", re.I
)


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    candidates = []
    if charset:
        candidates.append(charset)
    if html:
        match = _META_CHARSET.search(body[:4096])
        if match:
            candidates.append(match.group(1).decode("ascii"))
    for name in candidates:
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return body.decode(name, errors="replace")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _looks_binary(body: bytes) -> bool:
    return b"\x00" in body[:4096]


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------


def _origin(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{host}:{port}"


_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class Browser:
    """Fetches pages for agents within :class:`BrowseConfig` limits; thread-safe.

    Args:
        config: Limits and policy (default :class:`BrowseConfig`).
        **overrides: Fields of :class:`BrowseConfig` to change, e.g.
            ``Browser(allowed_networks=("127.0.0.1/32",), timeout=5)``.
    """

    def __init__(self, config: BrowseConfig | None = None, **overrides: Any) -> None:
        base = config or BrowseConfig()
        if overrides:
            from dataclasses import replace

            base = replace(base, **overrides)
        self.config = base
        self._infra = {_origin(o) for o in base.infrastructure_origins}
        self._cache: OrderedDict[str, _Document] = OrderedDict()
        self._lock = threading.Lock()

    def browse(self, url: str, page: int = 1) -> Page:
        """Page ``page`` (from 1) of the document at ``url``.

        Returns a :class:`Page`; ``page.error`` is set when the agent's URL (or page number)
        could not be read. Raises :class:`~llm_marl.errors.InfrastructureError` only for
        failures on our side (see the module docstring).
        """
        if not isinstance(page, int) or isinstance(page, bool) or page < 1:
            return Page(url=str(url), error=f"page must be a positive integer, got {page!r}")
        try:
            key = self._check_url(url)
            with self._lock:
                doc = self._cache.get(key)
                if doc is not None:
                    self._cache.move_to_end(key)
            if doc is None:
                doc = self._fetch(key)
                with self._lock:
                    self._cache[key] = doc
                    while len(self._cache) > self.config.cache_documents:
                        self._cache.popitem(last=False)
        except _AgentError as e:
            return Page(url=str(url)[: self.config.max_url_chars], error=str(e))
        if page > len(doc.pages):
            return Page(
                url=url,
                error=f"page {page} does not exist: {doc.final_url} has {len(doc.pages)} "
                f"page{'s' if len(doc.pages) != 1 else ''}",
            )
        return Page(
            url=url,
            final_url=doc.final_url,
            title=doc.title,
            text=doc.pages[page - 1],
            page=page,
            pages=len(doc.pages),
            truncated=doc.truncated,
        )

    def _check_url(self, url: Any) -> str:
        """The URL without its fragment, or :class:`_AgentError` if it cannot be fetched."""
        if not isinstance(url, str) or not url.strip():
            raise _AgentError("the URL is empty")
        url = url.strip()
        if len(url) > self.config.max_url_chars:
            raise _AgentError(f"the URL is longer than {self.config.max_url_chars} characters")
        if _CONTROL.search(url):
            raise _AgentError("the URL contains spaces or control characters; percent-encode them")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise _AgentError(f"malformed URL {url[:100]!r} ({e})") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise _AgentError(
                f"only http:// and https:// URLs can be browsed, not {parts.scheme or 'a URL without scheme'!r}"
            )
        if not parts.hostname:
            raise _AgentError(f"malformed URL {url[:100]!r}: no host")
        if parts.username is not None or parts.password is not None:
            raise _AgentError("URLs with a user name or password are not allowed")
        if port == 0:
            raise _AgentError("port 0 is not a valid port")
        return urldefrag(url)[0]

    def _fetch(self, url: str) -> _Document:
        cfg = self.config
        end = monotonic() + cfg.timeout
        seen: list[str] = []
        current = url
        while True:
            if current in seen:
                raise _AgentError(f"redirect loop: {current[:200]} was already visited")
            seen.append(current)
            response = self._fetch_once(current, end)
            if isinstance(response, str):  # a redirect target
                if len(seen) > cfg.max_redirects:
                    raise _AgentError(f"more than {cfg.max_redirects} redirects from {url[:200]}")
                current = self._check_url(response)
                continue
            return response

    def _fetch_once(self, url: str, end: float) -> _Document | str:
        """The document at ``url``, or the absolute URL it redirects to."""
        cfg = self.config
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infra = _origin(url) in self._infra
        remaining = end - monotonic()
        if remaining <= 0:
            raise self._timeout(url, infra)
        ips = _resolve(host, port, remaining)
        blocked = [ip for ip in ips if not address_allowed(ip, cfg.allowed_networks)]
        if blocked:
            raise _AgentError(
                f"{host} resolves to {blocked[0]}, a private, loopback, link-local or otherwise "
                f"non-public address; only public web addresses can be browsed"
            )

        def check_headers(status: int, headers: Mapping[str, str]) -> None:
            if status != 200:
                raise _Stop(status, headers)
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype and ctype not in TEXT_TYPES:
                raise _AgentError(
                    f"{url[:200]} is {ctype}, not a text page; only HTML and text can be read"
                )
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > cfg.max_bytes and not cfg.truncate_oversize:
                raise _AgentError(
                    f"{url[:200]} is {int(length):,} bytes, more than the {cfg.max_bytes:,}-byte limit"
                )

        try:
            response = http_request(
                "GET",
                url,
                timeout=end - monotonic(),
                max_bytes=cfg.max_bytes,
                headers={
                    "User-Agent": cfg.user_agent,
                    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1",
                    "Accept-Encoding": "identity",
                },
                connect_ip=ips[0],
                trust_env=False,
                verify=cfg.tls_verify,
                check_headers=check_headers,
            )
        except _Stop as stop:
            return self._status(url, stop, infra)
        except HttpError as e:
            if e.kind == "deadline":
                raise self._timeout(url, infra) from None
            if infra:
                raise InfrastructureError(f"the local web at {_origin(url)} failed: {e}") from None
            raise _AgentError(f"could not fetch {url[:200]}: {e}") from None
        except OSError as e:  # our machine, not the agent's URL
            raise InfrastructureError(f"fetching {url[:200]} failed locally: {e}") from e
        if not response.complete and not cfg.truncate_oversize:
            raise _AgentError(f"{url[:200]} is larger than the {cfg.max_bytes:,}-byte limit")
        ctype = response.content_type
        if not ctype and _looks_binary(response.body):
            raise _AgentError(f"{url[:200]} is binary data, not a text page")
        html = ctype in _HTML_TYPES or (not ctype and b"<html" in response.body[:2048].lower())
        text = _decode(response.body, response.charset, html)
        if html:
            title, text = html_to_text(text, url, max_tags=cfg.max_tags)
        else:
            title = ""
        return _Document(
            final_url=url,
            title=title,
            pages=paginate(text, cfg.page_chars),
            truncated=not response.complete,
        )

    def _status(self, url: str, stop: _Stop, infra: bool) -> str:
        """The redirect target for a 3xx, else an error for the status."""
        status = stop.status
        if status in (301, 302, 303, 307, 308):
            location = stop.headers.get("location", "").strip()
            if not location:
                raise _AgentError(f"{url[:200]} redirects (HTTP {status}) without a Location")
            return urljoin(url, location)
        if infra and status >= 500:
            raise InfrastructureError(f"the local web at {_origin(url)} answered HTTP {status}")
        raise _AgentError(f"{url[:200]} answered HTTP {status}")

    def _timeout(self, url: str, infra: bool) -> Exception:
        message = f"{url[:200]} did not answer within {self.config.timeout:g} s"
        if infra:
            return InfrastructureError(f"the local web at {_origin(url)} failed: {message}")
        return _AgentError(message)


def browse_tool(browser: Browser, *, name: str = "browse", server: str | None = None) -> Tool:
    """A :class:`~llm_marl.tools.calls.Tool` that reads page ``page`` of ``url`` with
    ``browser``; a page the agent cannot read is reported to it as an error.

    Example::

        box = Toolbox([search_tool(engine), browse_tool(Browser())])
    """

    def run(url: str, page: int = 1) -> str:
        """Read a web page as text. Long pages come in numbered pages; ask for the next one.

        Args:
            url: The http(s) URL to read, e.g. one from the search results.
            page: Which page of the document to read, from 1.
        """
        result = browser.browse(url, page)
        if result.error is not None:
            raise ToolUseError(result.error)
        return result.render()

    made = tool(run, name=name, server=server)
    params = dict(made.parameters)
    props = dict(params["properties"])
    props["page"] = {**props["page"], "minimum": 1}
    props["url"] = {**props["url"], "minLength": 1}
    params["properties"] = props
    return Tool(made.name, made.description, params, fn=run, server=server)
