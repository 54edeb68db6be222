"""`collect`: drive many envs with many policies, batched, and return :class:`Episode` s.

Each step gathers the conversations of all *active* agents across all live envs, makes **one
batched generate call per (policy, sampling) pair**, then steps the envs concurrently in a thread
pool (tools and sandboxes are I/O). It never makes one generate call per env: that is what makes
a 1-5B model rollout fast on a GPU, and even a tiny model on a CPU (see
``benchmarks/rollout_batching.py``).

Groups: every task is played by ``group_size`` copies (the GRPO group); episodes come back
task-major (task 0's G copies, then task 1's, ...). A group is named by
:attr:`Episode.group_id`, which holds the task's *global* index (``task_indices``), so the
episodes of several calls that each play a shard of one batch never merge two tasks' groups.

Seeds are per request, never per batch: copy ``g`` of the task with global index ``i`` is reset
with ``seed + i * group_size + g``, and the request of agent ``a`` at env step ``t`` of that
episode samples with :func:`request_seed` ``(seed, i, g, t, a)``. With a policy that honours
:attr:`SamplingParams.request_seeds` (``HFPolicy``, ``VLLMPolicy``) the same seed gives the same
episodes token for token however the batch is split into calls (or workers); the sampling
log-probs are equal up to float rounding where the model's kernels round differently for
another batch shape.

Shared frozen requests (``share_frozen``): when several episodes of one group ask a frozen agent
the same thing (same policy and sampling, equal conversation and token stream), the policy
samples one completion and every copy gets it. A group then acts from one shared state — with
a sampling frozen actor in ``math_critic-v0``, the ``G`` critiques of a group critique one live
draft — and a greedy frozen agent is simply asked ``G`` times less.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from llm_marl.checks import check_run_seed
from llm_marl.envs.registration import make
from llm_marl.envs.vector import VectorEnv
from llm_marl.policies.base import (
    Completion,
    Policy,
    PolicyError,
    SamplingParams,
    TokenContext,
    per_agent_sampling,
)
from llm_marl.rollout.cost import completion_cost, token_counts
from llm_marl.rollout.types import Episode, Trajectory, Turn

EnvSource = str | Callable[[], Any] | VectorEnv


def collect(
    env: EnvSource,
    policies: Mapping[str, Policy],
    tasks: Sequence[dict[str, Any]] | int | None = None,
    group_size: int = 1,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    seed: int | None = 0,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    max_workers: int | None = None,
    on_generate: Callable[[Policy, int], None] | None = None,
    raise_if_env_always_fails: bool = False,
    share_frozen: Collection[str] = (),
    task_indices: Sequence[int] | None = None,
    executor: Any = None,
) -> list[Episode]:
    """Play ``tasks`` x ``group_size`` episodes and return them task-major.

    Args:
        env: a registered env id (``env_kwargs`` go to ``make``), a zero-argument factory, or a
            :class:`VectorEnv` with exactly ``len(tasks) * group_size`` envs (reused as is).
        policies: one policy per agent of the env (``env.possible_agents``, i.e. after wrappers
            such as ``FrozenAgents``). Several agents may share one policy object: their requests
            go into the same batch.
        tasks: task dicts; an ``int`` samples that many of the env's tasks (seeded); ``None``
            takes all of them.
        group_size: copies per task (G). Copy ``g`` of task ``i`` is reset with seed
            ``seed + i * group_size + g``.
        sampling: one :class:`SamplingParams` for all agents, or one per agent.
        seed: base seed for env resets and for sampling (``None``: unseeded).
        progress: show a progress bar over finished episodes.
        on_generate: called as ``on_generate(policy, batch_size)`` after each generate call
            (metrics, tests).
        raise_if_env_always_fails: re-raise the env's first exception when it raised in *every*
            episode (evaluation sets it: an env that always raises is a bug to report, not a
            result). Off by default, so that training never crashes on env faults.
        share_frozen: frozen agents whose identical requests within one group are sampled once
            (see the module docstring): a request of agent ``a`` in episode ``k`` is served by
            the first request of ``a`` in ``k``'s group with an equal conversation and token
            stream. Every copy's :class:`Turn` records the completion, marked ``shared``.
            Sharing happens within a group only (never across tasks, nor between two agents
            that share a policy object). A trainable agent (or one whose policy object is
            trainable) is refused: its group would hold one sample ``G`` times.
        task_indices: the global index of each task in the batch this call plays a shard of
            (default ``0 .. len(tasks) - 1``). Reset seeds, sampling seeds,
            :attr:`Episode.task_index` and :attr:`Episode.group_id` derive from it, so shards
            of one batch played by separate calls give exactly the episodes of one call.
        executor: an object with this function's signature as a ``collect`` method (e.g.
            :class:`llm_marl.distributed.RayExecutor`): the call is handed to it whole.
            ``None``: play here.

    Faults never crash the batch: an episode whose policy request fails (any exception of the
    call; with OpenAIPolicy only the conversations that failed), whose env raises in ``reset`` or
    ``step``, or whose env reports ``infos[agent]["error"]`` is truncated with ``episode.error``
    set and the others go on. A ``RuntimeWarning`` sums up the losses when at least
    ``FAILED_WARN_FRACTION`` of the episodes failed (see ``raise_if_env_always_fails``).
    ``KeyboardInterrupt`` and other ``BaseException`` s always propagate.
    """
    check_group_size(group_size)
    if seed is not None:
        check_run_seed(seed)
    return play(
        env,
        policies,
        tasks,
        group_size,
        sampling,
        seed,
        env_kwargs=env_kwargs,
        progress=progress,
        max_workers=max_workers,
        on_generate=on_generate,
        raise_if_env_always_fails=raise_if_env_always_fails,
        share_frozen=check_share_frozen(share_frozen, policies),
        task_indices=task_indices,
        executor=executor,
    )


def play(
    env: EnvSource,
    policies: Mapping[str, Policy],
    tasks: Sequence[dict[str, Any]] | int | None,
    group_size: int,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None,
    seed: int | None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: bool = True,
    max_workers: int | None = None,
    on_generate: Callable[[Policy, int], None] | None = None,
    raise_if_env_always_fails: bool = False,
    share_frozen: Collection[str] = (),
    task_indices: Sequence[int] | None = None,
    executor: Any = None,
) -> list[Episode]:
    """:func:`collect` for callers that validated ``group_size`` and ``share_frozen`` where
    those values entered (the Trainer at construction, a Ray env worker for its executor):
    they are checked once, at that edge, and taken as given here. Same arguments, same
    episodes."""
    if executor is not None:
        return executor.collect(
            env,
            policies,
            tasks,
            group_size=group_size,
            sampling=sampling,
            seed=seed,
            env_kwargs=env_kwargs,
            progress=progress,
            max_workers=max_workers,
            on_generate=on_generate,
            raise_if_env_always_fails=raise_if_env_always_fails,
            share_frozen=share_frozen,
            task_indices=task_indices,
        )
    vec, owned, slots = _build_envs(
        env, tasks, group_size, env_kwargs, seed, max_workers, task_indices
    )
    try:
        collector = _Collector(
            vec, slots, policies, group_size, sampling, seed, on_generate, frozenset(share_frozen)
        )
        return collector.run(progress, raise_if_env_always_fails)
    finally:
        if owned:
            vec.close()


def _build_envs(
    env: EnvSource,
    tasks: Sequence[dict[str, Any]] | int | None,
    group_size: int,
    env_kwargs: Mapping[str, Any] | None,
    seed: int | None,
    max_workers: int | None,
    task_indices: Sequence[int] | None = None,
) -> tuple[VectorEnv, bool, list[tuple[int, dict[str, Any]]]]:
    """The VectorEnv that plays ``tasks`` x ``group_size`` episodes, whether this call owns
    it (and closes it), and each env's (global task index, task)."""
    probe = _make_one(env, env_kwargs)
    task_list = _resolve_tasks(probe, tasks, seed)
    indices = check_task_indices(task_indices, len(task_list))
    n = len(task_list) * group_size
    if isinstance(env, VectorEnv):
        if len(env) != n:
            raise ValueError(
                f"the VectorEnv has {len(env)} envs but {len(task_list)} tasks x group_size "
                f"{group_size} = {n} are needed"
            )
        vec, owned = env, False
    else:
        copies = [probe] + [_make_one(env, env_kwargs) for _ in range(n - 1)]
        vec, owned = VectorEnv(copies, max_workers=max_workers), True
    # slot k of the VectorEnv plays (global task index, task): task-major, copies adjacent.
    slots = [(i, t) for i, t in zip(indices, task_list) for _ in range(group_size)]
    return vec, owned, slots


