"""Advantages: group-relative baselines (GRPO, RLOO) and multi-turn discounted returns.

Everything here is plain arithmetic on rewards; nothing touches a model. The GRPO group is the
``G`` episodes that :func:`llm_marl.rollout.collect` plays on one task (same ``task_index``):

* ``baseline="mean"`` — ``A_i = R_i - mean(R)`` (GRPO, MAGRPO),
* ``baseline="rloo"`` — ``A_i = R_i - mean(R_{j != i})`` (leave-one-out: unbiased),
* ``baseline="none"`` — ``A_i = R_i`` (plain REINFORCE),

optionally divided by the group's standard deviation so that every task weighs the same
whatever its reward spread. Two conventions exist and both are offered, exactly:

* ``scale="std"`` — ``A / (std + eps)`` with the unbiased (``n - 1``) std and ``eps = 1e-6``:
  verl's ``compute_grpo_outcome_advantage`` (``torch.std``, ``epsilon=1e-6``), which the AgentPO
  and MATPO releases train with (``adv_estimator=grpo``; for groups of two or more). TRL's ``GRPOTrainer`` also divides by
  the unbiased std, with ``1e-4`` in place of ``eps``.
* ``scale="population-std"`` — ``A / max(std, eps)`` with the population (``n``) std: CoMLRL's
  MAGRPO (1.4.3, ``comlrl/trainers/reinforce/magrpo.py``, line 1632 of
  ``MAGRPOTrainer._compute_loss_with_gradients``:
  ``std = advantages.std(unbiased=False).clamp(min=1e-6)``). With ``baseline="mean"`` this is
  CoMLRL's ``advantage_normalization=True`` exactly; at ``G = 4`` its advantages are
  ``sqrt(4/3)`` times those of ``"std"``.

A group whose rewards are all equal carries no signal: its advantages are exactly zero.

Multi-turn episodes credit each turn with its discounted return-to-go (:func:`turn_returns`),
and the baseline of turn ``t`` is taken over the group's returns at turn ``t``
(:func:`turn_advantages`). Rollout trees (:func:`llm_marl.rollout.tree.collect_tree`) credit each
joint action with its reward plus the discounted mean return of its children
(:func:`tree_returns`), and its baseline is taken over its siblings, the joint actions sampled
from the same history (:func:`tree_advantages`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from llm_marl.rollout.tree import RolloutTree, TreeNode
from llm_marl.rollout.types import Episode

Baseline = Literal["mean", "rloo", "none"]
Scale = Literal["std", "population-std", "none"]

BASELINES = ("mean", "rloo", "none")
SCALES = ("std", "population-std", "none")


def check_baseline(baseline: str, scale: str) -> None:
    """Raise a clear error for an unknown ``baseline`` / ``scale`` name."""
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose one of {BASELINES}")
    if scale not in SCALES:
        raise ValueError(f"unknown advantage scale {scale!r}; choose one of {SCALES}")


def group_advantages(
    rewards: Sequence[float],
    baseline: Baseline = "mean",
    scale: Scale = "none",
    eps: float = 1e-6,
) -> list[float]:
    """Group-relative advantages of one group's rewards (see the module docstring).

    Examples:
        >>> group_advantages([1.0, 0.0, 0.0, 1.0])
        [0.5, -0.5, -0.5, 0.5]
        >>> [round(a, 3) for a in group_advantages([1.0, 0.0, 0.0], baseline="rloo")]
        [1.0, -0.5, -0.5]
        >>> [round(a, 3) for a in group_advantages([1.0, 0.0, 0.0, 1.0], scale="std")]
        [0.866, -0.866, -0.866, 0.866]
        >>> [round(a, 3) for a in group_advantages([1.0, 0.0, 0.0, 1.0], scale="population-std")]
        [1.0, -1.0, -1.0, 1.0]
    """
    check_baseline(baseline, scale)
    r = [float(x) for x in rewards]
    n = len(r)
    if n == 0:
        return []
    if not all(math.isfinite(x) for x in r):
        # inf passes a NaN check, then inf - inf makes every advantage of the group NaN.
        raise ValueError(f"rewards must be finite: {r}")
    total = sum(r)
    if baseline == "mean":
        adv = [x - total / n for x in r]
    elif baseline == "rloo":
        # One sample has no "others": it carries no baseline information, hence no signal.
        adv = [0.0] * n if n == 1 else [x - (total - x) / (n - 1) for x in r]
    else:
        adv = list(r)
    if scale != "none":
        if n < 2:
            return [0.0] * n
        mean = total / n
        squares = sum((x - mean) ** 2 for x in r)
        if scale == "std":  # verl's: unbiased, eps added
            adv = [a / (math.sqrt(squares / (n - 1)) + eps) for a in adv]
        else:  # CoMLRL's: population std, clamped at eps
            adv = [a / max(math.sqrt(squares / n), eps) for a in adv]
    # Exact zeros for constant groups (float noise would otherwise leak a tiny gradient).
    if baseline != "none" and all(x == r[0] for x in r):
        adv = [0.0] * n
    return adv


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """Return-to-go of each step: ``G_t = sum_{k>=t} gamma^(k-t) r_k``.

    >>> discounted_returns([0.0, 0.0, 1.0], gamma=0.5)
    [0.25, 0.5, 1.0]
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


