"""A pool of warm sandbox workers and the Sandbox implementation built on it.

A *worker* is one long-lived supervisor (``harness.py``) reached through a byte channel: a
subprocess's pipes (ProcessSandbox) or a Docker container's attached stdin/stdout
(DockerSandbox).  A worker runs one job at a time; the pool hands idle workers to callers,
replaces a worker that dies, and runs batches on a thread pool (the host threads only wait on
I/O, the work happens in the workers).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import select
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from llm_marl.tools.sandbox import harness
from llm_marl.tools.sandbox.base import (
    ExecutionResult,
    Limits,
    RunJob,
    SandboxError,
    SandboxUnavailableError,
    TestJob,
    TestReport,
)
from llm_marl.tools.sandbox.program import TeamProgram
from llm_marl.tools.sandbox.suite import TestSuite
from llm_marl.tools.sandbox.verdict import (
    infra_execution_result,
    infra_test_report,
    make_execution_result,
    make_test_report,
)

logger = logging.getLogger("llm_marl.tools.sandbox")

HARNESS_SOURCE = Path(harness.__file__).read_text(encoding="utf-8")

# Extra seconds the host waits beyond a job's own time limit before it declares the worker hung
# (the supervisor enforces the limit itself; this only catches a broken worker).
HOST_GRACE_SECONDS = 15.0

T = TypeVar("T")


class WorkerDied(SandboxError):
    """The worker's channel broke, it answered garbage, or it stopped answering."""


