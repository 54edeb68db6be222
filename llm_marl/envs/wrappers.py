"""Wrappers over :class:`~llm_marl.envs.base.LLMParallelEnv`.

* :class:`ParallelEnvWrapper` — forwards everything; subclasses override what they change.
* :class:`StepLimit` — truncate an episode after ``max_steps`` steps (what
  ``make(env_id, max_steps=N)`` applies; the words are defined in :mod:`llm_marl.envs.base`).

A wrapper reaches its env only through the env's public API (``reset``, ``step``,
:meth:`~llm_marl.envs.base.LLMParallelEnv.end_episode`, ...), never its private state.
Wrappers that run policies (:class:`~llm_marl.rollout.FrozenAgents`) live in
:mod:`llm_marl.rollout`: ``envs`` imports nothing of policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from gymnasium.spaces import Space
from pettingzoo import ParallelEnv

from llm_marl.envs.base import (
    ActionDict,
    LLMParallelEnv,
    ResetResult,
    StepResult,
    check_step_cap,
)


class ParallelEnvWrapper(ParallelEnv):
    """Forwards everything to ``env`` (an :class:`LLMParallelEnv` or a wrapper of one)."""

    def __init__(self, env: AnyEnv) -> None:
        if not isinstance(getattr(env, "unwrapped", None), LLMParallelEnv):
            raise TypeError(
                f"{type(self).__name__} wraps an LLMParallelEnv (or a wrapper of one), "
                f"got {type(env).__name__}"
            )
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> LLMParallelEnv:
        """The innermost env."""
        return self.env.unwrapped

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    @property
    def possible_agents(self) -> list[str]:
        return self.env.possible_agents

    @property
    def metadata(self) -> dict[str, Any]:
        return self.env.metadata

    def observation_space(self, agent: str) -> Space[Any]:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> Space[Any]:
        return self.env.action_space(agent)

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> ResetResult:
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: ActionDict) -> StepResult:
        return self.env.step(actions)

    def state(self) -> dict[str, Any]:
        return self.env.state()

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


AnyEnv: TypeAlias = LLMParallelEnv | ParallelEnvWrapper
"""What :func:`llm_marl.make` returns: an env, or a wrapper whose ``unwrapped`` is one."""


class StepLimit(ParallelEnvWrapper):
    """Truncate the episode once ``max_steps`` steps of this wrapper have been taken.

    The step that reaches the cap reports ``truncations[agent] = True`` for every agent (unless
    the env terminated the episode in that very step) and ends the episode through
    :meth:`~llm_marl.envs.base.LLMParallelEnv.end_episode`. ``step_count`` counts this wrapper's
    steps (over :class:`~llm_marl.rollout.FrozenAgents`, steps the frozen agents take inside
    one outer step are not counted).
    """

    def __init__(self, env: AnyEnv, max_steps: int) -> None:
        super().__init__(env)
        self.max_steps = check_step_cap(max_steps, "max_steps")
        self.step_count = 0

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> ResetResult:
        result = self.env.reset(seed=seed, options=options)
        self.step_count = 0
        return result

    def step(self, actions: ActionDict) -> StepResult:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self.step_count += 1
        if self.step_count >= self.max_steps and self.env.agents:
            truncs = dict.fromkeys(truncs, True)
            for info in infos.values():
                info["active"] = False
            self.env.unwrapped.end_episode()
        return obs, rewards, terms, truncs, infos
