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

import json
import math
from collections.abc import Callable, Sequence
from typing import Literal

from llm_marl.errors import ConfigError
from llm_marl.rollout.tree import RolloutTree, TreeNode
from llm_marl.rollout.types import Episode, Turn

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


_PICK_ANOTHER = "set algorithm.reward_component to one of them, or to null (the joint reward)"
"""How a run config fixes a reward component the env does not report (a ConfigError: the
command line prints it as one line)."""


def component_reward(name: str) -> RewardFn:
    """A :data:`RewardFn` that learns from one reward component, credited at the last step.

    E.g. ``component_reward("success")`` turns a shaped reward into the binary correctness
    signal of AgentPO. Raises if an episode does not report the component.
    """

    def fn(episode: Episode) -> list[float]:
        if name not in episode.reward_components:
            raise ConfigError(
                f"episode {episode.task_id!r} has no reward component {name!r}; it reports "
                f"{sorted(episode.reward_components)}: {_PICK_ANOTHER}"
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
            raise ConfigError(
                f"a leaf of the tree (step {node.depth}) has no reward component {name!r}; it "
                f"reports {sorted(node.reward_components)}: {_PICK_ANOTHER}"
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


# --- The zoo: credit assignment of other multi-agent LLM RL papers, on the same episodes. ---


def agent_turn_advantages(
    group: Sequence[Episode],
    agents: Sequence[str],
    gamma: float = 1.0,
    scale: Scale = "std",
    reward_fn: RewardFn = step_rewards,
) -> dict[str, list[list[float]]]:
    """AT-GRPO's agent- and turn-wise groups (PettingLLMs; Zhao et al., "Stronger Together:
    On-Policy Reinforcement Learning for Collaborative LLMs", arXiv:2510.11062).

    Every ``(agent, turn index)`` of one task's episodes is a group of its own: agent ``i``'s
    ``k``-th turns are compared only with each other, ``A = (R - mean) / (std + eps)`` (GRPO's
    normalisation, ``scale="std"``), where ``R`` is the turn's discounted return. Returns
    ``agent -> adv[e][k]``. On linear rollouts a group at ``k > 0`` compares turns whose
    histories differ; PettingLLMs' tree sampling (K candidates per agent per turn from one
    state) is what makes them share it.

    >>> from llm_marl.rollout.types import Trajectory, Turn
    >>> def ep(i, r):  # agent "a" acts at steps 0 and 1
    ...     turns = [Turn("a", 0, "x"), Turn("a", 1, "y")]
    ...     return Episode("t", 0, i, {"a": Trajectory("a", "p", True, turns)}, [r, 1.0 - r])
    >>> by_agent = agent_turn_advantages([ep(0, 1.0), ep(1, 0.0)], ["a"], 0.0, "none")
    >>> adv = by_agent["a"]
    >>> adv[0], adv[1]  # episode 0's turns, episode 1's: rewards (1, 0) and (0, 1)
    ([0.5, -0.5], [-0.5, 0.5])
    """
    return {
        agent: turn_advantages(group, agent, gamma, "mean", scale, reward_fn) for agent in agents
    }


def per_agent_advantages(
    group: Sequence[Episode],
    agent: str,
    gamma: float = 1.0,
    scale: Scale = "std",
    reward_fn: RewardFn = step_rewards,
) -> list[list[float]]:
    """Dr. MAS's agent-wise normalisation (Feng et al., "Dr. MAS: Stable Reinforcement
    Learning for Multi-Agent LLM Systems", 2026; code: github.com/langfengQ/DrMAS).

    The mean and std are the statistics of ``agent``'s own returns: every turn the agent took in
    the group's episodes, pooled across turns (the release's GRPO with the group id extended by
    the agent id and ``compute_mean_std_cross_steps``). Each agent is thus normalised by its own
    reward distribution rather than one statistic over all agents of the group, which is what
    the paper shows keeps the gradient norms of agents with different reward scales stable.
    Returns ``adv[e][k]`` for turn ``k`` of episode ``e``. A one-turn group carries no signal
    (advantage 0, :func:`group_advantages`' rule; verl's code would give it ``R`` itself).

    >>> from llm_marl.rollout.types import Trajectory, Turn
    >>> def ep(i, rewards):  # agent "a" acts at every step
    ...     turns = [Turn("a", s, "x") for s in range(len(rewards))]
    ...     return Episode("t", 0, i, {"a": Trajectory("a", "p", True, turns)}, rewards)
    >>> adv = per_agent_advantages([ep(0, [1.0, 0.0]), ep(1, [0.0])], "a", 0.0, scale="none")
    >>> [round(a, 3) for row in adv for a in row]  # pooled returns (1, 0, 0): mean 1/3
    [0.667, -0.333, -0.333]
    """
    returns = [turn_returns(ep, agent, gamma, reward_fn) for ep in group]
    pooled = group_advantages([r for rs in returns for r in rs], "mean", scale)
    out: list[list[float]] = []
    start = 0
    for rs in returns:
        out.append(pooled[start : start + len(rs)])
        start += len(rs)
    return out


class MovingBaseline:
    """RAE's baseline (SPIRAL: Liu et al., "SPIRAL: Self-Play on Zero-Sum Games Incentivizes
    Reasoning via Multi-Agent Multi-Turn Reinforcement Learning", arXiv:2506.24119, Algorithm 1;
    prime-rl's multi-agent envs use the same role-conditioned estimate).

    One exponential moving average per key (``(env, agent)``), starting at 0: each batch moves
    ``b <- decay * b + (1 - decay) * mean(batch returns of the key)`` and the key's advantages
    are ``A = R - b`` with the moved ``b``. Its state is part of the algorithm's checkpoint.

    >>> b = MovingBaseline(decay=0.5)
    >>> b.advantages(("env", "a"), [1.0, 0.0])
    [0.75, -0.25]
    >>> b.advantages(("env", "a"), [1.0, 1.0])
    [0.375, 0.375]
    """

    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.values: dict[tuple[str, str], float] = {}

    def advantages(self, key: tuple[str, str], returns: Sequence[float]) -> list[float]:
        """Move the key's baseline with this batch's returns; ``R - b`` for each."""
        r = [float(x) for x in returns]
        if not r:
            return []
        if not all(math.isfinite(x) for x in r):
            raise ValueError(f"returns must be finite: {r}")
        b = self.decay * self.values.get(key, 0.0) + (1.0 - self.decay) * sum(r) / len(r)
        self.values[key] = b
        return [x - b for x in r]

    def state_dict(self) -> dict[str, list[list[str | float]]]:
        """The baselines as JSON-friendly rows ``[env, agent, value]``."""
        return {"values": [[env, agent, v] for (env, agent), v in self.values.items()]}

    def load_state_dict(self, state: dict[str, list[list[str | float]]]) -> None:
        """Restore :meth:`state_dict`'s rows."""
        self.values = {(str(e), str(a)): float(v) for e, a, v in state.get("values", [])}


def anchor_key(turn: Turn) -> str:
    """The state a turn acted from, as a string: the exact token prompt when the policy records
    one, else the observed conversation (text-only policies). Two turns with equal keys acted
    from identical states (GiGPO's anchor states)."""
    if turn.prompt_ids:
        return "ids:" + ",".join(map(str, turn.prompt_ids))
    return "chat:" + json.dumps(turn.observation, sort_keys=True, default=str)


def step_group_advantages(
    group: Sequence[Episode],
    agent: str,
    gamma: float = 0.95,
    step_weight: float = 1.0,
    scale: Scale = "none",
    reward_fn: RewardFn = step_rewards,
) -> list[list[float]]:
    """GiGPO's group-in-group advantages (Feng et al., "Group-in-Group Policy Optimization for
    LLM Agent Training", arXiv:2505.10978; code: verl-agent, ``gigpo/core_gigpo.py``).

    * Episode level (Eq. 3): ``A^E = R_e - mean(R)`` over the group's episode totals.
    * Step level (Eqs. 5-7): the turns of ``agent`` across the group's episodes are clustered by
      identical anchor state (:func:`anchor_key`); each turn's discounted return-to-go
      (``gamma``, the release's default 0.95) is compared with its cluster's mean.
    * Combined (Eq. 8): ``A = A^E + step_weight * A^S``.

    ``scale="none"`` is the release's default ``mode="mean_norm"``; ``"std"`` its
    ``mean_std_norm``. A cluster of one turn has ``A^S = 0``, as in the release; a group of one
    episode has ``A^E = 0`` (the release would keep ``R``). Returns ``adv[e][k]``.

    >>> from llm_marl.rollout.types import Trajectory, Turn
    >>> def ep(i, rewards, states):
    ...     turns = [Turn("a", s, "x", observation=[{"content": o}]) for s, o in enumerate(states)]
    ...     return Episode("t", 0, i, {"a": Trajectory("a", "p", True, turns)}, rewards)
    >>> group = [ep(0, [0.0, 1.0], ["s", "u"]), ep(1, [0.0, 0.0], ["s", "u"])]
    >>> adv = step_group_advantages(group, "a", gamma=1.0)
    >>> adv[0], adv[1]
    ([1.0, 1.0], [-1.0, -1.0])
    """
    totals = [sum(reward_fn(ep)) for ep in group]
    episode_adv = group_advantages(totals, "mean", scale)
    returns = [turn_returns(ep, agent, gamma, reward_fn) for ep in group]
    clusters: dict[str, list[tuple[int, int]]] = {}
    for e, ep in enumerate(group):
        for k, turn in enumerate(ep.trajectories[agent].turns):
            clusters.setdefault(anchor_key(turn), []).append((e, k))
    step_adv: list[list[float]] = [[0.0] * len(r) for r in returns]
    for members in clusters.values():
        advs = group_advantages([returns[e][k] for e, k in members], "mean", scale)
        for (e, k), a in zip(members, advs):
            step_adv[e][k] = a
    return [[episode_adv[e] + step_weight * a for a in step_adv[e]] for e in range(len(group))]
