from __future__ import annotations

import math

import pytest

from llm_marl.algos.advantages import (
    component_reward,
    discounted_returns,
    group_advantages,
    turn_advantages,
    turn_returns,
)
from llm_marl.errors import ConfigError
from llm_marl.rollout.types import Trajectory

from .helpers import episode, single_turn_episode, turn


def test_mean_baseline_is_reward_minus_group_mean():
    assert group_advantages([1.0, 0.0, 0.0, 1.0]) == [0.5, -0.5, -0.5, 0.5]
    assert group_advantages([3.0, 1.0]) == [1.0, -1.0]


def test_rloo_baseline_leaves_the_sample_out():
    adv = group_advantages([1.0, 0.0, 0.0], baseline="rloo")
    assert adv == pytest.approx([1.0, -0.5, -0.5])
    # RLOO is the mean-baseline advantage scaled by G / (G - 1).
    mean = group_advantages([0.2, 0.9, 0.4, 0.5])
    rloo = group_advantages([0.2, 0.9, 0.4, 0.5], baseline="rloo")
    assert rloo == pytest.approx([m * 4 / 3 for m in mean])


def test_no_baseline_is_the_raw_reward():
    assert group_advantages([0.3, 0.7], baseline="none") == [0.3, 0.7]


def test_std_scaling_gives_unit_sample_std():
    r = [0.0, 1.0, 1.0, 0.0, 1.0]
    adv = group_advantages(r, scale="std")
    mean = sum(adv) / len(adv)
    std = math.sqrt(sum((a - mean) ** 2 for a in adv) / (len(adv) - 1))
    assert mean == pytest.approx(0.0, abs=1e-9)
    assert std == pytest.approx(1.0, rel=1e-4)


def test_the_two_std_conventions_on_a_hand_computed_group_of_four():
    # R = [3, 1, 0, 0]: mean 1, deviations [2, 0, -1, -1], sum of squares 6.
    r = [3.0, 1.0, 0.0, 0.0]
    # verl / AgentPO / MATPO: unbiased std sqrt(6 / 3) = sqrt(2), plus 1e-6.
    unbiased = math.sqrt(2.0)
    assert group_advantages(r, scale="std") == pytest.approx(
        [2 / (unbiased + 1e-6), 0.0, -1 / (unbiased + 1e-6), -1 / (unbiased + 1e-6)], abs=1e-12
    )
    # CoMLRL 1.4.3: population std sqrt(6 / 4) = sqrt(1.5), clamped at 1e-6.
    population = math.sqrt(1.5)
    assert group_advantages(r, scale="population-std") == pytest.approx(
        [2 / population, 0.0, -1 / population, -1 / population], abs=1e-12
    )
    # At G = 4 the two differ by exactly sqrt(4/3) (up to the 1e-6 guard).
    ratio = [
        p / u
        for p, u in zip(
            group_advantages(r, scale="population-std"), group_advantages(r, scale="std")
        )
        if u
    ]
    assert ratio == pytest.approx([math.sqrt(4 / 3)] * 3, rel=1e-5)
    # Binary rewards: the population std of [1, 0, 0, 1] is 0.5, so A = +-1 exactly.
    assert group_advantages([1.0, 0.0, 0.0, 1.0], scale="population-std") == [1.0, -1.0, -1.0, 1.0]


def test_population_std_scaling_gives_unit_population_std():
    r = [0.0, 1.0, 1.0, 0.0, 1.0]
    adv = group_advantages(r, scale="population-std")
    assert math.sqrt(sum(a * a for a in adv) / len(adv)) == pytest.approx(1.0, rel=1e-12)


def test_population_std_is_clamped_not_shifted_by_eps():
    # A spread below eps: CoMLRL divides by the clamp (1e-6), not by std + eps.
    adv = group_advantages([1e-7, 0.0], scale="population-std")
    assert adv == pytest.approx([0.05, -0.05], rel=1e-9)


