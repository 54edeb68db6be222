"""MATPO — one LLM trained as planner and worker(s) at once.

Mo et al. "Multi-Agent Tool-Integrated Policy Optimization" (arXiv:2510.04678, 2025).
Reference code: github.com/mzf666/MATPO (a verl fork).

One policy object plays several roles, chosen by role prompt: a **planner** that decomposes the
task and delegates subtasks, and **workers** that complete a subtask with tools (search, browse)
and report back (``websearch-v0``). Only the planner's final answer is scored. In llm_marl the
roles are agents of one env (``planner``, ``worker``) that share one policy object, so the
:class:`~llm_marl.algos.base.PolicyGradientAlgorithm` gives them ONE optimizer; each worker turn
records the planner turn that spawned its conversation in
:attr:`Turn.parent <llm_marl.rollout.Turn.parent>` as ``("planner", k)``.

Credit assignment (as the paper and the official code)
    The ``G`` episodes of a task form the group. Each episode's planner rollout gets ONE
    group-relative advantage from its final reward: ``(R - mean) / std`` over the group (GRPO).
    It is given to every planner token and to every worker rollout that planner spawned: the
    sub-agent's work is good exactly when the plan it served ended well. A worker turn whose
    parent is missing or names no planner turn is an error (the env must say which call spawned
    it). Turn-index baselines are NOT used: with rewards ``[1, 0, 0, 1]`` and planner turns
    ``[1, 3, 3, 1]``, the early turns of the failing rollouts get a negative advantage, as they
    must (a per-turn-index baseline would compare them only with each other and give 0).
Normalisation
    ``token-mean`` over every generated token of the batch, planner and worker alike, as the
    official code (verl ``loss_agg_mode: token-mean``). ``balance=True`` is an option of
    llm_marl, not of MATPO: the loss becomes ``sum_r c_r * token_mean_r`` -- a token-mean within
    each role, mixed with weights ``c_r`` (``planner_weight`` for the planner, the rest shared by
    the worker roles) -- implemented with per-sample weights ``c_r / N_r``. Use it when long
    worker transcripts swamp the planner's few tokens.
Defaults
    From the official config (``verl/trainer/config/ppo_trainer.yaml`` and
    ``examples/sglang_multiturn/qwen3-14b_musique_MATPO.sh``): lr 1e-5, clip 0.2 / 0.2,
    dual-clip 3.0 (``clip_ratio_c``), AdamW weight decay 0.01, gradient clip 1.0, no KL
    (``use_kl_loss: false``, ``use_kl_in_reward=False``), token-mean; G = 8 rollouts per task
    and sampling temperature 1.0 are trainer settings (see the ``matpo-paper`` preset).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from llm_marl.algos.advantages import (
    RewardFn,
    Scale,
    check_baseline,
    component_reward,
    group_advantages,
    step_rewards,
)
from llm_marl.algos.base import PolicyGradientAlgorithm, PolicyGroups
from llm_marl.algos.losses import Aggregation
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig
from llm_marl.errors import ConfigError
from llm_marl.rollout.types import Episode, group_episodes


@dataclass
class MATPOConfig(PGConfig):
    """MATPO hyperparameters; defaults from the official config (see the module docstring)."""

    lr: float = 1e-5
    """AdamW learning rate (official ``actor.optim.lr``)."""
    weight_decay: float = 0.01
    """AdamW weight decay (official ``actor.optim.weight_decay``)."""
    clip_low: float = 0.2
    """Lower clip range (official ``clip_ratio_low``)."""
    clip_high: float | None = 0.2
    """Upper clip range (official ``clip_ratio_high``: no clip-higher)."""
    clip_ratio_c: float | None = 3.0
    """Dual-clip constant (official ``clip_ratio_c``)."""
    aggregation: Aggregation = "token-mean"
    """Must stay ``token-mean`` (the official ``loss_agg_mode``; role balancing uses it too)."""
    planner: str = "planner"
    """The agent whose final reward is scored and whose advantage workers inherit."""
    workers: tuple[str, ...] = ("worker",)
    """Agents whose conversations planner turns spawn (``Turn.parent``)."""
    balance: bool = False
    """llm_marl's option, not MATPO's: balance roles (see the module docstring). False: one
    token-mean over every token, as the official code."""
    planner_weight: float = 0.5
    """With ``balance``: the planner's share of the loss (the workers share the rest)."""
    scale: Scale = "std"
    """Divide by the group's unbiased std plus 1e-6, as the official ``adv_estimator=grpo``
    (verl's ``compute_grpo_outcome_advantage``, ``torch.std``); ``none``: don't;
    ``population-std``: see :mod:`llm_marl.algos.advantages`."""
    reward_component: str | None = None
    """Learn from this reward component (e.g. ``matpo``, ``em``) instead of the joint reward."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline("mean", self.scale)
        self.workers = tuple(self.workers)
        if self.aggregation != "token-mean":
            raise ValueError("MATPO aggregates with token-mean (as the official code); keep it")
        if not 0.0 < self.planner_weight <= 1.0:
            raise ValueError(f"planner_weight must be in (0, 1], got {self.planner_weight}")
        if self.planner in self.workers:
            raise ValueError(f"{self.planner!r} cannot be both the planner and a worker")
        if not self.workers:
            raise ValueError("MATPO needs at least one worker role")


def matpo_samples(
    group: Sequence[Episode],
    planner: str,
    workers: Sequence[str],
    *,
    scale: Scale = "std",
    reward_fn: RewardFn = step_rewards,
) -> list[Sample]:
    """Samples of one task group: each episode's planner advantage (its final reward, group
    mean subtracted, divided by the group std) on every planner token and on every worker turn
    that planner spawned (weights are left at 1)."""
    returns = [float(sum(reward_fn(episode))) for episode in group]
    advantages = group_advantages(returns, "mean", scale)
    samples: list[Sample] = []
    for episode, adv in zip(group, advantages):
        planner_traj = episode.trajectories.get(planner)
        if planner_traj is None:
            raise KeyError(
                f"episode {episode.task_id!r} has no trajectory for the planner {planner!r}; "
                f"agents are {sorted(episode.trajectories)}"
            )
        n_planner = len(planner_traj.turns)
        samples += trajectory_samples(planner_traj, [adv] * n_planner)
        for worker in workers:
            traj = episode.trajectories.get(worker)
            if traj is None:
                raise KeyError(
                    f"episode {episode.task_id!r} has no trajectory for worker {worker!r}; "
                    f"agents are {sorted(episode.trajectories)}"
                )
            for i, turn in enumerate(traj.turns):
                if turn.parent is None or turn.parent[0] != planner:
                    raise ValueError(
                        f"turn {i} of worker {worker!r} in episode {episode.task_id!r} has parent "
                        f"{turn.parent!r}; every worker turn must name the planner turn that "
                        f"spawned it, e.g. Turn.parent = ({planner!r}, k)"
                    )
                k = turn.parent[1]
                if not 0 <= k < n_planner:
                    raise ValueError(
                        f"turn {i} of worker {worker!r} names planner turn {k}, but the planner "
                        f"took {n_planner} turns in episode {episode.task_id!r}"
                    )
            samples += trajectory_samples(traj, [adv] * len(traj.turns))
    return samples


def balance_roles(
    samples: Sequence[Sample], planner: str, workers: Sequence[str], planner_weight: float = 0.5
) -> list[Sample]:
    """Set each sample's weight to ``c_r / N_r`` so that token-mean aggregation gives
    ``sum_r c_r * (token-mean of role r)`` (see the module docstring). Roles with no generated
    token drop out and the remaining ``c_r`` are renormalised."""
    tokens: dict[str, int] = {}
    for s in samples:
        tokens[s.agent] = tokens.get(s.agent, 0) + s.num_generated
    present_workers = [w for w in workers if tokens.get(w, 0) > 0]
    shares: dict[str, float] = {}
    if tokens.get(planner, 0) > 0:
        shares[planner] = planner_weight if present_workers else 1.0
    for w in present_workers:
        shares[w] = (1.0 - planner_weight if planner in shares else 1.0) / len(present_workers)
    total = sum(shares.values())
    for s in samples:
        if s.agent not in shares:
            raise ValueError(f"sample of agent {s.agent!r}, which is neither planner nor worker")
        s.weight = shares[s.agent] / total / tokens[s.agent]
    return list(samples)


class MATPO(PolicyGradientAlgorithm[MATPOConfig]):
    """One shared policy trained on planner and worker turns with inherited advantages."""

    name: ClassVar[str] = "matpo"

    def _roles(self) -> list[str]:
        return [self.config.planner, *self.config.workers]

    def _one_policy(self) -> ConfigError:
        return ConfigError(
            "MATPO trains ONE policy object playing every role: pass the same trainable "
            f"policy for {self._roles()} (and no other trainable agent); from a run config keep "
            "policies.share true (with --lora: one adapter shared by every role)"
        )

    def check_team(self, agents: Sequence[str], trainable: Sequence[str]) -> None:
        missing = [r for r in self._roles() if r not in agents]
        if missing:
            raise ConfigError(f"MATPO roles {missing} are not agents of this env: {list(agents)}")
        if set(trainable) != set(self._roles()):
            raise self._one_policy()

    def select_trainable(self, groups: PolicyGroups) -> PolicyGroups:
        self.check_team(list(self.policies), list(self.trainable))
        if len(groups) != 1:  # the roles' agents are trainable, but not as one policy object
            raise self._one_policy()
        return groups

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        cfg = self.config
        reward_fn = component_reward(cfg.reward_component) if cfg.reward_component else step_rewards
        samples: list[Sample] = []
        for group in group_episodes(episodes):
            samples += matpo_samples(
                group, cfg.planner, cfg.workers, scale=cfg.scale, reward_fn=reward_fn
            )
        if cfg.balance:
            balance_roles(samples, cfg.planner, cfg.workers, cfg.planner_weight)
        (key,) = self.groups
        return {key: samples}

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        samples = self.build_samples(episodes)
        metrics = self.learn(samples)
        for role in (self.config.planner, *self.config.workers):
            metrics[f"{role}/tokens"] = float(
                sum(s.num_generated for ss in samples.values() for s in ss if s.agent == role)
            )
        return metrics
