"""Log-prob + backward of one 32+256-token sequence at Qwen's 151,936-token vocabulary.

Four ways to get the per-token log-probs of a 256-token completion after a 32-token prompt,
each followed by ``backward()`` of their sum, on a tiny Qwen2-shaped model (random init,
``build_tiny_lm(vocab_size=151936)``: the LM head dominates, as in the issue's measurement):

* ``loop`` — a per-token loop: one forward per completion token over its prefix (no KV cache,
  ``logits_to_keep=1``), ``log_softmax`` of that one position.
* ``loop_kv`` — the same loop with a KV cache (one new token per forward).
* ``old`` — ``HFPolicy.sequence_logprobs`` on its full-logits path (the ``(1, 257, V)`` logits,
  ``.float() / T``, gather - logsumexp), forced by refusing the decoder/head split.
* ``new`` — ``HFPolicy.sequence_logprobs`` as shipped: backbone once, then the LM head on
  (token x vocabulary) blocks, recomputed in backward (``llm_marl/policies/logprob.py``).

Each (method, repetition) runs in a fresh subprocess, methods interleaved within every
repetition. A child loads the model, warms its method up on a short sequence, resets the
peak-RSS counter (``/proc/self/clear_refs``), then times ``--runs`` calls: the peak is the
resident-set high-water mark above what the process held just before (model, warm caches).
Medians over repetitions are printed side by side with ratios (targets from issue 13:
``new`` >= 40x faster than ``loop``; ``new``'s peak <= 1/4 of ``old``'s).

    python benchmarks/logprob.py                 # 5 repetitions, ~2-4 minutes on 2 cores
    python benchmarks/logprob.py --reps 3 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHODS = ("loop", "loop_kv", "old", "new")


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    """Make VmHWM (peak RSS) restart from the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _loop(policy, prompt: list[int], comp: list[int], use_cache: bool):
    import torch

    model = policy.model
    temp = policy.logprob_temperature
    out = []
    if use_cache:
        past = None
        ids = torch.tensor([prompt + comp[:-1]])
        # Prompt in one forward, then one token per forward: the logits of position t predict t+1.
        res = model(input_ids=ids[:, : len(prompt)], use_cache=True, logits_to_keep=1)
        past, logits = res.past_key_values, res.logits[:, -1]
        for t, target in enumerate(comp):
            out.append(torch.log_softmax(logits.float() / temp, -1)[0, target])
            if t + 1 < len(comp):
                step = ids[:, len(prompt) + t : len(prompt) + t + 1]
                res = model(input_ids=step, past_key_values=past, use_cache=True, logits_to_keep=1)
                past, logits = res.past_key_values, res.logits[:, -1]
    else:
        for t, target in enumerate(comp):
            ids = torch.tensor([prompt + comp[:t]])
            logits = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1]
            out.append(torch.log_softmax(logits.float() / temp, -1)[0, target])
    return torch.stack(out)


def _one(policy, method: str, prompt: list[int], comp: list[int]) -> None:
    if method in ("loop", "loop_kv"):
        lp = _loop(policy, prompt, comp, use_cache=method == "loop_kv")
    else:
        lp = policy.sequence_logprobs([prompt], [comp])[0]
    lp.sum().backward()
    for p in policy.parameters():
        p.grad = None


def child(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import llm_marl.policies.hf as hf
    from llm_marl.policies import HFPolicy

    if args.chunk_elements:
        import llm_marl.policies.logprob as logprob

        logprob.CHUNK_ELEMENTS = args.chunk_elements
    if args.method == "old":
        hf.split_lm_head = lambda *_a, **_k: None  # type: ignore[assignment]
    policy = HFPolicy(args.model, trainable=True, seed=0)
    policy.logprob_temperature = args.temperature
    vocab = policy.model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist()
    comp = torch.randint(0, vocab, (args.completion_len,), generator=gen).tolist()
    _one(policy, args.method, prompt[:4], comp[:4])  # warm-up: lazy init, allocator pools
    _one(policy, args.method, prompt[:4], comp[:4])
    rss_before = _rss_kib("VmRSS")
    _reset_peak()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        _one(policy, args.method, prompt, comp)
        times.append(time.perf_counter() - start)
    peak = _rss_kib("VmHWM")
    return {"seconds": statistics.median(times), "peak_mib": (peak - rss_before) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--completion-len", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=5, help="subprocesses per method")
    parser.add_argument("--runs", type=int, default=3, help="timed calls per subprocess")
    parser.add_argument("--loop-runs", type=int, default=1, help="timed calls for the loops")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument(
        "--chunk-elements", type=int, default=0, help="override logprob.CHUNK_ELEMENTS for new"
    )
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.method:
        print(json.dumps(child(args)))
        return

    from llm_marl.policies import build_tiny_lm

    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}: choose from {METHODS}")
    root = Path(tempfile.gettempdir()) / "llm_marl_bench_logprob"
    model = build_tiny_lm(
        root / f"v{args.vocab}_h{args.hidden}", vocab_size=args.vocab, hidden_size=args.hidden
    )
    results: dict[str, list[dict]] = {m: [] for m in methods}
    for rep in range(args.reps):
        for method in methods:
            runs = args.loop_runs if method.startswith("loop") else args.runs
            cmd = [
                sys.executable,
                __file__,
                "--model",
                model,
                "--method",
                method,
                "--runs",
                str(runs),
                "--threads",
                str(args.threads),
                "--prompt-len",
                str(args.prompt_len),
                "--completion-len",
                str(args.completion_len),
                "--temperature",
                str(args.temperature),
                "--chunk-elements",
                str(args.chunk_elements),
            ]
            env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            if out.returncode:
                sys.exit(f"{method} failed:\n{out.stderr}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            results[method].append(res)
            print(
                f"rep {rep + 1}/{args.reps} {method:8s} {res['seconds']:8.3f} s "
                f"{res['peak_mib']:8.1f} MiB",
                file=sys.stderr,
                flush=True,
            )

    med = {
        m: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "peak_mib")}
        for m, rs in results.items()
    }
    print(
        f"\n{args.prompt_len}+{args.completion_len} tokens, vocab {args.vocab}, hidden "
        f"{args.hidden}, T={args.temperature}, {args.threads} threads, medians of {args.reps}"
    )
    print(f"{'method':10s} {'seconds':>9s} {'peak MiB':>9s} {'new speedup':>12s} {'new/peak':>9s}")
    new = med.get("new")
    for m, r in med.items():
        speed = f"{r['seconds'] / new['seconds']:11.1f}x" if new else ""
        mem = f"{new['peak_mib'] / r['peak_mib']:9.3f}" if new and r["peak_mib"] > 0 else ""
        print(f"{m:10s} {r['seconds']:9.3f} {r['peak_mib']:9.1f} {speed:>12s} {mem:>9s}")
    if new and "loop" in med and "old" in med:
        print(
            f"\nnew vs per-token loop: {med['loop']['seconds'] / new['seconds']:.1f}x faster "
            f"(target >= 40x); peak RSS new/old: "
            f"{new['peak_mib'] / med['old']['peak_mib']:.3f} (target <= 0.25)"
        )


if __name__ == "__main__":
    main()
