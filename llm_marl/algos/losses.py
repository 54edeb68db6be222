"""The tensor maths of the clipped policy-gradient loss (no optimizer, no data handling).

:func:`clipped_pg_loss` turns per-token log-probs (``[B, T]``), the rollout's log-probs (the
"old" policy), advantages and a mask into a per-token loss: the PPO/GRPO clipped surrogate with
asymmetric clipping (*clip-higher*, DAPO: ``1 - clip_low`` .. ``1 + clip_high``) plus an optional
KL penalty to a reference policy with the k3 estimator :func:`k3_kl`
``exp(ref - logp) - (ref - logp) - 1`` (unbiased, always >= 0), and optionally dual-clip
(``clip_ratio_c``: for negative advantages the loss is capped at ``-A * c``, Ye et al. 2020, as
verl's ``compute_policy_loss`` does). :func:`policy_gradient_loss` is the plain policy gradient
``-A * logp`` per token (no ratio, no clip: CoMLRL's MAGRPO loss). :func:`aggregate` reduces a
per-token loss:

* ``"token-mean"`` — every generated token weighs the same (DAPO / AgentPO),
* ``"sequence-mean"`` — mean over each completion's tokens, then over completions (original
  GRPO),
* ``"sequence-sum"`` — sum over each completion's tokens, mean over completions (CoMLRL's
  MAGRPO: ``-A * sum_t logp_t`` averaged over completions),
* ``"token-sum"`` — sum divided by a constant (Dr. GRPO).

A completion is one turn: a multi-turn token stream trained in one row holds several, and the
two sequence-level modes weigh each of its turns as one completion, as CoMLRL does by updating
each turn's completions separately (a turn's weight never grows with its share of the row's
tokens).

The loop that feeds these functions batches of samples and steps an optimizer is
:func:`llm_marl.algos.update.policy_gradient_update`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

Aggregation = Literal["token-mean", "sequence-mean", "sequence-sum", "token-sum"]
"""How per-token losses are reduced to a scalar (see the module docstring)."""
AGGREGATIONS: tuple[Aggregation, ...] = ("token-mean", "sequence-mean", "sequence-sum", "token-sum")

LossKind = Literal["clipped", "policy-gradient"]
"""``clipped``: :func:`clipped_pg_loss` (PPO/GRPO surrogate); ``policy-gradient``:
:func:`policy_gradient_loss` (``-A * logp``, no ratio, no clip)."""
LOSSES: tuple[LossKind, ...] = ("clipped", "policy-gradient")


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
    clip_ratio_c: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate loss (to be minimised) and per-token diagnostics.

    All inputs are ``[B, T]`` (``advantages`` may be ``[B]``: one per sequence). Returns the
    per-token loss (zero where ``mask`` is 0) and a dict with per-token ``ratio``, ``clipped``
    (1 where the clipped branch was taken), ``kl`` (only with a reference) and, with
    ``clip_ratio_c`` (dual-clip, must be > 1), ``dual_clipped`` (1 where a negative advantage's
    loss was capped at ``-A * clip_ratio_c``).
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
    stats = {"ratio": ratio.detach(), "clipped": (clipped > unclipped).float().detach()}
    if clip_ratio_c is not None:
        if clip_ratio_c <= 1.0:
            raise ValueError(f"clip_ratio_c (dual-clip) must be > 1, got {clip_ratio_c}")
        # A huge ratio on a token with a negative advantage would dominate the batch: cap it.
        cap = -advantages * clip_ratio_c
        capped = torch.where(advantages < 0, torch.minimum(per_token, cap), per_token)
        stats["dual_clipped"] = ((capped < per_token) & (advantages < 0)).float().detach()
        per_token = capped
    if ref_logprobs is not None and kl_coef > 0:
        kl = k3_kl(logprobs, ref_logprobs)
        per_token = per_token + kl_coef * kl
        stats["kl"] = kl.detach()
    return per_token * mask, stats


def policy_gradient_loss(
    logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Per-token plain policy-gradient loss ``-A * logp`` (zero where ``mask`` is 0).

    No importance ratio and no clipping: the loss of CoMLRL's MAGRPO trainer, which is
    ``-A * sum_t logp_t`` averaged over completions once reduced with ``"sequence-sum"``. Its
    gradient equals the clipped loss's at ratio 1 (one pass over fresh samples); only the value
    and the reduction differ.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logprobs)
    mask = mask.to(logprobs.dtype)
    return -advantages * logprobs * mask


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "token-mean",
    *,
    num_tokens: float | None = None,
    num_sequences: float | None = None,
    constant: float | None = None,
    turn_lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar.

    ``num_tokens`` / ``num_sequences`` / ``constant`` are the normalisers of the *whole*
    minibatch when ``per_token`` is one micro-batch of it (defaults: this tensor's own).
    ``turn_lengths`` (``[B, T]``, for ``sequence-mean``) holds, per token, the number of
    generated tokens of the completion it belongs to, when a row holds several completions
    (the turns of a multi-turn stream); by default a row is one completion. ``num_sequences``
    then counts completions, not rows.
    """
    mask = mask.to(per_token.dtype)
    if mode == "token-mean":
        denom = num_tokens if num_tokens is not None else float(mask.sum())
        return per_token.sum() / max(denom, 1.0)
    if mode == "sequence-mean":
        denom = num_sequences if num_sequences is not None else float(per_token.shape[0])
        if turn_lengths is not None:
            return (per_token / turn_lengths.clamp(min=1.0)).sum() / max(denom, 1.0)
        lengths = mask.sum(-1).clamp(min=1.0)
        return (per_token.sum(-1) / lengths).sum() / max(denom, 1.0)
    if mode == "sequence-sum":
        denom = num_sequences if num_sequences is not None else float(per_token.shape[0])
        return per_token.sum() / max(denom, 1.0)
    if mode == "token-sum":
        denom = constant if constant is not None else float(mask.shape[0] * mask.shape[1])
        return per_token.sum() / max(denom, 1.0)
    raise ValueError(f"unknown aggregation {mode!r}; choose one of {AGGREGATIONS}")
