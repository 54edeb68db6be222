"""`collect_tree`: tree rollouts, where every joint action branches into ``G`` children.

This is how CoMLRL's MAGRPO plays multi-turn episodes (``MAGRPOTrainer._train_step_returns`` in
``comlrl/trainers/reinforce/magrpo.py``): from the start of a task the team samples ``G`` joint
actions (the ``g``-th completion of every agent, CoMLRL's ``joint_mode="aligned"``); from the
state each joint action leads to, it samples ``G`` joint actions again, and so on for every
env step. The ``G`` joint actions sampled from one state are *siblings*: they share their whole
history (the same prompts, token for token), so comparing their returns compares actions, not
histories — the baseline of the linear rollout (:func:`~llm_marl.rollout.collect`, each turn's
baseline over ``G`` episodes whose histories differ) is valid but noisier. The returns and
advantages computed on a tree live in :mod:`llm_marl.algos.advantages` (:func:`tree_returns`,
:func:`tree_advantages`); MAGRPO trains on trees with ``MAGRPOConfig(rollout="tree")``.

* **Early stop** (CoMLRL's ``early_termination_threshold``): a sibling group whose *mean reward*
  (the rewards of this step, not returns) is strictly above ``early_stop`` is not expanded: its
  joint actions are leaves (:attr:`TreeNode.stopped_early`).
* **Depth**: a node whose episode ended (terminated or truncated by the env) is a leaf; so is
  a node at ``depth`` (its episode is cut there and marked truncated). ``depth=None`` plays
  every branch to the end of its episode (the env's ``max_steps`` bounds it). A full tree has
  ``G + G^2 + ... + G^depth`` nodes.
* **Batching**: every level of every tree is generated together, one ``generate`` call per
  (policy, sampling) pair per level, never one per node.
* **Shared frozen requests** (``share_frozen``, as in :func:`~llm_marl.rollout.collect`): the
  group is a sibling group, so a frozen agent named there is asked once per sibling group and
  its ``G`` siblings differ only in the other agents' actions.
* **Branching a state** replays its history: a child group needs ``G`` envs in the state its
  parent's joint action led to. The parent's own env is reused for the first child; each other
  one is a fresh env reset with the tree's seed and task and stepped through the joint actions
  of the path. Replays run concurrently in the thread pool, like steps. Every replayed
  observation and reward is checked against the recorded one: an env that does not reproduce
  its history from its seed and the actions (a ``FrozenAgents`` partner that samples, a live
  web service) fails the tree with an error that says so, and when every tree that needed a
  replay failed that way ``collect_tree`` raises, because the env cannot be played as a tree.
  Sandboxed envs (coding) replay fine: the history's programs are simply run again.

Faults: a tree in which a policy request or an env fails stops growing and is returned with
:attr:`RolloutTree.error` set (its sibling baselines are incomplete, so training drops it
whole, like an errored episode).

Every tree of a task is reset with seed ``seed + task index`` (all its envs share one seed, so
siblings share their start state).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from llm_marl.checks import check_run_seed
from llm_marl.envs.vector import VectorEnv
from llm_marl.policies.base import Completion, Policy, SamplingParams, per_agent_sampling
from llm_marl.rollout.collect import (
    FAILED_WARN_FRACTION,
    EnvSource,
    StreamEntry,
    _Identity,
    _make_one,
    _parent_of,
    _resolve_tasks,
    check_policies,
    check_share_frozen,
    generate_shared,
    group_id,
    record_turn,
    step_sampling,
    stream_context,
)
from llm_marl.rollout.types import Episode, Trajectory, Turn


@dataclass(eq=False)
class TreeNode:
    """One joint action of a rollout tree: the turns of the agents that acted in one env step
    from one history, and what the env did with them."""

    depth: int
    """The env step of this joint action (0: the first step of the episode)."""
    index: int
    """Position among its siblings (``0 .. G-1``)."""
    turns: dict[str, Turn]
    """The turn of each agent that acted (the active agents of this step)."""
    reward: float = 0.0
    """Joint reward of this step."""
    reward_components: dict[str, float] = field(default_factory=dict)
    """Components of the reward reported with this step."""
    terminated: bool = False
    """The env ended the episode with this step."""
    truncated: bool = False
    """The episode was cut after this step (the env's ``max_steps``, or the tree's ``depth``)."""
    stopped_early: bool = False
    """Not expanded because its sibling group's mean reward passed ``early_stop``."""
    error: str | None = None
    """Why this joint action could not be played (its tree is then failed)."""
    infos: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    """The env's infos after this step."""
    observations: dict[str, Any] = field(default_factory=dict, repr=False)
    """The env's observations after this step (what the children's agents see; replays are
    checked against them)."""
    children: list[TreeNode] = field(default_factory=list)
    """The ``G`` joint actions sampled from the state this one led to (empty for a leaf)."""
    parent: TreeNode | None = field(default=None, repr=False)
    """The joint action before this one (``None`` at the root level)."""

    @property
    def actions(self) -> dict[str, str]:
        """The joint action the env received: ``{agent: completion text}``."""
        return {agent: turn.text for agent, turn in self.turns.items()}

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def path(self) -> list[TreeNode]:
        """The joint actions from the start of the episode to this one (inclusive)."""
        out: list[TreeNode] = []
        node: TreeNode | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out[::-1]


