"""Memory-lean per-token log-probs for :meth:`HFPolicy.sequence_logprobs`.

A causal LM's log-prob of token ``y`` at one position is ``logit[y] - logsumexp(logits)``. The
plain way materialises the ``(batch, completion_len, vocab)`` logits, copies them
(``.float() / temperature``) and keeps several such tensors alive for backward: at Qwen's
151,936-token vocabulary one 256-token completion costs hundreds of MiB. Here the backbone
runs once to give final hidden states; only the real (unpadded) completion positions go through
the LM head, one (token tile x vocabulary chunk) block at a time, in a custom autograd
function that keeps one logsumexp per token and recomputes each block in backward (activation
checkpointing specialised to the head, without a weight-gradient tensor per block). Peak
memory above the model is about one block of logits plus the gradients, whatever the
completion length.

This is only exact for models whose logits ARE ``lm_head(last_hidden_state)``. That is
checked, never assumed (:func:`split_lm_head`): a model that post-processes logits (soft-capping,
a logit scale, ...), scales hidden states before its head, calls its head in an unusual way,
or whose head is not a plain ``nn.Linear`` (e.g. a LoRA adapter on ``lm_head``) is reported as
not splittable, and the caller keeps the full-logits path (:func:`full_logits_logprobs`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

from llm_marl.policies.kv_cache import cache_keyword, output_cache

if TYPE_CHECKING:
    import torch

__all__ = [
    "CHUNK_ELEMENTS",
    "HeadSplit",
    "chunked_logprobs",
    "full_logits_logprobs",
    "split_lm_head",
]

CHUNK_ELEMENTS = 1 << 21
"""Logits computed at once (tokens x vocabulary entries): 8 MiB of float32. A block is up to
:data:`TILE_TOKENS` tokens by as many vocabulary entries as fit (8,192 for 256 tokens)."""

# Config attributes of transformers models that change logits after the LM head. A model with
# one of them set is refused without probing: the probe below would catch these too, but a
# soft-cap is nearly the identity on small logits, so refusing by name is the safer first line.
_LOGIT_POSTPROCESSING = (
    "final_logit_softcapping",
    "logit_scale",
    "logits_scaling",
    "output_multiplier_scale",
    "mup_width_multiplier",
)


class HeadSplit(NamedTuple):
    """A causal LM seen as ``head(decoder(...).last_hidden_state)``."""

    decoder: Any
    """The backbone (``get_decoder()``): returns the final, normalised hidden states."""
    head: torch.nn.Linear
    """The LM head (``get_output_embeddings()``), a plain ``nn.Linear``."""

    def hidden_states(self, **kwargs: Any) -> torch.Tensor:
        """``(batch, seq, hidden)`` final hidden states of the backbone for these inputs."""
        return _last_hidden(self.decoder(**kwargs))

    def shared_prompts_hidden(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        row_prompt: torch.Tensor,
        completions: torch.Tensor,
        completion_mask: torch.Tensor,
    ) -> torch.Tensor | None:
        """Hidden states predicting each completion token, each distinct prompt encoded once.

        ``prompts`` and ``prompt_mask`` are ``(N, P)``, left padded (every prompt ends at column
        ``P - 1``); ``row_prompt`` is ``(B,)``: the prompt of each completion row;
        ``completions`` and ``completion_mask`` are ``(B, C)``, right padded. Returns
        ``(B, C, hidden)``: row ``t`` predicts completion token ``t``. The ``N`` prompts run
        through the backbone in one pass and their key/value cache is gathered for the ``B``
        completions, so a GRPO group's shared prompt costs one forward instead of ``G``, and
        several groups go through in one pass; gradients through the gathered cache sum over
        the rows that share a prompt, as separate passes would. ``None`` when the backbone
        returns no cache that can be gathered (the caller then encodes each row whole).
        """
        import torch

        if self.decoder.training and getattr(self.decoder, "gradient_checkpointing", False):
            return None  # checkpointed layers neither fill nor read a cache
        width = int(completions.shape[1])
        p_width = int(prompts.shape[1])
        # Positions count real tokens only, as generate() numbers a left-padded prompt.
        prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.decoder(
            input_ids=prompts,
            attention_mask=prompt_mask,
            position_ids=prompt_positions,
            use_cache=True,
        )
        cache = output_cache(out)
        length = getattr(cache, "get_seq_length", None)
        # A cache that does not hold the whole prompt (a layer that skipped it) cannot serve.
        if not callable(length) or length() != p_width or not _gather_cache_rows(cache, row_prompt):
            return None
        starts = prompt_mask.sum(-1)[row_prompt]
        positions = starts.unsqueeze(-1) + torch.arange(width, device=prompts.device)
        tail = self.hidden_states(
            input_ids=completions,
            attention_mask=torch.cat([prompt_mask[row_prompt], completion_mask], dim=1),
            position_ids=positions,
            use_cache=True,
            **{cache_keyword(self.decoder): cache},
        )
        # A prompt's last position predicts completion token 0; token t>0 is predicted by
        # completion position t-1.
        first = _last_hidden(out)[:, -1:].index_select(0, row_prompt)
        return torch.cat([first, tail[:, : width - 1]], dim=1)


def _gather_cache_rows(cache: Any, rows: torch.Tensor) -> bool:
    """Replace each layer's keys and values by their ``rows`` (a row may repeat); False if the
    cache's layout is unknown.

    ``index_select``, not transformers' ``batch_select_indices``: that indexes with
    ``keys[rows]``, whose backward accumulates the repeated rows' gradients with parallel
    atomic adds on CPU, in an order that varies from call to call, so two identical runs
    drifted apart in the last bits. ``index_select``'s backward adds them in a fixed order.
    """
    layers = getattr(cache, "layers", None)
    if isinstance(layers, list) and all(hasattr(layer, "keys") for layer in layers):
        for layer in layers:
            if layer.keys is not None and layer.keys.dim() == 4:
                layer.keys = layer.keys.index_select(0, rows)
                layer.values = layer.values.index_select(0, rows)
        return True
    keys, values = getattr(cache, "key_cache", None), getattr(cache, "value_cache", None)
    if isinstance(keys, list) and isinstance(values, list):  # transformers before 4.56
        for i in range(len(keys)):
            if keys[i].dim() == 4:
                keys[i] = keys[i].index_select(0, rows)
                values[i] = values[i].index_select(0, rows)
        return True
    return False


# Verdict of the probe, per model called: (id(decoder), id(head)) -> splittable. Keyed by the
# module identities so a head swapped or wrapped (e.g. LoRA added to lm_head) is probed again.
_VERDICTS: weakref.WeakKeyDictionary[Any, tuple[int, int, bool]] = weakref.WeakKeyDictionary()


def _base_model(model: Any) -> Any:
    """The ``PreTrainedModel`` inside a peft wrapper (or ``model`` itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _static_parts(model: Any) -> HeadSplit | None:
    """Decoder and head if the model's structure allows a split at all (no probing)."""
    import torch

    peft_config = getattr(model, "peft_config", None)
    # Prompt-learning adapters (prefix / prompt tuning) change the inputs of the backbone.
    if isinstance(peft_config, dict) and any(
        getattr(c, "is_prompt_learning", False) for c in peft_config.values()
    ):
        return None
    base = _base_model(model)
    config = getattr(base, "config", None)
    if config is None:
        return None
    for name in _LOGIT_POSTPROCESSING:
        value = getattr(config, name, None)
        if value is not None and value != 1:
            return None
    get_decoder = getattr(base, "get_decoder", None)
    get_head = getattr(base, "get_output_embeddings", None)
    if not (callable(get_decoder) and callable(get_head)):
        return None
    try:
        decoder, head = get_decoder(), get_head()
    except (AttributeError, NotImplementedError, ValueError):
        return None
    # type() is: a subclass (peft's LoRA Linear, a wrapper) may compute more than x @ W.T + b.
    if decoder is None or decoder is base or type(head) is not torch.nn.Linear:
        return None
    return HeadSplit(decoder, head)


def _last_hidden(output: Any) -> Any:
    hidden = getattr(output, "last_hidden_state", None)
    return hidden if hidden is not None else output[0]


def _probe(model: Any, parts: HeadSplit, forward_kwargs: dict[str, Any]) -> bool:
    """True if ``model(...).logits`` is exactly ``head(decoder(...).last_hidden_state)``.

    On a short input, one forward of the whole model with a hook that (1) records what the head
    receives and (2) replaces the head's output with a known random tensor: the model's logits
    must be that tensor unchanged (no post-processing) and the head's input must be the
    decoder's last hidden states (no rescaling, no other layout). Runs in eval mode under
    ``no_grad`` (dropout would make the two passes differ) and restores every module's mode.
    """
    import torch

    head = parts.head
    device = head.weight.device
    vocab = head.out_features
    length = 4
    ids = (torch.arange(length, device=device) * 7 % vocab).unsqueeze(0)
    kwargs: dict[str, Any] = {
        "attention_mask": torch.ones_like(ids),
        "position_ids": torch.arange(length, device=device).unsqueeze(0),
        "use_cache": False,
    }
    keep = forward_kwargs.get("logits_to_keep")
    full_kwargs = dict(kwargs, logits_to_keep=2) if keep is not None else dict(kwargs)
    seen: list[torch.Tensor] = []
    fake: list[torch.Tensor] = []

    def hook(_module: Any, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor:
        seen.append(args[0].detach().clone())
        gen = torch.Generator().manual_seed(len(seen))
        replacement = (torch.randn(output.shape, generator=gen) * 40 + 3).to(output)
        fake.append(replacement)
        return replacement

    modes = {m: m.training for m in model.modules()}
    handle = head.register_forward_hook(hook)
    try:
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=ids, **full_kwargs).logits
            hidden = parts.hidden_states(input_ids=ids, **kwargs)
    except Exception:  # noqa: BLE001  (any failure means: do not split this model)
        return False
    finally:
        handle.remove()
        for module, mode in modes.items():
            module.training = mode
    if len(seen) != 1 or logits.dtype not in (fake[0].dtype, torch.float32):
        return False
    if not torch.equal(logits, fake[0].to(logits.dtype)):
        return False
    got = seen[0]
    if got.dim() != 3 or hidden.dim() != 3 or got.shape[-1] != hidden.shape[-1]:
        return False
    expected = hidden[:, -got.shape[1] :]
    return bool(got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-4, atol=1e-5))