def check_task_indices(task_indices: Sequence[int] | None, n: int) -> list[int]:
    """``task_indices`` (see :func:`collect`) as a list of ``n`` distinct ints >= 0."""
    if task_indices is None:
        return list(range(n))
    out = list(task_indices)
    if len(out) != n:
        raise ValueError(f"task_indices has {len(out)} entries for {n} tasks")
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in out):
        raise ValueError(f"task_indices must be ints >= 0, got {out!r:.80}")
    if len(set(out)) != n:
        raise ValueError(f"task_indices must be distinct, got {out!r:.80}")
    return out


def _make_one(env: EnvSource, env_kwargs: Mapping[str, Any] | None) -> Any:
    if isinstance(env, VectorEnv):
        return env.envs[0]
    if isinstance(env, str):
        return make(env, **(env_kwargs or {}))
    if callable(env):
        if env_kwargs:
            raise ValueError("env_kwargs only apply when env is a registered id")
        return env()
    raise TypeError(
        f"env must be an env id, a zero-argument factory or a VectorEnv, got {type(env).__name__}"
    )


def _resolve_tasks(
    probe: Any, tasks: Sequence[dict[str, Any]] | int | None, seed: int | None
) -> list[dict[str, Any]]:
    if tasks is None or isinstance(tasks, int):
        available = getattr(probe, "tasks", None)
        if not available:
            raise ValueError("this env exposes no .tasks; pass tasks=[...] explicitly")
        if tasks is None:
            return list(available)
        if tasks < 1:
            raise ValueError(f"the number of tasks must be >= 1, got {tasks}")
        import numpy as np

        idx = np.random.default_rng(seed).choice(
            len(available), size=tasks, replace=tasks > len(available)
        )
        return [available[int(i)] for i in idx]
    task_list = list(tasks)
    if not task_list:
        raise ValueError("tasks is empty: nothing to collect")
    for i, t in enumerate(task_list):
        if not isinstance(t, Mapping) or "task_id" not in t:
            raise ValueError(f"task #{i} must be a dict with a 'task_id' key, got {t!r:.80}")
    return task_list


