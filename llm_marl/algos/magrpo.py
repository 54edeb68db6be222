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
  (:func:`~llm_marl.algos.losses.policy_gradient_update`). Agents that share one policy object
  (parameter sharing) share one optimizer. Frozen agents play along but are never updated.

Usage::

    algo = MAGRPO(MAGRPOConfig(lr=1e-3))
    Trainer(algo, {"left": left, "right": right}, TrainerConfig(env="coordination-v0")).train()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from llm_marl.algos.advantages import (
    Baseline,
    Scale,
    check_baseline,
    component_reward,
    step_rewards,
    turn_advantages,
)
from llm_marl.algos.base import Algorithm, trainable_policies
from llm_marl.algos.losses import (
    PGConfig,
    Sample,
    make_optimizer,
    policy_gradient_update,
    trajectory_samples,
)
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.rollout.types import Episode, group_episodes


@dataclass
class MAGRPOConfig(PGConfig):
    """MAGRPO hyperparameters. Defaults follow CoMLRL's MAGRPO (see ``PRESETS`` in the example).

    Inherits the optimizer / loss fields of :class:`~llm_marl.algos.losses.PGConfig`.
    """

    lr: float = 2e-5
    """AdamW learning rate (CoMLRL's CoopHumanEval config: 2e-5)."""
    aggregation: str = "sequence-mean"  # type: ignore[assignment]
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


class MAGRPO(Algorithm):
    """Multi-agent GRPO with a centralised group baseline and one optimizer per agent."""

    name: ClassVar[str] = "magrpo"
    min_group_size: ClassVar[int] = 2

    def __init__(self, config: MAGRPOConfig | None = None) -> None:
        self.config = config or MAGRPOConfig()
        self.optimizers: dict[str, Any] = {}
        self.schedulers: dict[str, Any] = {}
        self.groups: dict[str, tuple[Policy, list[str]]] = {}
        self.updates = 0

    def setup(self, policies: Mapping[str, Policy], sampling: Mapping[str, SamplingParams]) -> None:
        super().setup(policies, sampling)
        self.groups = trainable_policies(self.policies)
        if not self.groups:
            raise ValueError(
                "MAGRPO needs at least one trainable agent; every policy has trainable=False"
            )
        for key, (policy, _) in self.groups.items():
            self.optimizers[key], self.schedulers[key] = make_optimizer(
                policy.parameters(), self.config
            )

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        cfg = self.config
        reward_fn = component_reward(cfg.reward_component) if cfg.reward_component else step_rewards
        # 1. Advantages: one centralised baseline per task group (and per turn index).
        samples: dict[str, list[Sample]] = {key: [] for key in self.groups}
        for group in group_episodes(episodes):
            for key, (_, agents) in self.groups.items():
                for agent in agents:
                    advs = turn_advantages(
                        group, agent, cfg.gamma, cfg.baseline, cfg.scale, reward_fn
                    )
                    for episode, adv in zip(group, advs):
                        samples[key] += trajectory_samples(episode.trajectories[agent], adv)
        # 2. One clipped policy-gradient update per trainable policy, each with its optimizer.
        metrics: dict[str, float] = {}
        for key, (policy, _) in self.groups.items():
            m = policy_gradient_update(
                policy,
                self.optimizers[key],
                samples[key],
                cfg,
                scheduler=self.schedulers[key],
                update_index=self.updates,
            )
            metrics.update({f"{key}/{k}": v for k, v in m.items()})
        self.updates += 1
        return {**_mean_over_agents(metrics, self.groups), **metrics}

    def state_dict(self) -> dict[str, Any]:
        return {
            "updates": self.updates,
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        load_optimizers(self, state)


def load_optimizers(algo: Any, state: Mapping[str, Any]) -> None:
    """Restore ``algo.optimizers`` / ``algo.schedulers`` / ``algo.updates`` from a state dict."""
    saved = set(state.get("optimizers", {}))
    if saved != set(algo.optimizers):
        raise ValueError(
            f"checkpoint has optimizers for {sorted(saved)} but this run trains "
            f"{sorted(algo.optimizers)}"
        )
    for key, opt_state in state["optimizers"].items():
        algo.optimizers[key].load_state_dict(opt_state)
    for key, sched_state in state.get("schedulers", {}).items():
        algo.schedulers[key].load_state_dict(sched_state)
    algo.updates = int(state.get("updates", 0))


def _mean_over_agents(metrics: Mapping[str, float], groups: Mapping[str, Any]) -> dict[str, float]:
    """``loss``, ``kl``... averaged over the trainable policies (the console's columns)."""
    out: dict[str, float] = {}
    for name in ("loss", "kl", "clip_frac", "grad_norm", "ratio"):
        values = [metrics[f"{key}/{name}"] for key in groups if f"{key}/{name}" in metrics]
        if values:
            out[name] = sum(values) / len(values)
    return out