@dataclass(eq=False)
class RolloutTree:
    """The rollout tree of one task: ``G`` root joint actions, each with its subtree."""

    task_id: str
    task_index: int
    """Index of the task in the batch given to :func:`collect_tree`."""
    task: dict[str, Any] = field(repr=False)
    seed: int | None
    """The seed every env of this tree was reset with."""
    policies: dict[str, tuple[str, bool]] = field(repr=False)
    """``agent -> (policy name, trainable)`` of the team that played it."""
    roots: list[TreeNode] = field(default_factory=list)
    """The ``G`` joint actions sampled from the start state (siblings)."""
    observations: dict[str, Any] = field(default_factory=dict, repr=False)
    """The env's observations after ``reset``."""
    error: str | None = None
    """The first fault of the tree (a policy request, the env, a replay that diverged)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def nodes(self) -> Iterator[TreeNode]:
        """Every joint action, level by level (breadth-first)."""
        level = list(self.roots)
        while level:
            yield from level
            level = [child for node in level for child in node.children]

    def sibling_groups(self) -> list[list[TreeNode]]:
        """The groups of joint actions that share a history: the roots, then every non-empty
        ``children`` list (breadth-first)."""
        groups = [self.roots] if self.roots else []
        groups += [node.children for node in self.nodes() if node.children]
        return groups

    def leaves(self) -> list[TreeNode]:
        return [node for node in self.nodes() if node.is_leaf]

    def episodes(self) -> list[Episode]:
        """``G`` linear episodes read off the tree: root ``g``, then each node's first child.

        Each is an ordinary sample of the policy's episodes (a first child is one draw of the
        next joint action given its history), so reward metrics mean the same as in a linear
        rollout with ``group_size=G``. Turns are shared with the tree, not copied.
        """
        out = []
        for g, root in enumerate(self.roots):
            path = [root]
            while path[-1].children:
                path.append(path[-1].children[0])
            out.append(self.path_episode(path, group_index=g))
        return out

    def path_episode(self, path: Sequence[TreeNode], group_index: int = 0) -> Episode:
        """The :class:`Episode` that plays the joint actions of ``path`` (from a root down)."""
        trajectories = {
            agent: Trajectory(
                agent,
                name,
                trainable,
                [node.turns[agent] for node in path if agent in node.turns],
            )
            for agent, (name, trainable) in self.policies.items()
        }
        last = path[-1] if path else None
        return Episode(
            task_id=self.task_id,
            task_index=self.task_index,
            group_index=group_index,
            group_id=group_id(self.task_index, self.task_id),
            trajectories=trajectories,
            step_rewards=[node.reward for node in path],
            reward_components=dict(last.reward_components) if last else {},
            terminated=bool(last and last.terminated),
            truncated=bool(last and last.truncated) or self.error is not None,
            error=self.error,
            final_infos=dict(last.infos) if last else {},
        )


def collect_tree(
    env: EnvSource,
    policies: Mapping[str, Policy],
    tasks: Sequence[dict[str, Any]] | int | None = None,
    branching: int = 2,
    *,
    depth: int | None = None,
    early_stop: float | None = None,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    seed: int | None = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    max_workers: int | None = None,
    on_generate: Callable[[Policy, int], None] | None = None,
    share_frozen: Collection[str] = (),
) -> list[RolloutTree]:
    """Play one rollout tree per task (see the module docstring); trees come back in task order.

    Args:
        env: a registered env id (``env_kwargs`` go to ``make``) or a zero-argument factory;
            the tree creates envs as it grows, so a ready-made ``VectorEnv`` is refused.
        policies: one policy per agent of the env, as for :func:`~llm_marl.rollout.collect`.
        tasks: task dicts; an ``int`` samples that many of the env's tasks; ``None``: all.
        branching: ``G``, the joint actions sampled from every state (>= 2: a sibling
            baseline needs siblings). CoMLRL's ``num_generations``.
        depth: the most env steps a branch plays (``None``: until its episode ends).
            CoMLRL's ``num_turns``.
        early_stop: a sibling group whose mean step reward is strictly above this is not
            expanded. CoMLRL's ``early_termination_threshold``. ``None``: never.
        sampling: one :class:`SamplingParams` for all agents, or one per agent.
        seed: base seed of env resets (task ``i``: ``seed + i``) and of sampling.
        progress: show a progress bar over played joint actions.
        on_generate: called as ``on_generate(policy, batch_size)`` after each generate call.
        share_frozen: frozen agents asked once per sibling group when their requests are
            identical (see the module docstring); trainable agents are refused.
    """
    if isinstance(branching, bool) or not isinstance(branching, int) or branching < 2:
        raise ValueError(
            f"branching must be an int >= 2 (siblings are each other's baseline), got {branching!r}"
        )
    check_depth(depth)
    if seed is not None:
        check_run_seed(seed)
    return play_tree(
        env,
        policies,
        tasks,
        branching,
        depth=depth,
        early_stop=early_stop,
        sampling=sampling,
        seed=seed,
        env_kwargs=env_kwargs,
        progress=progress,
        max_workers=max_workers,
        on_generate=on_generate,
        share_frozen=check_share_frozen(share_frozen, policies),
    )


def check_depth(depth: int | None, name: str = "depth") -> None:
    """Validate a tree's ``depth`` (see :func:`collect_tree`): ``None`` or an int >= 1."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"{name} must be None or an int >= 1, got {depth!r}")


