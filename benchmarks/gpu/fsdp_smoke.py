"""The cost of FSDP2 wrapping where it is not needed: one GPU, a real-size model.

Builds a random-init Qwen2 with Qwen2.5-1.5B's shape (nothing downloaded; the tokenizer is
the tiny LM's, whose ids are valid in any larger vocabulary), fp32 weights and AdamW, and runs
:func:`~llm_marl.algos.update.policy_gradient_update` on the same fixed batch in three setups:

* ``plain``: one process, bf16 autocast, the chunked LM head (the library's default);
* ``plain-logits``: the same scoring from the model's full logits (what a sharded policy uses);
* ``fsdp``: :func:`~llm_marl.policies.sharded.shard_policy` on a one-rank NCCL group, bf16
  compute from fp32 sharded weights (``mixed_precision``).

Prints peak GPU memory and the median step time of each, with ``llm-marl train --dry-run``'s
estimate (:func:`~llm_marl.train.memory.estimate`) beside the memory. Run through
``fsdp_smoke.sh``. GPU images without the env layer's packages (pettingzoo) still run it: the
learner needs none of it (see :func:`_learner_imports`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

SHAPE = {  # Qwen2.5-1.5B's config.json
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
}


def _learner_imports() -> None:
    """Import the learner's modules without the package roots that pull in the env layer.

    ``import llm_marl`` imports the envs (pettingzoo); the GPU image lacks pettingzoo, and the
    policies, the update loop and the memory planner never use it. Empty package objects stand
    in for those roots so that only the submodules named below are executed.
    """
    try:
        import pettingzoo  # noqa: F401
    except ImportError:
        for name in ("llm_marl", "llm_marl.algos", "llm_marl.rollout", "llm_marl.train"):
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(ROOT / name.replace(".", "/"))]
            sys.modules[name] = pkg


def _batch(rows: int, prompt: int, completion: int) -> list[Any]:
    import torch

    from llm_marl.algos.samples import Sample

    gen = torch.Generator().manual_seed(0)
    out = []
    for r in range(rows):
        p = torch.randint(10, 400, (prompt,), generator=gen).tolist()
        c = torch.randint(10, 400, (completion,), generator=gen).tolist()
        adv = 1.0 if r % 2 else -1.0
        out.append(Sample(p, c, [1] * completion, [adv] * completion, old_logprobs=None))
    return out


def _run(mode: str, args: argparse.Namespace, tokenizer: str) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.policies.sharded import ShardingConfig, shard_policy

    torch.manual_seed(0)
    config = Qwen2Config(**SHAPE, use_sliding_window=False)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config)  # float32: the default dtype
    policy = HFPolicy(model, tokenizer=tokenizer, trainable=True, seed=0)
    policy.share_prompts = False
    if mode == "fsdp":
        shard_policy(policy, ShardingConfig(mixed_precision=True))
    elif mode == "plain-logits":
        policy.chunked_lm_head = False
    cfg = PGConfig(lr=1e-6, micro_batch_size=args.rows, max_grad_norm=1.0)
    optimizer, _ = make_optimizer(policy.parameters(), cfg)
    samples = _batch(args.rows, args.prompt, args.completion)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if mode != "fsdp" else contextlib.nullcontext()
    )
    times = []
    torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + 1):
        for s in samples:
            s.old_logprobs = None
        torch.cuda.synchronize()
        start = time.perf_counter()
        with autocast:
            metrics = policy_gradient_update(policy, optimizer, samples, cfg, update_index=step)
        torch.cuda.synchronize()
        if step:  # the first step allocates the optimizer state and warms the kernels up
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30
    result = {
        "peak_gib": peak,
        "step_s": statistics.median(times),
        "loss": float(metrics.get("loss", float("nan"))),
    }
    del policy, model, optimizer
    torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--completion", type=int, default=256)
    args = parser.parse_args()
    _learner_imports()
    import torch
    import torch.distributed as dist
    from transformers import Qwen2Config

    from llm_marl.policies.tiny import build_tiny_lm
    from llm_marl.train.memory import GIB, estimate, model_shape

    if not torch.cuda.is_available():
        sys.exit("fsdp_smoke needs a CUDA GPU")
    torch.cuda.set_device(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    tokenizer = build_tiny_lm(Path(tempfile.gettempdir()) / "fsdp-smoke-tiny")
    shape = model_shape(Qwen2Config(**SHAPE, use_sliding_window=False))
    tokens = args.rows * (args.prompt + args.completion)
    print(
        f"{torch.cuda.get_device_name()}: Qwen2.5-1.5B shape, {shape.params / 1e9:.2f}B params, "
        f"fp32 weights + AdamW, {args.rows} rows x ({args.prompt} + {args.completion}) tokens, "
        f"{args.steps} timed steps (median), torch {torch.__version__}"
    )
    results = {}
    for mode in ("plain", "plain-logits", "fsdp"):
        results[mode] = _run(mode, args, tokenizer)
        plan = estimate(shape, mixed_precision=True, tokens=tokens)
        planned = plan.total / GIB
        if mode != "plain":  # full logits: the logits, their fp32 copy and log-softmax
            planned += args.rows * args.completion * shape.vocab * (2 + 8) / GIB
        r = results[mode]
        print(
            f"{mode:<13} peak {r['peak_gib']:7.2f} GiB (--dry-run estimate {planned:6.2f})  "
            f"step {r['step_s']:6.3f} s  loss {r['loss']:+.5f}",
            flush=True,
        )
    base = results["plain-logits"]
    fsdp = results["fsdp"]
    print(
        f"fsdp / plain-logits: memory x{fsdp['peak_gib'] / base['peak_gib']:.3f}, "
        f"time x{fsdp['step_s'] / base['step_s']:.3f}"
    )
    dist.destroy_process_group()
    os._exit(0)


if __name__ == "__main__":
    main()
