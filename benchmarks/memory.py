"""Peak memory of one two-agent MAGRPO step: two LoRA adapters on ONE shared base vs two full copies.

Each configuration runs in a fresh subprocess, so that its peak is its own:

* ``lora`` — ``HFPolicy.shared_lora(base, ["left", "right"])``: one base model, one rank-r
  adapter per agent, one AdamW per adapter; the KL reference (if any) is the base with adapters
  disabled, so it costs nothing.
* ``full`` — two ``HFPolicy(path, trainable=True)``: two model copies, each with gradients and
  AdamW moments.

Both run the same MAGRPO step (collect ``tasks x G`` episodes on ``coordination-v0``, then
update both agents) twice — the first update allocates the optimizer state — and report the
peak memory above what the process held before the models were loaded: resident memory
(``ru_maxrss``) on CPU, ``torch.cuda.max_memory_allocated`` on a GPU. No KL term by default, so
that the comparison is weights + gradients + optimizer state + activations on both sides
(``--kl-coef`` adds the reference: a free base pass for LoRA, a frozen copy per agent for full).

    python benchmarks/memory.py                       # ~40M-parameter offline model, CPU
    python benchmarks/memory.py --model Qwen/Qwen2.5-0.5B-Instruct --device cuda

Prints a table and the ratio lora / full (target: <= 0.65).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def _rss_bytes() -> int:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def child(args: argparse.Namespace) -> dict:
    """Run two MAGRPO steps in this process and report the peak memory of the models."""
    import torch
    import transformers  # noqa: F401  (imported before the baseline: not part of the models)
    from transformers import AutoModelForCausalLM

    from llm_marl.algos import MAGRPO, MAGRPOConfig
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.base import SamplingParams
    from llm_marl.train import Trainer, TrainerConfig

    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.init()
        torch.cuda.reset_peak_memory_stats()
        base_mem = torch.cuda.memory_allocated()
    else:
        base_mem = _rss_bytes()

    dtype = getattr(torch, args.dtype)
    agents = ["left", "right"]
    if args.mode == "lora":
        from peft import LoraConfig

        base = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(args.device)
        lora = LoraConfig(
            r=args.lora_rank,
            lora_alpha=2 * args.lora_rank,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
        policies = HFPolicy.shared_lora(base, agents, lora, tokenizer=args.model, seed=0)
    else:
        policies = {}
        for i, agent in enumerate(agents):
            reference = None
            if args.kl_coef > 0:
                reference = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
                reference.to(args.device)
            policies[agent] = HFPolicy(
                args.model,
                trainable=True,
                name=agent,
                device=args.device,
                dtype=dtype,
                reference_model=reference,
                seed=i,
            )
    config = TrainerConfig(
        env="coordination-v0",
        steps=2,
        tasks_per_step=args.tasks,
        group_size=args.group_size,
        sampling=SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0),
        output_dir=tempfile.mkdtemp(prefix="llm_marl_mem_"),
        progress=False,
        console=False,
        plot=False,
    )
    trainer = Trainer(
        MAGRPO(MAGRPOConfig(lr=1e-4, kl_coef=args.kl_coef, micro_batch_size=args.micro_batch_size)),
        policies,
        config,
    )
    params = {a: sum(p.numel() for p in p_.parameters()) for a, p_ in policies.items()}
    for step in range(2):
        trainer.train_step(step)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base_mem
    else:
        peak = _peak_rss_bytes() - base_mem
    total = sum(p.numel() for p in next(iter(policies.values())).model.parameters())
    return {
        "mode": args.mode,
        "peak_bytes": int(peak),
        "trainable_params": params,
        "model_params": int(total),
    }


def build_default_model(directory: Path) -> str:
    """An offline ~40M-parameter model (big enough that weights dominate the process)."""
    from llm_marl.policies import build_tiny_lm

    return build_tiny_lm(
        directory / "bench-lm", seed=0, vocab_size=2048, hidden_size=512, num_layers=8, num_heads=8
    )


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default=None, help="HF id or path (default: an offline ~40M model)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--tasks", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--kl-coef", type=float, default=0.0)
    p.add_argument(
        "--micro-batch-size",
        type=int,
        default=4,
        help="sequences per forward/backward (bounds activations, as on a real GPU run)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cache", default=None, help="where to build the default model")
    p.add_argument("--mode", choices=["lora", "full"], help=argparse.SUPPRESS)  # child only
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    args = p.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"

    if args.mode is not None:  # we are a child: measure and report
        print("RESULT " + json.dumps(child(args)), flush=True)
        return {}

    if args.model is None:
        cache = Path(args.cache or Path(tempfile.gettempdir()) / "llm_marl_bench")
        args.model = build_default_model(cache)
    results = {}
    for mode in ("lora", "full"):
        cmd = [sys.executable, __file__, "--mode", mode]
        for key in (
            "model",
            "device",
            "dtype",
            "lora_rank",
            "group_size",
            "tasks",
            "max_new_tokens",
            "kl_coef",
            "micro_batch_size",
            "threads",
        ):
            cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            raise RuntimeError(
                f"the {mode} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
            )
        results[mode] = json.loads(line[0][len("RESULT ") :])
    ratio = results["lora"]["peak_bytes"] / results["full"]["peak_bytes"]
    summary = {"results": results, "ratio": ratio, "device": args.device, "model": args.model}
    if args.json:
        print(json.dumps(summary))
        return summary
    mib = 1024 * 1024
    print(
        f"two-agent MAGRPO step, {results['full']['model_params'] / 1e6:.1f}M-parameter model, "
        f"{args.device}, {args.dtype}, G={args.group_size} x {args.tasks} tasks, "
        f"{args.max_new_tokens} new tokens, micro-batch {args.micro_batch_size}, "
        f"kl_coef={args.kl_coef}"
    )
    print(f"{'setup':<34}{'trainable params':>18}{'peak memory':>16}")
    labels = {
        "lora": f"2 LoRA adapters (r={args.lora_rank}), 1 base",
        "full": "2 full model copies",
    }
    for mode in ("lora", "full"):
        r = results[mode]
        trainable = sum(r["trainable_params"].values())
        print(f"{labels[mode]:<34}{trainable / 1e6:>17.2f}M{r['peak_bytes'] / mib:>13.1f} MiB")
    print(f"ratio lora / full: {ratio:.3f}  (target <= 0.65)")
    return summary


if __name__ == "__main__":
    main()
