"""A trainable :class:`~llm_marl.policies.hf.HFPolicy` sharded over a process group with FSDP2.

:func:`shard_policy` applies PyTorch's own FSDP2 (``torch.distributed.fsdp.fully_shard``) to
the policy's model in place: one FSDP unit per decoder layer (the model's
``_no_split_modules``) and one for the rest, so that parameters, gradients and the AdamW state
built afterwards over :meth:`HFPolicy.parameters` are split across the ranks and each layer is
gathered only while it computes. Options (:class:`ShardingConfig`): mixed precision (bf16
compute parameters, fp32 gradient reduction) and activation checkpointing.

Every rank of the group runs the same code: it builds the same policy, calls
:func:`shard_policy`, builds the optimizer, and calls the unchanged
:func:`~llm_marl.algos.update.policy_gradient_update` with the same samples. The update reads
:func:`data_parallel` and then gives each rank a slice of every forward/backward pass, sums
the loss normalisers (token and sequence counts) across ranks, and FSDP sums the gradients
(the divide factor is set to 1): the gradient is the single-process one.

Weights leave the sharded model one parameter at a time (:func:`full_weights`), so no process
ever holds the whole model to sync an engine or write a consolidated Hugging Face directory
(:func:`save_hf`) -- except the saving rank, which holds the state dict it writes (kept on CPU).

Gloo (CPU) has no pre-multiplied sum, so reductions are plain sums
(``set_force_sum_reduction_for_comms``); NCCL takes the same path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.errors import ConfigError
from llm_marl.policies.hf import enable_checkpointing
from llm_marl.tools.files import replace_dir

if TYPE_CHECKING:
    import torch

    from llm_marl.policies.hf import HFPolicy

__all__ = [
    "DataParallel",
    "ShardingConfig",
    "data_parallel",
    "full_weights",
    "push_weights",
    "save_hf",
    "shard_policy",
]

WeightsConsumer = Callable[[Iterable[tuple[str, "torch.Tensor"]]], None]
"""Takes a stream of ``(name, full tensor)``: vLLM's ``model.load_weights``, a sender over the
learner-engine group, a test's recorder."""


@dataclass
class ShardingConfig:
    """How :func:`shard_policy` shards a policy."""

    mixed_precision: bool = False
    """Compute with bf16 copies of the (fp32, sharded) parameters and reduce gradients in fp32
    (FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``)."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward (transformers' non-reentrant
    checkpointing) instead of keeping them."""
    reshard_after_forward: bool = True
    """Free each layer's gathered parameters after its forward (gathered again in backward):
    ZeRO-3 memory. ``False`` keeps them until backward (ZeRO-2-like: more memory, less
    communication)."""


@dataclass(frozen=True)
class DataParallel:
    """The process group a sharded policy trains in."""

    rank: int
    world_size: int
    group: Any = None
    """The ``torch.distributed`` process group (``None``: the default group)."""


def data_parallel(policy: Any) -> DataParallel | None:
    """The group ``policy`` was sharded over by :func:`shard_policy`, or ``None``."""
    dp = getattr(policy, "data_parallel", None)
    return dp if isinstance(dp, DataParallel) else None


def shard_policy(
    policy: HFPolicy, config: ShardingConfig | None = None, *, group: Any = None
) -> HFPolicy:
    """Shard ``policy``'s model over ``group`` (default: the whole default group) in place.

    Call it on every rank after ``torch.distributed.init_process_group`` and before building
    the optimizer (FSDP2 replaces the parameters with sharded ones). Returns ``policy``.

    LoRA policies over one shared base (:meth:`HFPolicy.shared_lora`) are sharded together:
    the first call shards the base with every adapter on it; a call for another adapter over
    the same, already sharded, model only marks that policy sharded (``config`` was applied by
    the first call).
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError(
            "shard_policy needs torch.distributed initialised on every rank (torchrun, or "
            "init_process_group('gloo' | 'nccl', ...)) before the policy is sharded"
        )
    if data_parallel(policy) is not None:
        raise ValueError(f"policy {policy.name!r} is already sharded")
    if not policy.trainable:
        raise ValueError(f"policy {policy.name!r} is frozen: only trainable policies are sharded")
    config = config or ShardingConfig()
    group = group or dist.group.WORLD
    if isinstance(policy.model, FSDPModule):  # another adapter's policy sharded this base
        return _mark_sharded(policy, group)
    device_type = policy.device.type
    mesh = DeviceMesh.from_group(group, device_type)
    base = policy._base
    if config.activation_checkpointing:
        enable_checkpointing(base, "activation checkpointing", "activation_checkpointing=False")
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if config.mixed_precision
        else MixedPrecisionPolicy()
    )
    shard_kwargs: dict[str, Any] = {
        "mesh": mesh,
        "mp_policy": mp,
        "reshard_after_forward": config.reshard_after_forward,
    }
    layers = _layer_modules(base)
    if not layers:
        raise ConfigError(
            f"{type(base).__name__} names no decoder layer class (_no_split_modules): cannot "
            "shard it layer by layer"
        )
    for layer in layers:
        fully_shard(layer, **shard_kwargs)
    fully_shard(policy.model, **shard_kwargs)
    for module in policy.model.modules():
        if isinstance(module, FSDPModule):
            # The update normalises the loss by the whole minibatch's counts: ranks' gradients
            # add up to the single-process gradient, so sum them, never average.
            module.set_gradient_divide_factor(1.0)
            # Gloo has no PREMUL_SUM; plain sums work everywhere.
            module.set_force_sum_reduction_for_comms(True)
    return _mark_sharded(policy, group)


def _mark_sharded(policy: HFPolicy, group: Any) -> HFPolicy:
    """Point ``policy`` at its sharded model's parameters and record its group."""
    import torch.distributed as dist

    # The chunked LM head calls the backbone and the head outside the model's own forward,
    # which would bypass FSDP's gather of the root unit: score from the model's logits.
    policy.chunked_lm_head = False
    policy.rebind_parameters()
    policy.data_parallel = DataParallel(dist.get_rank(group), dist.get_world_size(group), group)
    return policy


