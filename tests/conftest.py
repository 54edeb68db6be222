"""Shared fixtures: the offline tiny LM, built once per machine and cached by pytest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# pytester runs a pytest session inside the test's own process (tests/test_fast_loop.py).
pytest_plugins = ("pytester",)

# Tests never touch the network; transformers must not try the Hub either.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# One torch thread. The tests run tiny models, whose ops are too small to gain from a second
# one; and while other jobs share the cores, OpenMP threads waiting for each other made one
# tiny generate call 60x slower (4.4 s against 0.07 s on a 2-core machine with a load of 6).
# The sandbox's own tests also run, as a non-root user, from an install without torch.
try:
    import torch
except ModuleNotFoundError:
    pass
else:
    torch.set_num_threads(1)


DATA_DIR = Path(
    os.environ.get("LLM_MARL_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
"""The benchmark data: ``$LLM_MARL_DATA_DIR``, else ``shared/data`` beside the checkout (the
project's layout, and what CI sets)."""
if DATA_DIR.is_dir():  # the library reads the variable itself (llm_marl.data.loading)
    os.environ.setdefault("LLM_MARL_DATA_DIR", str(DATA_DIR))


DOCKER_FIXTURES = frozenset({"docker_ready", "docker_sandbox"})
"""The fixtures that start Docker containers (tests/tools/conftest.py)."""
SLOW_MARKERS = ("docker", "vllm")
"""Tests that need Docker, or vLLM in a venv of its own (CI's vllm job), are slow too."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects (the mark plugin's hook)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Docker- and vLLM-backed tests are ``slow`` too, so that the fast loop (``-m "not slow"``)
    needs neither: those marked ``docker`` or ``vllm`` (a parametrised backend included) and
    those using a Docker fixture. ``-m docker`` / ``-m vllm`` still select them."""
    for item in items:
        marked = any(item.get_closest_marker(name) is not None for name in SLOW_MARKERS)
        if marked or DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data directory (:data:`DATA_DIR`); fails, never skips, when it is missing."""
    if not DATA_DIR.is_dir():
        pytest.fail(
            f"benchmark data not found at {DATA_DIR}: set LLM_MARL_DATA_DIR to the project's "
            "shared/data directory"
        )
    return DATA_DIR


@pytest.fixture(scope="session")
def tiny_lm_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Directory of the default tiny LM (``build_tiny_lm`` defaults).

    Kept in pytest's cache directory so that later sessions reuse it; ``build_tiny_lm`` checks
    the recorded build arguments and rebuilds if the recipe changed.
    """
    from llm_marl.policies.tiny import build_tiny_lm

    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("llm_marl_tiny_lm")) if cache is not None else None
    if root is None:
        root = tmp_path_factory.mktemp("tiny_lm")
    return build_tiny_lm(root / "default")


@pytest.fixture(scope="session")
def tiny_policy(tiny_lm_path: str):
    """A frozen :class:`HFPolicy` over the tiny LM. Shared: tests must not modify it."""
    from llm_marl.policies.hf import HFPolicy

    return HFPolicy(tiny_lm_path, name="tiny", seed=0)


class RawHttpServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers each request with raw bytes a test scripts.

    ``respond(n, body)`` gets the request number (from 1) and the decoded JSON body and returns
    the bytes to send (then the connection closes), or a callable ``f(conn, stopping)`` that
    writes to the socket itself (to trickle, hang or reset). It can break HTTP in ways no real
    framework would (torn bodies, bad chunking, bad gzip). Stopped by the fixture; handlers that
    wait should wait on ``stopping`` so that teardown ends them.
    """

    def __init__(self, respond) -> None:
        import socket
        import threading

        self.respond = respond
        self.requests = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(32)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._conns: list = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import threading

        while not self.stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn) -> None:
        import contextlib
        import json

        with contextlib.suppress(OSError), conn:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            with self._lock:
                self.requests += 1
                number = self.requests
            answer = self.respond(number, json.loads(body or b"null"))
            if callable(answer):
                answer(conn, self.stopping)
            else:
                conn.sendall(answer)

    def close(self) -> None:
        import contextlib
        import socket

        self.stopping.set()
        self._thread.join(timeout=2)
        self._sock.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


def http_reply(body: bytes, status: str = "200 OK", headers: dict | None = None) -> bytes:
    """A raw HTTP response; ``Content-Length`` is the body's unless ``headers`` sets it."""
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    fields.update(headers or {})
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode() + b"Connection: close\r\n\r\n" + body


@pytest.fixture
def raw_http_server():
    """``raw_http_server(respond)`` starts a :class:`RawHttpServer`; all stop at teardown."""
    servers: list[RawHttpServer] = []

    def start(respond) -> RawHttpServer:
        server = RawHttpServer(respond)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def http_reply_bytes():
    """The :func:`http_reply` helper, as a fixture (test modules cannot import conftest)."""
    return http_reply
