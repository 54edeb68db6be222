"""Memory planning: what each policy of a run needs per rank, before any model is built.

``llm-marl train --dry-run`` prints :func:`plan` for the resolved run config: for each
trainable policy the parameter, gradient, optimizer and activation memory on each of its
``policies.world_size`` ranks, and whether that fits ``policies.device_memory_gib``; frozen
local models get their weights' memory.

Where the figures come from:

* **Parameters** are counted exactly: the model is instantiated from its config on PyTorch's
  ``meta`` device (shapes only, no memory), read with ``transformers.AutoConfig`` from a local
  directory or the Hugging Face cache (``HF_HUB_OFFLINE``: a model never fetched is a one-line
  error). LoRA's parameters: ``rank x (in + out)`` for every linear layer but the LM head.
* **Sharding** (FSDP2, ZeRO-3): parameters, gradients and AdamW's two moments are split over
  the ranks; each rank also holds the gathered weights of the root unit (embeddings, final
  norm, LM head: gathered for the whole forward) and of the layer being computed and the next
  one (prefetch), counted under parameters.
* **Gradients** have the trained weights' dtype and size; **AdamW** keeps two moments of it.
  A fully fine-tuned policy with a KL term keeps a frozen reference copy (parameters).
* **Activations** of one forward/backward pass of ``micro_batch_tokens`` padded tokens (a
  rank's share of it, when sharded), as the autograd graph of a Llama/Qwen-style decoder layer
  with fused attention keeps them (per token and layer: the two RMSNorms' inputs and outputs,
  the attention's q, k, v, output and log-sum-exp, the MLP's four intermediate tensors), plus
  the completion logits where they exist in full (a sharded policy scores from the model's
  logits; one process uses the chunked LM head, which keeps almost none). With activation
  checkpointing only each layer's input is kept, plus one layer's activations while it is
  recomputed.

The KV cache of generation and the framework's own buffers are not counted; leave headroom.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.errors import ConfigError

if TYPE_CHECKING:
    from llm_marl.train.run import RunConfig

__all__ = [
    "ModelShape",
    "PolicyMemory",
    "estimate",
    "format_plan",
    "model_config",
    "model_shape",
    "plan",
]

GIB = 1 << 30
_FP32 = 4
_RANKS = (1, 2, 4, 8, 16, 32, 64)

_QWEN25_3B = {
    "model_type": "qwen2",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}
KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    # The paper presets' models, from their published config.json files, so that a plan
    # needs no download. Used only when the config is not found locally or in the HF cache.
    # Checked (2026-11-28) against copies of those files in public GitHub repositories:
    # - Qwen2.5-3B, Qwen2.5-7B, Qwen3-14B, Llama-3.2-3B: the config.json files collected in
    #   github.com/citsjtu2020/LLM-Prof, sglang/Model_Config.md (base models; their Instruct
    #   versions share the shapes). Every field below matches.
    # - Qwen2.5-Coder-3B: its model card (mirrored in github.com/ZHUI/paddlenlp_model_readme,
    #   Qwen/Qwen2.5-Coder-3B/index.md): 36 layers, 16 Q / 2 KV heads, tied embeddings,
    #   3.09B parameters -- the Qwen2.5-3B shape, which counts 3.09B here too.
    # - Qwen3-1.7B: github.com/zyzshishui/slime, scripts/models/qwen3-1.7B.sh (28 layers,
    #   hidden 2048, FFN 6144, 16 heads, 8 KV groups, head dim 128, vocab 151936); tied
    #   embeddings from the 1.72B total in github.com/keras-team/keras-hub,
    #   keras_hub/src/models/qwen3/qwen3_presets.py (untied it would be 2.03B).
    "Qwen/Qwen2.5-3B-Instruct": _QWEN25_3B,
    "Qwen/Qwen2.5-Coder-3B": _QWEN25_3B,
    "Qwen/Qwen2.5-7B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "Qwen/Qwen3-1.7B": {
        "model_type": "qwen3",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "Qwen/Qwen3-14B": {
        "model_type": "qwen3",
        "hidden_size": 5120,
        "intermediate_size": 17408,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
    "meta-llama/Llama-3.2-3B-Instruct": {
        "model_type": "llama",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    },
}
"""Hub id -> the ``config.json`` fields that fix a model's size, for models never downloaded."""


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a causal LM that its memory depends on."""

    params: int
    """Every parameter (tied weights once)."""
    lora_params: int
    """LoRA parameters at the rank asked for (0 without LoRA)."""
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    largest_layer: int
    """Parameters of the largest decoder layer (an FSDP unit of its own)."""
    root_params: int
    """Parameters outside the decoder layers (embeddings, final norm, untied LM head): the
    root FSDP unit, gathered for the whole forward."""


@dataclass(frozen=True)
class PolicyMemory:
    """One policy's memory on one of its ranks, in bytes."""

    name: str
    model: str
    trainable: bool
    ranks: int
    params: int
    grads: int
    optimizer: int
    activations: int
    min_ranks: int | None = None
    """The fewest ranks (1, 2, 4, ... 64) on which it fits the device (``None``: not even 64;
    frozen policies are not sharded: 1 or ``None``)."""

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations

    def fits(self, device_bytes: int) -> bool:
        return self.total <= device_bytes