class _Collector:
    def __init__(
        self,
        vec: VectorEnv,
        slots: list[tuple[int, dict[str, Any]]],
        policies: Mapping[str, Policy],
        group_size: int,
        sampling: SamplingParams | Mapping[str, SamplingParams] | None,
        seed: int | None,
        on_generate: Callable[[Policy, int], None] | None,
        share: frozenset[str] = frozenset(),
    ) -> None:
        self.vec = vec
        self.slots = slots
        self.seed = seed
        self.on_generate = on_generate
        agents = list(vec.envs[0].possible_agents)
        self.policies = check_policies(policies, agents)
        self.share = share  # checked where it entered (collect, or the Trainer)
        self.sampling = per_agent_sampling(sampling, agents, default=SamplingParams())
        self.group_size = group_size
        self.agent_index = {a: i for i, a in enumerate(agents)}
        # A stable per-policy number (order of first appearance) to derive sampling seeds from.
        self.policy_index: dict[int, int] = {}
        for a in agents:
            self.policy_index.setdefault(id(self.policies[a]), len(self.policy_index))
        n = len(vec)
        self.episodes = [
            Episode(
                task_id=str(task["task_id"]),
                task_index=ti,
                group_index=k % group_size,
                group_id=group_id(ti, task["task_id"]),
                trajectories={
                    a: Trajectory(a, self.policies[a].name, self.policies[a].trainable)
                    for a in agents
                },
            )
            for k, (ti, task) in enumerate(slots)
        ]
        # Per env and agent: the token stream so far and the text of the agent's last reply.
        self.contexts: list[dict[str, StreamEntry]] = [{} for _ in range(n)]

    def run(self, progress: bool, raise_if_env_always_fails: bool = False) -> list[Episode]:
        vec = self.vec
        n = len(vec)
        # Per slot, from the global task index and the copy: independent of how tasks are split.
        seeds = [
            None if self.seed is None else self.seed + ti * self.group_size + k % self.group_size
            for k, (ti, _) in enumerate(self.slots)
        ]
        options = [{"task": task} for _, task in self.slots]
        results = self._each_env(
            lambda k: vec.envs[k].reset(seed=seeds[k], options=options[k]), range(n)
        )
        obs: list[Any] = [{}] * n
        infos: list[Any] = [{}] * n
        live = [False] * n
        bar = tqdm(total=n, desc="collect", unit="ep", disable=not progress, leave=False)
        env_failures: list[Exception] = []
        for k, result in enumerate(results):
            if isinstance(result, _EnvFailure):
                self._fail(k, result.message)
                env_failures.append(result.exc)
                bar.update(1)
                continue
            obs[k], infos[k] = result
            live[k] = bool(vec.envs[k].agents)
            # setup_episode raised InfrastructureError (or a frozen partner failed): nobody acts
            error = next((i["error"] for i in infos[k].values() if i.get("error")), None)
            if error is not None:
                self._fail(k, error)
                live[k] = False
                bar.update(1)
        step = 0
        while any(live):
            actions: list[dict[str, str] | None] = [None] * n
            requests, stuck = self._requests(obs, infos, live)
            for k in stuck:  # an env bug; it costs this episode only
                self._fail(k, f"env #{k} is live but no agent is active")
                live[k] = False
                bar.update(1)
            for k in range(n):
                if live[k]:
                    actions[k] = {}
            failed: dict[int, str] = {}
            for (policy, sampling), reqs in requests.items():
                completions, shared = self._generate(policy, sampling, reqs, obs, step)
                for (k, agent), completion, copy in zip(reqs, completions, shared):
                    if isinstance(completion, str):  # the batch (or this item) failed
                        failed[k] = completion
                        continue
                    parent = _parent_of(infos[k][agent])
                    self._record(k, agent, step, obs[k][agent], completion, parent, copy)
                    action = actions[k]
                    assert action is not None  # set above for every live env
                    action[agent] = completion.text
            for k, error in failed.items():
                self._fail(k, error)
                live[k] = False
                actions[k] = None
                bar.update(1)
            stepped = [k for k in range(n) if actions[k] is not None]
            step_results = self._each_env(functools.partial(_step_env, vec, actions), stepped)
            for k, result in zip(stepped, step_results):
                if isinstance(result, _EnvFailure):
                    self._fail(k, result.message)
                    env_failures.append(result.exc)
                    live[k] = False
                    bar.update(1)
                    continue
                obs[k], rewards, terms, truncs, infos[k] = result
                ep = self.episodes[k]
                ep.step_rewards.append(float(next(iter(rewards.values()), 0.0)))
                if not vec.envs[k].agents:
                    live[k] = False
                    self._finish(k, terms, truncs, infos[k])
                    bar.update(1)
            step += 1
        bar.close()
        if raise_if_env_always_fails and len(env_failures) == n:
            # Not one episode survived its env: a bug in the env, not a fault of one episode.
            raise env_failures[0]
        warn_if_many_failed(self.episodes)
        return self.episodes

    def _each_env(self, fn: Callable[[int], Any], indices: Sequence[int]) -> list[Any]:
        """``fn(k)`` for each env, concurrently; an exception fails only env ``k``'s episode.

        Env code handles untrusted model output and talks to sandboxes and graders: one env that
        raises must not throw away the other episodes of the batch (nor the steps they made).
        """

        def guarded(k: int) -> Any:
            try:
                return fn(k)
            except Exception as exc:  # reported on the episode, not swallowed
                return _EnvFailure(exc)

        todo = list(indices)
        if len(todo) <= 1 or self.vec.max_workers <= 1:
            return [guarded(k) for k in todo]
        return list(self.vec.pool.map(guarded, todo))

    def _requests(
        self, obs: list[Any], infos: list[Any], live: list[bool]
    ) -> tuple[dict[tuple[Policy, SamplingParams], list[tuple[int, str]]], list[int]]:
        """Active (env, agent) pairs grouped by (policy, sampling): one generate call each; and
        the live envs where nobody is active (an env bug)."""
        requests: dict[tuple[_Identity, SamplingParams], list[tuple[int, str]]] = {}
        stuck: list[int] = []
        for k, alive in enumerate(live):
            if not alive:
                continue
            active = [a for a in self.vec.envs[k].agents if infos[k].get(a, {}).get("active")]
            if not active:
                stuck.append(k)
                continue
            for agent in active:
                key = (_Identity(self.policies[agent]), self.sampling[agent])
                requests.setdefault(key, []).append((k, agent))
        return {(key[0].obj, key[1]): reqs for key, reqs in requests.items()}, stuck

    def _generate(
        self,
        policy: Policy,
        sampling: SamplingParams,
        reqs: list[tuple[int, str]],
        obs: list[Any],
        step: int,
    ) -> tuple[list[Completion | str], list[bool]]:
        conversations = [obs[k][agent] for k, agent in reqs]
        contexts = [stream_context(self.contexts[k].get(agent), obs[k][agent]) for k, agent in reqs]
        # A shared agent's requests are identical only within its group (the task's G copies).
        keys = [(self.slots[k][0], agent) if agent in self.share else None for k, agent in reqs]
        call = step_sampling(sampling, self.seed, step, self.policy_index[id(policy)])
        if self.seed is not None and sampling.seed is None:
            call = dataclasses.replace(
                call,
                request_seeds=tuple(
                    request_seed(
                        self.seed,
                        self.slots[k][0],
                        k % self.group_size,
                        step,
                        self.agent_index[agent],
                    )
                    for k, agent in reqs
                ),
            )
        return generate_shared(
            policy,
            call,
            conversations,
            contexts,
            keys,
            self.on_generate,
        )

    def _record(
        self,
        k: int,
        agent: str,
        step: int,
        observation: list[dict[str, Any]],
        completion: Completion,
        parent: tuple[str, int] | None = None,
        shared: bool = False,
    ) -> None:
        turn, entry = record_turn(
            agent, step, observation, completion, self.contexts[k].get(agent), parent, shared
        )
        self.episodes[k].trajectories[agent].turns.append(turn)
        if entry is not None:
            self.contexts[k][agent] = entry

    def _finish(
        self,
        k: int,
        terms: Mapping[str, bool],
        truncs: Mapping[str, bool],
        infos: dict[str, dict[str, Any]],
    ) -> None:
        ep = self.episodes[k]
        ep.terminated = any(terms.values())
        ep.truncated = any(truncs.values())
        ep.final_infos = infos
        first: Mapping[str, Any] = next(iter(infos.values()), {})
        ep.reward_components = dict(first.get("reward_components", {}))
        ep.error = first.get("error")

    def _fail(self, k: int, error: str) -> None:
        ep = self.episodes[k]
        ep.truncated = True
        ep.error = error


