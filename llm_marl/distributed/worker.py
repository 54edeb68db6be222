"""An env worker: the actor that plays one shard of a ``collect`` call.

It owns its envs (built from the env id or factory it is sent) and therefore their sandbox,
grader, search and browse pools; it runs the ordinary :func:`~llm_marl.rollout.collect` on its
shard (as :func:`~llm_marl.rollout.collect.play`: the caller validated the options), with :class:`RemotePolicy` proxies for the policies that live on generation engines,
and sends back finished :class:`~llm_marl.rollout.Episode` s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl.errors import PolicyError
from llm_marl.policies.base import Completion, Conversation, Policy, SamplingParams, TokenContexts
from llm_marl.rollout.collect import play
from llm_marl.rollout.types import Episode


@dataclass(frozen=True)
class Route:
    """Where one policy's requests go from a worker: an engine actor, at a weights version."""

    key: str
    name: str
    trainable: bool
    engine: Any
    """The engine's Ray actor handle (it stays valid across the actor's restarts)."""
    version: int


class RemotePolicy:
    """A :class:`~llm_marl.policies.base.Policy` whose ``generate`` runs on an engine actor.

    A dead engine, or one that holds other weights than the learner, raises
    :class:`PolicyError`: ``collect`` fails the episodes of that batch and goes on.
    """

    def __init__(self, route: Route) -> None:
        self.route = route
        self.name = route.name
        self.trainable = route.trainable

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: TokenContexts = None,
    ) -> list[Completion]:
        import ray

        r = self.route
        ctx = list(contexts) if contexts is not None else None
        ref = r.engine.generate.remote(r.key, list(conversations), sampling, ctx, r.version)
        try:
            completions, _ = ray.get(ref)
        except ray.exceptions.RayError as exc:
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise PolicyError(f"engine of {r.name!r} failed: {first:.300}") from None
        return list(completions)


class EnvWorker:
    """Plays shards of ``collect`` calls (run as a Ray actor by the executor).

    Args:
        local: policy key -> policy object called in this process (pickled here once; Ray
            rebuilds it from the same arguments when it restarts the actor).
    """

    def __init__(self, local: Mapping[str, Policy]) -> None:
        import torch

        torch.set_num_threads(max(1, torch.get_num_threads()))
        self.local = dict(local)

    def ping(self) -> int:
        """The actor's process id (tests kill it by this)."""
        import os

        return os.getpid()

    def collect(
        self,
        env: Any,
        keys: Mapping[str, str],
        routes: Mapping[str, Route],
        tasks: list[dict[str, Any]],
        task_indices: list[int],
        options: Mapping[str, Any],
    ) -> list[Episode]:
        """Play ``tasks`` (global indices ``task_indices``) with ``collect``'s ``options``."""
        remote = {k: RemotePolicy(r) for k, r in routes.items()}
        policies = {a: remote[k] if k in remote else self.local[k] for a, k in keys.items()}
        # The executor's caller (collect or the Trainer) validated the options.
        episodes = play(env, policies, tasks, task_indices=task_indices, progress=False, **options)
        for ep in episodes:
            ep.policy_versions = {a: routes[k].version for a, k in keys.items() if k in routes}
        return episodes
