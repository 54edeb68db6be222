"""Per-job cost of the sandbox harness: this checkout's against an earlier one, side by side.

Issue 28 item 15 moved every job into a short-lived job process forked from a supervisor that
never reads a job (so no job's program can find an earlier job's data in freed memory). This
measures what that costs per job, on each backend, by running two one-worker pools at once:
one whose workers run the harness of ``--baseline`` (a git revision; the protocol is the same,
only the in-sandbox source differs) and one running this checkout's. Rounds alternate between
the two, so that a change of the machine's load hits both.

Jobs, each run back to back on its one worker:

* ``run``: a script printing one line (``Sandbox.run``);
* ``tests``: a three-unit suite, probed once beforehand (``Sandbox.run_tests``).

Reports the median per-job wall time over ``--rounds`` rounds of ``--jobs`` jobs, and the ratio;
and the CPU time the worker itself spent per job (every process of the worker: the supervisor's
own and its reaped descendants' time from ``/proc/<pid>/stat`` for ``ProcessSandbox``, the
container's ``cpuacct``/``cpu.stat`` for Docker), which a loaded machine changes far less than
wall time.

    python benchmarks/sandbox_job_cost.py [--baseline fc7fab9] [--jobs 100] [--rounds 5]
        [--no-docker]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HARNESS = "llm_marl/tools/sandbox/harness.py"
CHECK = (
    "def check(candidate):\n"
    "    assert candidate(1) == 2\n"
    "    assert candidate(5) == 10\n"
    "    assert candidate(0) == 0\n"
)


def baseline_source(revision: str) -> str:
    """The in-sandbox harness as it was at ``revision``."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{HARNESS}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@contextlib.contextmanager
def harness_source(source: str) -> Iterator[None]:
    """Workers started inside get ``source`` as their harness (both backends read the module
    constant when a pool is built)."""
    from llm_marl.tools.sandbox import docker, process

    saved = process.HARNESS_SOURCE, docker.HARNESS_SOURCE
    process.HARNESS_SOURCE = docker.HARNESS_SOURCE = source
    try:
        yield
    finally:
        process.HARNESS_SOURCE, docker.HARNESS_SOURCE = saved


def make(backend: str, source: str) -> Any:
    from llm_marl.tools.sandbox import DockerSandbox, Limits, ProcessSandbox

    limits = Limits(timeout=5.0, test_timeout=5.0)
    with harness_source(source):
        if backend == "docker":
            return DockerSandbox(workers=1, limits=limits)
        return ProcessSandbox(workers=1, limits=limits)


def worker_cpu_seconds(sandbox: Any) -> float | None:
    """CPU seconds used so far by the one worker of ``sandbox`` (None where it cannot be read)."""
    (worker,) = sandbox._workers
    pid = getattr(worker, "supervisor_pid", None)
    if pid is not None:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        # utime, stime, cutime, cstime: the supervisor's and its waited-for descendants'.
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    cid = worker.container_id
    for path, scale in (
        (f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage", 1e-9),
        (f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat", 1e-6),
    ):
        with contextlib.suppress(OSError):
            text = Path(path).read_text()
            if path.endswith("cpu.stat"):
                text = dict(line.split() for line in text.splitlines())["usage_usec"]
            return int(text) * scale
    return None


def per_job_ms(job: Callable[[], Any], n: int, sandbox: Any) -> tuple[float, float | None]:
    """Wall and worker CPU milliseconds per job."""
    cpu = worker_cpu_seconds(sandbox)
    start = time.perf_counter()
    for _ in range(n):
        job()
    wall = (time.perf_counter() - start) / n * 1000
    time.sleep(0.2)  # the last job process ends and is reaped
    after = worker_cpu_seconds(sandbox)
    return wall, None if cpu is None or after is None else (after - cpu) / n * 1000


def jobs_of(sandbox: Any) -> dict[str, Callable[[], Any]]:
    from llm_marl.tools.sandbox import Status, TestSuite

    suite = sandbox.failable(TestSuite.from_check(CHECK, "double"))

    def run() -> None:
        result = sandbox.run("print(sum(range(100)))\n")
        assert result.status is Status.OK and result.stdout == "4950\n", result

    def tests() -> None:
        report = sandbox.run_tests("def double(x):\n    return 2 * x\n", suite)
        assert report.passed == 3, report

    return {"run": run, "tests": tests}


def bench(backend: str, old: str, new: str, n: int, rounds: int) -> list[tuple[str, ...]]:
    pools = {"baseline": make(backend, old), "this checkout": make(backend, new)}
    try:
        jobs = {name: jobs_of(pool) for name, pool in pools.items()}
        times: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for name in pools:  # warm-up
            for job in jobs[name].values():
                per_job_ms(job, 5, pools[name])
        for r in range(rounds):
            order = list(pools) if r % 2 == 0 else list(pools)[::-1]
            for kind in ("run", "tests"):
                for name in order:
                    wall, cpu = per_job_ms(jobs[name][kind], n, pools[name])
                    times.setdefault((kind, name), []).append(wall)
                    if cpu is not None:
                        cpus.setdefault((kind, name), []).append(cpu)
    finally:
        for pool in pools.values():
            pool.close()
    rows = []
    for kind in ("run", "tests"):
        before = statistics.median(times[(kind, "baseline")])
        after = statistics.median(times[(kind, "this checkout")])
        rows.append(
            (backend, kind, "wall", f"{before:.2f}", f"{after:.2f}", f"{after - before:+.2f}",
             f"{after / before:.2f}x")
        )  # fmt: skip
        if (kind, "baseline") in cpus and (kind, "this checkout") in cpus:
            before = statistics.median(cpus[(kind, "baseline")])
            after = statistics.median(cpus[(kind, "this checkout")])
            rows.append(
                (backend, kind, "worker CPU", f"{before:.2f}", f"{after:.2f}",
                 f"{after - before:+.2f}", f"{after / before:.2f}x")
            )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline",
        default="fc7fab9",
        help="git revision of the harness to compare with (default: the last one whose "
        "supervisor forked every job's processes itself)",
    )
    parser.add_argument("--jobs", type=int, default=100, help="jobs per round and kind")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker backend")
    args = parser.parse_args(argv)

    from llm_marl.tools.sandbox import SandboxUnavailableError
    from llm_marl.tools.sandbox.pool import HARNESS_SOURCE

    old = baseline_source(args.baseline)
    print(
        f"per-job wall time, one worker per pool, {args.jobs} jobs x {args.rounds} rounds "
        f"(median), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"baseline harness {args.baseline}\n"
    )
    rows = bench("process", old, HARNESS_SOURCE, args.jobs, args.rounds)
    if not args.no_docker:
        try:
            rows += bench("docker", old, HARNESS_SOURCE, args.jobs, args.rounds)
        except SandboxUnavailableError as e:
            print(f"docker: unavailable ({e})")
    head = ("backend", "job", "per job", "baseline ms", "now ms", "delta ms", "ratio")
    print("  ".join(f"{h:>12}" for h in head))
    for row in rows:
        print("  ".join(f"{c:>12}" for c in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