FAILED_WARN_FRACTION = 0.1
"""``collect`` warns when at least this fraction of its episodes failed (infrastructure, policy
backend or env errors); a few lost episodes in a long run are normal and stay quiet."""


def warn_if_many_failed(episodes: Sequence[Episode]) -> None:
    """The ``RuntimeWarning`` of a ``collect`` call (local or on an executor's workers) in which
    at least :data:`FAILED_WARN_FRACTION` of the ``episodes`` failed, with the first error."""
    failed = [ep for ep in episodes if ep.error is not None]
    n = len(episodes)
    if failed and len(failed) >= max(1.0, FAILED_WARN_FRACTION * n):
        warnings.warn(
            f"collect: {len(failed)} of {n} episode(s) failed and were truncated (their "
            f"samples are dropped, never scored). First error: {failed[0].error}",
            RuntimeWarning,
            stacklevel=3,  # play's line: called by _Collector.run or RayExecutor.collect
        )


StreamEntry = tuple[TokenContext, str]
"""An agent's token stream so far and the text of its last reply (see :func:`stream_context`)."""


def step_sampling(
    sampling: SamplingParams, seed: int | None, step: int, policy_index: int
) -> SamplingParams:
    """The sampling params of one generate call: a seed derived from the rollout's ``seed``,
    the step and the policy (unless the params carry their own seed, or ``seed`` is None)."""
    if seed is None or sampling.seed is not None:
        return sampling
    return dataclasses.replace(
        sampling, seed=(seed * 1_000_003 + step * 7919 + policy_index) % 2**31
    )


