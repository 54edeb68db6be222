"""The Sandbox implementation over a pool of warm workers (:mod:`llm_marl.tools.workers`).

A *worker* is one long-lived supervisor (``harness.py``) reached through a byte channel: a
subprocess's pipes (ProcessSandbox) or a Docker container's attached stdin/stdout
(DockerSandbox).  A worker runs one job at a time; the pool (one
:class:`~llm_marl.tools.workers.ProcessPool`, shared machinery with the math grader) hands ready
workers to callers, replaces a worker that dies in the background, and batches run on a thread
pool (the host threads only wait on I/O, the work happens in the workers).

What a program can do to its worker is never an infrastructure error: a worker that dies during
a job is replaced and the job retried once; if the fresh worker dies on the same job too while a
third one answers a health check, the program is what kills workers and the job is scored as
failing.  Only when the infrastructure itself fails (workers cannot start, the health check
fails, the supervisor reports an infrastructure fault) is the result ``INFRA_ERROR``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from llm_marl.tools.sandbox import harness
from llm_marl.tools.sandbox.base import (
    ExecutionResult,
    Limits,
    RunJob,
    SandboxError,
    SandboxUnavailableError,
    Status,
    TestJob,
    TestReport,
)
from llm_marl.tools.sandbox.program import TeamProgram
from llm_marl.tools.sandbox.suite import TestSuite
from llm_marl.tools.sandbox.verdict import (
    crash_execution_result,
    crash_test_report,
    infra_execution_result,
    infra_test_report,
    make_execution_result,
    make_test_report,
)
from llm_marl.tools.workers import PoolClosedError, ProcessPool, WorkerGone, read_exact, write_all
from llm_marl.tools.workers import Worker as PoolWorker

logger = logging.getLogger("llm_marl.tools.sandbox")

HARNESS_SOURCE = Path(harness.__file__).read_text(encoding="utf-8")

# Extra seconds the host waits beyond a job's own time bound before it declares the worker hung
# (the supervisor enforces the limits itself; this only catches a broken worker).
HOST_GRACE_SECONDS = 15.0
# Seconds a health-check ping may take (a fresh worker answers in milliseconds).
HEALTH_CHECK_SECONDS = 30.0

T = TypeVar("T")


class WorkerDied(SandboxError, WorkerGone):
    """The worker's channel broke, it answered garbage, or it stopped answering."""


class Worker(PoolWorker):
    """One supervisor reached through a framed byte channel.

    Subclasses implement :meth:`_kill` (stop the processes) and :meth:`_release` (close the
    channel's descriptors).  :meth:`close` may come from another thread while a request is
    reading (a sandbox closed with jobs in flight): the descriptors are then released only when
    that request ends, so that it never reads from a descriptor number that meanwhile names
    another worker's pipe.
    """

    hello: dict[str, Any]
    _io_lock: threading.Lock
    _in_request = False
    _closing = False

    @abstractmethod
    def _kill(self) -> None:
        """Stop the worker's processes (the channel then reads EOF); keep the descriptors."""

    @abstractmethod
    def _release(self) -> None:
        """Close the channel's descriptors and free what the worker holds (idempotent)."""

    def _lock(self) -> threading.Lock:
        # Made on first use, so that subclasses need not call an __init__ of ours.
        return self.__dict__.setdefault("_io_lock", threading.Lock())

    def close(self) -> None:
        self._kill()
        with self._lock():
            self._closing = True
            release_now = not self._in_request
        if release_now:
            self._release()

    @abstractmethod
    def _send(self, data: bytes, deadline: float) -> None: ...

    @abstractmethod
    def _recv(self, size: int, deadline: float) -> bytes:
        """Exactly ``size`` bytes of the supervisor's stdout, or raise WorkerDied."""

    def alive(self) -> bool:
        return True

    def before_job(self, limits: Limits) -> None:
        """Prepare the worker for a job with ``limits`` (e.g. its memory cgroup)."""

    def after_job(self, facts: dict[str, Any] | None) -> dict[str, Any]:
        """Facts the host itself knows about the job that just ended (or the worker that just
        died when ``facts`` is None), e.g. ``{"oom_killed": True}``."""
        return {}

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
        lock = self._lock()
        with lock:
            if self._closing:
                raise WorkerDied("the sandbox worker was closed")
            self._in_request = True
        try:
            self._send(payload, deadline)
            return self._recv_frame(deadline)
        except WorkerGone as e:
            if isinstance(e, WorkerDied):
                raise
            raise WorkerDied(str(e)) from e
        finally:
            with lock:
                self._in_request = False
                release_now = self._closing
            if release_now:
                self._release()


