"""Wrappers: StepLimit truncates through the env's public API; no wrapper touches private state."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pettingzoo.test import parallel_api_test

import llm_marl
from llm_marl.envs import LLMParallelEnv, Transition
from llm_marl.envs.wrappers import ParallelEnvWrapper, StepLimit

PACKAGE = Path(llm_marl.__file__).resolve().parent


class Chatter(LLMParallelEnv):
    """One agent talks until it says 'bye' (a long, open-ended episode)."""

    metadata = {"name": "chatter-v0"}
    possible_agents = ["a", "b"]

    def default_tasks(self):
        return [{"task_id": "t"}]

    def setup_episode(self, task):
        self.say("a", "talk")
        self.set_active(["a"])

    def transition(self, actions):
        done = "bye" in actions["a"]
        if not done:
            self.set_active(["a"])
        return Transition(reward=1.0, done=done)


class Spy(Chatter):
    """Records every call of the public end_episode()."""

    ended = 0

    def end_episode(self):
        type(self).ended += 1
        super().end_episode()


@pytest.mark.parametrize("cap", [1, 2, 5])
def test_step_limit_truncates_at_the_cap(cap):
    env = StepLimit(Chatter(), max_steps=cap)
    env.reset(seed=0)
    for i in range(1, cap + 1):
        _, rewards, terms, truncs, infos = env.step({"a": "more"})
        assert env.step_count == i
        assert rewards == {"a": 1.0, "b": 1.0}, "the reward of the last step is kept"
        assert not any(terms.values())
        assert all(truncs.values()) == (i == cap)
    assert all(not info["active"] for info in infos.values())
    assert env.agents == [] and env.unwrapped.agents == []
    assert env.unwrapped.active_agents == []
    with pytest.raises(RuntimeError, match="call env.reset"):
        env.step({"a": "more"})
    env.reset(seed=0)  # a fresh episode, a fresh count
    assert env.step_count == 0 and env.agents == ["a", "b"]


def test_step_limit_ends_the_episode_through_the_public_api():
    Spy.ended = 0
    env = StepLimit(Spy(), max_steps=2)
    env.reset()
    env.step({"a": "x"})
    assert Spy.ended == 0
    env.step({"a": "x"})
    assert Spy.ended == 1


def test_termination_at_the_cap_is_not_reported_as_truncation():
    Spy.ended = 0
    env = StepLimit(Spy(), max_steps=1)
    env.reset()
    _, _, terms, truncs, _ = env.step({"a": "bye"})
    assert all(terms.values()) and not any(truncs.values())
    assert Spy.ended == 0, "nothing left to end"


def test_the_env_cap_and_the_wrapper_cap_the_smaller_wins():
    inner = Chatter(max_steps=2)
    env = StepLimit(inner, max_steps=5)
    env.reset()
    env.step({"a": "x"})
    *_, truncs, _ = env.step({"a": "x"})
    assert all(truncs.values()) and env.agents == []
    assert inner.step_count == 2 and env.step_count == 2


def test_step_limit_wrapping_a_wrapper():
    env = StepLimit(ParallelEnvWrapper(Chatter()), max_steps=1)
    env.reset()
    *_, truncs, _ = env.step({"a": "x"})
    assert all(truncs.values()) and env.unwrapped.agents == []


@pytest.mark.filterwarnings("ignore:.*reset ignores the option")
def test_step_limit_passes_the_pettingzoo_api_test():
    parallel_api_test(StepLimit(Chatter(), max_steps=3), num_cycles=20)


@pytest.mark.parametrize("cap", [0, -1, 1.5, "3", True, None])
def test_bad_caps_are_rejected(cap):
    with pytest.raises((TypeError, ValueError), match="max_steps must be"):
        StepLimit(Chatter(), max_steps=cap)


def test_wrappers_wrap_llm_envs_only():
    from pettingzoo import ParallelEnv

    with pytest.raises(TypeError, match="wraps an LLMParallelEnv"):
        StepLimit(ParallelEnv(), max_steps=1)
    with pytest.raises(TypeError, match="wraps an LLMParallelEnv"):
        ParallelEnvWrapper(object())  # type: ignore[arg-type]


def test_the_old_name_turn_limit_is_gone():
    import llm_marl.envs.wrappers

    assert not hasattr(llm_marl.envs.wrappers, "TurnLimit")
    assert not hasattr(llm_marl.envs, "TurnLimit")


def test_end_episode_is_a_no_op_without_an_episode_and_reset_recovers():
    env = Chatter()
    env.end_episode()
    assert env.agents == []
    env.reset()
    env.end_episode()
    assert env.agents == [] and env.active_agents == []
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step({"a": "x"})
    env.reset()
    assert env.step({"a": "bye"})[2] == {"a": True, "b": True}


def _wrapper_classes(tree: ast.Module) -> list[ast.ClassDef]:
    names = {"ParallelEnvWrapper", "StepLimit"}
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id in names for b in node.bases)
        | (node.name == "ParallelEnvWrapper")
    ]


def _private_reads_of_other_objects(cls: ast.ClassDef) -> list[str]:
    """``x._name`` where ``x`` is not ``self``/``cls`` (dunders excepted)."""
    found = []
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{cls.name}: line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.slow  # 17 s in the fast loop at load 17 (#22)
def test_no_wrapper_in_the_library_touches_private_env_state():
    checked, offenders = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in _wrapper_classes(tree):
            checked.append(cls.name)
            offenders += _private_reads_of_other_objects(cls)
    assert {"ParallelEnvWrapper", "StepLimit", "FrozenAgents"} <= set(checked)
    assert offenders == []


def test_the_private_state_check_can_fail():
    bad = ast.parse(
        "class Bad(ParallelEnvWrapper):\n"
        "    def step(self, actions):\n"
        "        self.env.unwrapped._active = set()\n"
        "        return self._own\n"
    )
    (cls,) = _wrapper_classes(bad)
    assert _private_reads_of_other_objects(cls) == ["Bad: line 3: ._active"]
