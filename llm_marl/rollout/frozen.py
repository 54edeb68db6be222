"""`FrozenAgents`: fold frozen policies into an env's dynamics.

It runs policies inside ``step``, so it lives in :mod:`llm_marl.rollout` (the layer that joins
envs and policies), not in :mod:`llm_marl.envs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pettingzoo import ParallelEnv

from llm_marl.envs.base import ActionDict, InfoDict, ObsDict, ResetResult, StepResult
from llm_marl.envs.wrappers import ParallelEnvWrapper
from llm_marl.policies.base import Policy, PolicyError, SamplingParams


class FrozenAgents(ParallelEnvWrapper):
    """Play some agents with fixed policies inside the env's dynamics.

    ``FrozenAgents(env, {"actor": policy})`` leaves only the other agents visible:
    ``possible_agents`` shrinks, and whenever only frozen agents are active the wrapper asks their
    policies and steps the inner env itself. Rewards earned during those inner steps are added to
    what the visible agents receive on their next step (or at reset, to the first step).

    The frozen completions of the current episode are in ``wrapper.frozen_turns`` as
    ``(agent, text)`` pairs. A frozen policy that fails (:class:`PolicyError`: server down,
    malformed reply) truncates the episode with ``infos[agent]["error"]`` set and reward 0, like
    any infrastructure failure (during ``reset``: reported in the infos, and the next ``step``
    truncates). For many envs at once, prefer :func:`llm_marl.rollout.collect`
    with all policies: it batches frozen agents across envs too.
    """

    def __init__(
        self,
        env: ParallelEnv,
        policies: Mapping[str, Policy],
        sampling: SamplingParams | None = None,
    ) -> None:
        super().__init__(env)
        unknown = [a for a in policies if a not in env.possible_agents]
        if unknown:
            raise ValueError(
                f"FrozenAgents: unknown agents {unknown}; env agents are {env.possible_agents}"
            )
        visible = [a for a in env.possible_agents if a not in policies]
        if not visible:
            raise ValueError("FrozenAgents: every agent is frozen; leave at least one to act")
        for agent, policy in policies.items():
            if not hasattr(policy, "generate"):
                raise TypeError(f"FrozenAgents: policy for {agent!r} has no generate() method")
        self.frozen = dict(policies)
        self.sampling = sampling or SamplingParams()
        self._visible = visible
        self._pending_reward = 0.0
        self._failed: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.frozen_turns: list[tuple[str, str]] = []

    @property
    def possible_agents(self) -> list[str]:
        return list(self._visible)

    @property
    def agents(self) -> list[str]:
        if self._failed is not None:  # a frozen policy failed at reset; the next step ends it
            return list(self._failed[0])
        return [a for a in self.env.agents if a not in self.frozen]

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> ResetResult:
        self._pending_reward = 0.0
        self._failed = None
        self.frozen_turns = []
        obs, infos = self.env.reset(seed=seed, options=options)
        result = self._play_frozen(obs, infos)
        if result is not None:  # the frozen agents ended the episode before anyone else acted
            obs, _, _, _, infos = result
        obs, infos = self._visible_only(obs), self._visible_only(infos)
        if any(info.get("error") for info in infos.values()):
            # Like an env whose setup_episode failed: report it now, truncate at the next step.
            self.unwrapped.end_episode()
            self._failed = (obs, infos)
        return obs, infos

    def step(self, actions: ActionDict) -> StepResult:
        frozen_keys = [a for a in actions if a in self.frozen]
        if frozen_keys:
            raise ValueError(f"agents {frozen_keys} are frozen; their actions come from policies")
        if self._failed is not None:
            obs, infos = self._failed
            self._failed = None
            return _truncated(obs, infos)
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        carried = self._pending_reward
        self._pending_reward = 0.0
        more = self._play_frozen(obs, infos)
        if more is not None and any(info.get("error") for info in more[4].values()):
            return _truncated(self._visible_only(more[0]), self._visible_only(more[4]))
        if more is not None:
            obs, more_rewards, terms, truncs, infos = more
            rewards = {a: rewards.get(a, 0.0) + more_rewards.get(a, 0.0) for a in rewards}
        rewards = {a: r + carried for a, r in rewards.items()}
        return (
            self._visible_only(obs),
            self._visible_only(rewards),
            self._visible_only(terms),
            self._visible_only(truncs),
            self._visible_only(infos),
        )

    def _play_frozen(self, obs: ObsDict, infos: InfoDict) -> StepResult | None:
        """Step the inner env while only frozen agents are active. Returns the last step or None."""
        last: StepResult | None = None
        accumulated: dict[str, float] = {}
        while self.env.agents:
            active = [a for a in self.env.agents if infos[a]["active"]]
            if not active or any(a not in self.frozen for a in active):
                break
            actions = {}
            for agent in active:
                try:
                    completion = self.frozen[agent].generate([obs[agent]], self.sampling)[0]
                except Exception as err:  # noqa: BLE001 - any fault of the call, as in collect
                    # The README's promise for infrastructure failures: the episode is
                    # truncated with infos[agent]["error"] set, and never scored.
                    self.unwrapped.end_episode()
                    what = "failed" if isinstance(err, PolicyError) else type(err).__name__
                    error = f"frozen policy for {agent!r} {what}: {err}"
                    infos = {a: {**i, "active": False, "error": error} for a, i in infos.items()}
                    return obs, dict.fromkeys(obs, 0.0), {}, {}, infos
                actions[agent] = completion.text
                self.frozen_turns.append((agent, completion.text))
            obs, rewards, terms, truncs, infos = self.env.step(actions)
            for a, r in rewards.items():
                accumulated[a] = accumulated.get(a, 0.0) + r
            last = (obs, accumulated, terms, truncs, infos)
        if last is not None and self.env.agents:
            # The episode goes on: hold the reward until the visible agents' next step.
            # The joint reward is the same for every agent: carry that one number.
            self._pending_reward += next(iter(accumulated.values()), 0.0)
            return last[0], dict.fromkeys(accumulated, 0.0), last[2], last[3], last[4]
        return last

    def _visible_only(self, d: Mapping[str, Any]) -> dict[str, Any]:
        return {a: v for a, v in d.items() if a not in self.frozen}


def _truncated(obs: ObsDict, infos: InfoDict) -> StepResult:
    """The step result of an episode a failed frozen policy cut short: truncated, reward 0."""
    return (
        obs,
        dict.fromkeys(obs, 0.0),
        dict.fromkeys(obs, False),
        dict.fromkeys(obs, True),
        infos,
    )