def test_constant_group_has_exactly_zero_advantage():
    for baseline in ("mean", "rloo"):
        for scale in ("none", "std", "population-std"):
            assert group_advantages([0.7] * 4, baseline, scale) == [0.0] * 4


def test_single_sample_group_carries_no_signal():
    assert group_advantages([1.0]) == [0.0]
    assert group_advantages([1.0], baseline="rloo") == [0.0]
    assert group_advantages([1.0], scale="std") == [0.0]
    assert group_advantages([1.0], scale="population-std") == [0.0]


def test_bad_names_and_nan_raise():
    with pytest.raises(ValueError, match="unknown baseline"):
        group_advantages([1.0, 0.0], baseline="median")
    with pytest.raises(ValueError, match="unknown advantage scale"):
        group_advantages([1.0, 0.0], scale="max")
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match="finite"):
            group_advantages([1.0, bad])


def test_discounted_returns():
    assert discounted_returns([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns([1.0, 2.0, 3.0]) == [6.0, 5.0, 3.0]
    assert discounted_returns([]) == []
    with pytest.raises(ValueError):
        discounted_returns([1.0], gamma=1.5)


def _two_turn_episode(task_index, g, rewards):
    """Agent "a" acts at steps 0 and 2, agent "b" at step 1; rewards per step."""
    trajs = {
        "a": Trajectory("a", "p", True, [turn("a", 0, [1], [2]), turn("a", 2, [1, 2, 9], [3])]),
        "b": Trajectory("b", "p", True, [turn("b", 1, [5], [6])]),
    }
    return episode(task_index, g, rewards, trajs)


def test_turn_returns_credit_later_rewards_to_earlier_turns():
    ep = _two_turn_episode(0, 0, [0.0, 1.0, 2.0])
    assert turn_returns(ep, "a", gamma=0.5) == [0.0 + 0.5 * 1.0 + 0.25 * 2.0, 2.0]
    assert turn_returns(ep, "b", gamma=0.5) == [1.0 + 0.5 * 2.0]
    # A reward function other than the joint step reward is discounted the same way.
    assert turn_returns(ep, "a", 0.5, lambda e: [1.0, 0.0, 0.0]) == [1.0, 0.0]


def test_turn_advantages_use_a_baseline_per_turn_index():
    group = [
        _two_turn_episode(0, 0, [0.0, 0.0, 1.0]),
        _two_turn_episode(0, 1, [0.0, 0.0, 0.0]),
        _two_turn_episode(0, 2, [0.0, 1.0, 1.0]),
    ]
    adv = turn_advantages(group, "a", gamma=1.0)
    # Turn 0 returns: 1, 0, 2 (mean 1); turn 1 returns: 1, 0, 1 (mean 2/3).
    assert adv[0] == pytest.approx([0.0, 1 / 3])
    assert adv[1] == pytest.approx([-1.0, -2 / 3])
    assert adv[2] == pytest.approx([1.0, 1 / 3])


def test_turn_advantages_handle_episodes_of_different_lengths():
    short = episode(0, 1, [1.0], {"a": Trajectory("a", "p", True, [turn("a", 0, [1], [2])])})
    long = _two_turn_episode(0, 0, [0.0, 0.0, 1.0])
    adv = turn_advantages([long, short], "a")
    # Turn 0: returns 1 and 1 -> 0. Turn 1 exists in one episode only -> no baseline signal.
    assert adv == [[0.0, 0.0], [0.0]]


def test_joint_reward_gives_every_agent_the_same_advantage():
    group = [single_turn_episode(0, g, r) for g, r in enumerate([1.0, 0.0, 0.5, 0.5])]
    assert turn_advantages(group, "a") == turn_advantages(group, "b")


def test_component_reward_credits_the_component_at_the_last_step():
    ep = _two_turn_episode(0, 0, [0.2, 0.0, 0.3])
    ep.reward_components = {"success": 1.0}
    assert component_reward("success")(ep) == [0.0, 0.0, 1.0]
    with pytest.raises(ConfigError, match="no reward component 'correct'"):
        component_reward("correct")(ep)
