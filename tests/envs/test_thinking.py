"""A completion's ``<think>`` reasoning never reaches a reward, a grader or another agent, in
every env family (issue 24 item 1): ``LLMParallelEnv.step`` removes it, in one place."""

from __future__ import annotations

import time

import pytest

import llm_marl
from llm_marl.tools.text import strip_thinking

# What a thinking model writes before its answer: in each family, text that would score if the
# env read it (the right answer, a long well-formed summary, the winning digit).
REASONING = {
    "math_single-v0": "The length is 13, so the answer is \\boxed{13}.",
    "tldr-v0": {
        "concise": "A couple plans a seven-day first trip to Japan and asks what fits.",
        "detailed": " ".join(
            ["They want food, temples and nature, so Kyoto and Tokyo fit; moreover, Nara"] * 6
        ),
    },
    "coordination-v0": "The target is 4: we should both answer 2, so 2",
    "websearch-v0": "The designer was Ilse Varga. \\boxed{Ilse Varga}",
}
# The visible answer after the reasoning: one that scores nothing by itself.
ANSWER = {
    "math_single-v0": "\\boxed{7}",
    "tldr-v0": "",
    "coordination-v0": "0",
    "websearch-v0": "\\boxed{nobody}",
}
KWARGS = {"tldr-v0": {"dataset": "tldr_sample", "guards": False}}  # the paper presets' reward


def reasoning(env_id: str, agent: str) -> str:
    text = REASONING[env_id]
    return text if isinstance(text, str) else text[agent]


def play(env_id: str, think: bool) -> tuple[list[float], list[str]]:
    """Rewards and every message the agents saw, every agent answering ``ANSWER`` (after the
    reasoning when ``think``)."""
    env = llm_marl.make(env_id, **KWARGS.get(env_id, {}))
    obs, infos = env.reset(seed=0)
    rewards, seen = [], []
    while env.agents:
        actions = {a: ANSWER[env_id] for a in env.agents if infos[a]["active"]}
        if think:
            actions = {
                a: f"<think>\n{reasoning(env_id, a)}\n</think>\n\n{x}" for a, x in actions.items()
            }
        obs, reward, _, _, infos = env.step(actions)
        rewards.append(next(iter(reward.values())))
        seen += [str(m.get("content")) for conv in obs.values() for m in conv]
    return rewards, seen


@pytest.mark.parametrize("env_id", list(REASONING))
def test_no_reward_or_agent_reads_the_reasoning(env_id):
    plain_rewards, _ = play(env_id, think=False)
    rewards, seen = play(env_id, think=True)
    assert rewards == plain_rewards
    hidden = [
        reasoning(env_id, a)
        for a in llm_marl.make(env_id, **KWARGS.get(env_id, {})).possible_agents
    ]
    assert not any("<think>" in text or any(h in text for h in hidden) for text in seen)


def test_the_reasoning_would_score_if_it_were_read():
    # The test above can fail: answered plainly, each family's reasoning text scores more.
    for env_id in ("math_single-v0", "tldr-v0"):
        env = llm_marl.make(env_id, **KWARGS.get(env_id, {}))
        _, infos = env.reset(seed=0)
        actions = {a: reasoning(env_id, a) for a in env.agents if infos[a]["active"]}
        assert next(iter(env.step(actions)[1].values())) > 0, env_id


def test_strip_thinking_rules():
    assert strip_thinking("<think>a</think>\n\nanswer") == "answer"
    assert strip_thinking("a</think> answer") == "answer"  # the template opened the block
    assert strip_thinking("<think>x</think><think>y</think>z") == "z"
    assert strip_thinking("answer <think>still going") == "answer "  # unclosed: no answer
    assert strip_thinking("plain answer") == "plain answer"


def test_strip_thinking_is_linear():
    hostile = "<think>" * 200_000 + "</think>" * 200_000 + "<think" * 200_000
    start = time.perf_counter()
    strip_thinking(hostile)
    assert time.perf_counter() - start < 0.5
