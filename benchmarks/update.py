"""Seconds per trained prompt of one policy-gradient update, by how the update batches its passes.

One :func:`~llm_marl.algos.update.policy_gradient_update` of a small random Qwen2 policy
(default: hidden 256, 4 layers, vocabulary 8,192: about 6M parameters, where the backbone and
not the LM head dominates, as in a real model) on
``--prompts`` GRPO groups of ``--group`` completions each (a ``--prompt-len``-token prompt,
completions of ``--min-len``..``--max-len`` tokens), the way the Trainer calls it (old
log-probs computed first, then one optimizer step), in three modes:

* ``whole`` — the minibatch padded into one forward/backward pass, every row encoding its own
  prompt (the update before issue 13: ``micro_batch_size`` = the minibatch,
  ``share_prompts=False``);
* ``groups`` — one pass per prompt group, each row still encoding its prompt
  (``micro_batch_tokens=1``, ``share_prompts=False``);
* ``shared`` — one pass per prompt group, the group's prompt encoded once and its key/value
  cache shared by the completions (``micro_batch_tokens=1``);
* ``packed`` — the default: whole prompt groups packed into passes of up to
  ``micro_batch_tokens`` (4,096) padded tokens, each distinct prompt encoded once.

Modes are interleaved within every repetition, in one process, on the same samples; medians are
printed side by side with ratios to ``whole``, for each number of prompts per step.

    python benchmarks/update.py                     # ~3-6 minutes on 2 cores
    python benchmarks/update.py --prompts 1 8 --reps 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODES = ("whole", "groups", "shared", "packed")
clock = time.perf_counter


def _samples(args: argparse.Namespace, prompts: int, vocab: int) -> list:
    import torch

    from llm_marl.algos.samples import Sample

    gen = torch.Generator().manual_seed(args.seed + prompts)
    out = []
    for _ in range(prompts):
        prompt = torch.randint(3, vocab, (args.prompt_len,), generator=gen).tolist()
        for _ in range(args.group):
            n = int(torch.randint(args.min_len, args.max_len + 1, (1,), generator=gen))
            comp = torch.randint(3, vocab, (n,), generator=gen).tolist()
            adv = float(torch.randn(1, generator=gen))
            out.append(Sample(prompt, comp, [1] * n, [adv] * n, None))
    return out


def _time_update(policy, samples: list, mode: str) -> float:
    from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update

    policy.share_prompts = mode in ("shared", "packed")
    config = PGConfig(
        lr=1e-5,
        micro_batch_size=len(samples) if mode == "whole" else None,
        micro_batch_tokens=PGConfig.micro_batch_tokens if mode == "packed" else 1,
    )
    optimizer, _ = make_optimizer(policy.parameters(), config)
    start = clock()
    policy_gradient_update(policy, optimizer, copy.deepcopy(samples), config)
    return clock() - start


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--prompts", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--group", type=int, default=4, help="completions per prompt (G)")
    p.add_argument("--prompt-len", type=int, default=192)
    p.add_argument("--min-len", type=int, default=16)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the process's CPU time instead of wall time (steadier on a busy machine)",
    )
    args = p.parse_args(argv)
    global clock
    clock = time.process_time if args.cpu_time else time.perf_counter

    import torch

    from llm_marl.policies import HFPolicy, build_tiny_lm
    from llm_marl.policies.quiet import quiet_transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    with quiet_transformers():
        path = build_tiny_lm(
            Path(tempfile.mkdtemp(prefix="llm_marl_update_")) / "lm",
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            num_layers=args.layers,
        )
        policy = HFPolicy(path, trainable=True, seed=args.seed)
    results: dict[int, dict[str, float]] = {}
    for prompts in args.prompts:
        samples = _samples(args, prompts, args.vocab)
        for mode in MODES:  # warm-up (the head-split probe, allocator)
            _time_update(policy, samples, mode)
        times: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.reps):
            for mode in MODES:
                times[mode].append(_time_update(policy, samples, mode) / prompts)
        results[prompts] = {m: statistics.median(t) for m, t in times.items()}

    print(
        f"\nupdate seconds per trained prompt (G={args.group}, prompt {args.prompt_len} tokens, "
        f"completions {args.min_len}-{args.max_len}, hidden {args.hidden} x {args.layers} layers, "
        f"vocab {args.vocab}; medians of {args.reps})"
    )
    print(f"{'prompts/step':>12}  " + "  ".join(f"{m:>8}" for m in MODES) + "  whole/packed")
    for prompts, row in results.items():
        cells = "  ".join(f"{row[m]:8.3f}" for m in MODES)
        print(f"{prompts:>12}  {cells}  {row['whole'] / row['packed']:11.2f}x")
    return results


if __name__ == "__main__":
    main()
