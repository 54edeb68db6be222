"""websearch-v0's release options (issue 24 item 3): the release's format score, 20 delegations
in ``matpo-paper``, and worker reports without ``<think>`` text."""

from __future__ import annotations

import json

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


def release_call(server: str, tool: str, **arguments) -> str:
    return (
        f"<use_mcp_tool>\n<server_name>{server}</server_name>\n<tool_name>{tool}</tool_name>\n"
        f"<arguments>\n{json.dumps(arguments)}\n</arguments>\n</use_mcp_tool>"
    )


def test_matpo_paper_prompts_with_the_release_system_prompts_and_tool_names():
    """Issue 24 item 3: the preset's env gives the planner the release's main-agent prompt and
    its ``search_and_browse`` tool on ``browsing_agent``, the worker the browsing-agent prompt
    with the web tools under ``search_and_scrape_webpage``
    (mzf666/MATPO examples/data_preprocess/prompt_utils.py, mcp_tool_config_full_agent.yaml)."""
    trainer = preset_config("matpo", "matpo-paper").trainer
    kwargs = {k: v for k, v in trainer.env_kwargs.items() if k not in ("dataset", "split")}
    env = llm_marl.make(trainer.env, **kwargs)
    try:
        obs, infos = env.reset(seed=0, options={"task_id": "sample/2"})
        assert [t["function"]["name"] for t in infos["planner"]["tools"]] == ["search_and_browse"]
        system = obs["planner"][0]
        assert system["role"] == "system"
        text = system["content"]
        assert text.startswith(
            "\nIn this environment you have access to a set of tools you can use to answer the "
            "user's question.\n"
        )
        assert "Today is: 2025-07-16" in text
        assert (
            "\nHere are the functions available in JSONSchema format:\n\n"
            "## Server name: browsing_agent\n### Tool name: search_and_browse\n"
            "Description: This tool is an agent that performs the subtask of searching"
        ) in text
        assert "\n\n# General Objective\n\n" in text
        assert text.endswith(
            "Your goal is to provide complete, accurate and well-reasoned answers using "
            "additional tools.\n\n\n"
        )
        assert "delegate" not in text and "planner" not in text  # none of our wording
        obs, *_ = env.step(
            {"planner": release_call("browsing_agent", "search_and_browse", subtask="Tamsen?")}
        )
        worker = obs["worker"][0]["content"]
        assert "# Agent Specific Objective\n\nYou are an agent that performs the task of " in worker
        assert "## Server name: search_and_scrape_webpage\n### Tool name: search\n" in worker
        assert obs["worker"][1] == {"role": "user", "content": "Tamsen?"}
        obs, *_ = env.step({"worker": "Osterland."})
        report = obs["planner"][-1]
        assert (report["role"], report["name"], report["content"]) == (
            "tool",
            "search_and_browse",
            "Osterland.",
        )
    finally:
        env.close()
    ours = llm_marl.make("websearch-v0")
    _, infos = ours.reset(seed=0)
    assert [t["function"]["name"] for t in infos["planner"]["tools"]] == ["delegate"]
    ours.close()
    with pytest.raises(ValueError, match="prompts"):
        llm_marl.make("websearch-v0", prompts="theirs")
