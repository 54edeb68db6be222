"""Sharded learner checkpoints with ``torch.distributed.checkpoint`` (DCP).

:class:`LearnerState` is a learner checkpoint: a policy's trainable weights, its optimizer and
its scheduler state. Its ``save`` writes a DCP checkpoint: every rank writes its own shards, in
parallel, and no rank gathers the model. Its ``load`` reads one into a policy sharded over any
number of ranks -- or not sharded at all (one process, no process group): DCP re-slices the
saved shards for the layout it loads into. Keys are the model's parameter names
(``get_state_dict`` / ``set_state_dict`` of ``torch.distributed.checkpoint.state_dict``), so
the optimizer state follows its parameters whatever the sharding.

A LoRA policy saves only what it trains (``ignore_frozen_params``): the base is read again
from its source. The consolidated Hugging Face directory of a policy is
:func:`llm_marl.policies.sharded.save_hf`.

A single-process run's checkpoint has no DCP folder: its weights are the consolidated ones and
its optimizer state is torch's plain ``Optimizer.state_dict()``. :func:`restore_optimizers` loads
those into a sharded policy with the Ray learner's
:func:`~llm_marl.distributed.sharded_learner.load_full` (``from_rank0``): rank 0 holds them
whole and broadcasts each tensor to the ranks, which keep their shards.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.distributed.sharded_learner import load_full
from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.policies.sharded import data_parallel
from llm_marl.tools.files import replace_dir

if TYPE_CHECKING:
    import torch
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from llm_marl.policies.hf import HFPolicy

__all__ = ["LearnerState", "load_full", "restore_optimizers", "sharded_learners"]

FullWeights = Callable[["HFPolicy"], "Mapping[str, torch.Tensor] | None"]
"""A sharded policy's trainable weights, whole, by the model's parameter names, on rank 0 (the
consolidated weights a checkpoint held); ``None`` on the other ranks."""


def _options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Not strict: the frozen weights a LoRA policy leaves out are missing on purpose. What was
    # saved must still all be found (DCP's load raises on a key the checkpoint lacks).
    return StateDictOptions(ignore_frozen_params=True, strict=False)


def _barrier(policy: HFPolicy) -> None:
    import torch.distributed as dist

    dp = data_parallel(policy)
    if dp is not None:
        dist.barrier(group=dp.group)


@dataclass
class LearnerState:
    """A learner checkpoint, as DCP's ``Stateful`` (:meth:`state_dict`, :meth:`load_state_dict`).

    :meth:`save` and :meth:`load` give DCP its state dict as the checkpoint's top level (keys
    ``model.*``, ``optimizer.*``, ``scheduler.*``): under a key of its own, as a value of a larger
    state dict, every key would gain that prefix and earlier checkpoints would no longer load.
    """

    policy: HFPolicy
    optimizer: Optimizer
    scheduler: LRScheduler | None = None

    def state_dict(self) -> dict[str, Any]:
        """This rank's shards of the trainable weights and optimizer state (by parameter name),
        and the scheduler state."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model, optim = get_state_dict(self.policy.model, self.optimizer, options=_options())
        state: dict[str, Any] = {"model": model, "optimizer": optim}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` (as DCP loaded it) into the policy, optimizer and scheduler."""
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(
            self.policy.model,
            self.optimizer,
            model_state_dict=state_dict["model"],
            optim_state_dict=state_dict["optimizer"],
            options=_options(),
        )
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state_dict["scheduler"])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the state to ``path``; every rank of the policy's group calls it. The checkpoint
        appears whole or not at all: the ranks write into ``PATH.tmp``, which the first rank
        moves into place after all are done."""
        import torch.distributed.checkpoint as dcp

        out = Path(path)
        tmp = out.with_name(out.name + ".tmp")
        dp = data_parallel(self.policy)
        first = dp is None or dp.rank == 0
        if first:
            shutil.rmtree(tmp, ignore_errors=True)
            out.parent.mkdir(parents=True, exist_ok=True)
        _barrier(self.policy)
        dcp.save(self.state_dict(), checkpoint_id=str(tmp), process_group=dp.group if dp else None)
        _barrier(self.policy)
        if first:
            replace_dir(tmp, out)
        _barrier(self.policy)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Load a :meth:`save` checkpoint into the policy, optimizer and scheduler: a policy
        sharded over any number of ranks (every rank calls it), or a plain one-process one."""
        import torch.distributed.checkpoint as dcp

        src = Path(path)
        if not (src / ".metadata").is_file():
            raise CheckpointError(f"{src} is not a sharded checkpoint (no .metadata)")
        dp = data_parallel(self.policy)
        # get_state_dict builds a fresh optimizer's state (a zero-lr step) so that DCP has
        # tensors to load into -- but not when a gradient is left over (e.g. from a format
        # warm-up): it would then load no moments at all. The checkpoint replaces them anyway.
        self.optimizer.zero_grad(set_to_none=True)
        state = self.state_dict()
        dcp.load(state, checkpoint_id=str(src), process_group=dp.group if dp else None)
        self.load_state_dict(state)


def sharded_learners(algorithm: Any) -> dict[str, tuple[HFPolicy, Optimizer]]:
    """``key -> (policy, optimizer)`` of the algorithm's trainable policies that are sharded
    (the keys of ``algorithm.groups``, one optimizer each)."""
    groups = getattr(algorithm, "groups", {}) or {}
    optimizers = getattr(algorithm, "optimizers", {}) or {}
    return {
        key: (policy, optimizers[key])
        for key, (policy, _) in groups.items()
        if data_parallel(policy) is not None and key in optimizers
    }


def restore_optimizers(
    algorithm: Any, state: dict[str, Any], full_weights: FullWeights | None = None
) -> None:
    """Load the optimizer states of ``state["optimizers"]`` that a plain load cannot take
    into the algorithm's policies and optimizers, and put each optimizer's loaded state in its
    entry, in place.

    ``state`` is an ``algorithm.pt`` read by :func:`~llm_marl.train.checkpoint.load_checkpoint`
    (markers resolved to absolute paths); ``algorithm.load_state_dict(state)`` then restores
    the rest as for any checkpoint. An entry naming a DCP folder is loaded with its weights by
    :meth:`LearnerState.load`, into policies sharded over any number of ranks (every rank calls
    it) or plain single-process ones. A plain entry (a single-process run's checkpoint) of a
    sharded policy is loaded with :func:`~llm_marl.distributed.sharded_learner.load_full` from
    rank 0, with the policy's weights from ``full_weights``; without them it is refused.
    """
    from llm_marl.train.checkpoint import dcp_path

    entries = state.get("optimizers")
    if not isinstance(entries, dict):
        return
    groups = getattr(algorithm, "groups", {}) or {}
    optimizers = getattr(algorithm, "optimizers", {}) or {}
    for key, entry in entries.items():
        path = dcp_path(entry)
        if key not in optimizers or key not in groups:
            continue  # algorithm.load_state_dict names the mismatch
        policy = groups[key][0]
        dp = data_parallel(policy)
        if path is not None:
            LearnerState(policy, optimizers[key]).load(path)
        elif dp is None:
            continue  # a plain state for a plain optimizer: algorithm.load_state_dict
        elif full_weights is None:
            raise ConfigError(
                f"the checkpoint's optimizer of {key!r} was saved by a single-process run and "
                "no consolidated weights were given to load with it: resume it with "
                "policies.world_size 1, or through llm-marl train under torchrun"
            )
        else:
            # Rank 0's entry is the saved state; the others' is not read (rank 0 sends it).
            weights = full_weights(policy)
            saved = entry if dp.rank == 0 else None
            load_full(policy, optimizers[key], saved, weights, from_rank0=True)
        entries[key] = optimizers[key].state_dict()
