"""Local search and tool-call parsing against the plain alternatives, side by side in one run.

Part 1 -- BM25 libraries on the HotpotQA offline corpus (4,858 unique paragraphs of the 500
questions in ``hotpotqa/dev_subsampled.jsonl``; each question's 2 supporting paragraphs are the
gold). For each library: index build time, single queries per second (one question at a time, as
an agent's tool call arrives), and recall@k of the supporting paragraphs:

* ``LocalSearch (tantivy)`` -- what llm_marl uses (``llm_marl.tools.search.LocalSearch``);
* ``bm25s``, ``SQLite FTS5`` (stdlib ``sqlite3``) and ``rank-bm25`` (the plain pure-Python
  alternative) -- each fed the *same* tokens (tantivy's English analyzer: lower-case, stemmed,
  stop words dropped from queries), so that the comparison is of the libraries, not tokenisers.

``--scale N`` repeats the corpus N times (each copy tagged) to see how each library scales
(recall is not shown then: the copies of a paragraph tie).

Part 2 -- tool-call parsing: ``parse_tool_calls`` (finds, parses *and validates* every call,
linear time) against a naive regex parser (``re.findall(r"<tool_call>(.*?)</tool_call>")`` then
``json.loads``, no validation), on typical completions and on hostile ones (``<tool_call>``
openers with no closer, where the lazy regex rescans the rest of the text from every opener).

Part 3 -- the offline ``websearch-v0`` env (HotpotQA corpus served on 127.0.0.1, searched with
LocalSearch, pages browsed over HTTP) played by scripted agents (the planner delegates the
question; the worker searches it, browses the top hit and reports its first words): episodes per
second through ``collect``, envs stepped one at a time (``max_workers=1``) and concurrently.

    python benchmarks/search.py [--data PATH] [--scale N] [--queries N] [--episodes N]

Optional packages (``pip install "llm-marl[bench]"``): bm25s, rank-bm25; a missing one is left out
of the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from llm_marl.tools.calls import parse_tool_calls, tool
from llm_marl.tools.search import Document, LocalSearch

ROOT = Path(__file__).resolve().parents[1]
K = 10


def _data_path(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = os.environ.get("LLM_MARL_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    return Path(base) / "hotpotqa" / "dev_subsampled.jsonl"


def load_hotpot(path: Path, scale: int) -> tuple[list[Document], list[tuple[str, set[int]]]]:
    """Unique paragraphs (times ``scale``) and (question, indices of its gold paragraphs)."""
    index: dict[tuple[str, str], int] = {}
    questions = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            gold = set()
            for ctx in row["contexts"]:
                i = index.setdefault((ctx["title"], ctx["paragraph_text"]), len(index))
                if ctx["is_supporting"]:
                    gold.add(i)
            questions.append((row["question_text"], gold))
    base = list(index)
    docs = []
    for copy in range(scale):
        tag = f" copy{copy}" if copy else ""
        docs += [Document(f"{copy}-{i}", t, p + tag) for i, (t, p) in enumerate(base)]
    return docs, questions


class Analyzer:
    """tantivy's English analysis, for the libraries that take pre-tokenized text."""

    def __init__(self) -> None:
        import tantivy as t

        def build(stop: bool):
            b = t.TextAnalyzerBuilder(t.Tokenizer.simple()).filter(t.Filter.remove_long(40))
            b = b.filter(t.Filter.lowercase())
            if stop:
                b = b.filter(t.Filter.stopword("english"))
            return b.filter(t.Filter.stemmer("english")).build()

        self.doc = build(False)
        self.query_analyzer = build(True)

    def document(self, doc: Document) -> list[str]:
        return self.doc.analyze(f"{doc.title}\n{doc.text}")

    def query(self, text: str) -> list[str]:
        terms = self.query_analyzer.analyze(text) or self.doc.analyze(text)
        return list(dict.fromkeys(terms))


Searcher = Callable[[str], list[int]]


def build_local(docs: Sequence[Document], analyzer: Analyzer) -> Searcher:
    position = {d.id: i for i, d in enumerate(docs)}
    engine = LocalSearch(docs, cache_dir=False)
    return lambda q: [position[r.doc_id or ""] for r in engine.search(q, K)]


