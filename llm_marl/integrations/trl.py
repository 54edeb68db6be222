"""Train the one trainable agent of an llm_marl env with TRL's ``GRPOTrainer``.

An env in which every agent but one is frozen — folded into the dynamics by
:class:`~llm_marl.rollout.FrozenAgents` — is, from the remaining agent's side, a
single-agent prompt -> completion -> reward problem, which is exactly what TRL trains. This
module turns such an env into the two things ``GRPOTrainer`` needs:

* a **dataset** (:func:`env_dataset`): one row per task, with the agent's first observation as
  a conversational ``prompt`` and the task itself (JSON) so the reward can replay it;
* a **reward function** (:class:`EnvReward`): for each completion, reset a fresh env on the
  row's task, step it with the completion as the agent's action (the frozen agents then play
  inside ``FrozenAgents``), and return the team reward of the episode.

::

    from trl import GRPOConfig
    trainer = grpo_trainer(
        "referential-v0", model, GRPOConfig(output_dir="out", num_generations=8),
        frozen={"listener": listener_policy},
    )
    trainer.train()

Limits: the trainable agent must act exactly once per episode (TRL samples one completion per
prompt). Multi-turn agents train with :class:`~llm_marl.algos.MAGRPO` /
:class:`~llm_marl.algos.AgentPO` and the llm_marl :class:`~llm_marl.train.Trainer`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from llm_marl.envs.registration import make
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.rollout import FrozenAgents

if TYPE_CHECKING:  # optional extras: imported where used, at call time
    from datasets import Dataset
    from trl import GRPOTrainer

__all__ = ["EnvReward", "env_dataset", "grpo_trainer", "single_agent_env"]

EnvSource = str | Callable[[], Any]


def single_agent_env(
    env: EnvSource,
    frozen: Mapping[str, Policy] | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    frozen_sampling: SamplingParams | None = None,
) -> Callable[[], Any]:
    """A zero-argument factory of the env with ``frozen`` folded in; checks one agent remains."""
    if isinstance(env, str):
        env_id, kwargs = env, dict(env_kwargs or {})

        def base() -> Any:
            return make(env_id, **kwargs)

    elif callable(env):
        if env_kwargs:
            raise ValueError("env_kwargs only apply when env is a registered id")
        base = env
    else:
        raise TypeError(
            f"env must be an env id or a zero-argument factory, got {type(env).__name__}"
        )

    def factory() -> Any:
        inner = base()
        if frozen:
            inner = FrozenAgents(inner, frozen, sampling=frozen_sampling)
        return inner

    probe = factory()
    agents = list(probe.possible_agents)
    probe.close()
    if len(agents) != 1:
        raise ValueError(
            f"TRL trains one agent, but this env still has agents {agents} after folding in the "
            f"frozen ones {sorted(frozen or {})}: pass frozen={{agent: policy}} for all but one"
        )
    return factory


def _agent(env: Any) -> str:
    return next(iter(env.possible_agents))


def env_dataset(
    env: EnvSource,
    frozen: Mapping[str, Policy] | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    tasks: Sequence[Mapping[str, Any]] | None = None,
    seed: int = 0,
    repeat: int = 1,
    frozen_sampling: SamplingParams | None = None,
) -> Dataset:
    """A ``datasets.Dataset`` with columns ``prompt`` (the agent's first observation, as chat
    messages), ``task`` (the task as JSON) and ``seed`` (for the env reset)."""
    from datasets import Dataset

    factory = single_agent_env(env, frozen, env_kwargs=env_kwargs, frozen_sampling=frozen_sampling)
    inner = factory()
    agent = _agent(inner)
    task_list = list(tasks) if tasks is not None else list(getattr(inner, "tasks", []) or [])
    if not task_list:
        raise ValueError("this env exposes no .tasks; pass tasks=[...]")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    rows: dict[str, list[Any]] = {"prompt": [], "task": [], "seed": []}
    for r in range(repeat):
        for i, task in enumerate(task_list):
            row_seed = seed + r * len(task_list) + i
            obs, infos = inner.reset(seed=row_seed, options={"task": dict(task)})
            if not infos[agent]["active"]:
                raise ValueError(
                    f"agent {agent!r} is not active after reset on task {task['task_id']!r}; "
                    "the trainable agent must act right after the frozen agents' opening moves"
                )
            rows["prompt"].append([dict(m) for m in obs[agent]])
            rows["task"].append(json.dumps(dict(task)))
            rows["seed"].append(row_seed)
    inner.close()
    return Dataset.from_dict(rows)


class EnvReward:
    """A TRL reward function: play each completion through the env, return the team reward.

    Args:
        env: Env id or factory (with ``frozen`` folded in, exactly one agent must remain).
        frozen: ``agent -> Policy`` for the agents the env plays itself.
        component: Return this reward component (e.g. ``"success"``) instead of the reward.
        env_kwargs: Keyword arguments for ``make`` when ``env`` is an id.
        frozen_sampling: Sampling of the frozen policies.

    Called by TRL as ``reward(prompts=..., completions=..., task=[...], seed=[...], ...)``.
    An episode whose infrastructure failed (sandbox, grader) gets ``None``: no reward signal,
    which TRL leaves out of the sample's reward (its documented contract for reward functions).
    """

    def __init__(
        self,
        env: EnvSource,
        frozen: Mapping[str, Policy] | None = None,
        *,
        component: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        frozen_sampling: SamplingParams | None = None,
    ) -> None:
        self.factory = single_agent_env(
            env, frozen, env_kwargs=env_kwargs, frozen_sampling=frozen_sampling
        )
        self.component = component
        self.__name__ = f"llm_marl_{component or 'reward'}"  # TRL logs rewards by function name

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task: Sequence[str] | None = None,
        seed: Sequence[int] | None = None,
        **_: Any,
    ) -> list[float | None]:
        if task is None:
            raise ValueError(
                "the dataset has no 'task' column: build it with llm_marl.integrations.trl."
                "env_dataset (TRL passes extra columns to the reward function)"
            )
        seeds = list(seed) if seed is not None else [None] * len(completions)
        return [
            self.play(json.loads(t), _text(c), s)
            for t, c, s in zip(task, completions, seeds, strict=True)
        ]

    def play(
        self, task: Mapping[str, Any], completion: str, seed: int | None = None
    ) -> float | None:
        """The reward of one episode in which the agent's single action is ``completion``;
        ``None`` when the env's infrastructure failed (the episode is not the model's doing)."""
        env = self.factory()
        agent = _agent(env)
        try:
            _, infos = env.reset(seed=seed, options={"task": dict(task)})
            total = 0.0
            _, rewards, _, _, infos = env.step({agent: completion})
            total += float(rewards.get(agent, 0.0))
            if env.agents:
                raise ValueError(
                    f"agent {agent!r} must act again in task {task.get('task_id')!r}: TRL's "
                    "GRPOTrainer trains single-action agents; train multi-turn agents with "
                    "llm_marl.algos (MAGRPO / AgentPO)"
                )
            info = infos.get(agent, {})
            if info.get("error"):
                # Not the model's fault: no signal (TRL ignores None rewards for a sample).
                return None
            if self.component is not None:
                components = info.get("reward_components", {})
                if self.component not in components:
                    raise KeyError(
                        f"the env reports no reward component {self.component!r}; it has "
                        f"{sorted(components)}"
                    )
                return float(components[self.component])
            return total
        finally:
            env.close()


def _text(completion: Any) -> str:
    """TRL gives conversational completions as ``[{"role": "assistant", "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"unexpected completion format: {completion!r:.80}")


def grpo_trainer(
    env: EnvSource,
    model: Any,
    args: Any = None,
    *,
    frozen: Mapping[str, Policy] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    tasks: Sequence[Mapping[str, Any]] | None = None,
    component: str | None = None,
    repeat: int = 1,
    seed: int = 0,
    frozen_sampling: SamplingParams | None = None,
    **trainer_kwargs: Any,
) -> GRPOTrainer:
    """A ``trl.GRPOTrainer`` for the env's one trainable agent (dataset + reward from the env).

    ``model`` and ``args`` (a ``trl.GRPOConfig``) and ``trainer_kwargs`` (``processing_class``,
    ``peft_config``, ...) go to ``GRPOTrainer`` unchanged.
    """
    from trl import GRPOTrainer

    dataset = env_dataset(
        env,
        frozen,
        env_kwargs=env_kwargs,
        tasks=tasks,
        seed=seed,
        repeat=repeat,
        frozen_sampling=frozen_sampling,
    )
    reward = EnvReward(
        env, frozen, component=component, env_kwargs=env_kwargs, frozen_sampling=frozen_sampling
    )
    return GRPOTrainer(
        model=model, reward_funcs=reward, args=args, train_dataset=dataset, **trainer_kwargs
    )