def play_tree(
    env: EnvSource,
    policies: Mapping[str, Policy],
    tasks: Sequence[dict[str, Any]] | int | None,
    branching: int,
    *,
    depth: int | None = None,
    early_stop: float | None = None,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    seed: int | None = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    max_workers: int | None = None,
    on_generate: Callable[[Policy, int], None] | None = None,
    share_frozen: Collection[str] = (),
) -> list[RolloutTree]:
    """:func:`collect_tree` for callers that validated ``branching``, ``depth`` and
    ``share_frozen`` where those values entered (MAGRPO's tree mode: the Trainer's
    ``group_size`` and ``share_frozen``, ``MAGRPOConfig.tree_depth``). Same arguments, same
    trees."""
    if isinstance(env, VectorEnv):
        raise TypeError(
            "collect_tree creates envs as the tree grows: pass an env id or a zero-argument "
            "factory, not a VectorEnv"
        )
    collector = _TreeCollector(
        env,
        env_kwargs,
        policies,
        tasks,
        branching,
        depth,
        None if early_stop is None else float(early_stop),
        sampling,
        seed,
        frozenset(share_frozen),
    )
    try:
        return collector.run(progress, max_workers, on_generate)
    finally:
        collector.close()


@dataclass(eq=False)
class _Slot:
    """An env in the state where one joint action of a tree is about to be sampled."""

    tree: RolloutTree
    parent: TreeNode | None
    index: int
    env: Any
    obs: dict[str, Any]
    infos: dict[str, dict[str, Any]]
    streams: dict[str, StreamEntry]


class _ReplayDiverged(Exception):
    """A replayed history did not reproduce what the tree recorded."""


