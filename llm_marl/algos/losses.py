"""The tensor maths of the clipped policy-gradient loss (no optimizer, no data handling).

:func:`clipped_pg_loss` turns per-token log-probs (``[B, T]``), the rollout's log-probs (the
"old" policy), advantages and a mask into a per-token loss: the PPO/GRPO clipped surrogate with
asymmetric clipping (*clip-higher*, DAPO: ``1 - clip_low`` .. ``1 + clip_high``) plus an optional
KL penalty to a reference policy with the k3 estimator :func:`k3_kl`
``exp(ref - logp) - (ref - logp) - 1`` (unbiased, always >= 0). :func:`aggregate` reduces it:

* ``"token-mean"`` — every generated token weighs the same (DAPO / AgentPO),
* ``"sequence-mean"`` — mean over each sequence's tokens, then over sequences (original GRPO),
* ``"token-sum"`` — sum divided by a constant (Dr. GRPO).

The loop that feeds these functions batches of samples and steps an optimizer is
:func:`llm_marl.algos.update.policy_gradient_update`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

Aggregation = Literal["token-mean", "sequence-mean", "token-sum"]
"""How per-token losses are reduced to a scalar (see the module docstring)."""
AGGREGATIONS: tuple[Aggregation, ...] = ("token-mean", "sequence-mean", "token-sum")


def stack_logprobs(logprobs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Right-pad per-sequence log-prob tensors (which carry gradients) into ``[B, T_max]``."""
    import torch

    width = max((int(t.shape[0]) for t in logprobs), default=0)
    rows = [torch.nn.functional.pad(t.float(), (0, width - int(t.shape[0]))) for t in logprobs]
    return torch.stack(rows) if rows else torch.zeros(0, 0)


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of ``KL(pi || ref)``: ``exp(d) - d - 1`` with ``d = ref - logp``."""
    import torch

    d = (ref_logprobs - logprobs).clamp(-20.0, 20.0)  # exp() of a huge gap would overflow
    return torch.exp(d) - d - 1.0


def clipped_pg_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate loss (to be minimised) and per-token diagnostics.

    All inputs are ``[B, T]`` (``advantages`` may be ``[B]``: one per sequence). Returns the
    per-token loss (zero where ``mask`` is 0) and a dict with per-token ``ratio``, ``clipped``
    (1 where the clipped branch was taken), ``kl`` (only with a reference).

    ``dual_clip = c > 1`` bounds the loss of tokens with a negative advantage by ``-c * A``
    (dual-clip PPO, Ye et al. 2020; verl's ``clip_ratio_c``): a huge ratio on a bad token cannot
    dominate the batch.
    """
    import torch

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logprobs)
    high = clip_low if clip_high is None else clip_high
    mask = mask.to(logprobs.dtype)
    # Masked positions may hold garbage log-probs; zero the log-ratio there before exp().
    log_ratio = (logprobs - old_logprobs) * mask
    ratio = torch.exp(log_ratio.clamp(max=20.0))
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + high)
    per_token = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        bounded = torch.minimum(per_token, -advantages * dual_clip)
        per_token = torch.where(advantages < 0, bounded, per_token)
    stats = {"ratio": ratio.detach(), "clipped": (clipped > unclipped).float().detach()}
    if ref_logprobs is not None and kl_coef > 0:
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + kl_coef * kl
        stats["kl"] = kl.detach()
    return per_token * mask, stats


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "token-mean",
    *,
    num_tokens: float | None = None,
    num_sequences: float | None = None,
    constant: float | None = None,
) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar.

    ``num_tokens`` / ``num_sequences`` / ``constant`` are the normalisers of the *whole*
    minibatch when ``per_token`` is one micro-batch of it (defaults: this tensor's own).
    """
    mask = mask.to(per_token.dtype)
    if mode == "token-mean":
        denom = num_tokens if num_tokens is not None else float(mask.sum())
        return per_token.sum() / max(denom, 1.0)
    if mode == "sequence-mean":
        lengths = mask.sum(-1).clamp(min=1.0)
        denom = num_sequences if num_sequences is not None else float(per_token.shape[0])
        return (per_token.sum(-1) / lengths).sum() / max(denom, 1.0)
    if mode == "token-sum":
        denom = constant if constant is not None else float(mask.shape[0] * mask.shape[1])
        return per_token.sum() / max(denom, 1.0)
    raise ValueError(f"unknown aggregation {mode!r}; choose one of {AGGREGATIONS}")