def model_config(model: str) -> Any:
    """The ``transformers`` config of ``model`` (``tiny``, a local directory or a Hub id)."""
    from llm_marl.train.models import TINY

    if model == TINY:
        from llm_marl.policies.tiny import tiny_config

        # What tiny_models builds for each agent: one layer of the default tiny LM.
        return tiny_config(num_layers=1)
    from transformers import AutoConfig

    name = model.removeprefix("hf:")
    try:
        return AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        if name in KNOWN_SHAPES:
            fields = dict(KNOWN_SHAPES[name])
            return AutoConfig.for_model(fields.pop("model_type"), **fields)
        where = "no such directory" if not Path(name).exists() else "no readable config.json"
        offline = os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0")
        hint = (
            " (HF_HUB_OFFLINE is set and it is not in the local cache: download it once, "
            "or pass a local directory)"
            if offline
            else ""
        )
        raise ConfigError(f"cannot read the config of model {name!r}: {where}{hint}") from exc


def model_shape(config: Any, lora_rank: int | None = None) -> ModelShape:
    """Count ``config``'s parameters on the meta device (no memory is allocated)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    lora = 0
    if lora_rank:
        head = model.get_output_embeddings()
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module is not head:
                lora += lora_rank * (module.in_features + module.out_features)
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    in_layers = sum(p.numel() for m in layers for p in m.parameters())
    largest = max([sum(p.numel() for p in m.parameters()) for m in layers], default=0)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    return ModelShape(
        params=params,
        lora_params=lora,
        layers=len(layers) or int(text.num_hidden_layers),
        hidden=int(text.hidden_size),
        intermediate=int(getattr(text, "intermediate_size", 4 * text.hidden_size)),
        heads=heads,
        kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
        head_dim=int(getattr(text, "head_dim", None) or text.hidden_size // heads),
        vocab=int(text.vocab_size),
        largest_layer=largest,
        root_params=params - in_layers,
    )


def _layer_activation_elements(shape: ModelShape) -> int:
    """Elements one decoder layer keeps for backward, per token (see the module docstring)."""
    norms = 2 * 3 * shape.hidden  # each RMSNorm: input, fp32 input, normalised output
    q = shape.heads * shape.head_dim
    kv = shape.kv_heads * shape.head_dim
    attention = shape.hidden + 3 * q + 2 * kv + shape.heads  # proj input, q, k, v, out, lse
    mlp = shape.hidden + 4 * shape.intermediate  # input, gate, up, act(gate), product
    return norms + attention + mlp


def estimate(
    shape: ModelShape,
    *,
    trainable: bool = True,
    lora: bool = False,
    world_size: int = 1,
    param_bytes: int = _FP32,
    mixed_precision: bool = False,
    activation_checkpointing: bool = False,
    tokens: int = 4096,
    reference: bool = False,
    adapters: int = 1,
    name: str = "",
    model: str = "",
) -> PolicyMemory:
    """One policy's memory per rank (see the module docstring for what is counted).

    ``adapters``: with ``lora``, how many adapters (one per trainable agent) share the base.
    """
    w = max(1, world_size)
    compute_bytes = 2 if mixed_precision else param_bytes
    params = shape.params * param_bytes // w
    if w > 1:  # gathered, in the compute dtype: the root unit, the current and next layer
        params += (shape.root_params + 2 * shape.largest_layer) * compute_bytes
    if reference and not lora:
        params += shape.params * compute_bytes
    if not trainable:
        return PolicyMemory(name, model, False, 1, shape.params * param_bytes, 0, 0, 0)
    trained = shape.lora_params * adapters if lora else shape.params
    if lora:
        params += trained * _FP32 // w
    grad_bytes = _FP32 if lora else param_bytes
    grads = trained * grad_bytes // w
    optimizer = 2 * trained * grad_bytes // w
    local_tokens = -(-tokens // w)
    per_layer = _layer_activation_elements(shape) * compute_bytes
    if activation_checkpointing:
        layers = local_tokens * (shape.layers * shape.hidden * compute_bytes + per_layer)
    else:
        layers = local_tokens * shape.layers * per_layer
    # Full logits (sharded): the logits, their fp32 copy and fp32 log-softmax per token.
    head = local_tokens * shape.vocab * (compute_bytes + 2 * _FP32) if w > 1 else 0
    return PolicyMemory(name, model, True, w, params, grads, optimizer, layers + head)


def _dtype_bytes(dtype: str | None) -> int:
    if dtype in (None, "", "float32", "fp32", "auto"):
        return _FP32
    if dtype in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return 2
    raise ConfigError(f"unknown dtype {dtype!r} for the memory plan; use float32 or bfloat16")


def plan(config: RunConfig) -> list[PolicyMemory]:
    """Each policy of ``config`` and its memory per rank, from configs alone."""
    from llm_marl.train.models import TINY, check_agents

    pol = config.policies
    algo = config.algorithm
    tokens = int(getattr(algo, "micro_batch_tokens", 4096))
    reference = float(getattr(algo, "kl_coef", 0.0)) > 0
    trainable = check_agents(pol, _agents(config), config.trainer.env)
    if pol.share or pol.lora:  # one model for every trainable agent
        groups = [(", ".join(trainable), pol.model)]
    else:
        groups = [(a, pol.model) for a in trainable]
    param_bytes = _dtype_bytes(pol.dtype)
    shape = model_shape(model_config(pol.model), pol.lora_rank if pol.lora else None)
    out = []
    device = int(pol.device_memory_gib * GIB)
    for name, model in groups:
        settings: dict[str, Any] = {
            "lora": pol.lora,
            "param_bytes": param_bytes,
            "mixed_precision": pol.mixed_precision,
            "activation_checkpointing": pol.gradient_checkpointing,
            "tokens": tokens,
            "reference": reference,
            "adapters": len(trainable) if pol.lora else 1,
            "name": name,
            "model": model,
        }
        fitting = (w for w in _RANKS if estimate(shape, world_size=w, **settings).fits(device))
        mem = estimate(shape, world_size=pol.world_size, **settings)
        out.append(dataclasses.replace(mem, min_ranks=next(fitting, None)))
    frozen_models: dict[str, list[str]] = {}
    for agent, spec in pol.frozen.items():
        frozen_models.setdefault(spec, []).append(agent)
    for spec, agents in frozen_models.items():
        local = spec == TINY or spec.startswith("hf:")
        if not local:
            continue  # a server, a function: no memory here
        frozen = estimate(
            model_shape(model_config(spec)),
            trainable=False,
            param_bytes=param_bytes,
            name=", ".join(agents),
            model=spec,
        )
        out.append(dataclasses.replace(frozen, min_ranks=1 if frozen.fits(device) else None))
    return out


def _agents(config: RunConfig) -> list[str]:
    """The env's agents: its class's ``possible_agents`` where it names them (no data is
    loaded), else those of an env built without models."""
    from llm_marl.envs.registration import make, spec
    from llm_marl.errors import LLMMarlError

    env_id = config.trainer.env
    entry = spec(env_id).entry_point
    if isinstance(entry, str):
        import importlib

        module, _, name = entry.partition(":")
        with contextlib.suppress(ImportError, AttributeError):
            agents = getattr(importlib.import_module(module), name).possible_agents
            if isinstance(agents, (list, tuple)) and agents:
                return [str(a) for a in agents]
    try:
        env = make(env_id, **config.trainer.env_kwargs)
    except LLMMarlError as exc:
        raise ConfigError(f"cannot plan memory for {env_id}: {exc}") from exc
    return list(env.possible_agents)


def format_plan(rows: list[PolicyMemory], device_gib: float) -> str:
    """The table ``--dry-run`` prints: GiB per rank, a fits verdict, the fewest ranks that fit."""
    device = int(device_gib * GIB)
    lines = [
        f"memory per rank (GiB), device memory {device_gib:g} GiB:",
        f"{'policy':<24} {'model':<28} {'ranks':>5} {'params':>8} {'grads':>8} "
        f"{'optim':>8} {'activ':>8} {'total':>8}  fits  needs",
    ]
    for r in rows:
        kind = r.name + ("" if r.trainable else " (frozen)")
        needs = f"{r.min_ranks} device(s)" if r.min_ranks else "more than 64 devices"
        lines.append(
            f"{kind[:24]:<24} {r.model[-28:]:<28} {r.ranks:>5} {r.params / GIB:>8.3f} "
            f"{r.grads / GIB:>8.3f} {r.optimizer / GIB:>8.3f} {r.activations / GIB:>8.3f} "
            f"{r.total / GIB:>8.3f}  {'yes' if r.fits(device) else 'NO ':<4}  {needs}"
        )
    return "\n".join(lines)
