"""Class 6: workers that die with the wrong thread.

A parent-death signal (``bwrap --die-with-parent``) fires when the *thread* that forked the child
exits.  Pools used to pre-start workers from a short-lived thread pool, so as a non-root user
(bwrap's normal case) every pre-started worker was killed at once and the first jobs of each
process failed.  Every worker is now forked by one long-lived spawner thread.  CI runs this file
as a non-root user too.
"""

from __future__ import annotations

import threading
import time

from llm_marl.tools.sandbox import Limits, ProcessSandbox, RunJob, Status


def _build_in_a_thread(**kwargs) -> ProcessSandbox:
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("sb", ProcessSandbox(**kwargs)))
    t.start()
    t.join()
    return out["sb"]


def test_prestarted_workers_survive_the_threads_that_started_them(bwrap_ready):
    sandbox = ProcessSandbox(workers=3, limits=Limits(timeout=5))
    try:
        time.sleep(0.5)  # a parent-death signal would have fired by now
        assert all(w._proc.poll() is None for w in sandbox._workers)
        results = sandbox.run_batch([RunJob("print('first')")] * 6)
        assert [r.status for r in results] == [Status.OK] * 6, results
        assert sandbox._pool.started == 3 and sandbox._pool.replaced == 0
    finally:
        sandbox.close()


def test_a_sandbox_built_in_a_short_lived_thread_keeps_its_workers(bwrap_ready):
    sandbox = _build_in_a_thread(workers=2, limits=Limits(timeout=5))
    try:
        time.sleep(0.5)
        assert all(w._proc.poll() is None for w in sandbox._workers)
        first = sandbox.run("print('first job')")
        assert first.status is Status.OK and first.stdout == "first job\n", first
        assert sandbox._pool.replaced == 0
    finally:
        sandbox.close()


def test_replacements_started_from_worker_threads_survive_them(bwrap_ready):
    with ProcessSandbox(workers=2, limits=Limits(timeout=5)) as sandbox:
        # Kill both workers from inside batch threads: replacements start in the background.
        for w in sandbox._workers:
            w.close()
        t = threading.Thread(target=lambda: sandbox.run("print(1)"))
        t.start()
        t.join()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(sandbox._workers) < 2:
            time.sleep(0.05)
        time.sleep(0.3)
        assert len(sandbox._workers) == 2
        assert all(w._proc.poll() is None for w in sandbox._workers)
        assert sandbox.run("print(2)").stdout == "2\n"