def request_seed(seed: int, task_index: int, copy: int, step: int, agent_index: int) -> int:
    """The sampling seed of one request: agent number ``agent_index`` (its place in the env's
    ``possible_agents``) at env step ``step`` of copy ``copy`` of the task with global index
    ``task_index``, in a collect seeded with ``seed``. A hash (numpy's ``SeedSequence``) of the
    five numbers, in ``[0, 2**31)``: every request gets an independent stream."""
    import numpy as np

    state = np.random.SeedSequence([seed % 2**63, task_index, copy, step, agent_index])
    return int(state.generate_state(1, np.uint32)[0]) & 0x7FFFFFFF


def group_id(task_index: int, task_id: Any) -> str:
    """:attr:`Episode.group_id` of the copies of the task with global index ``task_index``."""
    return f"{task_index}/{task_id}"


def generate_batch(
    policy: Policy,
    sampling: SamplingParams,
    conversations: list[list[dict[str, Any]]],
    contexts: list[TokenContext | None],
    on_generate: Callable[[Policy, int], None] | None = None,
) -> list[Completion | str]:
    """One batched ``policy.generate`` call; a failed item comes back as its error message.

    No exception of the call propagates (``BaseException`` s such as ``KeyboardInterrupt``
    do): a backend that says which replies failed (OpenAIPolicy's BatchPolicyError) costs only
    those items, otherwise every item of the batch gets the error. A policy that returns the
    wrong type or count is a bug in the policy and raises, naming it.
    """
    name = policy.name
    start = time.perf_counter()
    try:
        completions = policy.generate(conversations, sampling, contexts)
    except PolicyError as err:
        partial = getattr(err, "results", None)
        if isinstance(partial, list) and len(partial) == len(conversations):
            return [
                c if isinstance(c, Completion) else f"policy {name!r} failed: {c}" for c in partial
            ]
        return [f"policy {name!r} failed: {err}"] * len(conversations)
    except Exception as err:  # noqa: BLE001 - a tokenizer, a client, a model: the batch only
        # Any exception of the call (a tokenizer's TypeError on odd text, a CUDA assert, a
        # client's bug) costs the episodes of this batch, never the step of every other one.
        return [f"policy {name!r} raised {type(err).__name__}: {err}"] * len(conversations)
    seconds = time.perf_counter() - start
    if on_generate is not None:
        on_generate(policy, len(conversations))
    # A policy's own bug, not a reply that failed: raised, like a wrong count, naming the policy.
    if not isinstance(completions, Sequence) or isinstance(completions, (str, bytes)):
        raise TypeError(
            f"policy {name!r}.generate returned {type(completions).__name__}; expected a list "
            "of Completion"
        )
    if len(completions) != len(conversations):
        raise RuntimeError(
            f"policy {name!r} returned {len(completions)} completions for "
            f"{len(conversations)} prompts"
        )
    out: list[Completion | str] = []
    for c in completions:
        if not isinstance(c, Completion):
            raise TypeError(
                f"policy {name!r}.generate returned a {type(c).__name__} among its "
                "completions; expected Completion (llm_marl.policies.base)"
            )
        if c.finish_reason == "error":
            out.append(f"policy {name!r} failed: {c.metadata.get('error', 'unknown error')}")
        else:
            out.append(_with_spend(policy, c, seconds, len(conversations)))
    return out


