"""A pool of persistent grading worker processes with a hard per-comparison timeout.

Why processes: sympy cannot be interrupted from another thread, and ``signal.alarm`` only works
in the main thread, while the rollout collector grades from a thread pool. A child process can
always be killed. Each worker is started once (importing sympy costs ~0.5 s) and reused; a worker
that overruns its timeout is killed (SIGKILL) and replaced in the background.

Thread-safe: any number of threads may call :meth:`WorkerPool.run` at once; each request holds
one worker for its duration, and waits for a free one when all are busy (waiting does not count
against the request's timeout, so load never turns a correct answer into a timeout).

POSIX only (Linux, macOS): it waits on pipes with ``poll``. Elsewhere grade with
``symbolic=False`` (the in-process tiers decide nearly every real answer; see the benchmark).

Configuration (environment variables, read when the default pool is first used):
``LLM_MARL_GRADING_WORKERS`` (default ``min(4, cpu_count)``) and
``LLM_MARL_GRADING_WORKER_MEMORY_MB`` (address-space cap per worker, default 4096; 0 = none).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from typing import Any

from .worker import BOOTSTRAP

__all__ = ["WorkerError", "WorkerPool", "default_pool", "shutdown_default_pool"]

_GRADING_DIR = os.path.dirname(os.path.abspath(__file__))
STARTUP_TIMEOUT = 120.0
"""Seconds a fresh worker may take to import sympy (generous: CI machines can be slow)."""


def _wait_readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data (or EOF) within ``timeout`` seconds. poll() has no FD_SETSIZE
    limit, unlike select(), which fails for descriptors above 1024 in busy processes."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(poller.poll(max(0.0, timeout) * 1000.0))
    readable, _, _ = select.select([fd], [], [], timeout)  # pragma: no cover - no poll()
    return bool(readable)


class WorkerError(RuntimeError):
    """A grading worker could not be started or died unexpectedly."""


class _WorkerCrashed(WorkerError):
    """The worker died while computing: the input crashed it (stack or memory exhausted)."""


class _Worker:
    """One child process and the parent's end of its pipes."""

    def __init__(self, memory_mb: int):
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", BOOTSTRAP, _GRADING_DIR, str(memory_mb)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            raise WorkerError(
                f"could not start a grading worker ({sys.executable}): {exc}. "
                "Pass symbolic=False to grade without the sympy fallback."
            ) from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buf = b""
        self.ready = False
        self.next_id = 0

    def _read_line(self, deadline: float) -> bytes | None:
        """Next line from the worker; None at the deadline; WorkerError if it died."""
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not _wait_readable(self._fd, remaining):
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise WorkerError("grading worker exited unexpectedly")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self._read_line(time.monotonic() + STARTUP_TIMEOUT)
        if line is None:
            raise WorkerError(f"grading worker did not start within {STARTUP_TIMEOUT:.0f} s")
        msg = json.loads(line)
        if not msg.get("ready"):
            raise WorkerError(f"grading worker failed to start: {msg.get('error')}")
        self.ready = True

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request; its answer, or None if it did not come within ``timeout`` s."""
        self.wait_ready()
        self.next_id += 1
        payload = dict(payload, id=self.next_id)
        try:
            self._stdin.write((json.dumps(payload) + "\n").encode())
            self._stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError("grading worker exited unexpectedly") from exc
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._read_line(deadline)
            except WorkerError as exc:
                raise _WorkerCrashed(str(exc)) from exc
            if line is None:
                return None
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                return msg

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)  # SIGKILL cannot be ignored: this returns at once
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


class WorkerPool:
    """Up to ``size`` worker processes, started on demand and replaced when killed."""

    def __init__(self, size: int | None = None, memory_mb: int | None = None):
        if size is None:
            size = int(os.environ.get("LLM_MARL_GRADING_WORKERS", min(4, os.cpu_count() or 1)))
        if memory_mb is None:
            memory_mb = int(os.environ.get("LLM_MARL_GRADING_WORKER_MEMORY_MB", 4096))
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got size={size}")
        self.size = size
        self.memory_mb = memory_mb
        self.pid = os.getpid()
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._count = 0
        self._closed = False
        self.timeouts = 0
        self.restarts = 0

    def _acquire(self) -> _Worker:
        while True:
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                pass
            with self._lock:
                if self._closed:
                    raise WorkerError("the grading worker pool is closed")
                create = self._count < self.size
                if create:
                    self._count += 1
            if create:
                try:
                    return _Worker(self.memory_mb)
                except BaseException:
                    with self._lock:
                        self._count -= 1
                    raise
            try:
                return self._idle.get(timeout=0.5)
            except queue.Empty:
                continue

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            closed = self._closed
        if closed:
            worker.kill()
        else:
            self._idle.put(worker)

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and start its successor now, so that it imports while idle."""
        worker.kill()
        with self._lock:
            self._count -= 1
            self.restarts += 1
            if self._closed:
                return
            self._count += 1
        try:
            self._idle.put(_Worker(self.memory_mb))
        except WorkerError:
            with self._lock:
                self._count -= 1

    def run(self, payload: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Run one request; its answer, or None if it timed out (the worker is then replaced).

        A worker found dead before it took the request (killed while idle) is replaced and the
        request retried once. A worker that dies while computing was crashed by the input: the
        answer is then ``{"correct": False, ...}``. Raises :class:`WorkerError` if no worker can
        be started.
        """
        for attempt in range(2):
            worker = self._acquire()
            try:
                worker.wait_ready()
            except WorkerError:
                self._drop(worker)
                if attempt == 0:
                    continue
                raise
            try:
                answer = worker.request(payload, timeout)
            except _WorkerCrashed:
                self._replace(worker)
                return {"correct": False, "reason": "not equivalent (the symbolic check crashed)"}
            except WorkerError:
                self._replace(worker)
                if attempt == 0:
                    continue
                raise
            if answer is None:
                with self._lock:
                    self.timeouts += 1
                self._replace(worker)
                return None
            self._release(worker)
            return answer
        raise WorkerError("unreachable")  # pragma: no cover

    def _drop(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._count -= 1

    def warm_up(self) -> None:
        """Start one worker now and wait until it is ready (e.g. before timing something)."""
        worker = self._acquire()
        try:
            worker.wait_ready()
        except WorkerError:
            self._drop(worker)
            raise
        self._release(worker)

    def close(self) -> None:
        """Kill every idle worker; busy ones are killed when their request returns."""
        with self._lock:
            self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            worker.kill()
            with self._lock:
                self._count -= 1


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (created on first use; recreated in a forked child)."""
    global _default
    with _default_lock:
        if _default is None or _default.pid != os.getpid() or _default._closed:
            _default = WorkerPool()
        return _default


def shutdown_default_pool() -> None:
    """Kill the default pool's workers (they are also killed at interpreter exit)."""
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()


atexit.register(shutdown_default_pool)
