"""A scriptable HTTP server on 127.0.0.1 that misbehaves on demand, for testing tools offline.

It speaks raw HTTP/1.0 over sockets so that it can do what a well-behaved server library will
not: hang, trickle bytes, lie about ``Content-Length``, send garbage instead of a status line,
stream a 50 MB body without holding it. Each route plays a list of :class:`Reply` objects in
order (the last one repeats), and every request is recorded.

Example::

    from tests.tools.fakeweb import FakeWeb, Reply

    with FakeWeb() as web:
        web.route("/search", Reply(status=500), Reply(json={"organic": []}))
        engine = SerperSearch(api_key="k", base_url=web.base_url, backoff=0)
        engine.search("q")            # first attempt gets 500, the retry gets []
        web.requests[0].headers["x-api-key"]   # "k"

The server listens on 127.0.0.1 only, runs in daemon threads, and stops when the ``with`` block
ends (or :meth:`FakeWeb.stop` is called); hanging replies wake up and end when it stops.
"""

from __future__ import annotations

import contextlib
import json as jsonlib
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FakeWeb", "Reply", "Request"]

_REASONS = {200: "OK", 301: "Moved", 302: "Found", 404: "Not Found", 429: "Too Many Requests"}


@dataclass
class Reply:
    """What the server does for one request.

    Attributes:
        status: HTTP status code.
        body: The body (``str`` is UTF-8 encoded).
        json: A JSON value to send as the body (sets ``Content-Type: application/json``).
        headers: Extra response headers (``Content-Type`` defaults to ``text/html``).
        delay: Seconds to wait before sending anything (a hang, when long).
        trickle: Seconds between single bytes of the whole response (headers included).
        content_length: The ``Content-Length`` to declare (default: the true length; ``-1``:
            none, the body ends when the connection closes).
        stream_bytes: Send a generated body of this many bytes (``"x"`` repeated) instead of
            ``body``, produced as it is sent (for huge pages).
        raw: Send exactly these bytes instead of an HTTP response, then close.
    """

    status: int = 200
    body: bytes | str = b""
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float | None = None
    content_length: int | None = None
    stream_bytes: int | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class Request:
    """A request the server received (header names lower-case)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


class FakeWeb:
    """The server (see the module docstring). ``route(path, *replies)`` scripts a path; paths
    without a route answer 404."""

    def __init__(self, *, tls: tuple[str, str] | None = None) -> None:
        """``tls``: ``(certfile, keyfile)`` to serve https instead of http."""
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._routes: dict[str, list[Reply]] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._clients: set[socket.socket] = set()
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeWeb:
        if self._sock is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.settimeout(0.1)
        self._sock = sock
        self.port = sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="fakeweb").start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()
        with self._lock:
            for client in list(self._clients):
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                client.close()
            self._clients.clear()

    def __enter__(self) -> FakeWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def route(self, path: str, *replies: Reply) -> None:
        """Answer requests to ``path`` (query ignored) with ``replies`` in order; the last
        repeats."""
        if not replies:
            raise ValueError("route needs at least one Reply")
        with self._lock:
            self._routes[path] = list(replies)

    def count(self, path: str) -> int:
        """How many requests ``path`` received."""
        return sum(1 for r in self.requests if r.path == path)

    # -- serving -----------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._clients.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            if self._tls is not None:
                client.settimeout(5)
                client = self._tls.wrap_socket(client, server_side=True)
            request = self._read_request(client)
            if request is None:
                return
            with self._lock:
                self.requests.append(request)
                replies = self._routes.get(request.path)
                reply = (replies.pop(0) if len(replies) > 1 else replies[0]) if replies else None
            self._send(client, reply or Reply(status=404, body="not found"))
        except OSError:
            pass
        finally:
            with self._lock:
                self._clients.discard(client)
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()

    def _read_request(self, client: socket.socket) -> Request | None:
        client.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk or len(data) > 1 << 20:
                return None
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        while len(rest) < length:
            chunk = client.recv(65536)
            if not chunk:
                break
            rest += chunk
        parts = urlsplit(target)
        return Request(method, parts.path, parts.query, headers, rest[:length])

    def _wait(self, seconds: float) -> bool:
        """Sleep, waking early when the server stops; False if it stopped."""
        return not self._stop.wait(seconds)

    def _send(self, client: socket.socket, reply: Reply) -> None:
        if reply.delay and not self._wait(reply.delay):
            return
        if reply.raw is not None:
            client.sendall(reply.raw)
            return
        headers = {k.lower(): v for k, v in reply.headers.items()}
        body = reply.body.encode() if isinstance(reply.body, str) else reply.body
        if reply.json is not None:
            body = jsonlib.dumps(reply.json).encode()
            headers.setdefault("content-type", "application/json")
        headers.setdefault("content-type", "text/html; charset=utf-8")
        size = reply.stream_bytes if reply.stream_bytes is not None else len(body)
        declared = reply.content_length if reply.content_length is not None else size
        if declared >= 0:
            headers["content-length"] = str(declared)
        reason = _REASONS.get(reply.status, "Status")
        head = f"HTTP/1.0 {reply.status} {reason}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        if reply.trickle is not None:
            for i in range(len(head)):
                client.sendall(head[i : i + 1].encode("latin-1"))
                if not self._wait(reply.trickle):
                    return
            for i in range(len(body)):
                client.sendall(body[i : i + 1])
                if not self._wait(reply.trickle):
                    return
            return
        client.sendall(head.encode("latin-1"))
        if reply.stream_bytes is None:
            client.sendall(body)
            return
        chunk = b"x" * 65536
        sent = 0
        while sent < reply.stream_bytes and not self._stop.is_set():
            piece = chunk[: reply.stream_bytes - sent]
            client.sendall(piece)
            sent += len(piece)
            time.sleep(0)
