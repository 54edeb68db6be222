"""Persistent grading worker processes with a hard per-comparison timeout.

Why processes: sympy cannot be interrupted from another thread, and ``signal.alarm`` only works
in the main thread, while the rollout collector grades from a thread pool. A child process can
always be killed. Each worker is started once (importing sympy costs ~0.5 s) and reused; a worker
that overruns its timeout is killed (SIGKILL) and its successor starts in the background, so the
pool stays warm. The pool itself is :class:`llm_marl.tools.workers.ProcessPool` (shared with the
code sandbox): workers are forked by one long-lived thread, so a worker started or replaced from a
rollout thread does not die with that thread, and they all die with the host process.

Thread-safe: any number of threads may call :meth:`WorkerPool.run` at once; each request holds
one worker for its duration, and waits for a free, ready one when all are busy (waiting does not
count against the request's timeout, so load never turns a correct answer into a timeout).

POSIX only (Linux, macOS): it waits on pipes with ``poll``. Elsewhere grade with
``symbolic=False`` (the in-process tiers decide nearly every real answer; see the benchmark).

Configuration (environment variables, read when the default pool is first used):
``LLM_MARL_GRADING_WORKERS`` (default ``min(4, cpu_count)``) and
``LLM_MARL_GRADING_WORKER_MEMORY_MB`` (address-space cap per worker, default 4096; 0 = none).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from ..workers import PoolClosedError, ProcessPool, Worker, WorkerGone, popen, read_line
from .worker import BOOTSTRAP

__all__ = ["WorkerError", "WorkerPool", "default_pool", "shutdown_default_pool"]

_GRADING_DIR = os.path.dirname(os.path.abspath(__file__))
STARTUP_TIMEOUT = 120.0
"""Seconds a fresh worker may take to import sympy (generous: CI machines can be slow)."""


class WorkerError(RuntimeError):
    """A grading worker could not be started or died unexpectedly."""


class _Crashed(WorkerError):
    """The worker died while computing: the input crashed it (stack or memory exhausted)."""


class _GradingWorker(Worker):
    """One child process (``worker.py``) and the parent's end of its pipes."""

    def __init__(self, memory_mb: int) -> None:
        argv = [sys.executable, "-c", BOOTSTRAP, _GRADING_DIR, str(memory_mb), str(os.getpid())]
        try:
            self.proc = popen(argv, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise WorkerError(
                f"could not start a grading worker ({sys.executable}): {exc}. "
                "Pass symbolic=False to grade without the sympy fallback."
            ) from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buf = bytearray()
        self.next_id = 0
        try:
            line = read_line(self._fd, self._buf, time.monotonic() + STARTUP_TIMEOUT)
        except WorkerGone as exc:
            self.close()
            raise WorkerError(f"grading worker exited while starting ({exc})") from exc
        if line is None:
            self.close()
            raise WorkerError(f"grading worker did not start within {STARTUP_TIMEOUT:.0f} s")
        msg = json.loads(line)
        if not msg.get("ready"):
            self.close()
            raise WorkerError(f"grading worker failed to start: {msg.get('error')}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request; its answer, or None if it did not come within ``timeout`` s.

        Raises :class:`WorkerError` when the request could not be sent (the worker was already
        gone) and :class:`_Crashed` when the worker died while computing.
        """
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
                line = read_line(self._fd, self._buf, deadline)
            except WorkerGone as exc:
                raise _Crashed(str(exc)) from exc
            if line is None:
                return None
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                return msg

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)  # SIGKILL cannot be ignored: this returns at once
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


class WorkerPool(ProcessPool[_GradingWorker]):
    """Up to ``size`` grading workers, started on demand and replaced when killed."""

    def __init__(self, size: int | None = None, memory_mb: int | None = None):
        if size is None:
            size = int(os.environ.get("LLM_MARL_GRADING_WORKERS", min(4, os.cpu_count() or 1)))
        if memory_mb is None:
            memory_mb = int(os.environ.get("LLM_MARL_GRADING_WORKER_MEMORY_MB", 4096))
        self.memory_mb = memory_mb
        super().__init__(lambda: _GradingWorker(memory_mb), size, name="grading worker")
        self._stats_lock = threading.Lock()
        self.timeouts = 0

    @property
    def restarts(self) -> int:
        """Workers replaced so far (killed on timeout, crashed, or found dead)."""
        return self.replaced

    def _lease(self) -> _GradingWorker:
        try:
            return self.acquire()
        except PoolClosedError as exc:
            raise WorkerError("the grading worker pool is closed") from exc

    def run(self, payload: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Run one request; its answer, or None if it timed out (the worker is then replaced).

        A worker found dead before it took the request (killed while idle) is replaced and the
        request retried once. A worker that dies while computing was crashed by the input: the
        answer is then ``{"correct": False, ...}``. Raises :class:`WorkerError` if no worker can
        be started.
        """
        for attempt in range(2):
            worker = self._lease()
            try:
                answer = worker.request(payload, timeout)
            except _Crashed:
                self.discard(worker)
                return {"correct": False, "reason": "not equivalent (the symbolic check crashed)"}
            except WorkerError:
                self.discard(worker)
                if attempt == 0:
                    continue
                raise
            except BaseException:
                self.discard(worker)  # e.g. KeyboardInterrupt mid-request: the worker is busy
                raise
            if answer is None:
                with self._stats_lock:
                    self.timeouts += 1
                self.discard(worker)
                return None
            self.release(worker)
            return answer
        raise WorkerError("unreachable")  # pragma: no cover

    def warm_up(self) -> None:
        """Start every worker now, in parallel, and wait until they are ready (e.g. before
        timing something): a request then never waits for a sympy import."""
        try:
            self.prestart()
        except PoolClosedError as exc:
            raise WorkerError("the grading worker pool is closed") from exc

    def close(self, *, kill_busy: bool = False) -> None:
        """Kill every idle worker; busy ones are killed when their request returns."""
        super().close(kill_busy=kill_busy)


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (created on first use; recreated in a forked child)."""
    global _default
    with _default_lock:
        if _default is None or _default.pid != os.getpid() or _default.closed:
            _default = WorkerPool()
        return _default


def shutdown_default_pool() -> None:
    """Kill the default pool's workers (every pool is also closed at interpreter exit, by
    :func:`llm_marl.tools.workers.shutdown`)."""
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
