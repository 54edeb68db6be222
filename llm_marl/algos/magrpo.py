"""MAGRPO — Multi-Agent Group Relative Policy Optimization.

Liu, Chen, Liang, Lyu, Amato. "LLM Collaboration With Multi-Agent Reinforcement Learning."
arXiv:2508.04652 (AAAI 2026). Reference code: github.com/OpenMLRL/CoMLRL.

The team of ``N`` LLM agents is a cooperative Dec-POMDP with one joint reward. For each task the
rollout plays ``G`` episodes (:func:`llm_marl.rollout.collect` with ``group_size=G``):

* **Aligned joint actions.** The ``g``-th completion of every agent belongs to episode ``g``;
  together they form the ``g``-th joint action and earn that episode's joint reward. (CoMLRL's
  ``joint_mode="cross"``, which scores every combination of the agents' completions, needs
  ``G^N`` env evaluations per task and is not implemented.)
* **Centralised group baseline.** Every agent's advantage is the same team quantity
  ``A_g = R_g - mean_{g'} R_{g'}`` (optionally divided by the group std); multi-turn episodes use
  each turn's discounted return-to-go and a baseline per turn index
  (:func:`~llm_marl.algos.advantages.turn_advantages`).
* **Decentralised actors.** Each trainable agent keeps its own optimizer and is updated with the
  clipped policy-gradient loss on its own tokens
  (:func:`~llm_marl.algos.update.policy_gradient_update`, run by
  :class:`~llm_marl.algos.base.PolicyGradientAlgorithm`), or with CoMLRL's plain policy
  gradient (``loss="policy-gradient"``, ``aggregation="sequence-sum"``). Agents that share one
  policy object (parameter sharing) share one optimizer. Frozen agents play along but are never
  updated.

Usage::

    algo = MAGRPO(MAGRPOConfig(lr=1e-3))
    Trainer(algo, {"left": left, "right": right}, TrainerConfig(env="coordination-v0")).train()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from llm_marl.algos.advantages import (
    Baseline,
    Scale,
    check_baseline,
    component_reward,
    step_rewards,
    turn_advantages,
)
from llm_marl.algos.base import PolicyGradientAlgorithm
from llm_marl.algos.losses import Aggregation
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig
from llm_marl.rollout.types import Episode, group_episodes


@dataclass
class MAGRPOConfig(PGConfig):
    """MAGRPO hyperparameters; the presets (:mod:`llm_marl.train.presets.magrpo`) hold the
    paper's values with their sources.

    Inherits the optimizer / loss fields of :class:`~llm_marl.algos.update.PGConfig`. The
    default loss is our clipped surrogate (``loss="clipped"``); CoMLRL's own MAGRPO loss is
    ``loss="policy-gradient", aggregation="sequence-sum"`` (``-A * sum_t logp_t`` averaged over
    completions, no ratio, no clip), which the paper presets use.
    """

    lr: float = 2e-5
    """AdamW learning rate (CoMLRL's CoopHumanEval config: 2e-5)."""
    aggregation: Aggregation = "sequence-mean"
    """GRPO's original reduction: mean over each completion's tokens, then over completions."""
    gamma: float = 1.0
    """Discount of multi-turn returns (CoMLRL: 1.0 single-config, 0.9 for multi-turn runs)."""
    baseline: Baseline = "mean"
    """Group baseline: ``mean`` (MAGRPO), ``rloo`` (leave-one-out) or ``none``."""
    scale: Scale = "none"
    """``std`` divides advantages by the group's reward std; MAGRPO uses the raw difference."""
    reward_component: str | None = None
    """Learn from this reward component (credited at the last step) instead of the joint
    reward; ``None``: the joint reward of every step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline(self.baseline, self.scale)
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")


class MAGRPO(PolicyGradientAlgorithm[MAGRPOConfig]):
    """Multi-agent GRPO with a centralised group baseline and one optimizer per agent."""

    name: ClassVar[str] = "magrpo"

    def __init__(self, config: MAGRPOConfig | None = None) -> None:
        super().__init__(config or MAGRPOConfig())

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        cfg = self.config
        reward_fn = component_reward(cfg.reward_component) if cfg.reward_component else step_rewards
        samples: dict[str, list[Sample]] = {key: [] for key in self.groups}
        # One centralised baseline per task group (and per turn index), the same team quantity
        # for every agent; each agent's samples go to the optimizer of the policy playing it.
        for group in group_episodes(episodes):
            for key, (_, agents) in self.groups.items():
                for agent in agents:
                    advs = turn_advantages(
                        group, agent, cfg.gamma, cfg.baseline, cfg.scale, reward_fn
                    )
                    for episode, adv in zip(group, advs):
                        samples[key] += trajectory_samples(episode.trajectories[agent], adv)
        return samples