def build_bm25s(docs: Sequence[Document], analyzer: Analyzer) -> Searcher:
    import bm25s

    tokens = [analyzer.document(d) for d in docs]
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)

    def search(q: str) -> list[int]:
        terms = analyzer.query(q)
        if not terms:
            return []
        ids, _ = retriever.retrieve([terms], k=K, show_progress=False, n_threads=1)
        return [int(i) for i in ids[0]]

    return search


def build_fts5(docs: Sequence[Document], analyzer: Analyzer) -> Searcher:
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.execute("CREATE VIRTUAL TABLE d USING fts5(body, tokenize='unicode61')")
    con.executemany(
        "INSERT INTO d(rowid, body) VALUES (?, ?)",
        ((i, " ".join(analyzer.document(d))) for i, d in enumerate(docs)),
    )
    con.commit()

    def search(q: str) -> list[int]:
        terms = analyzer.query(q)
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = con.execute(
            "SELECT rowid FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT ?", (match, K)
        )
        return [r[0] for r in rows]

    return search


def build_rank_bm25(docs: Sequence[Document], analyzer: Analyzer) -> Searcher:
    import numpy as np
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([analyzer.document(d) for d in docs])

    def search(q: str) -> list[int]:
        scores = bm25.get_scores(analyzer.query(q))
        return [int(i) for i in np.argsort(-scores, kind="stable")[:K]]

    return search


LIBRARIES: list[tuple[str, Callable[[Sequence[Document], Analyzer], Searcher]]] = [
    ("LocalSearch (tantivy)", build_local),
    ("bm25s", build_bm25s),
    ("SQLite FTS5", build_fts5),
    ("rank-bm25", build_rank_bm25),
]


def _recall(ranked: list[list[int]], queries: list, k: int, n_base: int) -> float:
    """Mean share of gold paragraphs in the top ``k`` (with --scale, any copy counts)."""
    total = 0.0
    for found, (_, gold) in zip(ranked, queries):
        total += len({i % n_base for i in found[:k]} & gold) / len(gold)
    return total / len(queries)