class Worker(ABC):
    """One supervisor reached through a framed byte channel."""

    hello: dict[str, Any]

    @abstractmethod
    def _send(self, data: bytes, deadline: float) -> None: ...

    @abstractmethod
    def _recv(self, size: int, deadline: float) -> bytes:
        """Exactly ``size`` bytes of the supervisor's stdout, or raise WorkerDied."""

    @abstractmethod
    def close(self) -> None: ...

    def _recv_frame(self, deadline: float) -> dict[str, Any]:
        head = self._recv(harness.HEADER_SIZE, deadline)
        try:
            size = harness.frame_size(head)
        except ValueError as e:
            raise WorkerDied(str(e)) from e
        if size > harness.MAX_FRAME:
            raise WorkerDied(f"the worker sent a frame of {size} bytes")
        body = self._recv(size, deadline)
        try:
            import json

            message = json.loads(body.decode("utf-8"))
        except ValueError as e:
            raise WorkerDied(f"the worker sent an unreadable message: {e}") from e
        if not isinstance(message, dict):
            raise WorkerDied("the worker sent a message that is not an object")
        return message

    def handshake(self, timeout: float) -> dict[str, Any]:
        hello = self._recv_frame(time.monotonic() + timeout)
        if hello.get("type") != "hello" or hello.get("protocol") != harness.PROTOCOL_VERSION:
            raise WorkerDied(f"unexpected greeting from the sandbox worker: {hello!r}")
        self.hello = hello
        return hello

    def request(self, payload: bytes, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        self._send(payload, deadline)
        return self._recv_frame(deadline)


class FdChannelMixin:
    """``_send``/``_recv`` over a pair of pipe file descriptors (non-blocking, with deadlines)."""

    _wfd: int
    _rfd: int

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerDied("timed out writing to the sandbox worker")
            try:
                _, writable, _ = select.select([], [self._wfd], [], remaining)
                if not writable:
                    continue
                n = os.write(self._wfd, view)
            except BlockingIOError:
                continue
            except (OSError, ValueError) as e:
                raise WorkerDied(f"the sandbox worker's input is closed ({e})") from e
            view = view[n:]

    def _recv(self, size: int, deadline: float) -> bytes:
        chunks = []
        got = 0
        while got < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerDied("the sandbox worker did not answer in time")
            try:
                readable, _, _ = select.select([self._rfd], [], [], remaining)
                if not readable:
                    continue
                chunk = os.read(self._rfd, min(size - got, 1 << 20))
            except BlockingIOError:
                continue
            except (OSError, ValueError) as e:
                raise WorkerDied(f"the sandbox worker's output is closed ({e})") from e
            if not chunk:
                raise WorkerDied("the sandbox worker exited")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


_LIVE_SANDBOXES: weakref.WeakSet[PooledSandbox] = weakref.WeakSet()


@atexit.register
def _close_all_sandboxes() -> None:
    for sandbox in list(_LIVE_SANDBOXES):
        with contextlib.suppress(Exception):  # best effort at exit
            sandbox.close()


class PooledSandbox(ABC):
    """Sandbox implementation over a pool of warm workers; subclasses only start workers.

    Args:
        workers: pool size = number of jobs run at once (default: the CPU count).
        limits: default :class:`Limits` for jobs that do not pass their own.
    """

    backend: str = "pooled"

    def __init__(self, *, workers: int | None = None, limits: Limits | None = None) -> None:
        size = workers if workers is not None else (os.cpu_count() or 1)
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        self.limits = limits or Limits()
        self.size = size
        self._idle: queue.LifoQueue[Worker] = queue.LifoQueue()
        self._workers: set[Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._executor: ThreadPoolExecutor | None = None

    def _start_pool(self) -> None:
        """Start every worker now (in parallel) so that set-up errors surface at construction."""
        with ThreadPoolExecutor(max_workers=self.size) as ex:
            futures = [ex.submit(self._start_worker) for _ in range(self.size)]
        errors = []
        for fut in futures:
            try:
                worker = fut.result()
            except Exception as e:
                errors.append(e)
                continue
            with self._lock:
                self._workers.add(worker)
            self._idle.put(worker)
        if errors:
            self.close()
            err = errors[0]
            if isinstance(err, SandboxUnavailableError):
                raise err
            raise SandboxUnavailableError(
                f"could not start the {self.backend} sandbox workers: {err}"
            ) from err
        _LIVE_SANDBOXES.add(self)

    @abstractmethod
    def _start_worker(self) -> Worker:
        """Start one worker and complete its handshake (raise on failure)."""

    # ------------------------------------------------------------------ pool mechanics

    def _acquire(self) -> Worker:
        while True:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                pass
            with self._lock:
                start = len(self._workers) < self.size
                if start:
                    placeholder = _Placeholder()
                    self._workers.add(placeholder)
            if start:
                try:
                    worker = self._start_worker()
                except Exception as e:
                    with self._lock:
                        self._workers.discard(placeholder)
                    raise WorkerDied(f"could not start a replacement worker: {e}") from e
                with self._lock:
                    self._workers.discard(placeholder)
                    self._workers.add(worker)
                    if self._closed:
                        self._workers.discard(worker)
                        worker.close()
                        raise SandboxError("the sandbox is closed")
                return worker
            try:
                return self._idle.get(timeout=0.2)
            except queue.Empty:
                continue

    def _release(self, worker: Worker) -> None:
        if self._closed:
            self._discard(worker)
        else:
            self._idle.put(worker)

    def _discard(self, worker: Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
        try:
            worker.close()
        except Exception:  # pragma: no cover - best effort
            logger.debug("closing a dead worker failed", exc_info=True)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"the {self.backend} sandbox is closed; create a new one")

    def _execute(self, payload: bytes, limits: Limits) -> dict[str, Any] | str:
        """Run one job; returns the supervisor's facts, or an infrastructure error message.

        A worker that dies during a job is replaced and the job retried once: the first death
        may be the infrastructure's (container removed, engine restarted); a second one on the
        same job is reported as an infrastructure error too, but says that the program may be
        the cause.
        """
        timeout = limits.timeout + HOST_GRACE_SECONDS
        problems: list[str] = []
        for _attempt in range(2):
            try:
                worker = self._acquire()
            except WorkerDied as e:
                problems.append(str(e))
                break
            except SandboxError as e:
                return str(e)
            try:
                reply = worker.request(payload, timeout)
            except Exception as e:  # WorkerDied, or anything unexpected from the channel
                self._discard(worker)
                problems.append(str(e) if isinstance(e, WorkerDied) else f"{type(e).__name__}: {e}")
                continue
            if reply.get("type") == "result":
                self._release(worker)
                return reply
            self._discard(worker)
            problems.append(str(reply.get("error", reply)))
        detail = "; then ".join(problems) or "no worker available"
        return f"{self.backend} sandbox failure: {detail}" + (
            " (the worker died twice on this job: the program may have crashed it)"
            if len(problems) > 1
            else ""
        )

    # ------------------------------------------------------------------ public API

    def run(
        self, program: str, *, stdin: str = "", limits: Limits | None = None
    ) -> ExecutionResult:
        """Run ``program`` as a script (``__name__ == "__main__"``) with ``stdin`` as input.

        Returns an :class:`ExecutionResult`; an infrastructure failure comes back as
        ``Status.INFRA_ERROR`` (never raised).
        """
        if not isinstance(program, str):
            raise TypeError(f"program must be a str, got {type(program).__name__}")
        self._check_open()
        limits = limits or self.limits
        job = {
            "type": "job",
            "mode": "run",
            "program": program,
            "stdin": stdin,
            "limits": limits.to_wire(),
            "tests_len": 0,
        }
        facts = self._execute(harness.pack(job), limits)
        if isinstance(facts, str):
            return infra_execution_result(facts)
        return make_execution_result(facts, limits)

    def run_tests(
        self,
        program: str | TeamProgram,
        tests: TestSuite | Sequence[str] | str,
        *,
        entry_point: str | None = None,
        limits: Limits | None = None,
    ) -> TestReport:
        """Load ``program`` as module ``solution`` and score each test separately.

        ``tests``: a :class:`TestSuite`, a list of assert strings, or test source (a
        HumanEval-style ``def check(candidate)`` needs ``entry_point``).  Raises ``ValueError``
        for malformed tests (the dataset's fault); everything the program does is reported in
        the returned :class:`TestReport`, and an infrastructure failure comes back as
        ``Status.INFRA_ERROR``.  A :class:`TeamProgram` runs its entry point's author in a
        process of its own (see :mod:`~llm_marl.tools.sandbox.program`).
        """
        owner = None
        if isinstance(program, TeamProgram):
            owner, program = program.to_wire(), program.source
        if not isinstance(program, str):
            raise TypeError(f"program must be a str or TeamProgram, got {type(program).__name__}")
        self._check_open()
        suite = TestSuite.coerce(tests, entry_point)
        if entry_point is not None and suite.entry_point not in (None, entry_point):
            raise ValueError(
                f"entry_point={entry_point!r} disagrees with the suite's {suite.entry_point!r}"
            )
        limits = limits or self.limits
        tests_bytes = suite.to_wire()
        job = {
            "type": "job",
            "mode": "tests",
            "program": program,
            "limits": limits.to_wire(),
            "tests_len": len(tests_bytes),
            "n_tests": len(suite.tests),
            "owner": owner,
        }
        facts = self._execute(harness.pack(job) + tests_bytes, limits)
        if isinstance(facts, str):
            return infra_test_report(suite, facts)
        return make_test_report(facts, suite, limits)

    def run_batch(self, jobs: Sequence[RunJob]) -> list[ExecutionResult]:
        """:meth:`run` for many programs, concurrently on every worker; input order kept."""
        return self._map(lambda j: self.run(j.program, stdin=j.stdin, limits=j.limits), jobs)

    def run_tests_batch(self, jobs: Sequence[TestJob]) -> list[TestReport]:
        """:meth:`run_tests` for many jobs, concurrently on every worker; input order kept.

        Malformed tests raise ``ValueError`` before anything runs.
        """
        prepared = [(j, TestSuite.coerce(j.tests, j.entry_point)) for j in jobs]
        return self._map(
            lambda pair: self.run_tests(pair[0].program, pair[1], limits=pair[0].limits),
            prepared,
        )

    def _map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        items = list(items)
        if len(items) <= 1 or self.size == 1:
            return [fn(item) for item in items]
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.size, thread_name_prefix=f"{self.backend}-sandbox"
                )
            executor = self._executor
        return list(executor.map(fn, items))

    def close(self) -> None:
        """Stop every worker (idempotent; also registered to run at interpreter exit)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            self._workers.clear()
            executor, self._executor = self._executor, None
        for worker in workers:
            try:
                worker.close()
            except Exception:  # pragma: no cover - best effort
                logger.debug("closing a worker failed", exc_info=True)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        _LIVE_SANDBOXES.discard(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> PooledSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - depends on GC timing
        with contextlib.suppress(Exception):
            self.close()


class _Placeholder(Worker):
    """Reserves a pool slot while a replacement worker starts."""

    def _send(self, data: bytes, deadline: float) -> None:  # pragma: no cover
        raise WorkerDied("placeholder")

    def _recv(self, size: int, deadline: float) -> bytes:  # pragma: no cover
        raise WorkerDied("placeholder")

    def close(self) -> None:
        pass