def _with_spend(policy: Policy, completion: Completion, seconds: float, batch: int) -> Completion:
    """The completion with what it cost in its metadata (a copy: a policy may hand out the same
    object twice): the call's wall time and size, and its price (:mod:`llm_marl.rollout.cost`)."""
    spend: dict[str, Any] = {"generate_seconds": seconds, "generate_batch": batch}
    cost = completion_cost(policy, completion)
    if cost is not None:
        spend["cost"] = cost
    return dataclasses.replace(completion, metadata={**completion.metadata, **spend})


def generate_shared(
    policy: Policy,
    sampling: SamplingParams,
    conversations: list[list[dict[str, Any]]],
    contexts: list[TokenContext | None],
    keys: Sequence[Hashable | None],
    on_generate: Callable[[Policy, int], None] | None = None,
) -> tuple[list[Completion | str], list[bool]]:
    """:func:`generate_batch` in which identical requests are generated once.

    Requests ``i`` and ``j`` are identical when ``keys[i] == keys[j]`` is not None and their
    conversations and token contexts are equal; only the first of them goes to the policy, and
    every copy gets its completion (or its error). Returns the completions, one per request,
    and for each request whether its completion went to more than one request. With no key
    set this is exactly :func:`generate_batch`.
    """
    source = identical_requests(keys, conversations, contexts)
    firsts = [i for i, j in enumerate(source) if i == j]
    if len(firsts) == len(source):  # nothing to share: the plain batch
        unshared = [False] * len(source)
        return generate_batch(policy, sampling, conversations, contexts, on_generate), unshared
    if sampling.request_seeds is not None:  # a shared request samples with its first's seed
        sampling = dataclasses.replace(
            sampling, request_seeds=tuple(sampling.request_seeds[i] for i in firsts)
        )
    done = generate_batch(
        policy,
        sampling,
        [conversations[i] for i in firsts],
        [contexts[i] for i in firsts],
        on_generate,
    )
    copies = Counter(source)
    # Each shared completion says how many episodes it went to (its spend is split among them).
    by_first = {
        i: c
        if isinstance(c, str) or copies[i] == 1
        else dataclasses.replace(c, metadata={**c.metadata, "copies": copies[i]})
        for i, c in zip(firsts, done)
    }
    return [by_first[j] for j in source], [copies[j] > 1 for j in source]


