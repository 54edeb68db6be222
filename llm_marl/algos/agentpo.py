"""AgentPO-GRPO — train one collaborator agent beside frozen agents.

Sun, Liu, Zhang, Wu, Lu, Wu. "AgentPO: Enhancing Multi-Agent Collaboration via Reinforcement
Learning." ICLR 2026. Reference code: the AgentPO release, github.com/dreaming-madao/agentpo
(verl / DAPO recipe).

A fixed multi-agent topology holds one **trainable collaborator** and one or more **frozen**
agents (the actor: a local model, an ``OpenAIPolicy`` or a function):

* feedforward ("hint" / "assistant"): the collaborator writes a hint, the frozen actor answers
  (``math_hint-v0``);
* feedback ("critic"): the frozen actor answers, the collaborator critiques, the actor revises
  (``math_critic-v0``).

The topology is the environment; this class only needs to know which agent learns. The reward is
the actor's binary correctness. The collaborator is trained with GRPO as in the paper's released
config (``scripts/train.sh`` of the initial release, commit 8987a7e): group-normalised
advantages ``(R - mean) / std`` over the ``G`` episodes of a task, token-mean loss aggregation,
clip-higher (``clip_ratio_low=0.2``, ``clip_ratio_high=0.28``), dual-clip
(``clip_ratio_c=10.0``), no KL term, AdamW with weight decay 0.1, 10 warmup steps, grad-norm
1.0.

Usage::

    policies = {"hint": HFPolicy(model, trainable=True), "actor": frozen_actor}
    Trainer(AgentPO(), policies, TrainerConfig(env="math_hint-v0", group_size=16)).train()
"""

from __future__ import annotations

from collections.abc import Sequence
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
from llm_marl.algos.base import PolicyGradientAlgorithm, PolicyGroups
from llm_marl.algos.losses import Aggregation
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig
from llm_marl.errors import ConfigError
from llm_marl.rollout.types import Episode, group_episodes


@dataclass
class AgentPOConfig(PGConfig):
    """AgentPO-GRPO hyperparameters; defaults are the paper's released config.

    Inherits the optimizer / loss fields of :class:`~llm_marl.algos.update.PGConfig`.
    """

    lr: float = 1e-6
    """AdamW learning rate (released config: 1e-6 for a 3B collaborator)."""
    weight_decay: float = 0.1
    """AdamW weight decay (released config)."""
    warmup_steps: int = 10
    """Linear warmup steps (released config)."""
    clip_low: float = 0.2
    """Lower clip range (``1 - 0.2``)."""
    clip_high: float | None = 0.28
    """Upper clip range (``1 + 0.28``): DAPO's clip-higher keeps exploration alive."""
    clip_ratio_c: float | None = 10.0
    """Dual-clip: a negative advantage's per-token loss is capped at ``-A * 10`` (released
    config: ``actor_rollout_ref.actor.clip_ratio_c=10.0``)."""
    kl_coef: float = 0.0
    """No KL penalty (released config: ``use_kl_loss=False``)."""
    aggregation: Aggregation = "token-mean"
    """Every generated token weighs the same (``loss_agg_mode="token-mean"``)."""
    baseline: Baseline = "mean"
    """GRPO's group-mean baseline."""
    scale: Scale = "std"
    """GRPO divides by the group's unbiased reward std plus 1e-6, as the release's verl
    (``verl/verl/trainer/ppo/core_algos.py``: ``compute_grpo_outcome_advantage``, ``torch.std``);
    ``population-std`` / ``none``: see :mod:`llm_marl.algos.advantages`."""
    reward_component: str | None = None
    """Learn from this binary reward component (e.g. ``"success"`` on the toy envs,
    ``"correct"`` on the math envs) instead of the joint reward; ``None``: the joint reward
    (already binary on the math envs)."""
    collaborator: str | None = None
    """The agent to train; ``None``: the only trainable agent."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline(self.baseline, self.scale)


class AgentPO(PolicyGradientAlgorithm[AgentPOConfig]):
    """GRPO on one trainable collaborator; every other agent stays frozen."""

    name: ClassVar[str] = "agentpo"

    @property
    def collaborator(self) -> str:
        """The trained agent (known after :meth:`setup`)."""
        return next(iter(self.groups), "")

    def check_team(self, agents: Sequence[str], trainable: Sequence[str]) -> None:
        if len(trainable) != 1:
            raise ConfigError(
                "AgentPO trains exactly one collaborator beside frozen agents, but the trainable "
                f"agents are {sorted(trainable) or 'none'}. Build the other policies with "
                "trainable=False (or fold them into the env with FrozenAgents); to train several "
                "agents use MAGRPO."
            )
        if self.config.collaborator not in (None, trainable[0]):
            raise ConfigError(
                f"AgentPOConfig.collaborator={self.config.collaborator!r} but the trainable agent "
                f"is {trainable[0]!r}"
            )

    def select_trainable(self, groups: PolicyGroups) -> PolicyGroups:
        self.check_team(list(self.policies), sorted(self.trainable))
        return groups

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        cfg, agent = self.config, self.collaborator
        reward_fn = component_reward(cfg.reward_component) if cfg.reward_component else step_rewards
        # GRPO: normalised advantages within each task's group, credited to the collaborator's
        # tokens (gamma = 1: the actor's final correctness is the collaborator's return).
        samples: list[Sample] = []
        for group in group_episodes(episodes):
            advs = turn_advantages(group, agent, 1.0, cfg.baseline, cfg.scale, reward_fn)
            for episode, adv in zip(group, advs):
                samples += trajectory_samples(episode.trajectories[agent], adv)
        return {agent: samples}
