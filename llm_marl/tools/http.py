"""One HTTP request with a deadline for the whole exchange and a cap on the bytes read.

The live search engines (:mod:`llm_marl.tools.search.live`) and the browser
(:mod:`llm_marl.tools.browse`) both fetch through :func:`http_request`. It is ``requests`` with
three things ``requests`` does not do by itself:

* **A deadline for the whole request.** ``requests``' ``timeout`` bounds each socket operation,
  so a server that trickles one byte a second never times out. Here every socket the request
  opens is registered with a timer that shuts it down when the deadline passes, which wakes any
  blocked read; the connect and read timeouts are also set to the time left. Headers that trickle,
  bodies that trickle, hangs: all end at the deadline (plus the scheduling slack of one timer).
  DNS resolution inside ``requests`` is the one step a timer cannot interrupt; the browser
  resolves names itself, in a bounded wait, and passes ``connect_ip``.
* **A byte cap.** The body is streamed and reading stops at ``max_bytes``; the response says
  whether it was complete. A ``check_headers`` callback sees the status and headers before any of
  the body is read (the browser rejects binary content types and oversized ``Content-Length``
  there, without downloading anything).
* **Connecting to a chosen address.** ``connect_ip`` makes the request connect to that IP while
  the URL's host name still goes in the ``Host`` header, the TLS SNI and the certificate check;
  the browser uses it to connect to the very address it checked (no DNS rebinding between check
  and connect).

Redirects are never followed here (callers follow them, re-checking each hop). Failures raise
:class:`HttpError` with a ``kind`` that callers translate: the search engines into
:class:`~llm_marl.errors.InfrastructureError`, the browser into a message for the agent.
"""

from __future__ import annotations

import contextlib
import email.utils
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from llm_marl.errors import LLMMarlError

__all__ = ["HttpError", "HttpResponse", "http_request", "retry_after_seconds"]

CHUNK_BYTES = 16 * 1024
"""Bytes asked of the socket per read. Small, so that a compressed body cannot inflate much past
the cap in one step."""


