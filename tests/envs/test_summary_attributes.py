"""The class attributes each env's docs page summarises (``turn_order``, ``reward_range``,
``chance_note``) say what the env does."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import llm_marl
from llm_marl.envs.coding.env import CodeCollabEnv
from llm_marl.envs.coding.rewards import CodeRewardConfig


def _make(env_id: str):
    with warnings.catch_warnings():  # missing benchmark files fall back to the bundled samples
        warnings.simplefilter("ignore", UserWarning)
        return llm_marl.make(env_id)


def _is_coding(env_id: str) -> bool:
    env = _make(env_id)
    try:
        return isinstance(env.unwrapped, CodeCollabEnv)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_every_env_states_its_summary(env_id):
    env = _make(env_id)
    try:
        base = env.unwrapped
        assert base.turn_order, f"{env_id}: no turn_order"
        assert base.chance_note, f"{env_id}: no chance_note"
        low, high = base.reward_range
        assert np.isfinite(low) and np.isfinite(high) and low < high, base.reward_range
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_the_agents_that_act_first_are_named_first_in_turn_order(env_id):
    env = _make(env_id)
    try:
        _, infos = env.reset(seed=0)
        first = [a for a in env.agents if infos[a]["active"]]
        text = env.unwrapped.turn_order
        named = [text.find(f"`{a}`") for a in first]
        later = [text.find(f"`{a}`") for a in env.possible_agents if a not in first]
        assert min(named) >= 0, f"{env_id}: turn_order does not name {first}: {text!r}"
        assert all(p < 0 or p > max(named) for p in later), f"{env_id}: {text!r}"
    finally:
        env.close()


ANSWERS = ("", "0", "1", "2", "3", "d", "\\boxed{6}", "The answer is 4.", "x " * 40)


@pytest.mark.parametrize(
    "env_id", [i for i in sorted(llm_marl.registry) if not _is_coding(i)]
)  # the coding envs' bounds come from their reward config: see the test below
def test_random_play_stays_in_the_stated_reward_range(env_id):
    env = _make(env_id)
    rng = np.random.default_rng(0)
    low, high = env.unwrapped.reward_range
    seen = []
    try:
        for episode in range(6):
            _, infos = env.reset(seed=episode)
            while env.agents:
                actions = {}
                for agent in (a for a in env.agents if infos[a]["active"]):
                    pick = int(rng.integers(len(ANSWERS) + 1))
                    sample = env.action_space(agent).sample()
                    actions[agent] = ANSWERS[pick] if pick < len(ANSWERS) else sample
                _, rewards, _, _, infos = env.step(actions)
                seen += rewards.values()
    finally:
        env.close()
    assert seen and all(low <= r <= high for r in seen), (env_id, (low, high), max(seen))


def test_the_coding_bounds_follow_the_reward_weights():
    assert CodeRewardConfig().bounds(single_agent=False) == (0.0, 4.0)  # "Range [0, 4]"
    assert CodeRewardConfig().bounds(single_agent=True) == pytest.approx((0.0, 2.1))
    assert CodeRewardConfig(normalize=True).bounds(single_agent=False) == (0.0, 1.0)
    # a penalty can only come with main_defined + syntax + aux_used (0.6 + 0.5 + 0.5)
    assert CodeRewardConfig(aux_result_ignored=-2.0).bounds(single_agent=False)[0] == pytest.approx(
        -0.4
    )
    assert CodeRewardConfig(syntax=-1.0).bounds(single_agent=True)[0] == -1.0
    env = _make("coop_humaneval-v0")
    try:
        assert env.unwrapped.reward_range == (0.0, 4.0)
    finally:
        env.close()
    single = llm_marl.make("coop_humaneval_single-v0", reward={"normalize": True})
    try:
        assert single.unwrapped.reward_range == (0.0, 1.0)
    finally:
        single.close()
