"""`collect`: drive many envs with many policies, batched, and return :class:`Episode` s.

Each step gathers the conversations of all *active* agents across all live envs, makes **one
batched generate call per (policy, sampling) pair**, then steps the envs concurrently in a thread
pool (tools and sandboxes are I/O). It never makes one generate call per env: that is what makes
a 1-5B model rollout fast on a GPU, and even a tiny model on a CPU (see
``benchmarks/rollout_batching.py``).

Groups: every task is played by ``group_size`` copies (the GRPO group); episodes come back
task-major (task 0's G copies, then task 1's, ...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

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
    """
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an int >= 1, got {group_size!r}")
    vec, owned, slots = _build_envs(env, tasks, group_size, env_kwargs, seed, max_workers)
    try:
        collector = _Collector(vec, slots, policies, group_size, sampling, seed, on_generate)
        return collector.run(progress)
    finally:
        if owned:
            vec.close()


def _build_envs(env, tasks, group_size, env_kwargs, seed, max_workers):
    probe = _make_one(env, env_kwargs)
    task_list = _resolve_tasks(probe, tasks, seed)
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
    # slot k of the VectorEnv plays (task index, task): task-major, group copies adjacent.
    slots = [(i, t) for i, t in enumerate(task_list) for _ in range(group_size)]
    return vec, owned, slots


def _make_one(env: EnvSource, env_kwargs: Mapping[str, Any] | None):
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


def _resolve_tasks(probe, tasks, seed) -> list[dict[str, Any]]:
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
    def __init__(self, vec, slots, policies, group_size, sampling, seed, on_generate):
        self.vec = vec
        self.slots = slots
        self.seed = seed
        self.on_generate = on_generate
        agents = list(vec.envs[0].possible_agents)
        self.policies = check_policies(policies, agents)
        self.sampling = per_agent_sampling(sampling, agents, default=SamplingParams())
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
                trajectories={
                    a: Trajectory(
                        a,
                        getattr(self.policies[a], "name", type(self.policies[a]).__name__),
                        bool(getattr(self.policies[a], "trainable", False)),
                    )
                    for a in agents
                },
            )
            for k, (ti, task) in enumerate(slots)
        ]
        # Per env and agent: the token stream so far and the text of the agent's last reply.
        self.contexts: list[dict[str, tuple[TokenContext, str]]] = [{} for _ in range(n)]

    def run(self, progress: bool) -> list[Episode]:
        vec = self.vec
        n = len(vec)
        seeds = [None if self.seed is None else self.seed + k for k in range(n)]
        options = [{"task": task} for _, task in self.slots]
        results = vec.reset(seeds=seeds, options=options)
        obs = [r[0] for r in results]
        infos = [r[1] for r in results]
        live = [bool(vec.envs[k].agents) for k in range(n)]
        bar = tqdm(total=n, desc="collect", unit="ep", disable=not progress, leave=False)
        for k in range(n):  # setup_episode raised InfrastructureError: nobody can act
            error = next((i["error"] for i in infos[k].values() if i.get("error")), None)
            if live[k] and error is not None:
                self._fail(k, error)
                live[k] = False
                bar.update(1)
        step = 0
        while any(live):
            actions: list[dict[str, str] | None] = [None] * n
            requests = self._requests(obs, infos, live)
            for k in range(n):
                if live[k]:
                    actions[k] = {}
            failed: dict[int, str] = {}
            for (policy, sampling), reqs in requests.items():
                completions = self._generate(policy, sampling, reqs, obs, step)
                for (k, agent), completion in zip(reqs, completions):
                    if isinstance(completion, str):  # the batch (or this item) failed
                        failed[k] = completion
                        continue
                    parent = _parent_of(infos[k][agent])
                    self._record(k, agent, step, obs[k][agent], completion, parent)
                    actions[k][agent] = completion.text
            for k, error in failed.items():
                self._fail(k, error)
                live[k] = False
                actions[k] = None
                bar.update(1)
            for k, result in enumerate(vec.step(actions)):
                if result is None:
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
        return self.episodes

    def _requests(self, obs, infos, live):
        """Active (env, agent) pairs grouped by (policy, sampling): one generate call each."""
        requests: dict[tuple[Any, SamplingParams], list[tuple[int, str]]] = {}
        for k, alive in enumerate(live):
            if not alive:
                continue
            active = [a for a in self.vec.envs[k].agents if infos[k][a]["active"]]
            if not active:
                raise RuntimeError(
                    f"env #{k} ({self.episodes[k].task_id}) is live but no agent is active"
                )
            for agent in active:
                key = (_Identity(self.policies[agent]), self.sampling[agent])
                requests.setdefault(key, []).append((k, agent))
        return {(key[0].obj, key[1]): reqs for key, reqs in requests.items()}

    def _generate(self, policy, sampling, reqs, obs, step) -> list[Completion | str]:
        if self.seed is not None and sampling.seed is None:
            sampling = dataclasses.replace(
                sampling,
                seed=(self.seed * 1_000_003 + step * 7919 + self.policy_index[id(policy)]) % 2**31,
            )
        conversations = [obs[k][agent] for k, agent in reqs]
        contexts = [self._context_for(k, agent, obs[k][agent]) for k, agent in reqs]
        name = getattr(policy, "name", type(policy).__name__)
        try:
            completions = policy.generate(conversations, sampling, contexts)
        except PolicyError as err:
            return [f"policy {name!r} failed: {err}"] * len(reqs)
        if self.on_generate is not None:
            self.on_generate(policy, len(reqs))
        if len(completions) != len(reqs):
            raise RuntimeError(
                f"policy {name!r} returned {len(completions)} completions for {len(reqs)} prompts"
            )
        out: list[Completion | str] = []
        for c in completions:
            if c.finish_reason == "error":
                out.append(f"policy {name!r} failed: {c.metadata.get('error', 'unknown error')}")
            else:
                out.append(c)
        return out

    def _context_for(self, k, agent, conversation) -> TokenContext | None:
        """The agent's token stream, if its conversation still starts with what the stream holds."""
        entry = self.contexts[k].get(agent)
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

    def _record(self, k, agent, step, observation, completion: Completion, parent=None) -> None:
        traj = self.episodes[k].trajectories[agent]
        ctx = self._context_for(k, agent, observation)
        continues = bool(
            ctx is not None
            and completion.prompt_ids
            and tuple(completion.prompt_ids[: len(ctx.token_ids)]) == ctx.token_ids
        )
        traj.turns.append(
            Turn(
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
            )
        )
        if completion.prompt_ids:
            # The env appends the reply to the agent's own conversation, so the next observation
            # starts with these len(observation) + 1 messages (checked in _context_for).
            stream = tuple(completion.prompt_ids) + tuple(completion.token_ids)
            ctx = TokenContext(stream, len(observation) + 1)
            self.contexts[k][agent] = (ctx, completion.text)

    def _finish(self, k, terms, truncs, infos) -> None:
        ep = self.episodes[k]
        ep.terminated = any(terms.values())
        ep.truncated = any(truncs.values())
        ep.final_infos = infos
        first: Mapping[str, Any] = next(iter(infos.values()), {})
        ep.reward_components = dict(first.get("reward_components", {}))
        ep.error = first.get("error")

    def _fail(self, k, error: str) -> None:
        ep = self.episodes[k]
        ep.truncated = True
        ep.error = error


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
    """Validate a ``{agent: Policy}`` map against the env's agents (exactly one per agent)."""
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
    return dict(policies)
