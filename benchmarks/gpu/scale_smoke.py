"""Local vs Ray rollouts on one GPU: two engines and two learners sharing it, a real-size model.

Builds a random-init Qwen2 with Qwen2.5-0.5B's shape (nothing downloaded; the tokenizer is the
tiny LM's, whose ids are valid in any larger vocabulary) and two LoRA adapters over it (the two
agents of ``coordination-v0``, the toy MAGRPO preset's env), then trains ``--steps`` MAGRPO
steps twice: with the local executor, and with ``executor="ray"`` (two generation engines and
one learner actor per adapter, a quarter of the GPU each, two env workers). Prints
rollout samples/s (episodes and generated tokens per second of ``collect``) side by side and
checks that the two runs logged the same rewards. Run through ``scale_smoke.sh``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

SHAPE = {  # Qwen2.5-0.5B's config.json
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
}


def build_model(out: Path) -> str:
    """Save the random-init model with the tiny LM's tokenizer under ``out``."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from llm_marl.policies.tiny import build_tiny_lm

    tiny = build_tiny_lm(out.parent / "scale-smoke-tiny")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**SHAPE, use_sliding_window=False))
    model.to(torch.bfloat16).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(out)
    return str(out)


def run(path: str, executor: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from llm_marl.algos import MAGRPO, MAGRPOConfig
    from llm_marl.policies.base import SamplingParams
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.train.trainer import Trainer, TrainerConfig

    team = HFPolicy.shared_lora(path, ["left", "right"], device="cuda", dtype="bfloat16")
    sampling = SamplingParams(max_new_tokens=args.tokens, temperature=1.0)
    cfg = TrainerConfig(
        env="coordination-v0",
        steps=args.steps,
        tasks_per_step=args.tasks,
        group_size=args.group_size,
        sampling=sampling,
        eval_at_start=False,
        eval_tasks=1,
        output_dir=str(out / executor),
        plot=False,
        console=False,
        progress=False,
        executor=executor,  # type: ignore[arg-type]
        env_workers=2,
        engines=2,
        gpus_per_engine=0.25,
        learner_gpus=0.25,  # one learner actor per LoRA adapter
        cpus_per_engine=0.5,
        cpus_per_env_worker=0.5,
        learner_cpus=0.5,
    )
    trainer = Trainer(MAGRPO(MAGRPOConfig(lr=1e-4)), team, cfg)
    rows = trainer.train().history
    steps = [r for r in rows if "time/collect" in r]
    episodes = args.tasks * args.group_size
    # The first step starts the actors (and warms up the sampler): left out of the rates.
    timed = steps[1:] or steps
    return {
        "episodes/s": statistics.median(episodes / r["time/collect"] for r in timed),
        "collect s": statistics.median(r["time/collect"] for r in timed),
        "update s": statistics.median(r["time/update"] for r in timed),
        "rewards": [round(r["reward"], 6) for r in steps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    try:
        import pettingzoo  # noqa: F401
        import ray
        import torch
    except ImportError as exc:
        sys.exit(f"scale_smoke needs torch, ray and pettingzoo in this image: {exc}")
    if not torch.cuda.is_available():
        sys.exit("scale_smoke needs a CUDA GPU")
    out = Path(tempfile.mkdtemp(prefix="scale-smoke-"))
    path = build_model(out / "qwen2.5-0.5b-shape")
    ray.init(
        num_cpus=4,
        num_gpus=1,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        results = {name: run(path, name, args, out) for name in ("local", "ray")}
    finally:
        ray.shutdown()
    name = torch.cuda.get_device_name()
    print(f"{name}: Qwen2.5-0.5B shape, 2 LoRA agents, coordination-v0, {args.steps} steps")
    print(f"{'executor':<9} {'episodes/s':>11} {'collect s':>10} {'update s':>9}")
    for key, r in results.items():
        print(f"{key:<9} {r['episodes/s']:>11.2f} {r['collect s']:>10.2f} {r['update s']:>9.2f}")
    ratio = results["ray"]["episodes/s"] / results["local"]["episodes/s"]
    print(f"ray / local samples/s = {ratio:.2f}")
    same = results["ray"]["rewards"] == results["local"]["rewards"]
    print(f"rewards per step local {results['local']['rewards']}")
    print(f"rewards per step ray   {results['ray']['rewards']}  (same: {same})")


if __name__ == "__main__":
    main()