class HttpError(LLMMarlError, OSError):
    """An HTTP exchange failed before a complete status line and headers came back, or mid-body.

    ``kind`` says what happened, so that callers can decide whose fault it is:

    * ``"deadline"``: the whole-request deadline passed (a hang, a trickle, a slow connect);
    * ``"connect"``: the TCP/TLS connection could not be made (refused, unreachable, bad TLS);
    * ``"protocol"``: the server broke HTTP (garbage status line, connection reset mid-body,
      a body shorter than its ``Content-Length``);
    * ``"invalid_url"``: ``requests`` (or ``urllib``) refused the URL.

    A response ``requests`` cannot process (e.g. a header it fails to decode) is ``"protocol"``
    too: whatever a server sends must end as an ``HttpError``, never as another exception.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HttpResponse:
    """What came back. ``headers`` has lower-case names; ``complete`` is False when reading
    stopped at ``max_bytes`` with more of the body still unread."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    complete: bool
    elapsed: float = 0.0

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-case (``"text/html"``), or ``""``."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        """The ``charset`` parameter of ``Content-Type``, if any."""
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip("\"'")
        return None


@dataclass
class _SocketGuard:
    """Shuts down every socket of one request when the deadline passes."""

    sockets: list[socket.socket] = field(default_factory=list)
    fired: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, sock: socket.socket) -> None:
        with self.lock:
            self.sockets.append(sock)
            if self.fired:
                _shutdown(sock)

    def fire(self) -> None:
        with self.lock:
            self.fired = True
            for sock in self.sockets:
                _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    # shutdown (not close) wakes a thread blocked in recv on this socket; the owner closes it.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _OneHopSession(requests.Session):
    """A session that never works out where a redirect leads.

    ``requests`` pre-computes the next hop of a redirect even with ``allow_redirects=False``
    (for ``Response.next``): it decodes the ``Location`` header as UTF-8 and parses it as a URL,
    so a server sending ``Location: /caf\\xe9`` (Latin-1) or ``Location: http://[::1`` made
    ``session.request`` raise ``UnicodeDecodeError`` / ``ValueError``, which are not a
    ``RequestException``. We never follow redirects here (callers do, re-checking each hop),
    so there is no target to compute; the ``Location`` header still reaches the caller as sent.
    """

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        return None


def _guarded_adapter(guard: _SocketGuard, connect_ip: str | None, hostname: str) -> HTTPAdapter:
    """A transport adapter whose connections register with ``guard`` (and go to ``connect_ip``)."""

    class GuardedHTTPConnection(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            guard.attach(sock)
            return sock

    class GuardedHTTPSConnection(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            guard.attach(sock)
            return sock

    class GuardedHTTPPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTPConnection

    class GuardedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPSConnection

    pools = {"http": GuardedHTTPPool, "https": GuardedHTTPSPool}

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **proxy_kwargs)
            manager.pool_classes_by_scheme = pools
            return manager

        def get_connection_with_tls_context(
            self,
            request: requests.PreparedRequest,
            verify: Any,
            proxies: dict[str, str] | None = None,
            cert: Any = None,
        ) -> HTTPConnectionPool:
            if connect_ip is None:
                return super().get_connection_with_tls_context(request, verify, proxies, cert)
            host_params, pool_kwargs = self.build_connection_pool_key_attributes(
                request, verify, cert
            )
            if host_params["scheme"] == "https":
                # Connect to the IP, but do SNI and check the certificate against the name.
                pool_kwargs["server_hostname"] = hostname
                pool_kwargs["assert_hostname"] = hostname
            host_params["host"] = connect_ip
            return self.poolmanager.connection_from_host(**host_params, pool_kwargs=pool_kwargs)

    return GuardedAdapter(max_retries=0)


def http_request(
    method: str,
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    json_body: Any = None,
    connect_ip: str | None = None,
    trust_env: bool = True,
    verify: bool | str = True,
    check_headers: Callable[[int, Mapping[str, str]], None] | None = None,
) -> HttpResponse:
    """Send one request and read at most ``max_bytes`` of the body, all within ``timeout`` s.

    Args:
        method: ``"GET"``, ``"POST"``, ...
        url: An ``http``/``https`` URL.
        timeout: Deadline in seconds for the whole exchange: connect, TLS, headers and body.
        max_bytes: Read at most this many (decoded) body bytes; the rest is left unread and the
            response has ``complete=False``.
        headers: Extra request headers.
        params: Query parameters, as ``requests`` takes them.
        json_body: A JSON-serialisable body (sent with ``Content-Type: application/json``).
        connect_ip: Connect to this IP instead of resolving the URL's host (``Host``, SNI and
            certificate checks still use the URL's host).
        trust_env: Let ``requests`` read proxy settings and ``.netrc`` from the environment.
            The browser turns this off: a proxy would connect to addresses it never checked.
        verify: TLS certificate verification: True (the default CA bundle), a CA bundle path,
            or False (not recommended).
        check_headers: Called with ``(status, headers)`` before the body is read; an exception
            it raises aborts the request and propagates unchanged.

    Returns:
        The :class:`HttpResponse`. Redirect statuses are returned as they are, never followed.

    Raises:
        HttpError: On a deadline, connection or protocol failure (see :class:`HttpError`).
    """
    if timeout <= 0:
        raise HttpError("deadline", "no time left for the request")
    start = time.monotonic()
    end = start + timeout
    try:
        parts = urlsplit(url)
        hostname = parts.hostname or ""
    except ValueError as e:  # "http://[::1": urllib refuses it before requests sees it
        raise HttpError("invalid_url", f"invalid URL: {e}") from None
    guard = _SocketGuard()
    timer = threading.Timer(timeout, guard.fire)
    timer.daemon = True
    send_headers = dict(headers or {})
    if connect_ip is not None:
        send_headers["Host"] = parts.netloc.rpartition("@")[2]
    session = _OneHopSession()
    session.trust_env = trust_env
    adapter = _guarded_adapter(guard, connect_ip, hostname)
    session.mount("http://", adapter)
    session.mount("https://", adapter)

    def failure(kind: str, what: str, exc: BaseException) -> HttpError:
        if guard.fired or time.monotonic() >= end:
            return HttpError("deadline", f"no complete response within {timeout:g} s")
        return HttpError(kind, f"{what}: {type(exc).__name__}: {exc}")

    timer.start()
    try:
        try:
            response = session.request(
                method,
                url,
                headers=send_headers,
                params=params,
                json=json_body,
                timeout=(timeout, timeout),
                verify=verify,
                allow_redirects=False,
                stream=True,
            )
        except requests.exceptions.InvalidURL as e:
            raise HttpError("invalid_url", f"invalid URL: {e}") from None
        except requests.exceptions.ConnectTimeout as e:
            raise failure("deadline", "connection timed out", e) from None
        except (requests.exceptions.SSLError, requests.exceptions.ProxyError) as e:
            raise failure("connect", "connection failed", e) from None
        except requests.exceptions.ConnectionError as e:
            # A reset or garbage before the headers surfaces here too; with no response at all
            # we cannot tell them apart from a refused connection beyond the message.
            kind = (
                "protocol"
                if "BadStatusLine" in str(e) or "RemoteDisconnected" in str(e)
                else "connect"
            )
            raise failure(kind, "connection failed", e) from None
        except requests.exceptions.Timeout as e:
            raise failure("deadline", "timed out", e) from None
        except requests.exceptions.RequestException as e:
            raise failure("protocol", "request failed", e) from None
        except ValueError as e:
            # Outside RequestException: what requests or urllib3 raise on a response they
            # cannot process (a header that does not decode or parse; UnicodeError is a
            # ValueError). The server sent it, so it is a failed exchange like any other.
            raise failure("protocol", "the response could not be processed", e) from None
        try:
            status = response.status_code
            lower = {k.lower(): v for k, v in response.headers.items()}
            if check_headers is not None:
                check_headers(status, lower)
            body, complete = _read_capped(response, max_bytes)
        except (requests.exceptions.RequestException, OSError) as e:
            raise failure("protocol", "reading the response failed", e) from None
        finally:
            response.close()
        if guard.fired:
            # A shut-down socket reads as end-of-file, which ends a body without a length as
            # if it were complete: once the timer has fired, nothing read can be trusted.
            raise HttpError("deadline", f"no complete response within {timeout:g} s")
        return HttpResponse(
            url=response.url or url,
            status=status,
            headers=lower,
            body=body,
            complete=complete,
            elapsed=time.monotonic() - start,
        )
    finally:
        timer.cancel()
        session.close()


def _read_capped(response: requests.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The body up to ``max_bytes`` and whether that was all of it."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(CHUNK_BYTES):
        if not chunk:
            continue
        room = max_bytes - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
        if size == max_bytes:
            # Exactly at the cap: complete only if nothing follows.
            for more in response.iter_content(1):
                if more:
                    return b"".join(chunks), False
            return b"".join(chunks), True
    return b"".join(chunks), True


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
