"""One deadline-bounded pool of worker processes, used by the code sandbox and the math grader.

Both tools keep long-lived helper processes (sandbox supervisors, sympy graders) that a caller
leases for one request, talks to with a deadline, and gives back -- or kills, when the request
overran or the process broke.  This module is the one home of that machinery:

* :class:`ProcessPool` -- up to ``size`` workers, started on demand (or all at once with
  :meth:`ProcessPool.prestart`); :meth:`~ProcessPool.acquire` hands out a *ready* worker (a
  worker still starting is never handed out, so a request never pays for someone else's start-up),
  :meth:`~ProcessPool.release` gives it back, :meth:`~ProcessPool.discard` kills it and starts its
  successor in the background so that the pool stays warm.  Thread-safe; waiting for a free worker
  is not part of any request's deadline.
* :func:`spawn` -- every worker process is started from one long-lived thread of this module.
  A parent-death signal (``PR_SET_PDEATHSIG``, which ``bwrap --die-with-parent`` and the grader
  use so that workers die with the host) fires when the *thread* that forked the child exits, not
  the process: a worker started from a short-lived thread (a thread pool that pre-starts workers,
  a rollout thread that replaces a killed grader) would be killed as soon as that thread ends.
* :func:`read_exact`, :func:`read_line`, :func:`write_all` -- pipe I/O against a deadline
  (``poll``, so descriptors above 1024 work in busy processes).
* One shutdown path: every live pool is closed by one ``atexit`` hook (:func:`shutdown`); a pool
  belongs to the process that created it, so a forked child never kills its parent's workers.

This module imports nothing from ``llm_marl`` (``tools/`` are plain libraries).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import queue
import select
import subprocess
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

__all__ = [
    "PoolClosedError",
    "ProcessPool",
    "Worker",
    "popen",
    "WorkerGone",
    "read_exact",
    "read_line",
    "shutdown",
    "spawn",
    "wait_fd",
    "write_all",
]

logger = logging.getLogger("llm_marl.tools.workers")

T = TypeVar("T")


class WorkerGone(RuntimeError):
    """A worker's channel broke (EOF, closed pipe) or it missed its deadline."""


class PoolClosedError(RuntimeError):
    """The pool was closed; create a new one."""


# --------------------------------------------------------------------------- deadline I/O


def wait_fd(fd: int, deadline: float, *, write: bool = False) -> bool:
    """Whether ``fd`` becomes readable (or writable) before ``deadline`` (``time.monotonic``).

    EOF and errors count as ready (the next read says which).  Uses ``poll`` where it exists:
    ``select`` fails for descriptors above ``FD_SETSIZE`` (1024).
    """
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, (select.POLLOUT if write else select.POLLIN) | select.POLLERR)
            try:
                return bool(poller.poll(remaining * 1000.0))
            except InterruptedError:  # pragma: no cover - PEP 475 retries this already
                continue
        rlist, wlist = ([], [fd]) if write else ([fd], [])  # pragma: no cover
        ready = select.select(rlist, wlist, [], remaining)  # pragma: no cover
        return bool(ready[0] or ready[1])  # pragma: no cover


def _when_ready(fd: int, deadline: float, io: Callable[[], T], *, write: bool) -> T | None:
    """``io()`` (one ``os.read``/``os.write`` on ``fd``) once ``fd`` is ready, retried while it
    would block; ``None`` at the deadline; :class:`WorkerGone` when ``fd`` is closed."""
    while True:
        if not wait_fd(fd, deadline, write=write):
            return None
        try:
            return io()
        except (BlockingIOError, InterruptedError):
            continue
        except (OSError, ValueError) as e:
            side = "input" if write else "output"
            raise WorkerGone(f"the worker's {side} is closed ({e})") from e


def _read_some(fd: int, size: int, deadline: float) -> bytes | None:
    """Up to ``size`` bytes from ``fd``; ``None`` at the deadline; :class:`WorkerGone` on EOF."""
    chunk = _when_ready(fd, deadline, functools.partial(os.read, fd, size), write=False)
    if chunk is not None and not chunk:
        raise WorkerGone("the worker exited")
    return chunk


def read_exact(fd: int, size: int, deadline: float) -> bytes:
    """Exactly ``size`` bytes from ``fd``; :class:`WorkerGone` on EOF or at the deadline."""
    chunks = []
    got = 0
    while got < size:
        chunk = _read_some(fd, min(size - got, 1 << 20), deadline)
        if chunk is None:
            raise WorkerGone("the worker did not answer in time")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_line(fd: int, buffer: bytearray, deadline: float, limit: int = 1 << 26) -> bytes | None:
    """Next ``\\n``-terminated line from ``fd`` (without the newline); ``None`` at the deadline.

    ``buffer`` keeps bytes read past the line for the next call.  Raises :class:`WorkerGone` on
    EOF, and when a line grows beyond ``limit`` bytes (a broken worker must not fill our memory).
    """
    start = 0
    while True:
        newline = buffer.find(b"\n", start)
        if newline >= 0:
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            return line
        if len(buffer) > limit:
            raise WorkerGone(f"the worker sent a line longer than {limit} bytes")
        start = len(buffer)
        chunk = _read_some(fd, 1 << 16, deadline)
        if chunk is None:
            return None
        buffer += chunk


