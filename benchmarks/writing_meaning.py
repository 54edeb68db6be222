"""How often the default writing reward ranks an honest answer above counterfeits (issue 28, item 6).

For every TL;DR post of ``$LLM_MARL_DATA_DIR/tldr/test.jsonl`` (500) and the first 200 distinct
arXiv abstracts of ``$LLM_MARL_DATA_DIR/arxiv_abstracts/arxiv_data.csv``, scores the honest
answer and each counterfeit class of :mod:`llm_marl.envs.writing.probes` with the env's default
(guarded) reward, ``WritingEnv.score``, and prints per class the share of tasks where the honest
answer scores strictly higher; also how many honest answers fire a guard or score 0.

The honest answer: TL;DR, the gold TL;DR; arXiv, which has no gold introduction, the second half
of the abstract's sentences, scored on a task whose abstract is the first half (about the same
paper, fluent, not a copy).

The texts the reward embeds are encoded first in one batched call (the reward then reads them
from the embedder's cache), and the script reports that time per scored answer next to the
time of one tiny-model generation step.

    LLM_MARL_DATA_DIR=../shared/data python benchmarks/writing_meaning.py [--posts 500] [--abstracts 200]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import llm_marl
from llm_marl.envs.writing.guards import check_guards
from llm_marl.envs.writing.probes import PROBE_KINDS, probe_answers


def tldr_items(root: Path, n: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    rows = [json.loads(x) for x in (root / "tldr" / "test.jsonl").read_text().splitlines() if x]
    rows = rows[:n]
    tasks = [{"task_id": r["instruction_id"], "post": r["instruction"]} for r in rows]
    return tasks, [r["instruction"] for r in rows], [r["gold_response"] for r in rows]


def arxiv_items(root: Path, n: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    seen: set[str] = set()
    sources, golds = [], []
    with (root / "arxiv_abstracts" / "arxiv_data.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            abstract = " ".join(row["summaries"].split())
            if abstract in seen:
                continue
            seen.add(abstract)
            sentences = re.split(r"(?<=[.!?])\s+", abstract)
            half = len(sentences) // 2
            sources.append(" ".join(sentences[:half]))
            golds.append(" ".join(sentences[half:]))
            if len(sources) == n:
                break
    tasks = [{"task_id": f"arxiv/{i}", "abstract": s} for i, s in enumerate(sources)]
    return tasks, sources, golds


def rank(
    env_id: str, tasks: list[dict[str, Any]], sources: list[str], golds: list[str]
) -> dict[str, Any]:
    """Score every class on every task; the share of tasks where honest wins, per class."""
    env = llm_marl.make(env_id, dataset="tldr_sample" if "tldr" in env_id else "arxiv_sample")
    base = env.unwrapped
    probes = probe_answers(sources, golds, base.first_share)
    # Pre-encode, in one batched call, every answer the reward will embed (no guard fires).
    texts = list(sources)
    for source, answers in zip(sources, probes, strict=True):
        for p1, p2 in answers.values():
            if not check_guards((p1, p2), source, base.guard_config)[0]:
                texts.append(f"{p1}\n\n{p2}")
    start = time.perf_counter()
    base.embedder.encode(texts)
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    scores = [
        {k: base.score(p1, p2, task)[0] for k, (p1, p2) in answers.items()}
        for task, answers in zip(tasks, probes, strict=True)
    ]
    score_s = time.perf_counter() - start
    honest_details = [base.score(*a["honest"], t)[2] for t, a in zip(tasks, probes, strict=True)]
    n = len(tasks)
    return {
        "tasks": n,
        "win_rate": {k: sum(s["honest"] > s[k] for s in scores) / n for k in PROBE_KINDS},
        "honest_fired": sum(bool(d["guards"]) for d in honest_details),
        "honest_zero": sum(s["honest"] <= 0 for s in scores),
        "honest_penalised": sum(
            d.get("meaning", {}).get("factors", {}).get("compression", 1.0) < 1.0
            for d in honest_details
        ),
        "mean": {k: sum(s[k] for s in scores) / n for k in ("honest", *PROBE_KINDS)},
        "encode_s": encode_s,
        "texts_encoded": len(texts),
        "score_s": score_s,
        "answers_scored": n * (1 + len(PROBE_KINDS)),
    }


def generation_step_seconds(episodes: int = 16, max_new_tokens: int = 64) -> float:
    """Seconds of one batched generate call of the tiny test model (``episodes`` prompts)."""
    import tempfile

    from llm_marl.policies.base import SamplingParams
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.policies.tiny import build_tiny_lm

    with tempfile.TemporaryDirectory() as tmp:
        policy = HFPolicy(build_tiny_lm(tmp))
        prompts = [
            [{"role": "user", "content": f"Summarise post {i}: " + "word " * 200}]
            for i in range(episodes)
        ]
        sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0)
        policy.generate(prompts[:2], sampling)  # warm-up
        start = time.perf_counter()
        policy.generate(prompts, sampling)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--abstracts", type=int, default=200)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    root = Path(os.environ.get("LLM_MARL_DATA_DIR", "../shared/data"))
    results = {
        "tldr-v0": rank("tldr-v0", *tldr_items(root, args.posts)),
        "arxiv_intro-v0": rank("arxiv_intro-v0", *arxiv_items(root, args.abstracts)),
    }
    for env_id, r in results.items():
        print(
            f"{env_id}: {r['tasks']} tasks; honest fires a guard on {r['honest_fired']}, "
            f"scores 0 on {r['honest_zero']}, is compression-penalised on {r['honest_penalised']}"
        )
        for kind, rate in r["win_rate"].items():
            print(
                f"  honest > {kind:<11} {100 * rate:6.1f} %   (mean {r['mean'][kind]:.3f}, honest {r['mean']['honest']:.3f})"
            )
        per = (r["encode_s"] + r["score_s"]) / r["answers_scored"]
        print(
            f"  encode {r['texts_encoded']} texts in {r['encode_s']:.1f} s; score {r['answers_scored']} answers in {r['score_s']:.1f} s ({1000 * per:.1f} ms per answer)"
        )
    gen = generation_step_seconds()
    print(f"tiny-model generation step (16 prompts, 64 new tokens): {gen:.2f} s")
    if args.json:
        args.json.write_text(json.dumps({**results, "generation_step_s": gen}, indent=1))


if __name__ == "__main__":
    main()
