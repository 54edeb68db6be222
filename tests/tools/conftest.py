"""Fixtures for the sandbox tests: one warm sandbox per backend, shared by the session.

Docker tests (``@pytest.mark.docker``) need a reachable Docker engine and the sandbox image
(``python -m llm_marl.tools.sandbox build-image``; ``.ci/docker_setup.sh`` does both).  When
either is missing:

* with ``LLM_MARL_REQUIRE_DOCKER=1`` (CI sets it) the tests FAIL with a message saying what is
  missing, so CI can never go green without exercising Docker;
* otherwise (a developer machine without Docker) they are skipped with that message.

The ProcessSandbox isolation tests need bubblewrap (``apt-get install -y bubblewrap``); the same
rule applies, with ``LLM_MARL_REQUIRE_DOCKER=1`` or ``LLM_MARL_REQUIRE_BWRAP=1`` turning a
missing bubblewrap into a failure.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from llm_marl.tools.sandbox import (
    DEFAULT_IMAGE,
    DockerSandbox,
    Limits,
    ProcessSandbox,
    SandboxUnavailableError,
    bwrap_available,
)

# Short limits keep the adversarial tests quick; the memory limit is small so memory bombs hit
# it fast.
TEST_LIMITS = Limits(timeout=3.0, test_timeout=2.0, memory_mb=256, output_bytes=64 * 1024, nproc=32)


def _require(env_vars: tuple[str, ...], message: str) -> None:
    if any(os.environ.get(var) == "1" for var in env_vars):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _docker_problem() -> str | None:
    try:
        from llm_marl.tools.sandbox.image import docker_client, image_exists

        client = docker_client(timeout=10)
    except SandboxUnavailableError as e:
        return str(e)
    if not image_exists(DEFAULT_IMAGE, client):
        return (
            f"image {DEFAULT_IMAGE} not found; run `python -m llm_marl.tools.sandbox build-image` "
            f"(or .ci/docker_setup.sh)"
        )
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    problem = _docker_problem()
    if problem is not None:
        _require(("LLM_MARL_REQUIRE_DOCKER",), f"Docker sandbox unavailable: {problem}")


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    if not bwrap_available():
        _require(
            ("LLM_MARL_REQUIRE_DOCKER", "LLM_MARL_REQUIRE_BWRAP"),
            "bubblewrap is not installed or cannot create namespaces here "
            "(apt-get install -y bubblewrap); the ProcessSandbox isolation tests need it",
        )


def _make(kind: str, workers: int):
    if kind == "docker":
        return DockerSandbox(workers=workers, limits=TEST_LIMITS)
    return ProcessSandbox(workers=workers, limits=TEST_LIMITS, isolation="bwrap")


@pytest.fixture(scope="session")
def process_sandbox(bwrap_ready: None) -> Iterator[ProcessSandbox]:
    with ProcessSandbox(workers=2, limits=TEST_LIMITS, isolation="bwrap") as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def docker_sandbox(docker_ready: None) -> Iterator[DockerSandbox]:
    with DockerSandbox(workers=2, limits=TEST_LIMITS) as sandbox:
        yield sandbox


BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest):
    """Each test using this runs once per backend, on that backend's shared pool."""
    name = "docker_sandbox" if request.param == "docker" else "process_sandbox"
    return request.getfixturevalue(name)


@pytest.fixture(scope="session")
def _single_worker_pools(request: pytest.FixtureRequest) -> Iterator[dict]:
    pools: dict = {}
    yield pools
    for pool in pools.values():
        pool.close()


@pytest.fixture(params=BACKENDS)
def single_sandbox(request: pytest.FixtureRequest, _single_worker_pools: dict):
    """A one-worker pool per backend: consecutive jobs are guaranteed to share a worker."""
    kind = request.param
    request.getfixturevalue("docker_ready" if kind == "docker" else "bwrap_ready")
    if kind not in _single_worker_pools:
        _single_worker_pools[kind] = _make(kind, workers=1)
    return _single_worker_pools[kind]


class TcpServer:
    """A TCP server on 127.0.0.1 that counts the connections it accepts (stops with the test)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def tcp_server() -> Iterator[TcpServer]:
    server = TcpServer()
    yield server
    server.close()