RewardFn = Callable[[Episode], list[float]]
"""Maps an episode to the per-step rewards to learn from (default: ``episode.step_rewards``)."""


def step_rewards(episode: Episode) -> list[float]:
    """The joint reward of each env step (the default :data:`RewardFn`)."""
    return list(episode.step_rewards)


def component_reward(name: str) -> RewardFn:
    """A :data:`RewardFn` that learns from one reward component, credited at the last step.

    E.g. ``component_reward("success")`` turns a shaped reward into the binary correctness
    signal of AgentPO. Raises if an episode does not report the component.
    """

    def fn(episode: Episode) -> list[float]:
        if name not in episode.reward_components:
            raise KeyError(
                f"episode {episode.task_id!r} has no reward component {name!r}; it reports "
                f"{sorted(episode.reward_components)}"
            )
        steps = max(len(episode.step_rewards), 1)
        return [0.0] * (steps - 1) + [float(episode.reward_components[name])]

    return fn


def turn_returns(
    episode: Episode, agent: str, gamma: float = 1.0, reward_fn: RewardFn = step_rewards
) -> list[float]:
    """Discounted return from each of ``agent``'s turns (rewards from ``reward_fn``).

    The return of a turn taken at env step ``s`` sums the rewards of steps ``s, s+1, ...``, so a
    reward that arrives after a later agent acts (hint -> actor) is credited to the earlier turn.
    """
    to_go = discounted_returns(reward_fn(episode), gamma)
    out = []
    for turn in episode.trajectories[agent].turns:
        out.append(to_go[turn.step] if turn.step < len(to_go) else 0.0)
    return out


def turn_advantages(
    group: Sequence[Episode],
    agent: str,
    gamma: float = 1.0,
    baseline: Baseline = "mean",
    scale: Scale = "none",
    reward_fn: RewardFn = step_rewards,
) -> list[list[float]]:
    """Advantages of every turn of ``agent`` in every episode of one group.

    Returns ``adv[e][k]`` for turn ``k`` of episode ``e``. The baseline of turn index ``k`` is
    computed over the episodes of the group that have a ``k``-th turn (in a single-turn env that
    is the plain GRPO group baseline). With the joint reward this is MAGRPO's centralised
    baseline: every agent sees the same team return.
    """
    returns = [turn_returns(ep, agent, gamma, reward_fn) for ep in group]
    out: list[list[float]] = [[0.0] * len(r) for r in returns]
    depth = max((len(r) for r in returns), default=0)
    for k in range(depth):
        members = [e for e, r in enumerate(returns) if len(r) > k]
        adv = group_advantages([returns[e][k] for e in members], baseline, scale)
        for e, a in zip(members, adv):
            out[e][k] = a
    return out


NodeRewardFn = Callable[[TreeNode], float]
"""Maps a joint action of a rollout tree to the reward to learn from (default: ``node.reward``)."""


def node_reward(node: TreeNode) -> float:
    """The joint reward of the node's step (the default :data:`NodeRewardFn`)."""
    return float(node.reward)


def leaf_component_reward(name: str) -> NodeRewardFn:
    """A :data:`NodeRewardFn` that learns from one reward component, credited at the leaves
    (the tree's counterpart of :func:`component_reward`). Raises if a leaf does not report it."""

    def fn(node: TreeNode) -> float:
        if node.children:
            return 0.0
        if name not in node.reward_components:
            raise KeyError(
                f"a leaf of the tree (step {node.depth}) has no reward component {name!r}; it "
                f"reports {sorted(node.reward_components)}"
            )
        return float(node.reward_components[name])

    return fn


def tree_returns(
    tree: RolloutTree, gamma: float = 1.0, reward_fn: NodeRewardFn = node_reward
) -> dict[TreeNode, float]:
    """The return of every joint action of ``tree``.

    A leaf's return is its reward; an inner node's is ``reward + gamma * mean(children's
    returns)`` (CoMLRL's ``compute_returns`` in ``MAGRPOTrainer._train_step_returns``; CoMLRL
    1.4.3 leaves its ``discount`` unused, i.e. ``gamma = 1``). The mean over the ``G``
    children estimates the value of the state the joint action led to.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    returns: dict[TreeNode, float] = {}
    for node in reversed(list(tree.nodes())):  # breadth-first, reversed: children first
        value = float(reward_fn(node))
        if node.children:
            value += gamma * sum(returns[c] for c in node.children) / len(node.children)
        returns[node] = value
    return returns


def tree_advantages(
    tree: RolloutTree,
    gamma: float = 1.0,
    baseline: Baseline = "mean",
    scale: Scale = "none",
    reward_fn: NodeRewardFn = node_reward,
) -> dict[TreeNode, float]:
    """The advantage of every joint action of ``tree``: :func:`group_advantages` of the returns
    of each sibling group (:meth:`~llm_marl.rollout.tree.RolloutTree.sibling_groups`).

    With the joint reward this is MAGRPO's centralised baseline on a tree: every agent of a
    joint action gets the same advantage, relative to the joint actions sampled from the same
    history (CoMLRL: ``returns - returns.mean()`` per node, ``advantage_mode="mean"``).
    """
    returns = tree_returns(tree, gamma, reward_fn)
    out: dict[TreeNode, float] = {}
    for group in tree.sibling_groups():
        advs = group_advantages([returns[n] for n in group], baseline, scale)
        out.update(zip(group, advs))
    return out
