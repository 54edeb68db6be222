"""MATPO — one LLM trained as planner and worker(s) at once (design; lands with web search).

Mo et al. "Multi-Agent Tool-Integrated Policy Optimization" (arXiv:2510.04678, 2025).
Reference code: github.com/mzf666/MATPO.

One policy object plays several roles, chosen by role prompt: a **planner** that decomposes the
task and delegates sub-queries, and **workers** that answer a sub-query with tools (search,
browse) and report back. Only the planner's final answer is scored. In llm_marl the roles are
agents of one env (``planner``, ``worker``) that share one policy object, so the
:class:`~llm_marl.algos.base.PolicyGradientAlgorithm` gives them ONE optimizer; each worker turn records the
planner turn that spawned it in :attr:`Turn.parent <llm_marl.rollout.Turn.parent>` as
``("planner", k)``.

Credit assignment
    The ``G`` episodes of a task form the group. The planner's turn ``k`` gets its group-relative
    advantage (GRPO: ``(R - mean) / std`` of the returns at turn index ``k``). A worker turn
    inherits the advantage of the planner turn that spawned it: the sub-agent's work is good
    exactly when the plan it served ended well. A worker turn without a parent is an error (the
    env must say which call spawned it).
Normalisation
    Worker transcripts (tool results, long pages) can hold far more generated tokens than the
    planner's. A plain token-mean would let them swamp the planner's gradient. MATPO balances
    the roles: the loss is ``sum_r c_r * token_mean_r`` — a token-mean *within* each role,
    mixed with weights ``c_r`` (``planner_weight`` for the planner, the rest shared equally by
    the worker roles). It is implemented with per-sample weights ``c_r / N_r`` (``N_r``: the
    generated tokens of role ``r`` in the batch), which the token-mean aggregation of
    :func:`~llm_marl.algos.update.policy_gradient_update` turns into exactly that mixture.

The web-search env that produces planner/worker episodes comes later; :func:`matpo_samples`
and :func:`balance_roles` are complete and unit-tested on hand-built episodes, and
:class:`MATPO` runs on any env whose worker turns carry parents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from llm_marl.algos.advantages import (
    Baseline,
    RewardFn,
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
from llm_marl.rollout.types import Episode, group_episodes


@dataclass
class MATPOConfig(PGConfig):
    """MATPO hyperparameters (GRPO-style defaults; tune per task)."""

    lr: float = 1e-6
    """AdamW learning rate."""
    clip_high: float | None = 0.28
    """Clip-higher upper range (DAPO's ``0.28``; not a value taken from MATPO's release)."""
    aggregation: Aggregation = "token-mean"
    """Must stay ``token-mean``: role balancing is expressed through it."""
    planner: str = "planner"
    """The agent whose turns are scored and whose advantages workers inherit."""
    workers: tuple[str, ...] = ("worker",)
    """Agents whose turns are spawned by planner turns (``Turn.parent``)."""
    planner_weight: float = 0.5
    """Share of the loss given to the planner's tokens (the workers share the rest equally);
    ``None``-like behaviour (a plain token-mean over all roles) is ``balance=False``."""
    balance: bool = True
    """Balance roles (see the module docstring); False: one token-mean over every token."""
    gamma: float = 1.0
    """Discount of the planner's multi-turn returns."""
    baseline: Baseline = "mean"
    """Group baseline over the planner's returns."""
    scale: Scale = "std"
    """Divide by the group's std (GRPO)."""
    reward_component: str | None = None
    """Learn from this reward component instead of the joint reward."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline(self.baseline, self.scale)
        self.workers = tuple(self.workers)
        if self.aggregation != "token-mean":
            raise ValueError("MATPO balances roles through token-mean aggregation; keep it")
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
    gamma: float = 1.0,
    baseline: Baseline = "mean",
    scale: Scale = "std",
    reward_fn: RewardFn = step_rewards,
) -> list[Sample]:
    """Samples of one task group: planner turns with their group advantage, worker turns with
    the advantage of the planner turn that spawned them (weights are left at 1)."""
    planner_adv = turn_advantages(group, planner, gamma, baseline, scale, reward_fn)
    samples: list[Sample] = []
    for episode, p_adv in zip(group, planner_adv):
        samples += trajectory_samples(episode.trajectories[planner], p_adv)
        for worker in workers:
            traj = episode.trajectories.get(worker)
            if traj is None:
                raise KeyError(
                    f"episode {episode.task_id!r} has no trajectory for worker {worker!r}; "
                    f"agents are {sorted(episode.trajectories)}"
                )
            inherited = []
            for i, turn in enumerate(traj.turns):
                if turn.parent is None or turn.parent[0] != planner:
                    raise ValueError(
                        f"turn {i} of worker {worker!r} in episode {episode.task_id!r} has parent "
                        f"{turn.parent!r}; every worker turn must name the planner turn that "
                        f"spawned it, e.g. Turn.parent = ({planner!r}, k)"
                    )
                k = turn.parent[1]
                if not 0 <= k < len(p_adv):
                    raise ValueError(
                        f"turn {i} of worker {worker!r} names planner turn {k}, but the planner "
                        f"took {len(p_adv)} turns in episode {episode.task_id!r}"
                    )
                inherited.append(p_adv[k])
            samples += trajectory_samples(traj, inherited)
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

    def __init__(self, config: MATPOConfig | None = None) -> None:
        super().__init__(config or MATPOConfig())

    def select_trainable(self, groups: PolicyGroups) -> PolicyGroups:
        roles = [self.config.planner, *self.config.workers]
        missing = [r for r in roles if r not in self.policies]
        if missing:
            raise ValueError(
                f"MATPO roles {missing} are not agents of this env: {list(self.policies)}"
            )
        if len(groups) != 1 or set(next(iter(groups.values()))[1]) != set(roles):
            raise ValueError(
                "MATPO trains ONE policy object playing every role: pass the same trainable "
                f"policy for {roles} (and no other trainable agent)"
            )
        return groups

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        cfg = self.config
        reward_fn = component_reward(cfg.reward_component) if cfg.reward_component else step_rewards
        samples: list[Sample] = []
        for group in group_episodes(episodes):
            samples += matpo_samples(
                group,
                cfg.planner,
                cfg.workers,
                gamma=cfg.gamma,
                baseline=cfg.baseline,
                scale=cfg.scale,
                reward_fn=reward_fn,
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
