from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test

import llm_marl
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout import FrozenAgents


def target_of(conversation):
    return conversation[0]["content"].split(":")[1].split(".")[0].strip()


def test_frozen_speaker_leaves_a_single_agent_env():
    speaker = ScriptedPolicy(target_of, name="honest-speaker")
    env = FrozenAgents(llm_marl.make("referential-v0"), {"speaker": speaker})
    assert env.possible_agents == ["listener"]
    obs, infos = env.reset(seed=0, options={"task_id": "referential/target=2"})
    assert list(obs) == ["listener"] and infos["listener"]["active"]
    assert "Message: 2" in obs["listener"][-1]["content"]
    assert env.frozen_turns == [("speaker", "2")]
    _, rewards, terms, _, _ = env.step({"listener": "2"})
    assert rewards == {"listener": 1.0} and terms == {"listener": True}
    assert env.agents == []


def test_frozen_wrapper_passes_the_api_test():
    env = FrozenAgents(llm_marl.make("referential-v0"), {"speaker": ScriptedPolicy(target_of)})
    parallel_api_test(env, num_cycles=20)


def test_frozen_wrapper_rejects_bad_input():
    env = llm_marl.make("referential-v0")
    with pytest.raises(ValueError, match="unknown agents"):
        FrozenAgents(env, {"nobody": ScriptedPolicy(str)})
    with pytest.raises(ValueError, match="every agent is frozen"):
        FrozenAgents(env, {"speaker": ScriptedPolicy(str), "listener": ScriptedPolicy(str)})
    wrapped = FrozenAgents(env, {"speaker": ScriptedPolicy(target_of)})
    wrapped.reset(seed=0)
    with pytest.raises(ValueError, match="frozen"):
        wrapped.step({"speaker": "1", "listener": "1"})
