"""Ray executor scaling: a CPU-heavy env at 1 vs 2 env workers, and Ray's overhead.

Plays ``coop_humaneval-v0`` (the bundled sample, the process sandbox) with two scripted agents
that answer each problem's reference helper and main function, so that the time goes into what
an env worker owns: building the team program and running its tests in the sandbox. Three
set-ups play the same episodes (``--tasks`` problems x ``--group-size`` copies):

* local: ``collect`` in this process;
* ray x1: one env worker actor (the same work, plus Ray's dispatch and the episodes' transfer);
* ray x2: two env worker actors, each with its own sandbox pool.

Each set-up warms up once (sandbox pools, imports), then plays ``--repeats`` timed rounds; the
table gives episodes/s (median) and the ratios side by side. A local Ray cluster is started
with ``--cpus`` logical CPUs (loopback only) and stopped at the end.

    python benchmarks/scaling.py [--tasks 16] [--group-size 4] [--repeats 3] [--cpus 2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import Any

from llm_marl.distributed import RayExecutor, RayResources
from llm_marl.envs.registration import make
from llm_marl.policies.base import SamplingParams, ScriptedPolicy
from llm_marl.rollout import collect

ENV = "coop_humaneval-v0"
KWARGS = {"dataset": "sample", "sandbox": "process"}


def reference_team() -> dict[str, ScriptedPolicy]:
    """Scripted helper and main agents answering each problem's reference code."""
    env = make(ENV, **KWARGS)
    by_name = {t["entry_point"]: t for t in env.tasks}
    env.close()

    def answer(conv: list[dict[str, Any]], field: str) -> str:
        match = re.search(r"def (\w+)\(", conv[-1]["content"].split("Problem:", 1)[-1])
        task = by_name.get(match.group(1) if match else "")
        return "" if task is None else f"```python\n{task[field]}\n```"

    return {
        "helper": ScriptedPolicy(lambda c: answer(c, "reference_aux"), name="helper"),
        "main": ScriptedPolicy(lambda c: answer(c, "reference_main"), name="main"),
    }


def timed(team: dict[str, Any], tasks: int, group: int, seed: int, executor: Any) -> float:
    t0 = time.perf_counter()
    episodes = collect(
        ENV,
        team,
        tasks,
        group_size=group,
        sampling=SamplingParams(max_new_tokens=1),
        seed=seed,
        env_kwargs=KWARGS,
        progress=False,
        executor=executor,
    )
    elapsed = time.perf_counter() - t0
    failed = [e for e in episodes if not e.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} episode(s) failed: {failed[0].error}")
    if not any(e.total_reward > 0 for e in episodes):
        raise RuntimeError("no episode scored: the benchmark measures nothing")
    return len(episodes) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    import ray

    team = reference_team()
    ray.init(
        num_cpus=args.cpus,
        include_dashboard=False,
        object_store_memory=200 * 1024**2,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    rates: dict[str, list[float]] = {}
    try:
        setups: list[tuple[str, int | None]] = [("local", None), ("ray x1", 1), ("ray x2", 2)]
        for name, workers in setups:
            executor = None
            if workers is not None:
                cpus = args.cpus / workers
                executor = RayExecutor(RayResources(env_workers=workers, cpus_per_env_worker=cpus))
            try:
                timed(team, args.tasks, args.group_size, 0, executor)  # warm-up
                rates[name] = [
                    timed(team, args.tasks, args.group_size, r + 1, executor)
                    for r in range(args.repeats)
                ]
            finally:
                if executor is not None:
                    executor.shutdown()
    finally:
        ray.shutdown()
    med = {k: statistics.median(v) for k, v in rates.items()}
    n = args.tasks * args.group_size
    print(f"{ENV} (process sandbox), {n} episodes per round, {args.repeats} rounds, median")
    print(f"{'set-up':<10} {'episodes/s':>11}   runs")
    for k, v in rates.items():
        print(f"{k:<10} {med[k]:>11.1f}   {', '.join(f'{x:.1f}' for x in v)}")
    print(f"ray x1 / local  = {med['ray x1'] / med['local']:.2f}  (Ray overhead at equal work)")
    print(f"ray x2 / ray x1 = {med['ray x2'] / med['ray x1']:.2f}  (2 env workers vs 1)")


if __name__ == "__main__":
    main()
