"""A sharded learner under Ray: ``policies.world_size`` learner actors that train one policy
with FSDP2, as the ranks of a ``torchrun`` launch do.

:class:`~llm_marl.distributed.executor.RayExecutor` starts one :class:`ShardedLearner` per rank
(one placement-group bundle each, ``learner_cpus`` / ``learner_gpus`` per rank). Each builds the
driver's copy of the policy; rank 0 runs a ``TCPStore`` on its node's IP
(:meth:`ShardedLearner.rendezvous`) and every rank joins a ``torch.distributed`` group over it
(:meth:`ShardedLearner.join`: gloo on CPU, NCCL on CUDA), shards the policy with the torchrun
path's own :func:`~llm_marl.policies.sharded.shard_policy`, builds the optimizer over the
sharded parameters and loads the driver's optimizer state into it (each rank keeps its slices
of every moment). From then on every call is collective -- the executor calls it on every rank
at once:

* :meth:`Learner.update`: the unchanged
  :func:`~llm_marl.algos.update.policy_gradient_update` on the same samples on every rank; it
  reads :func:`~llm_marl.policies.sharded.data_parallel`, gives each rank a slice of every pass
  and sums the loss normalisers (token counts) across ranks, so the gradient is the
  single-process one;
* :meth:`ShardedLearner.send_full`: full weights to the engines, gathered one parameter at a
  time (:func:`~llm_marl.policies.sharded.push_weights`) and broadcast by rank 0 over the
  learner-engine group of :mod:`~llm_marl.distributed.weights`;
* :meth:`ShardedLearner.weights` / :meth:`ShardedLearner.state`: the gathered LoRA adapter (for
  the engines) or the full parameters and the scheduler state (for the driver's mirror, before
  a checkpoint), on rank 0;
* :meth:`ShardedLearner.save_shards`: every rank's DCP shards of the weights and optimizer
  state (the torchrun path's ``LearnerState.save``) into the checkpoint being written;
* :meth:`ShardedLearner.save`: a consolidated Hugging Face directory (the files fallback of the
  engine sync).

:func:`load_full`, the loader of a plain optimizer state into a sharded policy, serves the
torchrun path too: it resumes a single-process run's checkpoint on several ranks.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llm_marl.distributed.learner import Learner, LearnerInit
from llm_marl.distributed.weights import send_stream, sync_device, sync_group
from llm_marl.errors import CheckpointError
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.sharded import full_weights, push_weights, save_hf, shard_policy

if TYPE_CHECKING:
    import torch
    from torch.optim import Optimizer

GROUP_TIMEOUT_S = 1800.0
"""How long a collective of the learner group may wait for a slow rank."""


class ShardedLearner(Learner):
    """One rank of a sharded learner (see the module docstring).

    Args:
        init: the policy copy, the algorithm's functions, the optimizer states to start from
            and the sharding (``init.sharding``).
        device: ``"cuda"`` when the ranks reserve GPUs, else ``"cpu"``.
        rank: this actor's rank in the learner group.
    """

    def __init__(self, init: LearnerInit, device: str, rank: int) -> None:
        import torch

        assert init.sharding is not None, "a sharded learner"
        torch.set_num_threads(max(1, torch.get_num_threads()))
        self.policy = init.copy.build(device)
        self.config = init.config
        self.update_fn = init.update
        self.sharding = init.sharding
        self.rank = rank
        self._init: LearnerInit | None = init  # the optimizer is built once the group formed
        self._group_store: Any = None
        self._store: Any = None
        self._host = ""

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: open the learner group's ``TCPStore`` on this node; its ``(host, port)``."""
        import ray
        import torch.distributed as dist

        host = ray.util.get_node_ip_address()
        self._group_store = dist.TCPStore(
            host,
            0,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )
        return host, int(self._group_store.port)

    def join(self, host: str, port: int) -> None:
        """Join the learner group (collective), shard the policy, build and load the optimizer."""
        import torch.distributed as dist

        assert self._init is not None, "join once"
        timeout = datetime.timedelta(seconds=GROUP_TIMEOUT_S)
        store = self._group_store
        if store is None:
            store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
        backend = "nccl" if self.policy.device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend,
            store=dist.PrefixStore("learner", store),
            rank=self.rank,
            world_size=self.sharding.world_size,
            timeout=timeout,
        )
        shard_policy(self.policy, self.sharding.config)
        init = self._init
        self.optimizer, self.scheduler = init.make_optimizer(self.policy.parameters(), self.config)
        load_full(self.policy, self.optimizer, init.optimizer_state)
        self.scheduler.load_state_dict(init.scheduler_state)
        self._init = None

    def weights(self) -> dict[str, Any]:
        """Collective: the gathered LoRA adapter (peft's names) or full parameters
        (:func:`~llm_marl.policies.sharded.full_weights`' names) on CPU, on rank 0 (``{}``
        elsewhere)."""
        adapter_only = self.policy.adapter is not None
        out = {}
        for name, tensor in full_weights(self.policy, adapter_only=adapter_only):
            if self.rank == 0:
                out[name] = tensor.to("cpu", copy=True)
        return out

    def state(self) -> dict[str, Any]:
        """Collective: rank 0's weights and scheduler state for the driver's mirror (the
        optimizer state stays sharded: :meth:`save_shards` writes it); ``{}`` elsewhere."""
        weights = self.weights()
        if self.rank != 0:
            return {}
        key = "weights" if self.policy.adapter is not None else "params"
        return {key: weights, "scheduler": self.scheduler.state_dict()}

    def send_full(self, tag: str, world: int, backend: str = "gloo") -> None:
        """Collective: every rank gathers each parameter in turn; rank 0 broadcasts it to the
        engines as rank 0 of the sync group opened by :meth:`open_sync`."""
        if self.rank != 0:
            push_weights(self.policy, None)
            return
        assert self._store is not None, "open_sync first"
        group = sync_group(self._host, self._store.port, 0, world, tag, self._host, backend)
        push_weights(self.policy, lambda stream: send_stream(stream, group, sync_device(backend)))

    def save(self, path: str) -> None:
        """Collective: rank 0 writes a consolidated Hugging Face directory (files sync)."""
        save_hf(self.policy, path, rank=0)

    def save_shards(self, path: str) -> None:
        """Collective: every rank writes its DCP shards of the weights and optimizer state."""
        self.sharding.checkpoint(self.policy, self.optimizer).save(path)


