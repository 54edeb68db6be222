"""The algorithm zoo: other papers' multi-agent credit assignment on our one episode schema.

Each algorithm here is MAGRPO's machinery (linear rollouts of ``G`` episodes per task, one
optimizer per trainable policy, the shared clipped / plain policy-gradient update of
:mod:`llm_marl.algos.update`) with another paper's advantages, computed by a plain function of
:mod:`llm_marl.algos.advantages`. So every loss option of :class:`~llm_marl.algos.update.PGConfig`
(``loss``, ``aggregation``, clipping, KL) composes with every one of them, and
``llm-marl bench algos`` compares them on the same env, tasks and seeds.

* :class:`ATGRPO` — PettingLLMs' agent- and turn-wise groups.
* :class:`DrMAS` — Dr. MAS's per-agent normalisation.
* :class:`RAE` — SPIRAL's role-conditioned moving-average baseline per (env, agent).
* :class:`GiGPO` — verl-agent's step-level groups over identical anchor states plus episode
  groups.

Each config's docstring cites its source and says where our version departs from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from llm_marl.algos.advantages import (
    MovingBaseline,
    RewardFn,
    Scale,
    agent_turn_advantages,
    check_baseline,
    component_reward,
    per_agent_advantages,
    step_group_advantages,
    step_rewards,
    turn_returns,
)
from llm_marl.algos.base import PolicyGradientAlgorithm
from llm_marl.algos.losses import Aggregation
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig
from llm_marl.rollout.types import Episode, group_episodes

__all__ = [
    "ATGRPO",
    "RAE",
    "ATGRPOConfig",
    "DrMAS",
    "DrMASConfig",
    "GiGPO",
    "GiGPOConfig",
    "RAEConfig",
    "ZooConfig",
]


@dataclass
class ZooConfig(PGConfig):
    """The fields the zoo's algorithms share (MAGRPO's defaults); each inherits the optimizer /
    loss fields of :class:`~llm_marl.algos.update.PGConfig`."""

    lr: float = 2e-5
    """AdamW learning rate (MAGRPO's default)."""
    aggregation: Aggregation = "sequence-mean"
    """GRPO's reduction: mean over each completion's tokens, then over completions."""
    gamma: float = 1.0
    """Discount of multi-turn returns (each turn is credited with its return-to-go)."""
    reward_component: str | None = None
    """Learn from this reward component (credited at the last step) instead of the joint
    reward; ``None``: the joint reward of every step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")

    def reward_fn(self) -> RewardFn:
        """The per-step rewards to learn from."""
        return component_reward(self.reward_component) if self.reward_component else step_rewards


@dataclass
class _ScaledConfig(ZooConfig):
    """AT-GRPO's and Dr. MAS's GRPO-style scaling of group advantages (checked here)."""

    scale: Scale = "std"
    """``std``: ``(R - mean) / (std + 1e-6)``; ``none``: ``R - mean``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline("mean", self.scale)


@dataclass
class ATGRPOConfig(_ScaledConfig):
    """AT-GRPO: agent- and turn-wise GRPO groups.

    Source: Zhao et al., "Stronger Together: On-Policy Reinforcement Learning for Collaborative
    LLMs" (arXiv:2510.11062), code github.com/pettingllms-ai/PettingLLMs. Each agent's ``k``-th
    turns across a task's ``G`` episodes form one group, normalised GRPO-style (mean and std);
    see :func:`~llm_marl.algos.advantages.agent_turn_advantages`.

    Departures: our rollouts are linear, so a group at turn ``k > 0`` compares turns whose
    histories differ (PettingLLMs samples K candidates per agent per turn from one state and
    continues with the best); every agent learns from the joint reward (the paper mixes a
    team reward with agent-local ones, which our cooperative envs do not report).
    """

    scale: Scale = "std"
    """``std``: GRPO's ``(R - mean) / (std + 1e-6)``, as in AT-GRPO; ``none``: ``R - mean``."""


@dataclass
class DrMASConfig(_ScaledConfig):
    """Dr. MAS: per-agent advantage normalisation.

    Source: Feng et al., "Dr. MAS: Stable Reinforcement Learning for Multi-Agent LLM Systems"
    (2026), code github.com/langfengQ/DrMAS. Within each task's group, every agent's advantages
    are normalised with the mean and std of that agent's own returns, pooled over all its turns
    (:func:`~llm_marl.algos.advantages.per_agent_advantages`), instead of one statistic for the
    whole team. Departure: a group in which the agent took a single turn gives it advantage 0
    (the release's verl would give it the raw reward).
    """

    scale: Scale = "std"
    """``std``: divide by the agent's unbiased std plus 1e-6 (the release's GRPO)."""


@dataclass
class RAEConfig(ZooConfig):
    """RAE: role-conditioned advantage estimation with a moving-average baseline.

    Source: Liu et al., "SPIRAL: Self-Play on Zero-Sum Games Incentivizes Reasoning via
    Multi-Agent Multi-Turn Reinforcement Learning" (arXiv:2506.24119, Algorithm 1; code
    github.com/spiral-rl/spiral); prime-rl's multi-agent environments use the same estimate.
    One exponential moving average of the return per (env, agent), ``A = R - b``
    (:class:`~llm_marl.algos.advantages.MovingBaseline`); no group statistics, so it also works
    with ``group_size=1``. The baselines are saved in the checkpoint.
    """

    decay: float = 0.95
    """The moving average's ``alpha`` (SPIRAL: 0.95)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}")


@dataclass
class GiGPOConfig(ZooConfig):
    """GiGPO: group-in-group policy optimisation.

    Source: Feng et al., "Group-in-Group Policy Optimization for LLM Agent Training"
    (arXiv:2505.10978), code github.com/langfengQ/verl-agent (``gigpo/core_gigpo.py``). The
    episode-level GRPO advantage plus ``step_weight`` times a step-level one, whose groups are
    the turns of one agent that acted from an identical state (token for token) across the
    task's episodes (:func:`~llm_marl.algos.advantages.step_group_advantages`). Departures: the
    release's optional similarity-based clustering is not offered; a group of one episode has
    episode advantage 0.
    """

    gamma: float = 0.95
    """Discount of the step-level returns (the release's default 0.95)."""
    step_weight: float = 1.0
    """``omega``: weight of the step-level advantage (the release's default 1.0)."""
    scale: Scale = "none"
    """``none``: the release's default ``mean_norm``; ``std``: its ``mean_std_norm``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline("mean", self.scale)


ZooT = TypeVar("ZooT", bound=ZooConfig)


class _ZooAlgorithm(PolicyGradientAlgorithm[ZooT]):
    """Linear episodes; each trainable agent's per-turn advantages from :meth:`advantages`."""

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        samples: dict[str, list[Sample]] = {key: [] for key in self.groups}
        for group in group_episodes(list(episodes)):
            for key, (_, agents) in self.groups.items():
                for agent in agents:
                    for episode, adv in zip(group, self.advantages(group, agent)):
                        samples[key] += trajectory_samples(episode.trajectories[agent], adv)
        return samples

    def advantages(self, group: Sequence[Episode], agent: str) -> list[list[float]]:
        """``adv[e][k]``: the advantage of ``agent``'s turn ``k`` in episode ``e`` of ``group``."""
        raise NotImplementedError


class ATGRPO(_ZooAlgorithm[ATGRPOConfig]):
    """AT-GRPO (PettingLLMs): a GRPO group per (task, agent, turn index)."""

    name: ClassVar[str] = "at-grpo"

    def advantages(self, group: Sequence[Episode], agent: str) -> list[list[float]]:
        cfg = self.config
        return agent_turn_advantages(group, [agent], cfg.gamma, cfg.scale, cfg.reward_fn())[agent]


class DrMAS(_ZooAlgorithm[DrMASConfig]):
    """Dr. MAS: each agent normalised by its own reward statistics."""

    name: ClassVar[str] = "drmas"

    def advantages(self, group: Sequence[Episode], agent: str) -> list[list[float]]:
        cfg = self.config
        return per_agent_advantages(group, agent, cfg.gamma, cfg.scale, cfg.reward_fn())


class GiGPO(_ZooAlgorithm[GiGPOConfig]):
    """GiGPO (verl-agent): episode groups plus step groups over identical anchor states."""

    name: ClassVar[str] = "gigpo"

    def advantages(self, group: Sequence[Episode], agent: str) -> list[list[float]]:
        cfg = self.config
        return step_group_advantages(
            group, agent, cfg.gamma, cfg.step_weight, cfg.scale, cfg.reward_fn()
        )


class RAE(PolicyGradientAlgorithm[RAEConfig]):
    """RAE (SPIRAL): ``A = R - b[(env, agent)]``, ``b`` a moving average over batches."""

    name: ClassVar[str] = "rae"
    min_group_size: ClassVar[int] = 1

    def __init__(self, config: RAEConfig | None = None) -> None:
        super().__init__(config)
        self.baseline = MovingBaseline(self.config.decay)

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        cfg, reward_fn = self.config, self.config.reward_fn()
        samples: dict[str, list[Sample]] = {key: [] for key in self.groups}
        for key, (_, agents) in self.groups.items():
            for agent in agents:
                # One baseline move per (env, agent) per batch, over all the agent's turns.
                returns = [turn_returns(ep, agent, cfg.gamma, reward_fn) for ep in episodes]
                flat = self.baseline.advantages(
                    (self.env_id, agent), [r for rs in returns for r in rs]
                )
                start = 0
                for episode, rs in zip(episodes, returns):
                    adv = flat[start : start + len(rs)]
                    start += len(rs)
                    samples[key] += trajectory_samples(episode.trajectories[agent], adv)
        return samples

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "rae_baseline": self.baseline.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.baseline.load_state_dict(state.get("rae_baseline", {}))
