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
``max_tags`` tags parsed (HTML past that is not parsed), and at most ``max_text_chars``
characters of text per document (a link target longer than ``max_url_chars`` keeps only its
anchor text). HTML is parsed by BeautifulSoup over lxml: Python's own ``html.parser`` takes
quadratic time on hostile input such as ``<a <a <a ...`` and is never used. A charset the server
names that is not a text encoding (``rot13``, ``base64``, ...) is ignored, and a link whose URL
cannot be parsed keeps its text: a page is never lost to what it says about itself.

Address guard: the host is resolved here and *every* resolved address must be public -- not
private, loopback, link-local, multicast, reserved, unspecified, shared (100.64/10), nor an IPv6
form of one (IPv4-mapped, 6to4, NAT64, Teredo) -- unless it falls in ``allowed_networks``. The
request then connects to the checked address itself (the host name goes only in ``Host``, SNI and
the certificate check), so a DNS answer that changes between check and connect (DNS rebinding)
cannot reach an unchecked address. Proxies from the environment are ignored for the same reason.
An address let through by ``allowed_networks`` is reachable only on ``allowed_ports`` when
those are given (a LocalSite's browser: its own port, not every service on 127.0.0.1).

Whose fault: :meth:`Browser.browse` *returns* a :class:`Page` with ``error`` set for everything
that follows from the URL the agent chose -- a malformed URL, a scheme other than http(s), a
blocked address, a name that does not resolve, a refused or reset connection, a hang or a trickle
past the deadline, an HTTP error status, a redirect to a malformed URL, a redirect loop or too
many redirects, a binary content type, a page over the byte cap, a page past the last one. The
agent reads the message and is scored. It *raises* :class:`~llm_marl.errors.InfrastructureError`
only when our side failed: any network failure, HTTP 5xx or malformed redirect from an origin
listed in ``infrastructure_origins`` (the offline web
of a :class:`~llm_marl.tools.site.LocalSite`, which must not go down), or an unexpected error of
the local machine (out of file descriptors, ...). A 404 from such an origin is still the agent's
fault (it made up the URL).
"""

from __future__ import annotations

import codecs
import ipaddress
import re
import socket
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from time import monotonic
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from llm_marl.checks import is_int
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

MAX_TEXT_CHARS = 4 * 1024 * 1024
"""Default :attr:`BrowseConfig.max_text_chars` (and of :func:`html_to_text`)."""


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
        allowed_ports: The only ports on which the addresses that ``allowed_networks`` lets
            through may be reached; empty (the default): any port. A LocalSite allows its own
            port only: "127.0.0.1/32" alone would also open every other local service (a model
            server, a dashboard) to the agent. Public addresses are reachable on any port.
        infrastructure_origins: Origins (``"http://127.0.0.1:8000"``) whose failures are ours,
            raised as :class:`~llm_marl.errors.InfrastructureError` (see the module docstring).
        max_url_chars: Longest URL accepted. Also the longest link target written into the text:
            a longer one could not be browsed, so such a link keeps only its anchor text.
        max_text_chars: Most characters of text kept per document; past it the text ends with
            a ``[The text was cut at N characters.]`` line. Links make text longer than its
            HTML (each ``<a href="?">y</a>`` becomes ``[y](<the page's whole URL>)``), so without
            this a 0.24 MB page fetched at a 2 KB URL became 28 million characters. The default,
            twice the default ``max_bytes``, is beyond what any page under the byte cap yields
            without such amplification.
        cache_documents: Fetched documents kept for paging (least recently used dropped).
        cache_bytes: Most bytes of text (titles, URLs, pages, as Python holds them) the cache
            keeps; least recently used documents are dropped first, and a document larger than
            the whole cache is served but not kept.
        max_title_chars: Longest title the agent reads (a ``<title>`` is the page's choice).
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
    allowed_ports: tuple[int, ...] = ()
    infrastructure_origins: tuple[str, ...] = ()
    max_url_chars: int = 2048
    max_text_chars: int = MAX_TEXT_CHARS
    cache_documents: int = 64
    cache_bytes: int = 64 * 1024 * 1024
    max_title_chars: int = 300
    user_agent: str = "llm-marl-browse/0.1"
    tls_verify: bool | str = True

    def __post_init__(self) -> None:
        sizes = (self.timeout, self.max_bytes, self.page_chars, self.max_text_chars)
        if min(*sizes, self.cache_bytes, self.max_title_chars) <= 0:
            raise ValueError(
                "timeout, max_bytes, page_chars, max_text_chars, cache_bytes and "
                "max_title_chars must be positive"
            )
        for net in self.allowed_networks:
            ipaddress.ip_network(net, strict=False)  # raises ValueError on a typo
        for port in self.allowed_ports:
            if not is_int(port) or not 0 < int(port) < 65536:
                raise ValueError(f"allowed_ports must hold ports 1-65535, got {port!r}")


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

    @property
    def size(self) -> int:
        """Bytes its strings take in memory (what the cache bound counts); O(pages)."""
        strings = (self.final_url, self.title, *self.pages)
        return sum(sys.getsizeof(s) for s in strings)


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
        # Kept as we go, so that the walk can stop near max_text_chars without measuring the
        # text at every node: the exact length of the finished lines (with their newlines), and
        # the length of the current line's parts, which overcounts the whitespace that
        # flush() trims from its ends.
        self.lines_size = 0
        self.line_size = 0

    @property
    def size(self) -> int:
        """The length of the text so far, give or take the current line's end whitespace."""
        return self.lines_size + self.line_size

    def add(self, text: str) -> None:
        """Append ``text`` to the current line as it is (list marks, cell separators, ...)."""
        self.parts.append(text)
        self.line_size += len(text)

    def write(self, text: str, pre: bool) -> None:
        if pre:
            chunks = text.split("\n")
            for i, chunk in enumerate(chunks):
                if i:
                    self.flush(keep_empty=True)
                self.add(chunk)
                self.verbatim = True
        else:
            collapsed = _SPACE.sub(" ", text)
            if collapsed.strip() or (self.parts and not self.parts[-1].endswith(" ")):
                self.add(collapsed)

    def flush(self, keep_empty: bool = False) -> None:
        line = "".join(self.parts)
        self.parts = []
        line = line.rstrip() if self.verbatim else line.strip()
        self.verbatim = False
        self.line_size = 0
        if line or keep_empty:
            self.lines.append(line)
            self.lines_size += len(line) + 1  # and its newline

    def blank(self) -> None:
        """End a block with an empty line."""
        self.lines.append("")
        self.lines_size += 1

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


def _link_target(href: Any, base_url: str, max_chars: int) -> str | None:
    """The absolute http(s) URL (without fragment) that ``href`` names, or None when the link
    has none worth writing: no href, another scheme, longer than ``max_chars``, or unparseable.
    """
    if not isinstance(href, str) or not href.strip():
        return None
    href = href.strip()
    try:
        target = urljoin(base_url, href) if base_url else href
        if urlsplit(target).scheme not in ("http", "https"):
            return None
        target = urldefrag(target)[0]
    except ValueError:
        # urllib refuses some hrefs outright ("http://[::1", "//[bad", "http://]x[/"). That is
        # the page author's mistake, not a reason to lose the page: the anchor text stays.
        return None
    # A target the browser would refuse (over max_url_chars) is of no use to the agent, and
    # writing it out is how a small page of links grows into a huge text.
    return target if len(target) <= max_chars else None


def _cut_text(text: str, max_chars: int, *, cut: bool = False) -> str:
    """``text``, or its first ``max_chars`` characters and a line saying it was cut (also when
    ``cut`` says some of it was dropped already)."""
    if len(text) <= max_chars and not cut:
        return text
    return f"{text[:max_chars].rstrip()}\n\n[The text was cut at {max_chars:,} characters.]"


def html_to_text(
    markup: str,
    base_url: str = "",
    *,
    max_tags: int = 30_000,
    max_text_chars: int = MAX_TEXT_CHARS,
    max_link_chars: int = 2048,
) -> tuple[str, str]:
    """``(title, text)`` of an HTML document (see the module docstring for what is kept).

    Links become ``[text](absolute URL)`` (relative ones resolved against ``base_url``); a link
    whose URL cannot be parsed, or is longer than ``max_link_chars``, keeps only its text. The
    walk is iterative, so arbitrarily deep nesting costs no recursion. Linear in
    ``len(markup)``: lxml parses it, and only the first ``max_tags`` tags are parsed. The text
    is at most ``max_text_chars`` characters plus a line saying it was cut (the walk stops
    there).
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
    # Stop walking once the text is surely past the cap: the rest could not be kept anyway, so
    # it is not worth producing (a page of links could otherwise yield hundreds of times its
    # size). The margin covers out.size's overcount (end whitespace of the current line), so
    # text that fits is never dropped; the exact cut is made at the end.
    stop_at = max_text_chars + max_text_chars // 4 + 1024
    cut = False
    while stack:
        if out.size > stop_at:
            cut = True
            break
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
                out.add("#" * int(name[1]) + " ")
            elif name == "li":
                parent = node.parent
                if isinstance(parent, Tag) and parent.name == "ol":
                    # Counted per list as we go: looking back at siblings would be quadratic.
                    index = ol_counts.get(id(parent), 0) + 1
                    ol_counts[id(parent)] = index
                    out.add(f"{index}. ")
                else:
                    out.add("- ")
            elif name in ("td", "th"):
                previous = node.find_previous_sibling(["td", "th"])
                if previous is not None:
                    out.add(" | ")
            elif name == "a":
                target = _link_target(attrs.get("href"), base_url, max_link_chars)
                if target is not None:
                    opened["link"] = (target, len(out.lines), len(out.parts))
            elif name == "img":
                alt = attrs.get("alt")
                if isinstance(alt, str) and alt.strip():
                    out.add(f"[image: {_SPACE.sub(' ', alt).strip()}]")
            stack.append((node, False, opened))
            for child in reversed(node.contents):
                stack.append((child, True, None))
        else:
            opened = info or {}
            if "link" in opened:
                target, lines_at_start, start = opened["link"]
                if len(out.lines) != lines_at_start:
                    # The link spans blocks: its text is already written; add the target.
                    out.add(f" ({target})")
                else:
                    inner = "".join(out.parts[start:]).strip()
                    if inner:
                        out.parts[start:] = [f"[{inner}]({target})"]
                        out.line_size += len(target) + 4
            if name == "pre":
                pre_depth -= 1
            if name in ("main", "article"):
                content_depth -= 1
            if name in _BLOCK:
                out.flush()
                if name in ("p", "table", "ul", "ol", "pre", "blockquote") or name[:1] == "h":
                    out.blank()
    return title, _cut_text(out.text(), max_text_chars, cut=cut)


_NOT_SPACE = re.compile(r"\S")


def paginate(text: str, page_chars: int) -> list[str]:
    """``text`` cut into pages of at most ``page_chars`` characters, at line breaks where
    possible (a longer line is cut at a space, else mid-word). Always at least one page.

    Linear in ``len(text)``: a long line is walked by offsets, each page sliced out once.
    (Re-slicing the rest of the line for every page cost O(length**2 / page_chars): minutes for
    one 28-million-character line.)
    """
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        start = 0  # line[start:] is what is left of the line
        if len(line) > page_chars:
            while len(line) - start > page_chars:
                end = start + page_chars
                cut = line.rfind(" ", start, end)
                cut = cut if cut - start > page_chars // 2 else end
                if current:
                    pages.append("\n".join(current))
                    current, size = [], 0
                pages.append(line[start:cut])
                # The next page starts at the next non-space (the old ``.lstrip()``).
                more = _NOT_SPACE.search(line, cut)
                start = more.start() if more else len(line)
            line = line[start:]
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


# Codecs Python decodes bytes with that are no page's character set: punycode and idna decode
# host names (punycode in quadratic time: hours for a 2 MB body), the escape codecs read
# backslash sequences, "undefined" always fails. A page naming one is read as if it named none.
_NOT_CHARSETS = frozenset({"punycode", "idna", "unicode-escape", "raw-unicode-escape", "undefined"})


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    """``body`` as text: in the charset of the ``Content-Type`` header, else of a ``<meta>``
    tag, else UTF-8, else cp1252. The server picks the charset name, so a name that is not a
    text encoding, or that fails, is passed over; this never raises."""
    candidates = []
    if charset:
        candidates.append(charset)
    if html:
        match = _META_CHARSET.search(body[:4096])
        if match:
            candidates.append(match.group(1).decode("ascii"))
    for name in candidates:
        try:
            codec = codecs.lookup(name[:40]).name
        except (LookupError, ValueError):  # unknown, or a NUL in the name
            continue
        if codec in _NOT_CHARSETS:
            continue
        try:
            return body.decode(codec, errors="replace")
        except (LookupError, ValueError):
            # codecs.lookup also finds bytes-to-bytes codecs (base64, hex, zlib, uu, rot13),
            # which bytes.decode refuses with LookupError; some text codecs raise UnicodeError
            # (a ValueError) even with errors="replace".
            continue
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _looks_binary(body: bytes) -> bool:
    return b"\x00" in body[:4096]


# ---------------------------------------------------------------------------------------------
# The browser
# ---------------------------------------------------------------------------------------------


_NON_ASCII_BYTE = re.compile(rb"[\x80-\xff]")


def _ascii_location(location: str) -> str:
    """A ``Location`` header value with its non-ASCII bytes percent-encoded.

    Only ASCII belongs there, yet servers send UTF-8 or Latin-1 bytes. ``http.client`` decodes
    headers as Latin-1, so each character here is one byte as sent; percent-encoding those bytes
    is how a URL carries them, and keeps either reading (``/caf%C3%A9``, ``/caf%E9``).
    """
    try:
        raw = location.encode("latin-1")
    except UnicodeEncodeError:  # not from http.client: take it as text
        raw = location.encode("utf-8")
    return _NON_ASCII_BYTE.sub(lambda m: b"%%%02X" % m.group()[0], raw).decode("ascii")


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
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def cache_bytes(self) -> int:
        """Bytes of the documents now cached (at most ``config.cache_bytes``)."""
        with self._lock:
            return self._cached_bytes

    def _keep(self, key: str, doc: _Document) -> None:
        """Cache ``doc`` under ``key`` within both bounds (call with the lock held)."""
        size = doc.size
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_bytes -= old.size
        if size > self.config.cache_bytes:
            return  # served, never kept: it alone would break the bound
        self._cache[key] = doc
        self._cached_bytes += size
        while (
            len(self._cache) > self.config.cache_documents
            or self._cached_bytes > self.config.cache_bytes
        ):
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= dropped.size

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
                    self._keep(key, doc)
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
        if cfg.allowed_ports and port not in cfg.allowed_ports:
            # Let through by allowed_networks only: then only on the allowed ports.
            exempted = [ip for ip in ips if not address_allowed(ip)]
            if exempted:
                raise _AgentError(
                    f"port {port} of {host} ({exempted[0]}) cannot be browsed; only public web "
                    "addresses can be browsed"
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
        try:
            text = _decode(response.body, response.charset, html)
            if html:
                title, text = html_to_text(
                    text,
                    url,
                    max_tags=cfg.max_tags,
                    max_text_chars=cfg.max_text_chars,
                    max_link_chars=cfg.max_url_chars,
                )
            else:
                title, text = "", _cut_text(text, cfg.max_text_chars)
        except (ValueError, LookupError, RecursionError) as e:
            # A last line of defence: decoding and parsing handle every page we know of, but
            # the page is the server's choice and must not end the episode. It is unreadable.
            raise _AgentError(
                f"{url[:200]} could not be read as text ({type(e).__name__}: {str(e)[:100]})"
            ) from None
        if len(title) > cfg.max_title_chars:
            title = f"{title[: cfg.max_title_chars]}[... {len(title) - cfg.max_title_chars} characters cut]"
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
            try:
                return urljoin(url, _ascii_location(location))
            except ValueError:  # "http://[::1": urllib cannot parse it
                message = (
                    f"{url[:200]} redirects (HTTP {status}) to a malformed URL {location[:100]!r}"
                )
                if infra:
                    raise InfrastructureError(
                        f"the local web at {_origin(url)} failed: {message}"
                    ) from None
                raise _AgentError(message) from None
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