def load_full(
    policy: HFPolicy,
    optimizer: Optimizer,
    optimizer_state: Mapping[str, Any] | None,
    weights: Mapping[str, torch.Tensor] | None = None,
    *,
    from_rank0: bool = False,
) -> None:
    """Load a plain (unsharded) optimizer state, and whole trainable weights if given, into
    ``policy`` sharded with FSDP2 and ``optimizer`` built over its sharded parameters.

    Collective, on torch's ``set_optimizer_state_dict`` / ``set_model_state_dict``
    (``full_state_dict``): every rank keeps its shard of each tensor. ``optimizer_state`` is the
    ``Optimizer.state_dict()`` of an optimizer over :meth:`HFPolicy.parameters` in the same order
    (a single-process run's, the driver's); ``weights`` maps the model's parameter names to full
    tensors (a LoRA policy: its adapter's). Without ``from_rank0`` every rank passes the same
    state (the Ray learner) and ``weights=None`` keeps the policy's; with it (a torchrun resume
    of a single-process checkpoint) rank 0 passes both and broadcasts them, the other ranks pass
    ``None``. Saved parameter groups unlike ``optimizer``'s are a
    :class:`~llm_marl.errors.CheckpointError`.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    if not from_rank0 and optimizer_state is not None and not optimizer_state["state"]:
        # Nothing stepped yet: torch's loader would build the moments with a zero-lr step
        # (a step count of 1); a plain load keeps the fresh optimizer's.
        optimizer.load_state_dict(dict(optimizer_state))
        return
    # Not strict: only the trainable weights come; the frozen ones are already every rank's.
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=from_rank0, strict=False)
    if from_rank0 or weights is not None:
        set_model_state_dict(policy.model, dict(weights or {}), options=options)
    named: dict[str, Any] = {}
    if optimizer_state is not None:
        named = _named_optimizer_state(policy, optimizer, optimizer_state)
    # A leftover gradient (e.g. from a format warm-up) would keep torch from building the
    # state that the loaded one replaces.
    optimizer.zero_grad(set_to_none=True)
    set_optimizer_state_dict(policy.model, optimizer, named, options=options)


def _named_optimizer_state(
    policy: HFPolicy, optimizer: Optimizer, state: Mapping[str, Any]
) -> dict[str, Any]:
    """``state`` (keyed by parameter index, torch's format) keyed by parameter name instead,
    as ``set_optimizer_state_dict`` reads a full state: index ``i`` of the saved groups is
    the ``i``-th parameter of ``optimizer``'s groups."""
    names = {id(param): name for name, param in policy.model.named_parameters()}
    saved, current = state["param_groups"], optimizer.param_groups
    sizes = ([len(g["params"]) for g in saved], [len(g["params"]) for g in current])
    if sizes[0] != sizes[1]:
        raise CheckpointError(
            f"the checkpoint's optimizer of {policy.name!r} holds parameter groups of sizes "
            f"{sizes[0]}, this policy's optimizer {sizes[1]}: it was not saved by this policy"
        )
    name_of: dict[int, str] = {}
    groups = []
    for old, new in zip(saved, current):
        for index, param in zip(old["params"], new["params"]):
            name_of[index] = names[id(param)]
        groups.append({**old, "params": [name_of[i] for i in old["params"]]})
    return {
        "state": {name_of[index]: value for index, value in state["state"].items()},
        "param_groups": groups,
    }
