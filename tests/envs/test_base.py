"""The LLMParallelEnv contract: bad input gets clear errors, infra failures truncate, seeding."""

from __future__ import annotations

import numpy as np
import pytest

import llm_marl
from llm_marl.envs.base import InfrastructureError, LLMParallelEnv, Transition
from llm_marl.spaces import Chat, Text


class FlakyEnv(LLMParallelEnv):
    """Two agents; 'a' acts, then 'b'. Raises InfrastructureError when the task says so."""

    metadata = {"name": "flaky-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    possible_agents = ["a", "b"]

    def default_tasks(self):
        return [{"task_id": "ok", "fail": False}, {"task_id": "bad", "fail": True}]

    def setup_episode(self, task):
        self.say("a", "go")
        self.set_active(["a"])

    def transition(self, actions):
        if "a" in actions:
            if self.task["fail"]:
                raise InfrastructureError("sandbox engine unreachable")
            self.say("b", f"a said {actions['a']}")
            self.set_active(["b"])
            return Transition(reward=0.0)
        return Transition(reward=1.0, components={"x": 1.0}, done=True)


def test_sequential_phases_and_partial_observability():
    env = FlakyEnv(render_mode="ansi")
    obs, infos = env.reset(seed=0, options={"task_id": "ok"})
    assert infos["a"]["active"] and not infos["b"]["active"]
    assert obs["b"] == [], "b sees nothing before a acts"
    obs, rewards, terms, truncs, infos = env.step({"a": "hello", "b": "ignored"})
    assert infos["b"]["ignored_action"] is True
    assert obs["a"][-1] == {"role": "assistant", "content": "hello"}
    assert obs["b"] == [{"role": "user", "content": "a said hello"}]
    assert env.agents == ["a", "b"], "agents stay until the episode ends"
    obs, rewards, terms, truncs, infos = env.step({"b": "done"})
    assert rewards == {"a": 1.0, "b": 1.0}
    assert terms == {"a": True, "b": True} and truncs == {"a": False, "b": False}
    assert infos["a"]["reward_components"] == {"x": 1.0}
    assert env.agents == []
    assert "a said hello" in env.render()
    state = env.state()
    assert state["conversations"]["b"][-1]["content"] == "done"


def test_infrastructure_error_truncates_and_is_not_scored():
    env = FlakyEnv()
    env.reset(seed=0, options={"task_id": "bad"})
    obs, rewards, terms, truncs, infos = env.step({"a": "x"})
    assert truncs == {"a": True, "b": True} and terms == {"a": False, "b": False}
    assert rewards == {"a": 0.0, "b": 0.0}
    assert infos["a"]["error"] == "sandbox engine unreachable"
    assert env.agents == []


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        ({"a": "x", "zed": "y"}, ValueError, "unknown agent 'zed'"),
        ({"a": 42}, TypeError, "must be a str"),
        ({"b": "x"}, ValueError, "active agents \\['a'\\] gave no action"),
        (["a"], TypeError, "must be a dict"),
    ],
)
def test_bad_actions_raise_clear_errors_and_lose_nothing(actions, error, match):
    env = FlakyEnv()
    env.reset(seed=0, options={"task_id": "ok"})
    before = env.state()
    with pytest.raises(error, match=match):
        env.step(actions)
    assert env.state() == before, "a rejected step must not change the episode"
    env.step({"a": "fine"})  # the episode goes on


def test_step_after_end_and_before_reset():
    env = FlakyEnv()
    with pytest.raises(RuntimeError, match="call env.reset"):
        env.step({"a": "x"})
    env.reset(options={"task_id": "ok"})
    env.step({"a": "x"})
    env.step({"b": "y"})
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step({"a": "x"})


def test_any_string_is_a_legal_action():
    env = llm_marl.make("coordination-v0")
    space = env.action_space("left")
    for text in ["", "\x00\ud7ff", "🙂" * 10_000, "```python\nimport os\n```"]:
        env.reset(seed=1)
        assert space.contains(text)
        _, rewards, terms, *_ = env.step({"left": text, "right": text})
        assert terms["left"] and rewards["left"] == 0.0


