"""Rewards per second of the writing envs' rewards on 500 TL;DR posts (issue 11).

Scores one answer per post of ``$LLM_MARL_DATA_DIR/tldr/test.jsonl`` (the bundled 12-post sample,
repeated, if the data is missing): part 1 is the gold TL;DR, part 2 the first 60 words of the
post. Side by side in one run:

* ``lexical``: the paper's level-gated reward alone (``lexical_reward``);
* ``lexical + guards``: what ``tldr-v0`` computes by default;
* ``embedding (per answer)``: relevance + redundancy with all-MiniLM-L6-v2 as the env computes
  them, one answer (4 texts) per forward pass on CPU;
* ``embedding (batched)``: the same 2,000 texts encoded in batches of 64.

Also times the lexical reward and the guards on one 1 MB answer and on a 2 MB one (the ratio is
about 2 for linear work). CPU timings are noisy: read the ratios.

    python benchmarks/writing_reward.py [--posts 500] [--no-embedding]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import llm_marl
from llm_marl.envs.writing.guards import check_guards
from llm_marl.envs.writing.lexical import lexical_reward


def _posts(n: int) -> list[dict[str, str]]:
    root = os.environ.get("LLM_MARL_DATA_DIR")
    path = Path(root) / "tldr" / "test.jsonl" if root else None
    if path is not None and path.is_file():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        items = [{"post": r["instruction"], "tldr": r["gold_response"]} for r in rows]
    else:
        sample = Path(llm_marl.__file__).parent / "envs" / "writing" / "data" / "tldr_sample.jsonl"
        rows = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
        items = [{"post": r["post"], "tldr": r["tldr"]} for r in rows]
        print(f"(no $LLM_MARL_DATA_DIR/tldr: using the {len(items)}-post sample, repeated)")
    return [items[i % len(items)] for i in range(n)]


def _rate(label: str, n: int, seconds: float) -> float:
    rate = n / seconds if seconds > 0 else float("inf")
    print(f"{label:<28} {n:>5} answers  {seconds:8.3f} s  {rate:10.1f} rewards/s")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--no-embedding", action="store_true")
    args = parser.parse_args()
    posts = _posts(args.posts)
    answers = [(p["tldr"], " ".join(p["post"].split()[:60]), p["post"]) for p in posts]

    start = time.perf_counter()
    for p1, p2, _ in answers:
        lexical_reward(p1, p2)
    lexical = _rate("lexical", len(answers), time.perf_counter() - start)

    start = time.perf_counter()
    for p1, p2, source in answers:
        lexical_reward(p1, p2)
        check_guards((p1, p2), source)
    _rate("lexical + guards", len(answers), time.perf_counter() - start)

    if not args.no_embedding:
        from llm_marl.envs.writing.embeddings import shared_embedder

        embedder = shared_embedder()
        env = llm_marl.make(
            "tldr-v0", dataset="tldr_sample", embedder=embedder, reward={"relevance_weight": 1.0}
        )
        base = env.unwrapped
        start = time.perf_counter()
        for p1, p2, source in answers:
            base._similarities(p1, p2, source)
        per_answer = _rate("embedding (per answer)", len(answers), time.perf_counter() - start)
        texts = [t for p1, p2, source in answers for t in (f"{p1}\n\n{p2}", source, p1, p2)]
        start = time.perf_counter()
        embedder.encode(texts)
        batched = _rate("embedding (batched)", len(answers), time.perf_counter() - start)
        print(
            f"lexical is {lexical / per_answer:.0f}x faster than the per-answer embedding reward "
            f"({lexical / batched:.0f}x than the batched one)"
        )

    for size in (1, 2):
        huge = " ".join(["word"] * (size * 200_000))
        start = time.perf_counter()
        lexical_reward("a short concise part of eight words here", huge)
        check_guards(("a short concise part", huge), "the post")
        print(f"{size} MB answer: lexical + guards in {time.perf_counter() - start:.4f} s")
    medium = " ".join(["w"] * 8) + " " + "x" * 1_000_000
    start = time.perf_counter()
    lexical_reward("one two three four five six seven eight", medium)
    print(f"1 MB answer of 9 huge tokens (passes level 1): {time.perf_counter() - start:.4f} s")


if __name__ == "__main__":
    main()
