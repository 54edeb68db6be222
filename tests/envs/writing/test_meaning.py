"""The default writing reward reads meaning (issue 28, item 6).

Under the guards alone, the honest summary of another post scored exactly the honest summary of
this one, and this post's words shuffled nearly as much. The default reward now multiplies in a
meaning term (MiniLM relevance to the source, a word-order signal, compression): on a sample of
the real posts and abstracts (40 posts, 50 abstracts), the honest answer beats every counterfeit class of
:mod:`llm_marl.envs.writing.probes` on at least 95 % of tasks, and no guard or penalty fires on
a gold TL;DR. The full 500 / 200 run is ``benchmarks/writing_meaning.py``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import llm_marl
from llm_marl.envs.writing.meaning import TLDR_MEANING, meaning_quality, plausible_share
from llm_marl.envs.writing.probes import PROBE_KINDS, probe_answers

BENCH = Path(__file__).parents[3] / "benchmarks" / "writing_meaning.py"


def _bench():
    spec = importlib.util.spec_from_file_location("writing_meaning", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# slow: MiniLM embeds every honest and counterfeit answer (31 s and 44 s on an idle 2-core
# machine, a third of the fast loop's CPU); the cheap tests below keep the fast loop's coverage.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "items", "n"), [("tldr-v0", "tldr_items", 40), ("arxiv_intro-v0", "arxiv_items", 50)]
)
def test_honest_beats_every_counterfeit_class_on_95_percent(data_dir, env_id, items, n):
    bench = _bench()
    result = bench.rank(env_id, *getattr(bench, items)(data_dir, n))
    low = {k: r for k, r in result["win_rate"].items() if r < 0.95}
    assert low == {}, (env_id, result["win_rate"])
    assert result["honest_fired"] == 0 and result["honest_zero"] == 0


@pytest.mark.slow  # 18 s: MiniLM over 50 gold TL;DRs
def test_no_guard_or_penalty_fires_on_a_sample_of_gold_tldrs(data_dir):
    rows = [json.loads(x) for x in (data_dir / "tldr" / "test.jsonl").read_text().splitlines()]
    env = llm_marl.make("tldr_single-v0", dataset="tldr_sample").unwrapped
    for row in rows[::10]:
        task = {"task_id": row["instruction_id"], "post": row["instruction"]}
        _, _, details = env.score(*env_parts(row["gold_response"]), task)
        assert details["guards"] == [], row["instruction_id"]
        assert details["meaning"]["factors"]["compression"] == 1.0
        assert details["meaning"]["quality"] > 0


def env_parts(text: str) -> tuple[str, str]:
    from llm_marl.envs.writing.env import split_single

    head, tail, _ = split_single(text, 1 / 3.5)
    return head, tail


def test_the_paper_presets_keep_the_lexical_reward_exactly():
    """guards=False is the paper's reward: no meaning term, no embedding, bit for bit."""
    from llm_marl.envs.writing.lexical import lexical_reward

    class NoEmbedder:
        def encode(self, texts):
            raise AssertionError("guards=False must not embed anything")

    env = llm_marl.make("tldr-v0", dataset="tldr_sample", guards=False, embedder=NoEmbedder())
    base = env.unwrapped
    for task in base.tasks:
        p1, p2 = task["reference"], task["reference_detailed"]
        reward, components, _ = base.score(p1, p2, task)
        assert reward == lexical_reward(p1, p2).reward
        assert "meaning" not in components and "meaning_gate" not in components
    assert base.max_reward() == 3.0


def test_an_empty_or_one_word_partner_does_not_collect_the_meaning_bonus():
    env = llm_marl.make("tldr-v0", dataset="tldr_sample").unwrapped
    task = env.tasks[0]
    honest = env.score(task["reference"], task["reference_detailed"], task)[0]
    for partner in ("", "ok"):
        assert env.score(task["reference"], partner, task)[0] < honest / 4


def test_word_order_is_what_plausible_share_reads():
    source = "My boyfriend of two years keeps forgetting the plans we make together."
    text = "My boyfriend keeps forgetting the plans we make, so I am upset with him."
    shuffled = "plans forgetting I the him boyfriend make am keeps upset with so we My."
    assert plausible_share(text, source) > 0.6 > 0.2 > plausible_share(shuffled, source)
    q, measured = meaning_quality(0.9, " ".join([text] * 20), source, TLDR_MEANING)
    assert measured["factors"]["compression"] == 0.0 and q == 0.0  # longer than the post


def test_probe_classes_are_all_built():
    answers = probe_answers(["one two three four five six"] * 2, ["a b c d", "e f g h"], 0.5)
    assert set(answers[0]) == {"honest", *PROBE_KINDS}