def write_all(fd: int, data: bytes, deadline: float) -> None:
    """Write all of ``data`` to ``fd`` (which may be non-blocking) before ``deadline``."""
    view = memoryview(data)
    while view:
        n = _when_ready(fd, deadline, functools.partial(os.write, fd, view), write=True)
        if n is None:
            raise WorkerGone("timed out writing to the worker")
        view = view[n:]


# --------------------------------------------------------------------------- spawning


class _Spawner:
    """The one long-lived thread that forks every worker process of this (host) process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(
            target=self._loop, name="llm_marl-worker-spawner", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            if not fut.set_running_or_notify_cancel():  # pragma: no cover - never cancelled
                continue
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the caller
                fut.set_exception(e)

    def run(self, fn: Callable[[], T]) -> T:
        if threading.current_thread() is self._thread:
            return fn()
        fut: Future[T] = Future()
        self._jobs.put((fn, fut))  # type: ignore[arg-type]
        return fut.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def spawn(start: Callable[[], T]) -> T:
    """Run ``start`` (which starts a process, e.g. ``subprocess.Popen``) on the spawner thread.

    The spawner thread lives as long as this process, so a parent-death signal armed in the
    child fires only when the host process itself exits.  A forked child of the host gets its
    own spawner thread on first use.
    """
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.run(start)


def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a worker process on the spawner thread (see :func:`spawn`).

    Its stdin and stdout are pipes to this process (the channel :func:`read_line` and friends
    serve) and it inherits no other descriptors than ``pass_fds`` (``close_fds``), unless
    ``kwargs`` says otherwise; the rest of ``kwargs`` goes to :class:`subprocess.Popen`.
    """
    options = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "close_fds": True, **kwargs}
    return spawn(lambda: subprocess.Popen(argv, **options))


# --------------------------------------------------------------------------- the pool


class Worker(ABC):
    """A pool's view of one worker process."""

    @abstractmethod
    def alive(self) -> bool:
        """False once the process is known to be dead (cheap; no I/O)."""

    @abstractmethod
    def close(self) -> None:
        """Kill the process and free its resources (idempotent, never raises)."""


W = TypeVar("W", bound=Worker)

_LIVE_POOLS: weakref.WeakSet[ProcessPool[Any]] = weakref.WeakSet()
_live_lock = threading.Lock()


