"""A learner: the actor that holds one trainable policy's training copy, optimizer and scheduler.

Under ``TrainerConfig(executor="ray")`` each trainable policy of a policy-gradient algorithm
trains in its own :class:`Learner` actor (its own CPUs / GPUs, placed with the run's placement
group). The driver keeps the algorithm's credit assignment (``build_samples``: advantages from
the whole team's episodes, a few kilobytes) and sends each learner its policy's samples through
the object store; the learner runs the update function it was built with (the algorithm's
:func:`~llm_marl.algos.update.policy_gradient_update`, unchanged) on its copy, then serves its
new weights to the engines (:mod:`~llm_marl.distributed.weights`: the adapter through the
object store, full weights over gloo with itself as rank 0, or files).

The driver's policy objects and optimizers are the learners' mirrors: they start the learners
(weights, optimizer and scheduler states travel at start, so a resumed run's learners continue
from the checkpoint) and get the learners' states back before every checkpoint
(:func:`load_learner_state`).

This module never imports ``llm_marl.algos`` (one layer holds both): the update and optimizer
functions travel in :class:`LearnerSpec` and are pickled by reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm_marl.distributed.weights import (
    adapter_state,
    copy_weights,
    load_adapter_state,
    open_store,
    send_full,
    sync_device,
    sync_group,
)
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.sharded import ShardingConfig

_POLICY_ATTRIBUTES = ("logprob_temperature", "share_prompts", "chunked_lm_head")
"""Class-level settings of ``HFPolicy`` that a run may set per instance (the Trainer sets
``logprob_temperature``) and that the update reads."""


@dataclass
class PolicyCopy:
    """What rebuilds a trainable :class:`HFPolicy` in another process, weights included."""

    model: Any
    tokenizer: Any
    name: str
    adapter: str | None
    chat_template_kwargs: dict[str, Any]
    prompt_mode: str
    reference_model: Any
    attributes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: HFPolicy) -> PolicyCopy:
        """The copy of ``policy`` (its current weights; the model pickles with them)."""
        return cls(
            policy.model,
            policy.tokenizer,
            policy.name,
            policy.adapter,
            dict(policy.chat_template_kwargs or {}),
            policy.prompt_mode,
            policy.reference_model,
            {a: getattr(policy, a) for a in _POLICY_ATTRIBUTES},
        )

    def build(self, device: str) -> HFPolicy:
        """The trainable policy, on ``device``."""
        policy = HFPolicy(
            self.model,
            self.tokenizer,
            name=self.name,
            adapter=self.adapter,
            trainable=True,
            device=device,
            chat_template_kwargs=self.chat_template_kwargs or None,
            reference_model=self.reference_model,
            prompt_mode=self.prompt_mode,
        )
        if self.reference_model is not None:
            self.reference_model.to(device)
        for name, value in self.attributes.items():
            setattr(policy, name, value)
        return policy


@dataclass
class LearnerSpec:
    """One trainable policy's learner, as the Trainer describes it (the driver's objects)."""

    key: str
    """The algorithm's key of the policy (agents joined by ``+``)."""
    policy: HFPolicy
    """The driver's policy object (the learner's mirror)."""
    optimizer: Any
    """The driver's optimizer of the policy (mirror; never stepped under Ray)."""
    scheduler: Any
    config: Any
    """The algorithm's config (a ``PGConfig``), passed to ``make_optimizer`` and ``update``."""
    make_optimizer: Callable[[Any, Any], tuple[Any, Any]]
    """``(parameters, config) -> (optimizer, scheduler)``: the algorithm's own."""
    update: Callable[..., dict[str, float]]
    """``(policy, optimizer, samples, config, scheduler=, update_index=) -> metrics``."""
    sharding: LearnerSharding | None = None
    """``None``: one learner actor; else a group of ``sharding.world_size`` actors that shard
    the policy with FSDP2 (:mod:`~llm_marl.distributed.sharded_learner`)."""

    @property
    def ranks(self) -> int:
        """How many learner actors train this policy."""
        return 1 if self.sharding is None else self.sharding.world_size


@dataclass(frozen=True)
class LearnerSharding:
    """A learner sharded over a group of actors (``policies.world_size > 1`` under Ray)."""

    world_size: int
    config: ShardingConfig
    """How :func:`~llm_marl.policies.sharded.shard_policy` shards it (mixed precision...)."""
    checkpoint: Callable[[Any, Any], Any]
    """``(policy, optimizer) -> state`` whose ``state.save(path)`` every rank calls to write its
    DCP shards of the policy's weights and optimizer state (the Trainer's
    :class:`~llm_marl.train.sharded_checkpoint.LearnerState`, the torchrun path's own)."""


