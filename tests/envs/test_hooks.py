"""The two public hooks: a concrete env without one fails when its class is created."""

from __future__ import annotations

import inspect
import re

import pytest

import llm_marl
from llm_marl.envs import LLMParallelEnv, Transition
from llm_marl.envs.base import HOOKS
from llm_marl.envs.math.env import MathEnv
from llm_marl.envs.registration import _load_entry_point


def test_hooks_are_public_abstract_and_documented():
    for name in HOOKS:
        hook = getattr(LLMParallelEnv, name)
        assert getattr(hook, "__isabstractmethod__", False), name
        assert not name.startswith("_")
        assert "Transition" in inspect.getdoc(LLMParallelEnv.transition)
        assert len(inspect.getdoc(hook) or "") > 200, f"{name} is documented for env authors"
    doc = inspect.getdoc(__import__("llm_marl.envs.base", fromlist=["x"]))
    assert "setup_episode" in doc and "transition" in doc and "abstract=True" in doc


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({}, "setup_episode() and transition()"),
        ({"setup_episode": lambda self, task: None}, "transition()"),
        ({"transition": lambda self, actions: Transition(done=True)}, "setup_episode()"),
    ],
)
def test_a_concrete_env_missing_a_hook_fails_at_class_creation(body, missing):
    namespace = {"possible_agents": ["a"], **body}
    pattern = rf"Half does not implement {re.escape(missing)},.*abstract=True"
    with pytest.raises(TypeError, match=pattern):
        type("Half", (LLMParallelEnv,), namespace)


def test_the_old_private_hook_names_do_not_count():
    with pytest.raises(TypeError, match="setup_episode\\(\\) and transition\\(\\)"):

        class Old(LLMParallelEnv):  # the v1 names: a third-party env written against them
            possible_agents = ["a"]

            def _setup(self, task):
                pass

            def _transition(self, actions):
                return Transition(done=True)


def test_an_intermediate_base_is_declared_abstract_and_cannot_be_instantiated():
    class Family(LLMParallelEnv, abstract=True):
        possible_agents = ["a"]

        def default_tasks(self):
            return [{"task_id": "t"}]

        def transition(self, actions):
            return Transition(reward=1.0, done=True)

    with pytest.raises(TypeError, match="abstract env base class"):
        Family()

    class Member(Family):  # concrete: inherits transition, adds setup_episode
        def setup_episode(self, task):
            self.say("a", "go")
            self.set_active(["a"])

    env = Member()
    env.reset(seed=0)
    assert env.step({"a": "x"})[1] == {"a": 1.0}

    with pytest.raises(TypeError, match="Orphan does not implement setup_episode"):

        class Orphan(Family):  # concrete again, and still missing a hook
            pass


def test_the_base_class_itself_cannot_be_instantiated():
    with pytest.raises(TypeError):
        LLMParallelEnv()  # type: ignore[abstract]


def test_math_env_is_an_abstract_base_without_a_third_hook():
    assert MathEnv._abstract
    assert not hasattr(MathEnv, "_begin")
    with pytest.raises(TypeError, match="abstract env base class"):
        MathEnv(tasks=[{"task_id": "t", "problem": "1+1", "answer": "2"}])
    with pytest.raises(TypeError, match="does not implement setup_episode"):

        class NoSetup(MathEnv):
            metadata = {"name": "no_setup-v0"}
            possible_agents = ["actor"]

            def transition(self, actions):
                return self._grade_final(actions["actor"])


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_every_registered_env_implements_both_hooks_in_its_own_family(env_id):
    cls = _load_entry_point(llm_marl.spec(env_id).entry_point, env_id)
    assert isinstance(cls, type) and issubclass(cls, LLMParallelEnv)
    assert not cls._abstract
    for name in HOOKS:
        hook = getattr(cls, name)
        assert not getattr(hook, "__isabstractmethod__", False)
        assert hook.__qualname__.split(".")[0] != "LLMParallelEnv"
