"""Rollout throughput: one batched generate call per policy per step vs one call per env.

``collect`` gathers the prompts of every active agent across all live envs and makes one
batched generate call per policy. The MAGRPO reference code generates env by env. This script
plays the same 16 episodes (4 tasks x G=4) of ``referential-v0`` with the same two tiny models
both ways, interleaving the runs, and prints generated tokens per second and the ratio.

    python benchmarks/rollout_batching.py [--envs 16] [--max-new-tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.tiny import build_tiny_lm
from llm_marl.rollout import collect


def generated_tokens(episodes) -> int:
    return sum(
        len(t.completion_ids) for e in episodes for tr in e.trajectories.values() for t in tr.turns
    )


def batched(policies, tasks, group_size, sampling, seed):
    t0 = time.perf_counter()
    eps = collect(
        "referential-v0",
        policies,
        tasks=tasks,
        group_size=group_size,
        sampling=sampling,
        seed=seed,
        progress=False,
    )
    return generated_tokens(eps), time.perf_counter() - t0


def one_env_at_a_time(policies, tasks, group_size, sampling, seed):
    tokens, t0 = 0, time.perf_counter()
    for i, task in enumerate(tasks):
        for g in range(group_size):
            eps = collect(
                "referential-v0",
                policies,
                tasks=[task],
                group_size=1,
                sampling=sampling,
                seed=seed + i * group_size + g,
                progress=False,
            )
            tokens += generated_tokens(eps)
    return tokens, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, default=16, help="episodes per round (4 tasks x G)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))

    group_size = 4
    num_tasks = max(1, args.envs // group_size)
    root = Path(tempfile.gettempdir()) / "llm_marl_bench_tiny"
    path = build_tiny_lm(
        root / f"h{args.hidden_size}-l{args.layers}",
        seed=0,
        hidden_size=args.hidden_size,
        num_layers=args.layers,
    )
    model = HFPolicy(path, name="tiny")
    policies = {"speaker": model, "listener": model}
    tasks = [
        {"task_id": f"referential/target={k % 4}-{k}", "target": k % 4} for k in range(num_tasks)
    ]
    # min_new_tokens is not a SamplingParams field: a tiny random model rarely stops early
    # within 32 tokens, and both modes count the tokens they really generated.
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0)

    batched(policies, tasks, group_size, sampling, 0)  # warm-up (allocator, kernels)
    rates = {"batched (collect)": [], "one env at a time": []}
    for r in range(args.repeats):
        for name, fn in (("batched (collect)", batched), ("one env at a time", one_env_at_a_time)):
            tokens, seconds = fn(policies, tasks, group_size, sampling, 100 + r)
            rates[name].append(tokens / seconds)

    params = sum(p.numel() for p in model.model.parameters())
    print(
        f"referential-v0, {num_tasks} tasks x G={group_size} = {num_tasks * group_size} envs, "
        f"2 agents, max_new_tokens={args.max_new_tokens}, tiny LM {params / 1e6:.2f}M params, "
        f"{torch.get_num_threads()} threads, median of {args.repeats}"
    )
    print(f"{'mode':<22}{'tokens/s':>12}")
    for name, values in rates.items():
        print(f"{name:<22}{statistics.median(values):>12.0f}")
    ratio = statistics.median(rates["batched (collect)"]) / statistics.median(
        rates["one env at a time"]
    )
    print(f"{'speed-up':<22}{ratio:>11.1f}x")


if __name__ == "__main__":
    main()