def test_seeding_controls_task_choice():
    def tasks(seed):
        env = llm_marl.make("coordination-v0")
        return [env.reset(seed=seed)[1]["left"]["task_id"]] + [
            env.reset()[1]["left"]["task_id"] for _ in range(5)
        ]

    assert tasks(7) == tasks(7)
    assert len({tuple(tasks(s)) for s in range(6)}) > 1


def test_bad_constructor_input():
    with pytest.raises(ValueError, match="empty"):
        FlakyEnv(tasks=[])
    with pytest.raises(ValueError, match="no 'task_id'"):
        FlakyEnv(tasks=[{"x": 1}])
    with pytest.raises(ValueError, match="duplicate task_id"):
        FlakyEnv(tasks=[{"task_id": 1}, {"task_id": 1}])
    with pytest.raises(ValueError, match="render_mode"):
        FlakyEnv(render_mode="rgb_array")


def test_spaces():
    text = Text(max_length=5, seed=0)
    assert text.contains("abcde") and not text.contains("abcdef") and not text.contains(3)
    assert text.contains(text.sample())
    chat = Chat(seed=0)
    assert chat.contains(chat.sample())
    assert chat.contains([{"role": "tool", "content": "r", "tool_call_id": "1"}])
    assert not chat.contains([{"role": "robot", "content": "x"}])
    assert not chat.contains([{"role": "user"}])
    a, b = Text(seed=3), Text(seed=3)
    assert [a.sample() for _ in range(5)] == [b.sample() for _ in range(5)]


def test_subclass_metadata_inherits_what_it_does_not_state():
    class Named(FlakyEnv):
        metadata = {"name": "named-v0"}

    assert Named.metadata == {**FlakyEnv.metadata, "name": "named-v0"}
    assert llm_marl.make("coordination-v0").metadata["render_modes"] == ["ansi", "human"]


@pytest.mark.parametrize(
    ("env_id", "task_id", "action", "expected"),
    [
        ("coordination-v0", None, None, None),
        ("referential-v0", "referential/target=2", "2", True),
        ("referential-v0", "referential/target=2", "3", False),
    ],
)
def test_success_is_reported_on_the_final_step_only(env_id, task_id, action, expected):
    env = llm_marl.make(env_id)
    options = {"task_id": task_id} if task_id else None
    obs, infos = env.reset(seed=0, options=options)
    assert all("success" not in i for i in infos.values())
    if env_id == "coordination-v0":  # digits summing to the target: success iff they do
        target = int(env.task["target"])
        left = min(target, env.num_symbols - 1)
        _, _, _, _, infos = env.step({"left": str(left), "right": str(target - left)})
        assert all(i["success"] is True for i in infos.values())
        return
    _, _, _, _, infos = env.step({"speaker": "2"})
    assert all("success" not in i for i in infos.values()), "not on an intermediate step"
    _, _, _, _, infos = env.step({"listener": action})
    assert all(i["success"] is expected for i in infos.values())


class RewardEnv(LLMParallelEnv):
    """One agent, one step; the reward is whatever the task says."""

    metadata = {"name": "reward-v0"}
    possible_agents = ["a"]

    def default_tasks(self):
        return [{"task_id": "t", "reward": 1.0}]

    def setup_episode(self, task):
        self.say("a", "go")
        self.set_active(["a"])

    def transition(self, actions):
        return Transition(reward=self.task["reward"], done=True)


@pytest.mark.parametrize(
    ("reward", "error"),
    [
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (-float("inf"), ValueError),
        (np.float32("nan"), ValueError),
        (None, TypeError),
        ("0.75", TypeError),
        (b"1", TypeError),
        ([1.0], TypeError),
    ],
    ids=repr,
)
def test_a_reward_that_is_not_a_finite_number_is_refused(reward, error):
    env = RewardEnv(tasks=[{"task_id": "t", "reward": reward}])
    env.reset(seed=0)
    with pytest.raises(error, match="RewardEnv.transition returned"):
        env.step({"a": "x"})


@pytest.mark.parametrize("reward", [1, -2.5, True, np.float32(0.5), np.int64(3)], ids=repr)
def test_real_numbers_of_any_type_are_rewards(reward):
    env = RewardEnv(tasks=[{"task_id": "t", "reward": reward}])
    env.reset(seed=0)
    _, rewards, *_ = env.step({"a": "x"})
    assert rewards == {"a": float(reward)} and type(rewards["a"]) is float