def close_quietly(*ends: Any) -> None:
    """Close each of a worker's channel ends (sockets, pipe files) that is not None.

    ``OSError`` is ignored: the end may already be closed or broken (the worker died), and a
    worker being released must free everything else it holds all the same.
    """
    for end in ends:
        try:
            if end is not None:
                end.close()
        except OSError:
            pass


class FdChannelMixin:
    """``_send``/``_recv`` over a pair of pipe file descriptors (non-blocking, with deadlines)."""

    _wfd: int
    _rfd: int

    def _send(self, data: bytes, deadline: float) -> None:
        write_all(self._wfd, data, deadline)

    def _recv(self, size: int, deadline: float) -> bytes:
        return read_exact(self._rfd, size, deadline)


@dataclass(frozen=True)
class _Infra:
    """The infrastructure failed: no verdict on the program."""

    message: str


@dataclass(frozen=True)
class _Crash:
    """The program killed two workers in a row while a third one is healthy: a verdict."""

    status: Status
    message: str


class PooledSandbox:
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
        self._pool: ProcessPool[Worker] | None = None
        self._closed = False
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._probed: dict[TestSuite, TestSuite] = {}

    def _start_pool(self) -> None:
        """Start every worker now so that set-up errors surface at construction."""
        self._pool = ProcessPool(
            self._start_worker, self.size, name=f"{self.backend} sandbox worker"
        )
        try:
            self._pool.prestart()
        except Exception as err:
            self.close()
            if isinstance(err, SandboxUnavailableError):
                raise
            raise SandboxUnavailableError(
                f"could not start the {self.backend} sandbox workers: {err}"
            ) from err

    @abstractmethod
    def _start_worker(self) -> Worker:
        """Start one worker (its process through :func:`llm_marl.tools.workers.spawn`) and
        complete its handshake; raise on failure."""

    @property
    def _workers(self) -> list[Worker]:
        """The live workers (for inspection and tests)."""
        return self._pool.workers() if self._pool is not None else []

    # ------------------------------------------------------------------ running one job

    def _check_open(self) -> None:
        if self._closed or self._pool is None:
            raise SandboxError(f"the {self.backend} sandbox is closed; create a new one")

    def _execute(
        self, payload: bytes, limits: Limits, seconds: float
    ) -> dict[str, Any] | _Infra | _Crash:
        """Run one job of at most ``seconds``; the supervisor's facts, or what went wrong."""
        pool = self._pool
        if pool is None:
            return _Infra("the sandbox is closed")
        timeout = seconds + HOST_GRACE_SECONDS
        problems: list[str] = []
        deaths = 0
        oom = False
        for _attempt in range(2):
            try:
                worker = pool.acquire()
            except PoolClosedError as e:
                return _Infra(str(e))
            except Exception as e:
                problems.append(f"could not start a replacement worker: {e}")
                break
            try:
                worker.before_job(limits)
                reply = worker.request(payload, timeout)
            except Exception as e:  # WorkerDied, or anything unexpected from the channel
                oom = oom or bool(worker.after_job(None).get("oom_killed"))
                pool.discard(worker)
                problems.append(str(e) if isinstance(e, WorkerDied) else f"{type(e).__name__}: {e}")
                deaths += 1
                continue
            kind = reply.get("type")
            if kind == "result":
                reply.update(worker.after_job(reply))
                if reply.get("retire"):
                    # The job left something behind the supervisor could not remove: this
                    # worker must not serve another job.  The result itself is sound.
                    logger.info("retiring a %s sandbox worker: %s", self.backend, reply["retire"])
                    pool.discard(worker)
                else:
                    pool.release(worker)
                return reply
            pool.discard(worker)
            problems.append(str(reply.get("error", reply)))
            if kind == "infra":
                continue  # the supervisor itself says it was not the program
            deaths += 1
        detail = "; then ".join(problems) or "no worker available"
        if deaths == 2 and self._healthy(pool):
            status = Status.MEMORY if oom else Status.FAILED
            return _Crash(
                status,
                "the program crashed the sandbox worker twice (a healthy worker answers); "
                f"scored as failing: {detail}",
            )
        return _Infra(f"{self.backend} sandbox failure: {detail}")

    def _healthy(self, pool: ProcessPool[Worker]) -> bool:
        """Whether a (fresh) worker answers a ping: tells a hostile program from a broken
        infrastructure after two workers died on the same job."""
        try:
            worker = pool.acquire(timeout=HEALTH_CHECK_SECONDS)
        except Exception:
            return False
        try:
            reply = worker.request(harness.pack({"type": "ping"}), HEALTH_CHECK_SECONDS)
        except Exception:
            pool.discard(worker)
            return False
        if reply.get("type") != "pong":
            pool.discard(worker)
            return False
        pool.release(worker)
        return True

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
        too_big = _too_big(program, limits)
        if too_big:
            return crash_execution_result(Status.FAILED, too_big)
        job = {
            "type": "job",
            "mode": "run",
            "program": program,
            "stdin": stdin,
            "limits": limits.to_wire(),
        }
        facts = self._execute(harness.pack(job), limits, limits.job_seconds())
        if isinstance(facts, _Infra):
            return infra_execution_result(facts.message)
        if isinstance(facts, _Crash):
            return crash_execution_result(facts.status, facts.message)
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
        suite = self.failable(suite, limits)
        return self._run_suite(program, suite, limits, owner)

    def failable(self, suite: TestSuite, limits: Limits | None = None) -> TestSuite:
        """``suite`` without the units that cannot fail, found by running it.

        A unit that passes against every probe program -- one whose functions (the entry point
        and every name the tests read from the program) all return the same sentinel: a string
        no task expects, ``None``, or ``0`` -- passes whatever the program does (``assert
        candidate(x) or True``, ``assert candidate(x) == candidate(x)``, a comparison that only
        touches the value...): it is left out and listed in :attr:`TestSuite.unscored`. The
        result is cached per suite and marked :attr:`TestSuite.probed`; :meth:`run_tests` probes
        every suite it is given that is not marked. When a probe cannot run (an infrastructure
        error) the suite is returned as it is, unmarked.

        Raises:
            ValueError: no unit can fail.
        """
        if suite.probed:
            return suite
        with self._lock:
            cached = self._probed.get(suite)
        if cached is not None:
            return cached
        limits = limits or self.limits
        names = suite.program_names()
        reports = []
        for value in _PROBE_VALUES:
            program = "".join(f"def {n}(*args, **kwargs):\n    return {value!r}\n" for n in names)
            report = self._run_suite(program, suite, limits, None)
            if report.status is Status.INFRA_ERROR:
                return suite
            reports.append(report)
        always = [i for i in range(len(suite.tests)) if all(r.tests[i].passed for r in reports)]
        if len(always) == len(suite.tests):
            raise ValueError(_NOTHING_CAN_FAIL_RUN)
        if always:
            keep = [i for i in range(len(suite.tests)) if i not in always]
            refined, _ = suite.subset(keep)
            unscored = suite.unscored + tuple(suite.tests[i] for i in always)
            refined = dataclasses.replace(refined, unscored=unscored, probed=True)
        else:
            refined = dataclasses.replace(suite, probed=True)
        with self._lock:
            if len(self._probed) >= _PROBE_CACHE:
                self._probed.pop(next(iter(self._probed)))
            self._probed[suite] = refined
        return refined

    def _run_suite(
        self,
        program: str,
        suite: TestSuite,
        limits: Limits,
        owner: dict[str, object] | None,
    ) -> TestReport:
        too_big = _too_big(program, limits)
        if too_big:
            return crash_test_report(suite, Status.FAILED, too_big)
        tests_bytes = suite.to_wire()
        job = {
            "type": "job",
            "mode": "tests",
            "program": program,
            "limits": limits.to_wire(),
            "n_tests": len(suite.tests),
            "owner": owner,
        }
        facts = self._execute(
            # The tests follow as a frame of their own, which the test runner reads itself.
            harness.pack(job) + b"%010d\n" % len(tests_bytes) + tests_bytes,
            limits,
            limits.job_seconds(len(suite.tests)),
        )
        if isinstance(facts, _Infra):
            return infra_test_report(suite, facts.message)
        if isinstance(facts, _Crash):
            return crash_test_report(suite, facts.status, facts.message)
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
        """Stop every worker (idempotent; every pool is also closed at interpreter exit by
        :func:`llm_marl.tools.workers.shutdown`)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if self._pool is not None:
            self._pool.close()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

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


# What the probe programs' functions return (PooledSandbox.failable): a string no task expects,
# None and 0. A unit that passes against all three passes whatever the program does.
_PROBE_VALUES = ("\u2063llm-marl probe\u2063", None, 0)
_PROBE_CACHE = 4096
_NOTHING_CAN_FAIL_RUN = (
    "no test can fail: every unit passes against programs that return a fixed sentinel, so "
    "the suite would score every program the same"
)


def _too_big(program: str, limits: Limits) -> str | None:
    """A program larger than the file size limit is refused (scored as failing) before it is
    sent: writing it into the sandbox would fail for reasons of its own making."""
    size = len(program.encode("utf-8", "surrogatepass"))
    if size > limits.file_size_mb << 20:
        return (
            f"the program is {size} bytes, more than the file size limit "
            f"({limits.file_size_mb} MiB); not run"
        )
    return None
