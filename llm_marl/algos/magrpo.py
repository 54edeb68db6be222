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
* **Two multi-turn rollouts.** ``rollout="linear"`` (the default) plays ``G`` independent
  episodes per task; turn ``t``'s baseline is then over episodes whose histories differ (valid,
  but noisier). ``rollout="tree"`` is CoMLRL's: every joint action branches into ``G`` children
  (:func:`~llm_marl.rollout.tree.collect_tree`, ``G`` = the Trainer's ``group_size``), a joint
  action's return is its reward plus ``gamma`` times the mean return of its children, and its
  baseline is over its siblings, the ``G`` joint actions sampled from the same history
  (:func:`~llm_marl.algos.advantages.tree_advantages`). Each agent's turn at each node of the
  tree is one sample whose prompt is that node's history. ``tree_depth`` caps the depth
  (CoMLRL's ``num_turns``) and ``early_stop`` leaves a sibling group unexpanded when its mean
  reward is above it (CoMLRL's ``early_termination_threshold``). The ``toy-rounds`` preset
  (:mod:`llm_marl.train.presets.magrpo`, with its measured figures) trains two tiny LMs this way
  on CPU.
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

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from llm_marl.algos.advantages import (
    Baseline,
    Scale,
    check_baseline,
    component_reward,
    leaf_component_reward,
    node_reward,
    step_rewards,
    tree_advantages,
    turn_advantages,
)
from llm_marl.algos.base import PolicyGradientAlgorithm
from llm_marl.algos.losses import Aggregation
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig
from llm_marl.policies.base import SamplingParams
from llm_marl.rollout.collect import EnvSource
from llm_marl.rollout.tree import RolloutTree, check_depth, play_tree
from llm_marl.rollout.types import Episode, Trajectory, group_episodes

Rollout = Literal["linear", "tree"]
ROLLOUTS = ("linear", "tree")
Schedule = Literal["step", "buffered"]
SCHEDULES = ("step", "buffered")


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
    """``none``: the raw difference. ``population-std`` divides by the group's population std,
    as CoMLRL's MAGRPO with ``advantage_normalization`` (the paper presets); ``std`` by the
    unbiased std (verl's GRPO). See :mod:`llm_marl.algos.advantages`."""
    reward_component: str | None = None
    """Learn from this reward component (credited at the last step; in a tree, at the leaves)
    instead of the joint reward; ``None``: the joint reward of every step."""
    rollout: Rollout = "linear"
    """``linear``: ``group_size`` independent episodes per task (baseline per turn index over
    episodes). ``tree``: CoMLRL's tree rollout, every joint action branching into
    ``group_size`` children (baseline over siblings that share a history; see the module
    docstring)."""
    tree_depth: int | None = None
    """Tree mode: the most env steps a branch plays (CoMLRL's ``num_turns``); ``None``: until
    its episode ends. A full tree has ``G + G^2 + ... + G^depth`` joint actions."""
    early_stop: float | None = None
    """Tree mode: a sibling group whose mean step reward is strictly above this is not expanded
    (CoMLRL's ``early_termination_threshold``); ``None``: always expand."""
    schedule: Schedule = "step"
    """When the optimizer steps. ``step``: once per training step on all its samples (each
    policy). ``buffered`` (tree mode; CoMLRL 1.4.3's): each policy keeps a buffer of tree
    nodes (a sibling group: the ``G`` joint actions sampled from one history, in the order they
    were sampled) that carries over from one training step to the next; whenever it holds
    ``rollout_buffer_size`` nodes it is emptied: its nodes are split by turn (tree depth), each
    turn's nodes shuffled and cut into batches of ``train_batch_size`` nodes, one optimizer
    step per batch (``MAGRPOTrainer._process_buffer`` / ``_update_from_samples`` in
    comlrl/trainers/reinforce/magrpo.py). The buffer is checkpointed."""
    rollout_buffer_size: int = 2
    """``schedule="buffered"``: nodes per buffer (CoMLRL's ``rollout_buffer_size``, default 2)."""
    train_batch_size: int | None = None
    """``schedule="buffered"``: nodes per optimizer step (CoMLRL's ``train_batch_size``;
    ``None``: ``rollout_buffer_size``, as CoMLRL)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_baseline(self.baseline, self.scale)
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"unknown rollout {self.rollout!r}; choose one of {ROLLOUTS}")
        depth = self.tree_depth
        check_depth(depth, "tree_depth")
        if self.rollout == "linear" and (depth is not None or self.early_stop is not None):
            raise ValueError(
                "tree_depth and early_stop only apply to tree rollouts: set rollout='tree'"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {SCHEDULES}")
        if self.schedule == "buffered" and self.rollout != "tree":
            raise ValueError("schedule='buffered' steps per tree node: set rollout='tree'")
        for name in ("rollout_buffer_size", "train_batch_size"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")


class MAGRPO(PolicyGradientAlgorithm[MAGRPOConfig]):
    """Multi-agent GRPO with a centralised group baseline and one optimizer per agent."""

    name: ClassVar[str] = "magrpo"

    def __init__(self, config: MAGRPOConfig | None = None) -> None:
        super().__init__(config)
        # schedule="buffered": per policy key, the buffered nodes as (turn, samples).
        self.buffers: dict[str, list[tuple[int, list[Sample]]]] = {}

    def collect(
        self,
        env: EnvSource,
        tasks: Sequence[dict[str, Any]],
        *,
        group_size: int,
        sampling: Mapping[str, SamplingParams],
        seed: int | None,
        **options: Any,
    ) -> list[Episode] | list[RolloutTree]:
        """Linear episodes, or with ``rollout="tree"`` one tree per task branching
        ``group_size`` ways."""
        if self.config.rollout == "linear":
            return super().collect(
                env, tasks, group_size=group_size, sampling=sampling, seed=seed, **options
            )
        # Validated where they entered: group_size and share_frozen by the Trainer, the depth
        # by MAGRPOConfig.
        return play_tree(
            env,
            self.policies,
            tasks,
            group_size,
            depth=self.config.tree_depth,
            early_stop=self.config.early_stop,
            sampling=sampling,
            seed=seed,
            **options,
        )

    def update(self, episodes: Sequence[Episode] | Sequence[RolloutTree]) -> dict[str, float]:
        trees = [t for t in episodes if isinstance(t, RolloutTree)]
        if self.config.schedule == "buffered":
            metrics = self._buffered_update(trees)
        else:
            metrics = self.learn(self.build_samples(episodes))
        if trees:
            metrics["tree/nodes"] = sum(len(list(t.nodes())) for t in trees) / len(trees)
        return metrics

    def build_samples(
        self, episodes: Sequence[Episode] | Sequence[RolloutTree]
    ) -> dict[str, list[Sample]]:
        """Samples with MAGRPO's advantages, from linear episodes or (tree mode) trees."""
        trees = [r for r in episodes if isinstance(r, RolloutTree)]
        if self.config.rollout == "tree" or trees:
            if len(trees) != len(episodes) or self.config.rollout != "tree":
                raise TypeError(
                    "MAGRPO(rollout='tree') learns from RolloutTree s (MAGRPO.collect, which the "
                    "Trainer calls, or rollout.collect_tree) and rollout='linear' from Episode s; "
                    f"got {sorted({type(r).__name__ for r in episodes})} with "
                    f"rollout={self.config.rollout!r}"
                )
            return self._tree_samples(trees)
        return self._linear_samples(cast(list[Episode], list(episodes)))

    def _tree_samples(self, trees: list[RolloutTree]) -> dict[str, list[Sample]]:
        """One sample per agent turn per node, advantage over the node's siblings (the same
        team quantity for every agent of the joint action)."""
        samples: dict[str, list[Sample]] = {key: [] for key in self.groups}
        for _, by_key in self._tree_groups(trees):
            for key, group_samples in by_key.items():
                samples[key] += group_samples
        return samples

    def _tree_groups(self, trees: list[RolloutTree]) -> list[tuple[int, dict[str, list[Sample]]]]:
        """Each sibling group of each tree, in the order CoMLRL samples its nodes (a group,
        then each of its joint actions' children, depth first), as ``(depth, key -> samples)``."""
        cfg = self.config
        reward_fn = (
            leaf_component_reward(cfg.reward_component) if cfg.reward_component else node_reward
        )
        out: list[tuple[int, dict[str, list[Sample]]]] = []
        for tree in trees:
            advantages = tree_advantages(tree, cfg.gamma, cfg.baseline, cfg.scale, reward_fn)
            pending = [list(tree.roots)] if tree.roots else []
            while pending:
                group = pending.pop()
                by_key: dict[str, list[Sample]] = {key: [] for key in self.groups}
                for node in group:
                    for key, (policy, agents) in self.groups.items():
                        for agent in agents:
                            turn = node.turns.get(agent)
                            if turn is None:  # not active in this step
                                continue
                            # The turn alone: its prompt is the node's whole history.
                            alone = Trajectory(agent, policy.name, True, [turn])
                            by_key[key] += trajectory_samples(alone, [advantages[node]])
                out.append((group[0].depth, by_key))
                pending += [list(n.children) for n in reversed(group) if n.children]
        return out

    def _buffered_update(self, trees: list[RolloutTree]) -> dict[str, float]:
        """CoMLRL 1.4.3's schedule (see :attr:`MAGRPOConfig.schedule`)."""
        import random

        cfg = self.config
        size = cfg.rollout_buffer_size
        batch = cfg.train_batch_size or size
        rng = random.Random(cfg.seed * 1_000_003 + self.updates)
        batches: dict[str, list[list[Sample]]] = {key: [] for key in self.groups}
        for depth, by_key in self._tree_groups(trees):
            for key, samples in by_key.items():
                if not samples:
                    continue
                buffer = self.buffers.setdefault(key, [])
                buffer.append((depth, samples))
                if len(buffer) < size:
                    continue
                for turn in sorted({d for d, _ in buffer}):
                    nodes = [s for d, s in buffer if d == turn]
                    rng.shuffle(nodes)
                    for start in range(0, len(nodes), batch):
                        chunk = nodes[start : start + batch]
                        batches[key].append([s for node in chunk for s in node])
                buffer.clear()
        metrics: dict[str, float] = {}
        ran = self.run_updates(batches)
        for key in self.groups:
            results = ran[key]
            for result in results:
                self._count_nonfinite(key, result)
            names = {name for r in results for name in r}
            for name in names:
                values = [r[name] for r in results if name in r]
                total = name in ("optimizer_steps", "skipped_steps", "num_samples", "num_tokens")
                metrics[f"{key}/{name}"] = sum(values) if total else sum(values) / len(values)
            metrics[f"{key}/optimizer_steps"] = metrics.get(f"{key}/optimizer_steps", 0.0)
            metrics[f"{key}/buffered_nodes"] = float(len(self.buffers.get(key, [])))
        self.updates += 1
        return {**self._mean_over_policies(metrics), **metrics}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.config.schedule == "buffered":
            state["buffers"] = {
                key: [(d, [dataclasses.asdict(s) for s in samples]) for d, samples in nodes]
                for key, nodes in self.buffers.items()
            }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.buffers = {
            key: [(int(d), [Sample(**s) for s in samples]) for d, samples in nodes]
            for key, nodes in state.get("buffers", {}).items()
        }

    def _linear_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
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
