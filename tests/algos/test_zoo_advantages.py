"""The zoo's credit assignment on hand-built groups, every number computed by hand."""

from __future__ import annotations

import math

import pytest

from llm_marl.algos.advantages import (
    MovingBaseline,
    agent_turn_advantages,
    anchor_key,
    per_agent_advantages,
    step_group_advantages,
    turn_advantages,
)
from llm_marl.rollout.types import Trajectory

from .helpers import episode, turn


def _two_agent_episode(g, rewards, a_steps, b_steps, a_prompts=None):
    """Agents "a" and "b" acting at the given env steps; prompts default to one per step."""
    a_prompts = a_prompts or [(1, s) for s in a_steps]
    trajs = {
        "a": Trajectory(
            "a", "p", True, [turn("a", s, p, (5,)) for s, p in zip(a_steps, a_prompts)]
        ),
        "b": Trajectory("b", "p", True, [turn("b", s, (2, s), (6,)) for s in b_steps]),
    }
    return episode(0, g, rewards, trajs)


def test_at_grpo_groups_each_agent_turn_index_separately_and_divides_by_the_std():
    # Two steps; "a" acts at both, "b" only at step 1. gamma = 0: each turn's own reward.
    group = [
        _two_agent_episode(0, [1.0, 0.0], [0, 1], [1]),
        _two_agent_episode(1, [0.0, 2.0], [0, 1], [1]),
        _two_agent_episode(2, [0.0, 1.0], [0, 1], [1]),
    ]
    adv = agent_turn_advantages(group, ["a", "b"], gamma=0.0, scale="std")
    # a, turn 0: rewards [1, 0, 0], mean 1/3, unbiased std sqrt((4/9 + 1/9 + 1/9) / 2) = 1/sqrt(3).
    s0 = 1 / math.sqrt(3) + 1e-6
    # a, turn 1 and b, turn 0 (both step 1): rewards [0, 2, 1], mean 1, std 1.
    s1 = 1.0 + 1e-6
    assert [row[0] for row in adv["a"]] == pytest.approx(
        [(2 / 3) / s0, (-1 / 3) / s0, (-1 / 3) / s0]
    )
    assert [row[1] for row in adv["a"]] == pytest.approx([-1 / s1, 1 / s1, 0.0])
    assert [row[0] for row in adv["b"]] == pytest.approx([-1 / s1, 1 / s1, 0.0])
    # gamma = 1 with no scale is MAGRPO's per-turn-index baseline over returns-to-go.
    same = agent_turn_advantages(group, ["a"], gamma=1.0, scale="none")["a"]
    assert same == turn_advantages(group, "a", 1.0, "mean", "none")
    # a's turn-0 returns are [1, 2, 1]: mean 4/3.
    assert [row[0] for row in same] == pytest.approx([-1 / 3, 2 / 3, -1 / 3])


def test_dr_mas_normalises_each_agent_by_its_own_pooled_statistics():
    # "a" acts twice per episode, "b" once; gamma = 0.
    group = [
        _two_agent_episode(0, [1.0, 3.0], [0, 1], [1]),
        _two_agent_episode(1, [0.0, 0.0], [0, 1], [1]),
    ]
    # a's pooled rewards [1, 3, 0, 0]: mean 1, unbiased std sqrt((0 + 4 + 1 + 1) / 3) = sqrt(2).
    s = math.sqrt(2) + 1e-6
    a = per_agent_advantages(group, "a", gamma=0.0, scale="std")
    assert a == [pytest.approx([0.0, 2 / s]), pytest.approx([-1 / s, -1 / s])]
    # b's rewards [3, 0]: mean 1.5, std 3 / sqrt(2); a's statistics do not leak into b's.
    sb = 3 / math.sqrt(2) + 1e-6
    b = per_agent_advantages(group, "b", gamma=0.0, scale="std")
    assert b == [pytest.approx([1.5 / sb]), pytest.approx([-1.5 / sb])]
    # Per turn index (AT-GRPO) the same data gives a different answer at a's turn 0.
    at = agent_turn_advantages(group, ["a"], gamma=0.0, scale="std")["a"]
    # a's turn 0 alone: rewards [1, 0], mean 0.5, unbiased std sqrt(0.5).
    assert at[0][0] == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-6))
    assert a[0][0] == 0.0