def split_lm_head(model: Any, forward_kwargs: dict[str, Any]) -> HeadSplit | None:
    """The model as decoder + plain linear head, or ``None`` if that would not be exact.

    ``model`` is the module the caller would run (a transformers causal LM, a peft wrapper of
    one, ...); ``forward_kwargs`` the keyword arguments it would pass (only ``logits_to_keep``
    is looked at). The verdict is cached per model and re-probed when its decoder or head
    module changes. The caller holds whatever lock guards the model.
    """
    parts = _static_parts(model)
    if parts is None:
        return None
    key = (id(parts.decoder), id(parts.head))
    cached = _VERDICTS.get(model)
    if cached is not None and cached[:2] == key:
        return parts if cached[2] else None
    ok = _probe(model, parts, forward_kwargs)
    _VERDICTS[model] = (*key, ok)
    return parts if ok else None


def _chunk_logits(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """Float32 ``(hidden @ weight.T + bias) / temperature`` for one chunk, as the full-logits
    path computes it (the head in the model's dtype, then ``.float()``, then the division)."""
    import torch

    logits = torch.nn.functional.linear(hidden, weight, bias).float()
    if temperature != 1.0:
        logits.div_(temperature)
    return logits


TILE_TOKENS = 1024
"""Most tokens processed together; the vocabulary is split so a tile's chunk fits the budget."""


def _tiles(n_tokens: int, vocab: int, budget: int) -> list[tuple[slice, slice]]:
    """(token rows, vocabulary columns) blocks of at most ``budget`` logits, row-major.

    Chunking the vocabulary (rather than only the tokens) keeps the matmuls wide and writes
    each slice of the weight gradient once per token tile instead of once per token chunk.
    """
    tile = max(1, min(n_tokens, TILE_TOKENS, budget))
    width = max(1, budget // tile)
    return [
        (slice(r, r + tile), slice(c, min(c + width, vocab)))
        for r in range(0, n_tokens, tile)
        for c in range(0, vocab, width)
    ]


def _local_targets(targets: torch.Tensor, cols: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets as indices into the ``cols`` chunk (clamped) and which of them fall inside it."""
    inside = (targets >= cols.start) & (targets < cols.stop)
    return (targets - cols.start).clamp(0, cols.stop - cols.start - 1), inside


def _selective_log_softmax() -> Any:
    """The autograd Function (built lazily: torch is imported on first use only)."""
    import torch

    class SelectiveLogSoftmax(torch.autograd.Function):
        """``log_softmax(head(hidden) / T)[targets]`` computed and differentiated chunk by chunk.

        Works on (token tile x vocabulary chunk) blocks (:func:`_tiles`). Forward merges the
        blocks' logsumexps and keeps only one logsumexp per token; backward recomputes each
        block's logits and turns them in place into ``grad * (onehot - softmax) / T``, from
        which the hidden-state, weight and bias gradients follow by two matmuls. One block of
        logits exists at a time; gradients accumulate in one buffer each (float32 for
        low-precision weights) instead of one weight-sized tensor per block.
        """

        @staticmethod
        def forward(
            ctx: Any,
            hidden: torch.Tensor,
            weight: torch.Tensor,
            bias: torch.Tensor | None,
            targets: torch.Tensor,
            temperature: float,
            budget: int,
        ) -> torch.Tensor:
            picked = hidden.new_zeros(hidden.shape[0], dtype=torch.float32)
            lse = torch.empty_like(picked)
            for rows, cols in _tiles(hidden.shape[0], weight.shape[0], budget):
                logits = _chunk_logits(
                    hidden[rows], weight[cols], None if bias is None else bias[cols], temperature
                )
                # Online logsumexp over the vocabulary chunks of this token tile.
                chunk_lse = torch.logsumexp(logits, dim=-1)
                if cols.start == 0:
                    lse[rows] = chunk_lse
                else:
                    lse[rows] = torch.logaddexp(lse[rows], chunk_lse)
                local, inside = _local_targets(targets[rows], cols)
                picked[rows] += torch.where(
                    inside, logits.gather(-1, local.unsqueeze(-1)).squeeze(-1), 0.0
                )
            ctx.save_for_backward(hidden, weight, bias, targets, lse)
            ctx.temperature, ctx.budget = temperature, budget
            return picked - lse

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
            hidden, weight, bias, targets, lse = ctx.saved_tensors
            need_h, need_w, need_b = ctx.needs_input_grad[:3]
            low = weight.dtype in (torch.float16, torch.bfloat16)
            acc = torch.float32 if low else weight.dtype
            grad_h = torch.zeros(hidden.shape, dtype=acc, device=hidden.device) if need_h else None
            grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
            grad_b = None
            if need_b and bias is not None:
                grad_b = torch.zeros(bias.shape, dtype=acc, device=bias.device)
            grad_out = grad_out.float()
            for rows, cols in _tiles(hidden.shape[0], weight.shape[0], ctx.budget):
                go = grad_out[rows].unsqueeze(-1)
                g = _chunk_logits(
                    hidden[rows],
                    weight[cols],
                    None if bias is None else bias[cols],
                    ctx.temperature,
                )
                # d(logit[y] - lse)/d logits = onehot(y) - softmax, times the incoming gradient.
                g.sub_(lse[rows].unsqueeze(-1)).exp_().mul_(-go)
                local, inside = _local_targets(targets[rows], cols)
                g.scatter_add_(-1, local.unsqueeze(-1), torch.where(inside.unsqueeze(-1), go, 0.0))
                if ctx.temperature != 1.0:
                    g.div_(ctx.temperature)
                g_head = g.to(weight.dtype)
                if grad_h is not None:
                    grad_h[rows] += (g_head @ weight[cols]).to(acc)
                if grad_w is not None:
                    grad_w[cols].addmm_(g_head.t().to(acc), hidden[rows].to(acc))
                if grad_b is not None:
                    grad_b[cols] += g.sum(0).to(acc)
            return (
                grad_h.to(hidden.dtype) if grad_h is not None else None,
                grad_w.to(weight.dtype) if grad_w is not None else None,
                grad_b.to(bias.dtype) if grad_b is not None else None,
                None,
                None,
                None,
            )

    return SelectiveLogSoftmax


_FUNCTION: Any = None


def chunked_logprobs(
    hidden: torch.Tensor,
    head: torch.nn.Linear,
    targets: torch.Tensor,
    temperature: float = 1.0,
    *,
    chunk_elements: int | None = None,
) -> torch.Tensor:
    """Log-probs of ``targets`` under ``head(hidden) / temperature``, a block at a time.

    Args:
        hidden: ``(N, H)`` final hidden states, one row per scored token.
        head: The LM head (plain ``nn.Linear``; its weight and bias get gradients if they
            require them).
        targets: ``(N,)`` token ids.
        temperature: Logits are divided by it (in float32, as the full-logits path does).
        chunk_elements: Logits per block (tokens x vocabulary entries); default
            :data:`CHUNK_ELEMENTS` (read at call time).

    Returns ``(N,)`` float32 log-probs. Only one block's logits exist at any time, in forward
    and in backward (which recomputes them); the graph keeps ``hidden`` and one float per token.
    """
    global _FUNCTION

    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(
            f"expected hidden (N, H) and targets (N,), got {tuple(hidden.shape)}, "
            f"{tuple(targets.shape)}"
        )
    budget = max(1, CHUNK_ELEMENTS if chunk_elements is None else chunk_elements)
    if _FUNCTION is None:
        _FUNCTION = _selective_log_softmax()
    result: torch.Tensor = _FUNCTION.apply(
        hidden, head.weight, head.bias, targets, float(temperature), budget
    )
    return result


def full_logits_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """The plain computation: ``log_softmax(logits.float() / temperature)`` at ``targets``.

    ``logits`` is ``(..., V)`` and ``targets`` ``(...)``. Materialises full-size copies of the
    logits; used for models :func:`split_lm_head` refuses, and as the reference in tests.
    """
    import torch

    scaled = logits.float() / temperature
    picked = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(scaled, dim=-1)