def identical_requests(
    keys: Sequence[Hashable | None],
    conversations: Sequence[Sequence[dict[str, Any]]],
    contexts: Sequence[TokenContext | None],
) -> list[int]:
    """For each request, the index of the first request identical to it (itself when none
    comes before); see :func:`generate_shared`. A request with key ``None`` is never shared."""
    firsts: dict[Hashable, list[int]] = {}
    out: list[int] = []
    for i, key in enumerate(keys):
        if key is None:
            out.append(i)
            continue
        seen = firsts.setdefault(key, [])
        same = next(
            (
                j
                for j in seen
                if contexts[j] == contexts[i] and conversations[j] == conversations[i]
            ),
            None,
        )
        if same is None:
            seen.append(i)
            out.append(i)
        else:
            out.append(same)
    return out


def check_group_size(group_size: int) -> None:
    """Validate ``group_size`` (see :func:`collect`): an int >= 1."""
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an int >= 1, got {group_size!r}")


def check_share_frozen(
    names: Collection[str] | str, policies: Mapping[str, Policy]
) -> frozenset[str]:
    """Validate ``share_frozen`` (see :func:`collect`) against ``{agent: policy}``.

    Every name must be an agent that ``policies`` plays, with a frozen policy: sharing one
    sample across a group would give a trainable agent ``G`` copies of one sample and no
    group-relative signal. A single name may be given as a string.
    """
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, Collection) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"share_frozen must be a collection of agent names, got {names!r:.80}")
    unknown = [n for n in names if n not in policies]
    if unknown:
        raise ValueError(
            f"share_frozen names {unknown}, which are not agents of the env (its agents are "
            f"{list(policies)}; agents folded into the env by FrozenAgents are played by the "
            "wrapper, not by collect, and cannot be shared)"
        )
    trainable = [n for n in names if policies[n].trainable]
    if trainable:
        raise ValueError(
            f"share_frozen names trainable agents {trainable}: a shared request gives every "
            "episode of the group the same sample, so the group would compare a trainable "
            "agent's sample with itself. Share only frozen agents (trainable=False)"
        )
    return frozenset(names)


def stream_context(
    entry: StreamEntry | None, conversation: Sequence[dict[str, Any]]
) -> TokenContext | None:
    """The agent's token stream, if its conversation still starts with what the stream holds."""
    if entry is None:
        return None
    ctx, last_text = entry
    n = ctx.num_messages
    if len(conversation) < n:
        return None
    reply = conversation[n - 1]
    if reply.get("role") != "assistant" or reply.get("content") != last_text:
        return None  # the env rewrote the history: the policy must render it afresh
    return ctx


