"""Wrappers over :class:`~llm_marl.envs.base.LLMParallelEnv`.

* :class:`ParallelEnvWrapper` — forwards everything; subclasses override what they change.
* :class:`TurnLimit` — truncate an episode after a number of steps.

Wrappers that run policies (:class:`~llm_marl.rollout.FrozenAgents`) live in
:mod:`llm_marl.rollout`: ``envs`` imports nothing of policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pettingzoo import ParallelEnv


class ParallelEnvWrapper(ParallelEnv):
    """Forwards everything to ``env``; subclasses override what they change."""

    def __init__(self, env: ParallelEnv) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> ParallelEnv:
        return self.env.unwrapped

    @property
    def agents(self) -> list[str]:  # type: ignore[override]
        return self.env.agents

    @property
    def possible_agents(self) -> list[str]:  # type: ignore[override]
        return self.env.possible_agents

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]
        return self.env.metadata

    def observation_space(self, agent: str):
        return self.env.observation_space(agent)

    def action_space(self, agent: str):
        return self.env.action_space(agent)

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None):
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Mapping[str, str]):
        return self.env.step(actions)

    def state(self):
        return self.env.state()

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


class TurnLimit(ParallelEnvWrapper):
    """Truncate every agent once ``max_steps`` env steps have been taken in an episode."""

    def __init__(self, env: ParallelEnv, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        super().__init__(env)
        self.max_steps = int(max_steps)
        self._steps = 0

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None):
        self._steps = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Mapping[str, str]):
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._steps += 1
        if self._steps >= self.max_steps and self.env.agents:
            truncs = {a: True for a in truncs}
            for a in infos:
                infos[a]["active"] = False
            self._force_end()
        return obs, rewards, terms, truncs, infos

    def _force_end(self) -> None:
        env = self.env.unwrapped
        env.agents = []
        if hasattr(env, "_active"):
            env._active = set()