def test_dr_mas_constant_rewards_carry_no_signal():
    group = [_two_agent_episode(g, [1.0, 1.0], [0, 1], [1]) for g in range(3)]
    assert per_agent_advantages(group, "a", gamma=0.0) == [[0.0, 0.0]] * 3


def test_rae_moves_one_baseline_per_env_and_agent():
    b = MovingBaseline(decay=0.9)
    # First batch: b = 0.9 * 0 + 0.1 * mean([1, 0]) = 0.05.
    assert b.advantages(("coord", "a"), [1.0, 0.0]) == pytest.approx([0.95, -0.05])
    # Another key starts from 0, untouched by the first: b = 0.1 * 2 = 0.2.
    assert b.advantages(("coord", "b"), [2.0]) == pytest.approx([1.8])
    # Second batch of ("coord", "a"): b = 0.9 * 0.05 + 0.1 * 1 = 0.145.
    assert b.advantages(("coord", "a"), [1.0, 1.0]) == pytest.approx([0.855, 0.855])
    restored = MovingBaseline(decay=0.9)
    restored.load_state_dict(b.state_dict())
    assert restored.values == pytest.approx(b.values)
    with pytest.raises(ValueError, match="decay"):
        MovingBaseline(decay=1.0)
    with pytest.raises(ValueError, match="finite"):
        b.advantages(("coord", "a"), [math.nan])


def test_gigpo_adds_step_groups_over_identical_anchor_states_to_the_episode_advantage():
    # "a" acts at steps 0 and 1. Step 0: every episode starts from the same prompt. Step 1:
    # episodes 0 and 1 reach the same state (prompt (9,)), episode 2 another one (prompt (8,)).
    prompts = [[(1,), (9,)], [(1,), (9,)], [(1,), (8,)]]
    rewards = [[0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    group = [_two_agent_episode(g, rewards[g], [0, 1], [1], a_prompts=prompts[g]) for g in range(3)]
    adv = step_group_advantages(group, "a", gamma=0.5, step_weight=1.0, scale="none")
    # Episode level: totals [1, 0, 2], mean 1 -> [0, -1, 1].
    # Step 0, one cluster: returns 0 + 0.5 * r1 = [0.5, 0, 1.5], mean 2/3.
    # Step 1, cluster {0, 1}: returns [1, 0] -> [0.5, -0.5]; cluster {2} alone -> 0.
    expected = [
        [0 + (0.5 - 2 / 3), 0 + 0.5],
        [-1 + (0 - 2 / 3), -1 - 0.5],
        [1 + (1.5 - 2 / 3), 1 + 0.0],
    ]
    assert [pytest.approx(row) for row in expected] == adv
    # step_weight 0: the episode advantage alone, on every turn.
    assert step_group_advantages(group, "a", 0.5, 0.0) == [[0.0, 0.0], [-1.0, -1.0], [1.0, 1.0]]


def test_anchor_key_uses_token_prompts_and_falls_back_to_the_conversation():
    t = turn("a", 0, (1, 2), (3,))
    assert anchor_key(t) == anchor_key(turn("a", 3, (1, 2), (4,)))
    assert anchor_key(t) != anchor_key(turn("a", 0, (1, 3), (3,)))
    text = turn("a", 0, (), ())
    text.observation = [{"role": "user", "content": "hi"}]
    other = turn("a", 0, (), ())
    other.observation = [{"role": "user", "content": "ho"}]
    assert anchor_key(text) != anchor_key(other)
