"""websearch-v0's release options (issue 24 item 3): the release's format score, 20 delegations
in ``matpo-paper``, and worker reports without ``<think>`` text."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.train import preset_config

from .scripted import hermes, mcp


def play(format_score: str, worker_calls_bad_tool: bool) -> dict:
    env = llm_marl.make("websearch-v0", format_score=format_score)
    try:
        env.reset(seed=0, options={"task_id": "sample/2"})
        env.step({"planner": mcp("delegate", subtask="Tamsen Prize country?")})  # format 1.0
        bad = '<tool_call>{"name": "search", "arguments": {"nope": 1}}</tool_call>'
        env.step({"worker": bad if worker_calls_bad_tool else hermes("search", query="Tamsen")})
        obs, _, _, _, _ = env.step({"worker": "<think>SECRET musing</think>Osterland."})
        # The worker's report reaches the planner without its reasoning.
        assert obs["planner"][-1]["content"] == "Osterland."
        assert not any("SECRET" in str(m["content"]) for m in obs["planner"])
        _, _, _, _, infos = env.step({"planner": "<answer>Lorvik</answer>"})
        return infos["planner"]["reward_components"]
    finally:
        env.close()


def test_the_release_format_score_averages_planner_and_worker_rollouts():
    # Planner turns with blocks: one, well formed (1.0). The worker's one tool turn: 1.0 or 0.0.
    assert play("release", worker_calls_bad_tool=False)["format"] == pytest.approx(1.0)
    assert play("release", worker_calls_bad_tool=True)["format"] == pytest.approx(0.5)
    # Ours: the mean over the two turns with blocks.
    assert play("turns", worker_calls_bad_tool=True)["format"] == pytest.approx(0.5)


def test_no_worker_spawned_scores_zero_for_the_worker_part():
    for mode, expected in (("release", 0.5), ("turns", 1.0)):
        env = llm_marl.make("websearch-v0", format_score=mode)
        env.reset(seed=0)
        _, _, _, _, infos = env.step({"planner": "<answer>x</answer>"})
        assert infos["planner"]["reward_components"]["format"] == pytest.approx(expected)
        env.close()
    with pytest.raises(ValueError, match="format_score"):
        llm_marl.make("websearch-v0", format_score="mean")


def test_matpo_paper_uses_the_release_values():
    kwargs = preset_config("matpo", "matpo-paper").trainer.env_kwargs
    assert (kwargs["max_delegations"], kwargs["format_score"]) == (20, "release")
    assert (kwargs["max_planner_turns"], kwargs["max_worker_turns"]) == (20, 20)