class ProcessPool(Generic[W]):
    """Up to ``size`` warm worker processes, leased one request at a time.

    Args:
        start: starts one worker and returns it once it is ready to serve (it should create the
            process through :func:`spawn`); raising means the worker could not start.
        size: the most workers alive at once (busy, idle or starting).
        name: used in log lines and errors.

    Invariants: the idle set only holds workers that finished starting; a discarded worker's
    successor starts in the background (its start-up is never charged to a request); closing
    the pool kills idle workers at once and busy ones when they come back.
    """

    def __init__(self, start: Callable[[], W], size: int, *, name: str = "worker") -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got size={size!r}")
        self._start = start
        self.size = size
        self.name = name
        self.pid = os.getpid()
        # LIFO: the most recently used worker is the warmest (its pages are in cache).
        self._idle: queue.LifoQueue[W] = queue.LifoQueue()
        self._cond = threading.Condition()
        self._count = 0  # workers alive or starting
        self._starting = 0  # of which still starting
        self._busy: set[W] = set()
        self._closed = False
        self.started = 0
        self.replaced = 0
        self.last_start_error: BaseException | None = None
        with _live_lock:
            _LIVE_POOLS.add(self)

    # -- starting

    def _start_counted(self) -> W:
        """Start one worker whose slot the caller already counted and marked as starting.

        On failure the slot is freed; on success it stays marked until the worker is handed out
        or put on the idle set (:meth:`_started`), so :meth:`prestart` never sees a gap.
        """
        try:
            worker = self._start()
        except BaseException as e:
            with self._cond:
                self._starting -= 1
                self._count -= 1
                self.last_start_error = e
                self._cond.notify_all()
            raise
        with self._cond:
            self.started += 1
            if not self._closed:
                return worker
            self._starting -= 1
            self._count -= 1
            self._cond.notify_all()
        worker.close()
        raise PoolClosedError(f"the {self.name} pool is closed")

    def _started(self, worker: W, *, busy: bool) -> None:
        """A freshly started worker joins the busy set (handed out) or the idle set."""
        with self._cond:
            self._starting -= 1
            self._cond.notify_all()
            if busy:
                self._busy.add(worker)
                return
        self._put_idle(worker)

    def prestart(self) -> None:
        """Start every missing worker now, in parallel, and wait until every worker of the pool
        (those replacing discarded ones included) has finished starting; raise the first
        start-up error.

        The processes are forked by the spawner thread; only the waits for their start-up run on
        short-lived threads here.
        """
        with self._cond:
            self._check_usable()
            missing = max(0, self.size - self._count)
            self._count += missing
            self._starting += missing
        results: list[W | BaseException] = []
        lock = threading.Lock()

        def one() -> None:
            try:
                worker: W | BaseException = self._start_counted()
            except BaseException as e:
                worker = e
            with lock:
                results.append(worker)

        threads = [threading.Thread(target=one, daemon=True) for _ in range(missing)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [r for r in results if isinstance(r, BaseException)]
        for r in results:
            if not isinstance(r, BaseException):
                self._started(r, busy=False)
        if errors:
            raise errors[0]
        with self._cond:  # background replacements still starting
            while self._starting and not self._closed:
                self._cond.wait(0.5)

    def _start_in_background(self) -> None:
        """Start one worker (already counted) on a daemon thread; it joins the idle set when
        ready."""

        def run() -> None:
            try:
                worker = self._start_counted()
            except PoolClosedError:
                return
            except BaseException as e:
                logger.warning("could not start a replacement %s: %s", self.name, e)
                return
            self._started(worker, busy=False)

        with self._cond:
            self._starting += 1
        threading.Thread(target=run, name=f"{self.name}-restart", daemon=True).start()

    def _put_idle(self, worker: W) -> None:
        with self._cond:
            if not self._closed:
                self._idle.put(worker)
                self._cond.notify()
                return
            self._count -= 1
        worker.close()

    # -- leasing

    def acquire(self, timeout: float | None = None) -> W:
        """A ready worker, for the caller alone until :meth:`release` or :meth:`discard`.

        Takes an idle worker, else starts one when fewer than ``size`` exist (in the calling
        thread's time, through the spawner), else waits for one to come back.  Raises
        :class:`PoolClosedError` once the pool is closed, whatever ``start`` raises when a new
        worker cannot start, and :class:`TimeoutError` after ``timeout`` seconds of waiting.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                self._check_usable()
                worker = self._take_idle()
                if worker is None and self._count < self.size:
                    self._count += 1
                    self._starting += 1
                    start_now = True
                elif worker is None:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"no {self.name} became free in {timeout} s")
                    self._cond.wait(0.5 if remaining is None else min(0.5, remaining))
                    continue
                else:
                    start_now = False
            if start_now:
                worker = self._start_counted()
                self._started(worker, busy=True)
                return worker
            assert worker is not None
            if not worker.alive():  # died while idle: replace it and look again
                self.discard(worker)
                continue
            with self._cond:
                self._busy.add(worker)
            return worker

    def _take_idle(self) -> W | None:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return None

    def _check_usable(self) -> None:
        if self._closed:
            raise PoolClosedError(f"the {self.name} pool is closed")
        if self.pid != os.getpid():
            raise PoolClosedError(
                f"this {self.name} pool belongs to process {self.pid}; create a new pool in "
                f"the forked process"
            )

    def release(self, worker: W) -> None:
        """Give a healthy worker back."""
        with self._cond:
            self._busy.discard(worker)
        self._put_idle(worker)

    def discard(self, worker: W, *, replace: bool = True) -> None:
        """Kill ``worker`` (it broke, overran a deadline, or must not serve again) and, unless
        ``replace`` is false or the pool is closed, start its successor in the background."""
        worker.close()
        with self._cond:
            self._busy.discard(worker)
            if self._closed or not replace:
                self._count -= 1
                self._cond.notify_all()
                return
            self.replaced += 1
        # The slot stays counted: it now belongs to the successor.
        self._start_in_background()

    @contextlib.contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[W]:
        """``with pool.lease() as worker:`` -- released on success, discarded on any exception."""
        worker = self.acquire(timeout)
        try:
            yield worker
        except BaseException:
            self.discard(worker)
            raise
        self.release(worker)

    # -- shutting down

    @property
    def closed(self) -> bool:
        return self._closed

    def workers(self) -> list[W]:
        """The live workers (idle and busy), for inspection and tests."""
        with self._cond:
            return list(self._idle.queue) + list(self._busy)

    def close(self, *, kill_busy: bool = True) -> None:
        """Kill every idle worker now, and the busy ones too (a request still talking to one
        gets :class:`WorkerGone`) unless ``kill_busy`` is false: they are then killed when they
        come back.  Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            idle = []
            while True:
                worker = self._take_idle()
                if worker is None:
                    break
                idle.append(worker)
            self._count -= len(idle)
            busy = list(self._busy) if kill_busy and self.pid == os.getpid() else []
            self._cond.notify_all()
        for worker in idle + busy:
            with contextlib.suppress(Exception):
                worker.close()
        with _live_lock:
            _LIVE_POOLS.discard(self)


def shutdown() -> None:
    """Close every pool this process created (runs at interpreter exit)."""
    with _live_lock:
        pools = [p for p in _LIVE_POOLS if p.pid == os.getpid()]
    for pool in pools:
        with contextlib.suppress(Exception):  # best effort at exit
            pool.close()


atexit.register(shutdown)