def record_turn(
    agent: str,
    step: int,
    observation: list[dict[str, Any]],
    completion: Completion,
    entry: StreamEntry | None,
    parent: tuple[str, int] | None = None,
    shared: bool = False,
) -> tuple[Turn, StreamEntry | None]:
    """The :class:`Turn` of ``completion`` and the agent's stream after it (``None``: a
    text-only completion, the stream is unchanged). ``shared``: the completion went to
    several episodes (:attr:`Turn.shared`)."""
    ctx = stream_context(entry, observation)
    continues = bool(
        ctx is not None
        and completion.prompt_ids
        and tuple(completion.prompt_ids[: len(ctx.token_ids)]) == ctx.token_ids
    )
    prompt_tokens, completion_tokens = token_counts(completion)
    meta = completion.metadata
    usage = meta.get("usage")
    turn = Turn(
        agent=agent,
        step=step,
        text=completion.text,
        prompt_ids=list(completion.prompt_ids),
        completion_ids=list(completion.token_ids),
        logprobs=None if completion.logprobs is None else list(completion.logprobs),
        finish_reason=completion.finish_reason,
        continues_stream=continues,
        observation=observation,
        parent=parent,
        shared=shared,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        generate_seconds=float(meta.get("generate_seconds", 0.0)),
        generate_batch=int(meta.get("generate_batch", 1)),
        copies=int(meta.get("copies", 1)),
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        cost=meta.get("cost"),
    )
    if not completion.prompt_ids:
        return turn, None
    # The env appends the reply to the agent's own conversation, so the next observation starts
    # with these len(observation) + 1 messages (checked in stream_context).
    stream = tuple(completion.prompt_ids) + tuple(completion.token_ids)
    return turn, (TokenContext(stream, len(observation) + 1), completion.text)


def _step_env(vec: VectorEnv, actions: list[dict[str, str] | None], k: int) -> Any:
    action = actions[k]
    assert action is not None  # only envs with actions are stepped
    return vec.envs[k].step(action)


class _EnvFailure:
    """An exception an env raised in ``reset``/``step``, as a value (the batch goes on)."""

    __slots__ = ("exc", "message")

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.message = f"env raised {type(exc).__name__}: {exc}"


def _parent_of(info: Mapping[str, Any]) -> tuple[str, int] | None:
    """``infos[agent]["parent"]`` as ``(agent, turn index)``: the turn that spawned this
    conversation (DESIGN "Sub-conversations"); None when the env names none."""
    parent = info.get("parent")
    if parent is None:
        return None
    try:
        agent, index = parent
    except (TypeError, ValueError):
        raise RuntimeError(
            f"infos['parent'] must be (agent, turn index), got {parent!r:.80}"
        ) from None
    if not isinstance(agent, str) or isinstance(index, bool) or not isinstance(index, int):
        raise RuntimeError(f"infos['parent'] must be (agent, turn index), got {parent!r:.80}")
    return (agent, int(index))


class _Identity:
    """Hash a policy by identity (policies need not be hashable)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


def check_policies(policies: Mapping[str, Policy], agents: list[str]) -> dict[str, Policy]:
    """Validate a ``{agent: Policy}`` map against the env's agents (exactly one per agent, each
    with ``generate``, ``name`` and ``trainable``)."""
    if not isinstance(policies, Mapping):
        raise TypeError(f"policies must be a dict {{agent: Policy}}, got {type(policies).__name__}")
    missing = [a for a in agents if a not in policies]
    unknown = [a for a in policies if a not in agents]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no policy for agents {missing}")
        if unknown:
            parts.append(f"policies given for unknown agents {unknown}")
        raise ValueError(
            f"{'; '.join(parts)}. The env's agents are {agents} (agents folded into the env by "
            "FrozenAgents need no policy)."
        )
    for agent, policy in policies.items():
        if not callable(getattr(policy, "generate", None)):
            raise TypeError(f"the policy for {agent!r} has no generate() method: {policy!r}")
        # The rest of the rollout reads these two Policy attributes directly.
        missing = [attr for attr in ("name", "trainable") if not hasattr(policy, attr)]
        if missing:
            raise TypeError(
                f"the policy for {agent!r} has no {' or '.join(missing)} attribute (see "
                f"llm_marl.policies.Policy): {policy!r}"
            )
    return dict(policies)
