"""The step vocabulary: ``step_count`` counts steps, ``max_steps`` caps them, and every env says
its cap with the same name."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.envs import LLMParallelEnv, Transition
from llm_marl.envs.base import HOOKS


class Endless(LLMParallelEnv):
    """Never ends by itself: only the cap stops it."""

    metadata = {"name": "endless-v0", "render_modes": ["ansi"]}
    possible_agents = ["a"]

    def default_tasks(self):
        return [{"task_id": "t"}]

    def setup_episode(self, task):
        self.say("a", "go")
        self.set_active(["a"])

    def transition(self, actions):
        self.set_active(["a"])
        return Transition(reward=float(self.step_count))


def test_step_count_counts_steps_and_is_reported_everywhere():
    env = Endless(render_mode="ansi")
    _, infos = env.reset(seed=0)
    assert env.step_count == 0 and infos["a"]["step_count"] == 0
    for k in range(1, 4):
        _, rewards, _, _, infos = env.step({"a": "x"})
        assert env.step_count == k and infos["a"]["step_count"] == k
        assert rewards["a"] == float(k), "transition sees the count of the step it handles"
        assert env.state()["step_count"] == k
        assert f"| step {k}" in env.render()
    assert "turn" not in infos["a"] and "turn" not in env.state()
    env.reset()
    assert env.step_count == 0


def test_the_old_name_turn_is_gone():
    env = Endless()
    env.reset()
    assert not hasattr(env, "turn"), "env.step_count is the one name of the step counter"


@pytest.mark.parametrize(("cap", "expected"), [(None, 64), (1, 1), (3, 3)])
def test_the_cap_truncates_an_env_that_never_ends(cap, expected):
    env = Endless(max_steps=cap) if cap else Endless()
    assert env.max_steps == expected
    env.reset()
    steps = 0
    while env.agents:
        _, _, terms, truncs, infos = env.step({"a": "x"})
        steps += 1
    assert steps == expected and all(truncs.values()) and not any(terms.values())
    assert "success" not in infos["a"], "a truncated episode carries no success flag"


def test_a_subclass_states_its_cap_as_a_class_attribute():
    class Short(Endless):
        max_steps = 2

    assert Short().max_steps == 2 and Short(max_steps=5).max_steps == 5
    assert Endless.max_steps == 64


@pytest.mark.parametrize("cap", [0, -1, 2.0, "3", True])
def test_bad_constructor_caps_are_rejected(cap):
    with pytest.raises((TypeError, ValueError), match="max_steps must be"):
        Endless(max_steps=cap)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "cap"),
    [
        ("coordination-v0", {}, 1),
        ("coordination-v0", {"num_rounds": 3}, 3),
        ("referential-v0", {}, 2),
        ("math_single-v0", {}, 1),
        ("math_hint-v0", {}, 2),
        ("math_critic-v0", {}, 3),
        ("coop_humaneval-v0", {"dataset": "sample", "sandbox": "process"}, 1),
        ("humaneval_single-v0", {"num_rounds": 3, "sandbox": "process"}, 3),
    ],
)
def test_every_env_states_its_cap_as_max_steps(env_id, kwargs, cap):
    env = llm_marl.make(env_id, **kwargs)
    try:
        assert env.max_steps == cap
        for old in ("num_steps", "max_turns", "max_steps_default", "_begin"):
            assert not hasattr(env, old), f"{env_id} still has {old}"
    finally:
        env.close()


def test_the_coding_envs_name_their_protocol_rounds():
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox="process", num_rounds=2)
    try:
        assert env.num_rounds == 2 and env.max_steps == 2
        with pytest.raises(TypeError, match="unknown arguments \\['max_turns'\\]"):
            llm_marl.make("coop_humaneval-v0", max_turns=2)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_episodes_of_every_env_end_within_its_cap(env_id):
    env = llm_marl.make(env_id)
    try:
        _, infos = env.reset(seed=1)
        while env.agents:
            active = [a for a in env.agents if infos[a]["active"]]
            _, _, _, _, infos = env.step(dict.fromkeys(active, "1"))
            assert all(i["step_count"] == env.step_count for i in infos.values())
        assert 1 <= env.step_count <= env.max_steps
        assert all(callable(getattr(env, h)) for h in HOOKS)
    finally:
        env.close()
