"""A generation engine: the actor that holds one model's policies and samples for env workers.

:class:`Engine` is a plain class; :class:`~llm_marl.distributed.executor.RayExecutor` runs it
as a threaded Ray actor, so that the requests of several env workers arrive concurrently and
:class:`MicroBatcher` joins those with equal sampling settings into one ``generate`` call.
Joining never changes a sample: every request carries its own seed
(:attr:`~llm_marl.policies.base.SamplingParams.request_seeds`), and requests without one are
never joined.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from llm_marl.distributed.recipes import EngineRecipe, build_engine_policies
from llm_marl.distributed.weights import (
    load_adapter_state,
    receive_full,
    sync_device,
    sync_group,
)
from llm_marl.errors import PolicyError
from llm_marl.policies.base import Completion, Conversation, Policy, SamplingParams, TokenContext
from llm_marl.policies.hf import HFPolicy


class StaleWeightsError(PolicyError):
    """An engine was asked for a sample of a policy version it does not hold."""


@dataclasses.dataclass
class _Request:
    conversations: list[Conversation]
    sampling: SamplingParams
    contexts: list[TokenContext | None]
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: list[Completion] | None = None
    error: BaseException | None = None


class MicroBatcher:
    """Joins concurrent ``generate`` requests to one policy into one batched call.

    The first request to arrive waits ``wait_s`` for others, then runs every pending request
    whose sampling settings (seeds aside) equal its own in one call, and repeats while requests
    are pending; the others wait for their results.
    """

    def __init__(self, policy: Policy, wait_s: float) -> None:
        self.policy = policy
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._running = False
        self.calls: list[int] = []
        """Batch size of every ``generate`` call made (for tests and metrics)."""

    def submit(
        self,
        conversations: list[Conversation],
        sampling: SamplingParams,
        contexts: list[TokenContext | None],
    ) -> list[Completion]:
        request = _Request(conversations, sampling, contexts)
        with self._lock:
            self._pending.append(request)
            leader = not self._running
            self._running = True
        if leader:
            time.sleep(self.wait_s)
            self._drain()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
                first = self._pending[0]
                batch = [r for r in self._pending if _joinable(first, r)]
                self._pending = [r for r in self._pending if not any(r is b for b in batch)]
            self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        conversations = [c for r in batch for c in r.conversations]
        contexts = [c for r in batch for c in r.contexts]
        sampling = batch[0].sampling
        if len(batch) > 1:
            seeds = tuple(s for r in batch for s in (r.sampling.request_seeds or ()))
            sampling = dataclasses.replace(sampling, request_seeds=seeds)
        try:
            self.calls.append(len(conversations))
            out = self.policy.generate(conversations, sampling, contexts)
            if len(out) != len(conversations):
                raise RuntimeError(
                    f"policy returned {len(out)} completions for {len(conversations)} prompts"
                )
        except BaseException as exc:  # every request of the batch gets it, then it goes on
            for r in batch:
                r.error = exc
                r.done.set()
            return
        start = 0
        for r in batch:
            r.result = list(out[start : start + len(r.conversations)])
            start += len(r.conversations)
            r.done.set()


def _joinable(a: _Request, b: _Request) -> bool:
    """Requests join only when both carry per-request seeds and sample alike otherwise."""
    if a is b:
        return True
    if a.sampling.request_seeds is None or b.sampling.request_seeds is None:
        return False
    return dataclasses.replace(a.sampling, request_seeds=None) == dataclasses.replace(
        b.sampling, request_seeds=None
    )


class Engine:
    """One model's policies in an actor: batched sampling, versioned weights.

    Args:
        recipe: the model and the policies over it (:mod:`llm_marl.distributed.recipes`).
        device: ``"cuda"`` on a GPU engine, else ``"cpu"``.
        backend: ``"hf"`` (sample with transformers) or ``"vllm"`` (one ``VLLMPolicy`` in the
            actor samples for every policy of the model; weights reach it by the policies'
            ``after_update``).
        batch_wait_s: how long the first request waits for others to join its batch.
    """

    def __init__(
        self, recipe: EngineRecipe, device: str, backend: str = "hf", batch_wait_s: float = 0.005
    ) -> None:
        import torch

        # One thread per engine CPU: Ray sets OMP_NUM_THREADS, torch may not have read it.
        torch.set_num_threads(max(1, torch.get_num_threads()))
        self.policies = build_engine_policies(recipe, device)
        if backend == "vllm":
            from llm_marl.policies.vllm import VLLMPolicy

            hf = [p for p in self.policies.values() if isinstance(p, HFPolicy)]
            VLLMPolicy.for_trainable(hf)
        self.versions = dict.fromkeys(self.policies, 0)
        self.batchers = {k: MicroBatcher(p, batch_wait_s) for k, p in self.policies.items()}

    def ping(self) -> int:
        """The actor's process id (tests kill it by this)."""
        import os

        return os.getpid()

    def get_versions(self) -> dict[str, int]:
        """The weights version each policy holds (0: the weights it was built with)."""
        return dict(self.versions)

    def batch_sizes(self) -> dict[str, list[int]]:
        """Per policy, the size of every generate call made so far."""
        return {k: list(b.calls) for k, b in self.batchers.items()}

    def generate(
        self,
        key: str,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: Sequence[TokenContext | None] | None,
        version: int | None,
    ) -> tuple[list[Completion], int]:
        """Sample for policy ``key``; refuses when it holds another weights ``version``."""
        held = self.versions[key]
        if version is not None and held != version:
            raise StaleWeightsError(
                f"engine holds version {held} of policy {key!r}, the learner is at {version}"
            )
        ctx: list[TokenContext | None] = (
            list(contexts) if contexts is not None else [None] * len(conversations)
        )
        return self.batchers[key].submit(list(conversations), sampling, ctx), held

    def load_adapter(self, key: str, version: int, state: dict[str, Any]) -> int:
        """Take a new LoRA adapter version (state from the object store)."""
        policy = self._hf(key)
        load_adapter_state(policy, state)
        return self._synced(key, version)

    def receive_full(
        self,
        key: str,
        version: int,
        host: str,
        port: int,
        rank: int,
        world: int,
        tag: str,
        backend: str = "gloo",
    ) -> int:
        """Join the learner's sync group (on ``backend``) and receive the full weights of
        ``key``, one parameter at a time."""
        import ray

        policy = self._hf(key)
        own = ray.util.get_node_ip_address()
        group = sync_group(host, port, rank, world, tag, own, backend)
        receive_full(policy, group, sync_device(backend))
        return self._synced(key, version)

    def load_files(self, key: str, version: int, path: str) -> int:
        """Load weights the learner saved under ``path`` (the filesystem fallback)."""
        self._hf(key).load(path)
        return self._synced(key, version)

    def _hf(self, key: str) -> HFPolicy:
        policy = self.policies[key]
        if not isinstance(policy, HFPolicy):
            raise TypeError(f"policy {key!r} on this engine has no weights to sync")
        return policy

    def _synced(self, key: str, version: int) -> int:
        after = getattr(self.policies[key], "after_update", None)
        if callable(after):  # a vLLM sampler registers the new weights here
            after()
        self.versions[key] = version
        return version