@dataclass
class LearnerInit:
    """What travels to a :class:`Learner` actor when it starts."""

    copy: PolicyCopy
    config: Any
    make_optimizer: Callable[[Any, Any], tuple[Any, Any]]
    update: Callable[..., dict[str, float]]
    optimizer_state: dict[str, Any]
    scheduler_state: dict[str, Any]
    sharding: LearnerSharding | None = None

    @classmethod
    def of(cls, spec: LearnerSpec) -> LearnerInit:
        """The start state of ``spec``'s learner: the driver's current weights and states."""
        return cls(
            PolicyCopy.of(spec.policy),
            spec.config,
            spec.make_optimizer,
            spec.update,
            spec.optimizer.state_dict(),
            spec.scheduler.state_dict(),
            spec.sharding,
        )


class Learner:
    """The learner actor of one trainable policy (see the module docstring).

    Args:
        init: the policy copy, the algorithm's functions and the optimizer states to start from.
        device: ``"cuda"`` when the learner reserves GPUs, else ``"cpu"``.
    """

    def __init__(self, init: LearnerInit, device: str) -> None:
        import torch

        # One thread per learner CPU: Ray sets OMP_NUM_THREADS, torch may not have read it.
        torch.set_num_threads(max(1, torch.get_num_threads()))
        self.policy = init.copy.build(device)
        self.config = init.config
        self.update_fn = init.update
        self.optimizer, self.scheduler = init.make_optimizer(self.policy.parameters(), init.config)
        self.optimizer.load_state_dict(init.optimizer_state)
        self.scheduler.load_state_dict(init.scheduler_state)
        self._store: Any = None
        self._host = ""

    def ping(self) -> int:
        """The actor's process id."""
        import os

        return os.getpid()

    def update(self, batches: list[list[Any]], update_index: int) -> list[dict[str, float]]:
        """One update per sample list, in order; each one's metrics."""
        return [
            self.update_fn(
                self.policy,
                self.optimizer,
                samples,
                self.config,
                scheduler=self.scheduler,
                update_index=update_index,
            )
            for samples in batches
        ]

    def state(self) -> dict[str, Any]:
        """Weights (the adapter's, or the whole model's), optimizer and scheduler states, on CPU."""
        return {
            "weights": self.weights(),
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "scheduler": self.scheduler.state_dict(),
        }

    def weights(self) -> dict[str, Any]:
        """The trained weights on CPU: the LoRA adapter's, or the model's ``state_dict``."""
        if self.policy.adapter is not None:
            return adapter_state(self.policy)
        with self.policy._state.lock:
            state = self.policy.model.state_dict()
            return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}

    def open_sync(self) -> tuple[str, int]:
        """Open the rendezvous of a gloo weight sync on this node; its ``(host, port)``."""
        import ray

        self._host = ray.util.get_node_ip_address()
        # Kept until the next sync: receivers may still read the store after the broadcast.
        self._store = open_store(self._host)
        return self._host, int(self._store.port)

    def send_full(self, tag: str, world: int, backend: str = "gloo") -> None:
        """Broadcast the full weights as rank 0 of the group opened by :meth:`open_sync`."""
        assert self._store is not None, "open_sync first"
        group = sync_group(self._host, self._store.port, 0, world, tag, self._host, backend)
        send_full(self.policy, group, sync_device(backend))

    def save(self, path: str) -> None:
        """Write the weights for engines to load (the files fallback of full-weight sync)."""
        self.policy.save(path)


def load_learner_state(spec: LearnerSpec, state: dict[str, Any]) -> None:
    """Put a learner's :meth:`Learner.state` into the driver's mirrors of ``spec`` (a sharded
    learner's has full parameters by name and no optimizer state: that goes to the checkpoint
    from every rank, see :mod:`~llm_marl.distributed.sharded_learner`)."""
    policy = spec.policy
    if policy.adapter is not None:
        load_adapter_state(policy, state["weights"])
    elif "params" in state:
        copy_weights(policy, state["params"])
    else:
        with policy._state.lock:
            policy.model.load_state_dict(state["weights"])
    if "optimizer" in state:
        spec.optimizer.load_state_dict(state["optimizer"])
    spec.scheduler.load_state_dict(state["scheduler"])


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor in it moved to the CPU (optimizer states hold nested ones)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value
