"""One rank of the sharded-learner tests (``test_sharded.py``), and the cases both sides run.

Run as ``python sharded_worker.py RANK WORLD PORT MODEL_DIR OUT_DIR``: joins a gloo group on
127.0.0.1, trains every case of :data:`CASES` with the policy sharded by FSDP2, and writes
what the test compares into ``OUT_DIR`` (rank 0). The test imports this file by path for
:func:`train` and :func:`make_policy`, so both sides train exactly the same way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

STEPS = 2
"""Updates per case (each one optimizer step per epoch)."""

CASES: list[dict[str, Any]] = [
    # Both losses, both aggregations, with and without LoRA; packed passes, fixed-size passes
    # and one-sample passes (rank 0 then has nothing in a pass and runs a zero-weight one).
    {"loss": "clipped", "aggregation": "token-mean", "lora": False, "micro_batch_size": None},
    {
        "loss": "policy-gradient",
        "aggregation": "sequence-mean",
        "lora": False,
        "micro_batch_size": 3,
    },
    # LoRA with a trained copy of the (tied) embedding, as the toy presets' adapters have.
    {
        "loss": "clipped",
        "aggregation": "sequence-mean",
        "lora": True,
        "micro_batch_size": 1,
        "modules_to_save": ["embed_tokens"],
    },
    {
        "loss": "policy-gradient",
        "aggregation": "token-mean",
        "lora": True,
        "micro_batch_size": None,
    },
    # Sharded with activation checkpointing (the one-process run keeps its activations).
    {
        "loss": "clipped",
        "aggregation": "token-mean",
        "lora": False,
        "micro_batch_size": 2,
        "checkpointing": True,
    },
]
CHECKPOINT_CASES = (0, 2)
"""Cases that also save after :data:`STEPS` updates, train one more, and resume on 2 ranks."""


def pg_config(case: dict[str, Any]) -> Any:
    from llm_marl.algos.update import PGConfig

    return PGConfig(
        lr=1e-3,
        loss=case["loss"],
        aggregation=case["aggregation"],
        epochs=2 if case["loss"] == "clipped" else 1,
        micro_batch_size=case["micro_batch_size"],
        micro_batch_tokens=40,
        max_grad_norm=1.0,
    )


def make_policy(model_dir: str, case: dict[str, Any]) -> Any:
    from llm_marl.policies.hf import HFPolicy

    lora = None
    if case["lora"]:
        from peft import LoraConfig

        saved = case.get("modules_to_save")
        lora = LoraConfig(
            r=4,
            lora_alpha=8,
            lora_dropout=0.0,
            target_modules="all-linear",
            modules_to_save=saved,
            ensure_weight_tying=bool(saved),  # the copy stays the output layer too
        )
    # peft draws LoRA's A matrices from the global generator: the same start in every process.
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return HFPolicy(model_dir, trainable=True, lora_config=lora, seed=0)


def samples(step: int) -> list[Any]:
    """Three prompts with two completions each, of different lengths, fixed per step."""
    from llm_marl.algos.samples import Sample

    gen = torch.Generator().manual_seed(1000 + step)
    out = []
    for p in range(3):
        prompt = torch.randint(10, 400, (3 + p,), generator=gen).tolist()
        for c in range(2):
            n = 2 + (p + 2 * c) % 4
            completion = torch.randint(10, 400, (n,), generator=gen).tolist()
            advantage = float(torch.randn((), generator=gen))
            out.append(Sample(prompt, completion, [1] * n, [advantage] * n))
    return out


def train(
    policy: Any, optimizer: Any, scheduler: Any, case: dict[str, Any], steps: range
) -> list[float]:
    """Train on :func:`samples` of ``steps``; the gradient norm of each update (before
    clipping: unlike the weights, it shows a gradient that is off by a constant factor, which
    Adam's update would hide)."""
    from llm_marl.algos.update import policy_gradient_update

    norms = []
    for step in steps:
        metrics = policy_gradient_update(
            policy,
            optimizer,
            samples(step),
            pg_config(case),
            scheduler=scheduler,
            update_index=step,
        )
        norms.append(metrics["grad_norm"])
    return norms


def weights(policy: Any) -> dict[str, torch.Tensor]:
    """Every trainable weight, whole (a collective on a sharded policy)."""
    from llm_marl.policies.sharded import full_weights

    lora = policy.adapter is not None
    return {n: t.clone() for n, t in full_weights(policy, adapter_only=lora)}


def main(rank: int, world: int, port: int, model_dir: str, out: Path) -> None:
    import torch.distributed as dist

    from llm_marl.algos.update import make_optimizer
    from llm_marl.policies.sharded import ShardingConfig, push_weights, save_hf, shard_policy
    from llm_marl.train.sharded_checkpoint import LearnerState

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )

    def built(case: dict[str, Any]) -> tuple[Any, Any, Any]:
        sharding = ShardingConfig(activation_checkpointing=case.get("checkpointing", False))
        policy = shard_policy(make_policy(model_dir, case), sharding)
        optimizer, scheduler = make_optimizer(policy.parameters(), pg_config(case))
        return policy, optimizer, scheduler

    for i, case in enumerate(CASES):
        policy, optimizer, scheduler = built(case)
        norms = train(policy, optimizer, scheduler, case, range(STEPS))
        result: dict[str, Any] = {"after": weights(policy), "grad_norms": norms}
        if i in CHECKPOINT_CASES:
            LearnerState(policy, optimizer, scheduler).save(out / f"ckpt-{i}")
            save_hf(policy, out / f"hf-{i}")
            train(policy, optimizer, scheduler, case, range(STEPS, STEPS + 1))
            result["continued"] = weights(policy)
            # A sync consumer on rank 0 only: it records what the stream hands it.
            seen: list[tuple[str, torch.Tensor]] = []
            push_weights(
                policy,
                seen.extend if rank == 0 else None,
                adapter_only=case["lora"],
            )
            result["pushed"] = seen
            resumed, optimizer, scheduler = built(case)
            LearnerState(resumed, optimizer, scheduler).load(out / f"ckpt-{i}")
            train(resumed, optimizer, scheduler, case, range(STEPS, STEPS + 1))
            result["resumed"] = weights(resumed)
        if rank == 0:
            torch.save(result, out / f"case-{i}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], Path(sys.argv[5]))