def bench_libraries(docs, questions, n_queries: int, n_base: int) -> list[dict]:
    analyzer = Analyzer()
    rows = []
    for name, build in LIBRARIES:
        try:
            start = time.perf_counter()
            search = build(docs, analyzer)
            built = time.perf_counter() - start
        except ImportError as e:
            print(f"  ({name} left out: {e})")
            continue
        queries = questions[:n_queries]
        start = time.perf_counter()
        ranked = [search(q) for q, _ in queries]
        elapsed = time.perf_counter() - start

        rows.append(
            {
                "name": name,
                "build": built,
                "qps": len(queries) / elapsed,
                "r2": _recall(ranked, queries, 2, n_base),
                "r5": _recall(ranked, queries, 5, n_base),
                "r10": _recall(ranked, queries, 10, n_base),
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Tool-call parsing
# ---------------------------------------------------------------------------------------------

_NAIVE = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def naive_parse(text: str) -> list[dict]:
    """What a plain regex + json.loads parser does: no limits, no validation."""
    calls = []
    for body in _NAIVE.findall(text):
        with contextlib.suppress(ValueError):
            calls.append(json.loads(body))
    return calls


@tool
def search(query: str, k: int = 5) -> str:
    """Search.

    Args:
        query: What to look for.
        k: How many results.
    """
    return query


def typical_completions(n: int) -> list[str]:
    out = []
    for i in range(n):
        thought = f"I need to find out more about item {i}. " * 8
        call = json.dumps({"name": "search", "arguments": {"query": f"item {i} history", "k": 3}})
        out.append(f"<think>\n{thought}\n</think>\n\n<tool_call>\n{call}\n</tool_call>")
    return out


def rate(fn: Callable[[str], object], inputs: Sequence[str], budget: float = 2.0) -> float:
    """Calls per second over repeated passes through ``inputs`` (at least one pass)."""
    calls = 0
    start = time.perf_counter()
    while True:
        for text in inputs:
            fn(text)
        calls += len(inputs)
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return calls / elapsed


def bench_parsing() -> list[tuple[str, float, float]]:
    tools = [search]

    def ours(text: str) -> object:
        return parse_tool_calls(text, tools)

    rows = [
        (
            "typical completion (1 call, ~450 chars)",
            rate(ours, typical_completions(200)),
            rate(naive_parse, typical_completions(200)),
        )
    ]
    three = ["\n".join(typical_completions(3))]
    rows.append(("3 calls in one completion", rate(ours, three), rate(naive_parse, three)))
    for n in (2_000, 4_000, 8_000):
        hostile = ["<tool_call>" * n]
        label = f"{n:,} unclosed <tool_call> ({len(hostile[0]) // 1000} KB)"
        rows.append((label, rate(ours, hostile, 1.0), rate(naive_parse, hostile, 1.0)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="HotpotQA dev_subsampled.jsonl (default: shared data)")
    parser.add_argument("--scale", type=int, default=1, help="repeat the corpus N times")
    parser.add_argument("--queries", type=int, default=500, help="questions to time")
    parser.add_argument("--episodes", type=int, default=32, help="env episodes to time")
    args = parser.parse_args()

    docs, questions = load_hotpot(_data_path(args.data), args.scale)
    n_base = len(docs) // args.scale
    timed = min(args.queries, len(questions))
    print(f"HotpotQA corpus: {len(docs):,} paragraphs; {timed} questions timed; top-{K}\n")
    rows = bench_libraries(docs, questions, args.queries, n_base)
    base = next((r["qps"] for r in rows if r["name"] == "rank-bm25"), None)
    header = f"{'library':24} {'build s':>8} {'queries/s':>10} {'vs rank-bm25':>13} {'R@2':>6} {'R@5':>6} {'R@10':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['qps'] / base:.1f}x" if base else "-"
        print(
            f"{r['name']:24} {r['build']:8.2f} {r['qps']:10.1f} {ratio:>13} "
            + (
                f"{r['r2']:6.3f} {r['r5']:6.3f} {r['r10']:6.3f}"
                if args.scale == 1
                else "(copies tie)"
            )
        )

    print("\nTool-call parsing (ours: parse + validate, bounded; naive: regex + json.loads)\n")
    header = f"{'completion':44} {'ours /s':>10} {'naive /s':>10} {'ours/naive':>11}"
    print(header)
    print("-" * len(header))
    for label, ours, naive in bench_parsing():
        print(f"{label:44} {ours:10.0f} {naive:10.3g} {ours / naive:10.3g}x")

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        LocalSearch(docs, cache_dir=tmp)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        LocalSearch(docs, cache_dir=tmp)
        warm = time.perf_counter() - start
    print(f"\nLocalSearch on-disk cache: build {cold:.2f} s, reopen {warm:.3f} s")

    print("\nwebsearch-v0, offline HotpotQA web, scripted planner + worker\n")
    for label, rate_, em in bench_env(args.episodes):
        print(f"{label:44} {rate_:8.1f} episodes/s   EM {em:.2f}")


def _scripted_planner(conversation: list[dict]) -> str:
    if not any(m["role"] == "tool" for m in conversation):
        call = {"name": "delegate", "arguments": {"subtask": conversation[1]["content"]}}
        return "<tool_call>" + json.dumps(call) + "</tool_call>"
    return "\\boxed{" + conversation[-1]["content"] + "}"


def _scripted_worker(conversation: list[dict]) -> str:
    turns = sum(m["role"] == "assistant" for m in conversation)
    if turns == 0:
        call = {"name": "search", "arguments": {"query": conversation[1]["content"], "k": 3}}
        return "<tool_call>" + json.dumps(call) + "</tool_call>"
    if turns == 1:
        found = re.search(r"URL: (\S+)", conversation[-1]["content"])
        if found:
            call = {"name": "browse", "arguments": {"url": found.group(1)}}
            return "<tool_call>" + json.dumps(call) + "</tool_call>"
    return " ".join(conversation[-1]["content"].split()[:5])


def bench_env(episodes: int) -> list[tuple[str, float, float]]:
    """Episodes/s of websearch-v0 with scripted agents, sequential and concurrent envs."""
    from llm_marl.policies import ScriptedPolicy
    from llm_marl.rollout import collect

    team = {
        "planner": ScriptedPolicy(_scripted_planner),
        "worker": ScriptedPolicy(_scripted_worker),
    }
    rows = []
    for label, workers in (("envs stepped one at a time", 1), ("envs stepped concurrently", None)):
        start = time.perf_counter()
        eps = collect(
            "websearch-v0",
            team,
            tasks=episodes,
            env_kwargs={"dataset": "hotpotqa"},
            progress=False,
            max_workers=workers,
        )
        elapsed = time.perf_counter() - start
        em = sum(e.reward_components.get("em", 0.0) for e in eps) / len(eps)
        rows.append((label, len(eps) / elapsed, em))
    return rows


if __name__ == "__main__":
    main()