class _TreeCollector:
    def __init__(
        self,
        env: EnvSource,
        env_kwargs: Mapping[str, Any] | None,
        policies: Mapping[str, Policy],
        tasks: Sequence[dict[str, Any]] | int | None,
        branching: int,
        depth: int | None,
        early_stop: float | None,
        sampling: SamplingParams | Mapping[str, SamplingParams] | None,
        seed: int | None,
        share: frozenset[str],
    ) -> None:
        self.env_source = env
        self.env_kwargs = env_kwargs
        self.branching = branching
        self.depth = depth
        self.early_stop = early_stop
        self.seed = seed
        probe = _make_one(env, env_kwargs)
        self.open_envs: list[Any] = [probe]
        self.spare: Any = probe  # the probe plays the first root
        self.tasks = _resolve_tasks(probe, tasks, seed)
        agents = list(probe.possible_agents)
        self.policies = check_policies(policies, agents)
        self.share = share  # checked where it entered (collect_tree, or the Trainer)
        self.sampling = per_agent_sampling(sampling, agents, default=SamplingParams())
        self.policy_index: dict[int, int] = {}
        for a in agents:
            self.policy_index.setdefault(id(self.policies[a]), len(self.policy_index))
        self.team = {a: (self.policies[a].name, self.policies[a].trainable) for a in agents}
        self.pool: ThreadPoolExecutor | None = None
        self.replays = 0
        self.diverged: list[str] = []

    # ------------------------------------------------------------------ driver
    def run(
        self,
        progress: bool,
        max_workers: int | None,
        on_generate: Callable[[Policy, int], None] | None,
    ) -> list[RolloutTree]:
        self.on_generate = on_generate
        n = len(self.tasks) * self.branching
        self.pool = ThreadPoolExecutor(
            max_workers or min(32, n), thread_name_prefix="llm_marl-tree"
        )
        trees = [
            RolloutTree(
                task_id=str(task["task_id"]),
                task_index=i,
                task=task,
                seed=None if self.seed is None else self.seed + i,
                policies=dict(self.team),
            )
            for i, task in enumerate(self.tasks)
        ]
        bar = tqdm(desc="collect_tree", unit="node", disable=not progress, leave=False)
        slots = self._root_slots(trees)
        level = 0
        while slots:
            nodes = self._play(slots, level)
            bar.update(len(nodes))
            slots = self._expand(nodes, level)
            level += 1
        bar.close()
        if self.replays and len(self.diverged) == self.replays:
            raise RuntimeError(
                f"collect_tree: every replayed history diverged ({self.diverged[0]}). Tree "
                "rollouts branch a state by replaying its history from the same seed and "
                "actions, so the env must be deterministic given them (a FrozenAgents partner "
                "must sample greedily or with a fixed seed; no live services). Use the linear "
                "rollout (collect) for this env."
            )
        self._warn_if_many_failed(trees)
        return trees

    def close(self) -> None:
        for env in self.open_envs:
            _close_quietly(env)
        self.open_envs = []
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``fn(item)`` for each item, concurrently; an exception is returned, not raised."""

        def guarded(item: Any) -> Any:
            try:
                return fn(item)
            except Exception as exc:  # reported on the tree, not swallowed
                return exc

        if len(items) <= 1 or self.pool is None:
            return [guarded(x) for x in items]
        return list(self.pool.map(guarded, items))

    def _new_env(self) -> Any:
        if self.spare is not None:
            env, self.spare = self.spare, None
            return env
        env = _make_one(self.env_source, self.env_kwargs)
        self.open_envs.append(env)
        return env

    def _retire(self, env: Any) -> None:
        _close_quietly(env)
        if env in self.open_envs:
            self.open_envs.remove(env)

    # ------------------------------------------------------------------ level 0
    def _root_slots(self, trees: list[RolloutTree]) -> list[_Slot]:
        pairs = [(tree, g) for tree in trees for g in range(self.branching)]
        envs = [self._new_env() for _ in pairs]

        def reset(k: int) -> Any:
            tree = pairs[k][0]
            return envs[k].reset(seed=tree.seed, options={"task": tree.task})

        results = self._map(reset, list(range(len(pairs))))
        slots = []
        for (tree, g), env, result in zip(pairs, envs, results):
            if isinstance(result, Exception):
                _fail(tree, f"env raised {type(result).__name__} in reset: {result}")
                continue
            obs, infos = result
            error = next((i["error"] for i in infos.values() if i.get("error")), None)
            if error is not None:
                _fail(tree, error)
                continue
            if g == 0:
                tree.observations = obs
            slots.append(_Slot(tree, None, g, env, obs, infos, {}))
        live = {id(s.env) for s in slots if s.tree.ok}
        for env in envs:
            if id(env) not in live:
                self._retire(env)
        return [s for s in slots if s.tree.ok]

    # ------------------------------------------------------------------ one level
    def _play(self, slots: list[_Slot], level: int) -> list[tuple[_Slot, TreeNode]]:
        """Sample one joint action in every slot (batched per policy) and step the envs."""
        requests: dict[tuple[_Identity, SamplingParams], list[tuple[int, str]]] = {}
        turns: list[dict[str, Turn]] = [{} for _ in slots]
        errors: list[str | None] = [None] * len(slots)
        for k, slot in enumerate(slots):
            active = [a for a in slot.env.agents if slot.infos.get(a, {}).get("active")]
            if not active:
                errors[k] = f"the env of task {slot.tree.task_id!r} is live but nobody is active"
            for agent in active:
                key = (_Identity(self.policies[agent]), self.sampling[agent])
                requests.setdefault(key, []).append((k, agent))
        streams: list[dict[str, StreamEntry]] = [dict(s.streams) for s in slots]
        for (ident, sampling), reqs in requests.items():
            policy = ident.obj
            conversations = [slots[k].obs[agent] for k, agent in reqs]
            contexts = [stream_context(slots[k].streams.get(a), slots[k].obs[a]) for k, a in reqs]
            # The group of a shared request: its sibling group (one tree, one parent).
            keys = [
                (slots[k].tree.task_index, id(slots[k].parent), a) if a in self.share else None
                for k, a in reqs
            ]
            completions, shared = generate_shared(
                policy,
                step_sampling(sampling, self.seed, level, self.policy_index[id(policy)]),
                conversations,
                contexts,
                keys,
                self.on_generate,
            )
            for (k, agent), completion, copy in zip(reqs, completions, shared):
                if not isinstance(completion, Completion):
                    errors[k] = errors[k] or completion
                    continue
                slot = slots[k]
                turn, entry = record_turn(
                    agent,
                    level,
                    slot.obs[agent],
                    completion,
                    slot.streams.get(agent),
                    _parent_of(slot.infos.get(agent, {})),
                    copy,
                )
                turns[k][agent] = turn
                if entry is not None:
                    streams[k][agent] = entry
        nodes = []
        for k, slot in enumerate(slots):
            node = TreeNode(depth=level, index=slot.index, turns=turns[k], parent=slot.parent)
            node.error = errors[k]
            nodes.append((slot, node))
            slot.streams = streams[k]
            if slot.parent is None:
                slot.tree.roots.append(node)
            else:
                slot.parent.children.append(node)
        stepped = [(slot, node) for slot, node in nodes if node.error is None]
        results = self._map(lambda pair: pair[0].env.step(pair[1].actions), stepped)
        for (slot, node), result in zip(stepped, results):
            if isinstance(result, Exception):
                node.error = f"env raised {type(result).__name__} in step: {result}"
                continue
            obs, rewards, terms, truncs, infos = result
            first: Mapping[str, Any] = next(iter(infos.values()), {})
            node.reward = float(next(iter(rewards.values()), 0.0))
            node.reward_components = dict(first.get("reward_components", {}))
            node.terminated = any(terms.values())
            node.truncated = any(truncs.values())
            node.infos, node.observations = infos, obs
            node.error = first.get("error")
            slot.obs, slot.infos = obs, infos
        for slot, node in nodes:
            if node.error is not None:
                _fail(slot.tree, node.error)
        return nodes

    # ------------------------------------------------------------------ branching
    def _expand(self, nodes: list[tuple[_Slot, TreeNode]], level: int) -> list[_Slot]:
        """The slots of the next level: ``G`` per expanded joint action (histories replayed)."""
        groups: dict[int, list[tuple[_Slot, TreeNode]]] = {}
        for slot, node in nodes:
            key = id(slot.parent) if slot.parent is not None else id(slot.tree)
            groups.setdefault(key, []).append((slot, node))
        keep: list[tuple[_Slot, TreeNode]] = []
        retire: list[Any] = []
        for group in groups.values():
            tree = group[0][0].tree
            if not tree.ok:
                retire += [slot.env for slot, _ in group]
                continue
            mean = sum(node.reward for _, node in group) / len(group)
            stop = self.early_stop is not None and mean > self.early_stop
            for slot, node in group:
                if not slot.env.agents:  # the episode ended
                    retire.append(slot.env)
                elif self.depth is not None and level + 1 >= self.depth:
                    node.truncated = True  # the tree's depth cuts the episode here
                    retire.append(slot.env)
                elif stop:
                    node.stopped_early = True
                    retire.append(slot.env)
                else:
                    keep.append((slot, node))
        for env in retire:
            self._retire(env)
        children: list[_Slot] = []
        replays: list[tuple[_Slot, Any, TreeNode]] = []
        for slot, node in keep:
            first = _Slot(slot.tree, node, 0, slot.env, slot.obs, slot.infos, slot.streams)
            children.append(first)
            for g in range(1, self.branching):
                child = _Slot(slot.tree, node, g, None, slot.obs, slot.infos, slot.streams)
                children.append(child)
                replays.append((child, self._new_env(), node))
        self.replays += len(replays)
        results = self._map(lambda job: _replay(job[1], job[0].tree, job[2]), replays)
        for (child, env, _), result in zip(replays, results):
            child.env = env
            if isinstance(result, _ReplayDiverged):
                self.diverged.append(str(result))
                _fail(child.tree, str(result))
            elif isinstance(result, Exception):
                _fail(child.tree, f"env raised {type(result).__name__} while replaying: {result}")
        out = []
        for child in children:
            if child.tree.ok:
                out.append(child)
            elif child.env is not None:
                self._retire(child.env)
        return out

    def _warn_if_many_failed(self, trees: list[RolloutTree]) -> None:
        failed = [t for t in trees if not t.ok]
        if failed and len(failed) >= max(1.0, FAILED_WARN_FRACTION * len(trees)):
            warnings.warn(
                f"collect_tree: {len(failed)} of {len(trees)} tree(s) failed (training drops "
                f"them whole). First error: {failed[0].error}",
                RuntimeWarning,
                stacklevel=4,
            )


def _replay(env: Any, tree: RolloutTree, node: TreeNode) -> None:
    """Bring a fresh ``env`` to the state after ``node`` by replaying its path; check that every
    observation and reward matches the tree's record (raises :class:`_ReplayDiverged`)."""
    obs, _ = env.reset(seed=tree.seed, options={"task": tree.task})
    where = f"task {tree.task_id!r}"
    if obs != tree.observations:
        raise _ReplayDiverged(f"{where}: the observations after reset differ")
    for step in node.path():
        obs, rewards, *_ = env.step(step.actions)
        reward = float(next(iter(rewards.values()), 0.0))
        if reward != step.reward or obs != step.observations:
            what = "reward" if reward != step.reward else "observations"
            raise _ReplayDiverged(
                f"{where}: replaying step {step.depth} gave a different {what} than the "
                "recorded one"
            )


def _fail(tree: RolloutTree, error: str) -> None:
    if tree.error is None:
        tree.error = error


def _close_quietly(env: Any) -> None:
    # Best effort: the tree is done with this env either way.
    with contextlib.suppress(Exception):
        env.close()


def as_episodes(rollouts: Sequence[Episode | RolloutTree]) -> list[Episode]:
    """Episodes as they are, and each tree as its :meth:`RolloutTree.episodes` (metrics)."""
    out: list[Episode] = []
    for r in rollouts:
        out += r.episodes() if isinstance(r, RolloutTree) else [r]
    return out
