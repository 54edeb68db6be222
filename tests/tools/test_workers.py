"""The one worker-process pool (llm_marl.tools.workers): spawning, leasing, replacement, shutdown.

The workers here are tiny trusted ``python -c`` helpers written by the test (no untrusted code).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref

import pytest

from llm_marl.tools import workers
from llm_marl.tools.workers import PoolClosedError, ProcessPool, WorkerGone

# A child that asks for SIGKILL when its parent *thread* exits (PR_SET_PDEATHSIG, as
# bwrap --die-with-parent and the grading worker do), then answers one line and waits.
PDEATHSIG_CHILD = """
import ctypes, signal, sys, time
ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)
print("ready", flush=True)
time.sleep(60)
"""


def _alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def _started_in_thread(start):
    """Start a child from a thread that waits until the child armed its parent-death signal,
    then exits (as a thread pool's thread does after pre-starting workers)."""
    out = {}

    def run():
        proc = start()
        proc.stdout.readline()  # "ready": the signal is armed while this thread still lives
        out["proc"] = proc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out["proc"]


def _popen():
    return subprocess.Popen(
        [sys.executable, "-c", PDEATHSIG_CHILD], stdout=subprocess.PIPE, text=True
    )


def test_spawned_processes_outlive_the_thread_that_asked_for_them():
    # Control: started directly from a thread that then exits, the child is killed at once.
    direct = _started_in_thread(_popen)
    spawned = _started_in_thread(lambda: workers.spawn(_popen))
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(direct):
            time.sleep(0.02)
        assert not _alive(direct), "the parent-death signal should fire when the thread exits"
        time.sleep(0.3)
        assert _alive(spawned), "a worker started through spawn() must survive the thread"
    finally:
        for proc in (direct, spawned):
            proc.kill()
            proc.wait()
            proc.stdout.close()


class EchoWorker(workers.Worker):
    """Answers each line with the same line; can be told to hang."""

    started = 0

    def __init__(self, delay: float = 0.0) -> None:
        time.sleep(delay)  # a slow start-up, like importing sympy
        self.proc = workers.spawn(
            lambda: subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys\nfor line in sys.stdin:\n"
                    "    if line.startswith('hang'):\n        import time; time.sleep(60)\n"
                    "    sys.stdout.write(line); sys.stdout.flush()\n",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
        self.buf = bytearray()
        type(self).started += 1

    def ask(self, text: str, timeout: float) -> bytes | None:
        workers.write_all(self.proc.stdin.fileno(), text.encode() + b"\n", time.monotonic() + 5)
        return workers.read_line(self.proc.stdout.fileno(), self.buf, time.monotonic() + timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


def test_pool_leases_ready_workers_and_replaces_killed_ones_in_the_background():
    pool = ProcessPool(lambda: EchoWorker(delay=0.3), 2, name="echo worker")
    try:
        pool.prestart()
        assert pool.started == 2
        with pool.lease() as w:
            assert w.ask("hi", 5) == b"hi"
        # A request that overruns its deadline: the worker is killed, its successor starts in
        # the background, and the next request is served at once by the other, warm worker.
        w = pool.acquire()
        assert w.ask("hang", 0.2) is None
        pool.discard(w)
        start = time.monotonic()
        with pool.lease() as other:
            assert other is not w
            assert other.ask("fast", 5) == b"fast"
        assert time.monotonic() - start < 0.25, "served by a warm worker, not a starting one"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(pool.workers()) < 2:
            time.sleep(0.05)
        assert len(pool.workers()) == 2 and pool.replaced == 1
        # A worker killed while idle is noticed and replaced when it is next leased.
        victim = pool.workers()[0]
        victim.proc.kill()
        victim.proc.wait()
        for _ in range(3):
            with pool.lease() as w:
                assert w.alive() and w.ask("ok", 5) == b"ok"
    finally:
        pool.close()
    with pytest.raises(PoolClosedError):
        pool.acquire()


def test_deadline_io_reports_eof_and_deadlines():
    r, w = os.pipe()
    try:
        buf = bytearray()
        start = time.monotonic()
        assert workers.read_line(r, buf, time.monotonic() + 0.2) is None
        assert 0.15 < time.monotonic() - start < 2
        os.write(w, b"one\ntwo")
        assert workers.read_line(r, buf, time.monotonic() + 1) == b"one"
        with pytest.raises(WorkerGone, match="did not answer"):
            workers.read_exact(r, 10, time.monotonic() + 0.1)
    finally:
        os.close(w)
    with pytest.raises(WorkerGone, match="exited"):
        workers.read_exact(r, 100, time.monotonic() + 1)
    os.close(r)


def test_one_shutdown_closes_every_pool_and_a_forked_child_leaves_them_alone(monkeypatch):
    # A registry of this test's own: shutdown() closes every pool of the process, and the
    # session's sandbox pools, which later tests use, must stay open whatever the test order.
    monkeypatch.setattr(workers, "_LIVE_POOLS", weakref.WeakSet())
    pool = ProcessPool(EchoWorker, 1, name="echo worker")
    other = ProcessPool(EchoWorker, 1, name="echo worker")
    pool.prestart()
    (w,) = pool.workers()
    pid = os.fork()
    if pid == 0:  # the child must neither use nor kill its parent's workers
        code = 0
        try:
            try:
                pool.acquire()
                code = 1
            except PoolClosedError:
                pass
            workers.shutdown()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert w.alive()
    workers.shutdown()
    assert not w.alive() and pool.closed and other.closed


def test_pool_rejects_a_bad_size():
    with pytest.raises(ValueError, match="at least one worker"):
        ProcessPool(EchoWorker, 0)


def test_a_failed_start_frees_its_slot():
    calls = []

    def start():
        calls.append(1)
        if len(calls) == 1:
            raise OSError("no more processes")
        return EchoWorker()

    pool = ProcessPool(start, 1)
    try:
        with pytest.raises(OSError, match="no more processes"):
            pool.acquire()
        with pool.lease(timeout=10) as w:
            assert w.ask("again", 5) == b"again"
    finally:
        pool.close()


def test_close_kills_busy_workers_unless_told_otherwise():
    pool = ProcessPool(EchoWorker, 1)
    w = pool.acquire()
    pool.close(kill_busy=False)
    assert w.alive()
    pool.release(w)  # comes back after the close: killed now
    assert not w.alive()
    pool2 = ProcessPool(EchoWorker, 1)
    w2 = pool2.acquire()
    pool2.close()
    assert not w2.alive()
    os.kill(os.getpid(), 0)  # still here
    assert signal.SIGKILL  # noqa: B015 - keep the import used on every platform