def _layer_modules(model: Any) -> list[Any]:
    """The model's repeated blocks: modules of the classes in ``_no_split_modules``."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def full_weights(policy: HFPolicy, *, adapter_only: bool = False) -> Iterator[tuple[str, Any]]:
    """``(name, full tensor)`` for each parameter of ``policy``, gathered one at a time.

    Names are the underlying ``transformers`` model's (``model.layers.0.mlp.up_proj.weight``;
    tied weights appear once), or with ``adapter_only`` the entries of the policy's peft
    adapter file, as :meth:`HFPolicy.save` writes it: the LoRA weights and the adapter's
    trained copies of whole modules (peft's ``modules_to_save``), adapter name removed
    (``base_model.model....lora_A.weight``, ``base_model.model.model.embed_tokens.weight``). A
    copy tied to another module (an embedding copy that is the output layer too) is gathered
    once and handed under each of its names, as peft's file holds it. For a sharded policy
    each tensor is all-gathered when reached, so at most one parameter is whole at a time;
    every rank of the group must iterate the stream to its end in step (the gathers are
    collective).
    """
    from torch.distributed.tensor import DTensor

    if adapter_only:
        for names, param in _adapter_entries(policy):
            value = param.full_tensor() if isinstance(param, DTensor) else param
            for name in names:
                yield name, value.detach()
        return
    for name, param in policy._base.named_parameters():
        value = param.full_tensor() if isinstance(param, DTensor) else param
        # peft wraps a LoRA policy's layers: its base weights carry a ``base_layer`` segment.
        yield name.replace(".base_layer", ""), value.detach()


def _adapter_entries(policy: HFPolicy) -> list[tuple[list[str], Any]]:
    """Each distinct parameter of ``policy``'s adapter with its names in peft's adapter file.

    peft's own ``get_peft_model_state_dict`` picks and names the entries, from the model's
    parameters as they are (a sharded model's hold only this rank's shards: nothing is
    gathered here).
    """
    from peft import get_peft_model_state_dict

    if policy.adapter is None:
        raise ValueError(f"policy {policy.name!r} has no LoRA adapter")
    state = get_peft_model_state_dict(
        policy.model,
        # keep_vars: the parameters themselves, so that a tied copy is one object.
        state_dict=policy.model.state_dict(keep_vars=True),
        adapter_name=policy.adapter,
        # Only what the adapter trains; "auto" would re-read the base's config to check for a
        # resized vocabulary (which a run here never makes).
        save_embedding_layers=False,
    )
    entries: dict[int, tuple[list[str], Any]] = {}
    for name, param in state.items():
        entries.setdefault(id(param), ([], param))[0].append(name)
    return list(entries.values())


def push_weights(
    policy: HFPolicy, consumer: WeightsConsumer | None, *, adapter_only: bool = False
) -> None:
    """Stream ``policy``'s full weights into ``consumer`` on the rank that has one.

    The hook of a weight sync from a sharded learner: the rank that talks to the engines
    (usually rank 0) passes its consumer (vLLM's ``load_weights``, a sender over the
    learner-engine group); every other rank passes ``None`` and only takes part in the
    gathers. A consumer must read the stream to its end.
    """
    stream = full_weights(policy, adapter_only=adapter_only)
    if consumer is None:
        for _ in stream:
            pass
        return
    consumer(stream)
    if next(stream, None) is not None:
        raise RuntimeError("the weights consumer stopped before the end of the stream")


def save_hf(policy: HFPolicy, path: str | os.PathLike[str], *, rank: int = 0) -> Path | None:
    """Write a consolidated Hugging Face directory of ``policy`` (a LoRA policy: its adapter).

    The full model (``config.json``, safetensors, tokenizer) loads with
    ``AutoModelForCausalLM.from_pretrained`` and as ``hf:PATH`` in ``llm-marl eval``; an
    adapter is written in peft's format, as :meth:`HFPolicy.save` writes it. Every rank calls
    it (the gathers are collective); rank ``rank`` writes, atomically, and gets the path.
    """
    dp = data_parallel(policy)
    writer = dp is None or dp.rank == rank
    adapter = policy.adapter is not None
    state: dict[str, Any] = {}
    for name, tensor in full_weights(policy, adapter_only=adapter):
        if writer:
            # A tied copy comes twice as one tensor; safetensors wants distinct memory.
            state[name] = tensor.detach().to("cpu", copy=True).contiguous()
    if not writer:
        return None
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    if adapter:
        from safetensors.torch import save_file

        policy.model.peft_config[policy.adapter].save_pretrained(str(tmp))
        save_file(state, str(tmp / "adapter_model.safetensors"))
    else:
        _save_full(policy, state, tmp)
    replace_dir(tmp, out)
    return out


def _save_full(policy: HFPolicy, state: dict[str, Any], out: Path) -> None:
    """``save_pretrained`` of a plain copy of the model holding ``state``."""
    import torch
    from transformers import AutoModelForCausalLM

    base = policy._base
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(base.config, dtype=base.dtype)
    plain.load_state_dict(state, strict=False, assign=True)
    plain.tie_weights()
    missing = [n for n, p in plain.named_parameters() if p.is_meta]
    if missing:
        raise RuntimeError(f"consolidating {policy.name!r}: no weights for {missing[:5]}")
    plain.generation_config = base.generation_config
    plain.save_pretrained(str(out))
    policy.tokenizer.save_pretrained(str(out))
