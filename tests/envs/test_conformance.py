"""Every registered env id passes PettingZoo's parallel API and seed tests.

The test iterates the registry, so a newly registered env is covered without editing this file.
"""

from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import llm_marl
from llm_marl.envs.base import LLMParallelEnv
from llm_marl.spaces import Chat, Text

ENV_IDS = sorted(llm_marl.registry)


def test_registry_has_the_builtin_envs():
    assert {"coordination-v0", "referential-v0"} <= set(ENV_IDS)


# parallel_api_test checks that reset accepts arbitrary options ({"options": 1}); the envs accept
# and ignore such keys with a warning (see LLMParallelEnv.reset).
@pytest.mark.filterwarnings("ignore:.*reset ignores the option")
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_api(env_id):
    env = llm_marl.make(env_id)
    try:
        parallel_api_test(env, num_cycles=200)
    finally:
        env.close()


@pytest.mark.filterwarnings("ignore:.*reset ignores the option")
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_api_under_a_step_limit(env_id):
    env = llm_marl.make(env_id, max_steps=1)
    try:
        parallel_api_test(env, num_cycles=20)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_parallel_seed(env_id):
    envs = []

    def factory():
        envs.append(llm_marl.make(env_id))
        return envs[-1]

    try:
        parallel_seed_test(factory, num_cycles=50)
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_contract(env_id):
    """The llm_marl contract on top of PettingZoo's: chat observations, info keys, joint reward."""
    env = llm_marl.make(env_id)
    try:
        base = env.unwrapped
        assert isinstance(base, LLMParallelEnv)
        assert base.__doc__ or type(base).__module__, "every env is documented by its docstring"
        assert (type(base).__doc__ or __import__(type(base).__module__).__doc__ or "").strip()
        obs, infos = env.reset(seed=3)
        assert env.agents == list(env.possible_agents)
        for agent in env.agents:
            assert isinstance(env.observation_space(agent), Chat)
            assert isinstance(env.action_space(agent), Text)
            assert env.observation_space(agent).contains(obs[agent]), obs[agent]
            for key in ("active", "task_id", "step_count", "reward_components", "error"):
                assert key in infos[agent], key
        assert any(infos[a]["active"] for a in env.agents), "someone must act first"
        steps = 0
        while env.agents:
            actions = {a: "" for a in env.agents if infos[a]["active"]}
            obs, rewards, terms, truncs, infos = env.step(actions)
            assert len(set(rewards.values())) == 1, "the joint reward goes to every agent"
            steps += 1
            assert steps <= 200
        assert all(isinstance(r, float) for r in rewards.values())
    finally:
        env.close()
