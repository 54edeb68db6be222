"""The clipped policy-gradient loss, and the update step the GRPO-family algorithms share.

Three layers, each usable on its own:

1. **Tensors** — :func:`clipped_pg_loss` turns per-token log-probs (``[B, T]``), the rollout's
   log-probs (the "old" policy), advantages and a mask into a per-token loss: the PPO/GRPO
   clipped surrogate with asymmetric clipping (*clip-higher*, DAPO: ``1 - clip_low`` ..
   ``1 + clip_high``) plus an optional KL penalty to a reference policy with the k3 estimator
   ``exp(ref - logp) - (ref - logp) - 1`` (unbiased, always >= 0). :func:`aggregate` reduces it:
   ``"token-mean"`` (every generated token weighs the same: DAPO / AgentPO),
   ``"sequence-mean"`` (mean over each sequence's tokens, then over sequences: the original
   GRPO) or ``"token-sum"`` (sum divided by a constant: Dr. GRPO).
2. **Samples** — :class:`Sample` is one contiguous token stream of one agent (prompt, generated
   tokens with mask 1, env-produced tokens with mask 0, a per-token advantage);
   :func:`trajectory_samples` builds them from a :class:`~llm_marl.rollout.Trajectory`, one per
   stream segment, so a multi-turn trajectory costs one forward pass, not one per turn.
3. **Update** — :func:`policy_gradient_update` runs epochs x minibatches x micro-batches of
   :meth:`~llm_marl.policies.base.TrainablePolicy.sequence_logprobs` (one batched forward pass
   per micro-batch, never a loop over tokens), accumulates gradients, clips them and steps one
   optimizer. The loss is normalised over the whole minibatch, so micro-batching changes memory,
   not the gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from llm_marl.rollout.types import Trajectory

if TYPE_CHECKING:
    import torch

Aggregation = Literal["token-mean", "sequence-mean", "token-sum"]
AGGREGATIONS = ("token-mean", "sequence-mean", "token-sum")


# ---------------------------------------------------------------------------------------- config


@dataclass
class PGConfig:
    """Knobs of the clipped policy-gradient update shared by MAGRPO, AgentPO-GRPO and MATPO."""

    lr: float = 1e-5
    """AdamW learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    adam_eps: float = 1e-8
    """AdamW epsilon."""
    warmup_steps: int = 0
    """Linear learning-rate warmup over this many optimizer steps (then constant)."""
    epochs: int = 1
    """Passes over each batch of rollouts (GRPO's mu). More than one makes clipping matter."""
    minibatch_size: int | None = None
    """Samples (token streams) per optimizer step; ``None``: the whole batch, one step."""
    micro_batch_size: int | None = None
    """Samples per forward/backward pass (gradient accumulation); ``None``: the minibatch."""
    max_grad_norm: float | None = 1.0
    """Clip the gradient's global L2 norm to this; ``None`` disables clipping."""
    clip_low: float = 0.2
    """The ratio is clipped below at ``1 - clip_low``."""
    clip_high: float | None = None
    """The ratio is clipped above at ``1 + clip_high``; ``None``: same as ``clip_low``.
    ``0.28`` with ``clip_low=0.2`` is DAPO's clip-higher."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the reference policy (LoRA: the base with adapters
    disabled). ``0`` skips the reference forward pass entirely."""
    aggregation: Aggregation = "token-mean"
    """How per-token losses are reduced: ``token-mean``, ``sequence-mean`` or ``token-sum``."""
    token_sum_normalizer: float | None = None
    """For ``token-sum``: the constant to divide by (default: the largest completion length
    in the minibatch times the number of sequences, i.e. Dr. GRPO's ``B * T_max``)."""
    seed: int = 0
    """Seeds minibatch shuffling (only used when a batch is split into several minibatches)."""

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        for name in ("minibatch_size", "micro_batch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if self.clip_low < 0 or (self.clip_high is not None and self.clip_high < 0):
            raise ValueError("clip_low and clip_high must be >= 0")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"unknown aggregation {self.aggregation!r}; choose one of {AGGREGATIONS}"
            )
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        self.betas = tuple(self.betas)  # type: ignore[assignment]  # JSON round-trips give lists


# ---------------------------------------------------------------------------------------- tensors


def stack_logprobs(logprobs: Sequence[torch.Tensor]):
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
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token clipped surrogate loss (to be minimised) and per-token diagnostics.

    All inputs are ``[B, T]`` (``advantages`` may be ``[B]``: one per sequence). Returns the
    per-token loss (zero where ``mask`` is 0) and a dict with per-token ``ratio``, ``clipped``
    (1 where the clipped branch was taken), ``kl`` (only with a reference).
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


# ---------------------------------------------------------------------------------------- samples


@dataclass
class Sample:
    """One contiguous token stream of one agent, ready for :func:`policy_gradient_update`."""

    prompt_ids: list[int]
    """Tokens before the first generated token (never trained on)."""
    completion_ids: list[int]
    """Everything after the prompt: generated tokens and env-produced tokens between turns."""
    mask: list[int]
    """1 for tokens the agent generated (trained on), 0 for env-produced tokens."""
    advantages: list[float]
    """Per completion token (the advantage of the turn that generated it; 0 where mask is 0)."""
    old_logprobs: list[float] | None = None
    """Sampling log-probs from the rollout (``None``: computed before the update)."""
    weight: float = 1.0
    """Multiplies this sample's per-token loss (MATPO uses it to balance roles)."""
    agent: str = ""
    ref_logprobs: list[float] | None = field(default=None, repr=False)
    """Filled by the update when ``kl_coef > 0``."""

    @property
    def num_generated(self) -> int:
        return int(sum(self.mask))


def trajectory_samples(
    trajectory: Trajectory, turn_advantages: Sequence[float], weight: float = 1.0
) -> list[Sample]:
    """Split a trajectory into its contiguous token streams, with per-token advantages.

    ``turn_advantages[k]`` is credited to every token turn ``k`` generated. Turns that extend the
    previous stream (``continues_stream``) join its sample: the env-produced tokens between the
    two completions go in with mask 0.
    """
    if len(turn_advantages) != len(trajectory.turns):
        raise ValueError(
            f"{len(turn_advantages)} advantages for {len(trajectory.turns)} turns of agent "
            f"{trajectory.agent!r}"
        )
    samples: list[Sample] = []
    stream: list[int] = []  # prompt + completion of the current sample so far
    for turn, adv in zip(trajectory.turns, turn_advantages):
        if not turn.completion_ids:
            if turn.text:
                raise ValueError(
                    f"agent {trajectory.agent!r} (policy {trajectory.policy!r}) returned text "
                    "without token ids: a trainable policy must report the ids it generated "
                    "(token-in/token-out). Mark text-only policies trainable=False."
                )
            continue  # nothing generated, nothing to learn
        if not turn.prompt_ids:
            raise ValueError(
                f"agent {trajectory.agent!r}: a turn has completion ids but no prompt ids"
            )
        lps = list(turn.logprobs) if turn.logprobs is not None else None
        if lps is not None and len(lps) != len(turn.completion_ids):
            raise ValueError(
                f"agent {trajectory.agent!r}: {len(lps)} log-probs for "
                f"{len(turn.completion_ids)} generated tokens"
            )
        if turn.continues_stream and samples and turn.prompt_ids[: len(stream)] == stream:
            cur = samples[-1]
            bridge = turn.prompt_ids[len(stream) :]
            cur.completion_ids += bridge + list(turn.completion_ids)
            cur.mask += [0] * len(bridge) + [1] * len(turn.completion_ids)
            cur.advantages += [0.0] * len(bridge) + [float(adv)] * len(turn.completion_ids)
            if cur.old_logprobs is not None and lps is not None:
                cur.old_logprobs += [0.0] * len(bridge) + lps
            else:
                cur.old_logprobs = None
        else:
            samples.append(
                Sample(
                    prompt_ids=list(turn.prompt_ids),
                    completion_ids=list(turn.completion_ids),
                    mask=[1] * len(turn.completion_ids),
                    advantages=[float(adv)] * len(turn.completion_ids),
                    old_logprobs=lps,
                    weight=weight,
                    agent=trajectory.agent,
                )
            )
        stream = list(turn.prompt_ids) + list(turn.completion_ids)
    return samples


# ---------------------------------------------------------------------------------------- update


def make_optimizer(parameters: Any, config: PGConfig):
    """AdamW over ``parameters`` with a linear warmup scheduler (constant after warmup)."""
    import torch

    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError(
            "no trainable parameters: the policy returned no tensor with requires_grad=True"
        )
    optimizer = torch.optim.AdamW(
        params,
        lr=config.lr,
        betas=config.betas,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
    )
    warmup = config.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0
    )
    return optimizer, scheduler


def _chunks(items: list[Any], size: int | None) -> Iterator[list[Any]]:
    size = size or max(len(items), 1)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _sequence_logprobs(policy: Any, batch: list[Sample], reference: bool = False):
    return policy.sequence_logprobs(
        [s.prompt_ids for s in batch], [s.completion_ids for s in batch], reference=reference
    )


def _fill_missing(policy: Any, samples: list[Sample], config: PGConfig) -> None:
    """Old log-probs for samples the rollout gave none, and reference log-probs for the KL."""
    import torch

    need_old = [s for s in samples if s.old_logprobs is None]
    with torch.no_grad():
        for batch in _chunks(need_old, config.micro_batch_size):
            for s, lp in zip(batch, _sequence_logprobs(policy, batch)):
                s.old_logprobs = lp.detach().float().cpu().tolist()
        if config.kl_coef > 0:
            for batch in _chunks(samples, config.micro_batch_size):
                for s, lp in zip(batch, _sequence_logprobs(policy, batch, reference=True)):
                    s.ref_logprobs = lp.detach().float().cpu().tolist()


def policy_gradient_update(
    policy: Any,
    optimizer: Any,
    samples: list[Sample],
    config: PGConfig,
    *,
    scheduler: Any = None,
    update_index: int = 0,
) -> dict[str, float]:
    """Train ``policy`` on ``samples`` with the clipped surrogate; return averaged metrics.

    ``update_index`` (how many updates came before) seeds the minibatch shuffle, so that a
    resumed run shuffles exactly as an uninterrupted one.
    """
    import torch

    samples = [s for s in samples if s.num_generated > 0]
    if not samples:
        return {"num_samples": 0.0}
    _fill_missing(policy, samples, config)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    device = next(iter(params)).device
    totals: dict[str, float] = {}
    counts: dict[str, float] = {}

    def add(name: str, value: float, weight: float = 1.0) -> None:
        totals[name] = totals.get(name, 0.0) + value * weight
        counts[name] = counts.get(name, 0.0) + weight

    gen = torch.Generator().manual_seed(config.seed * 1_000_003 + update_index)
    steps = skipped = 0
    for _ in range(config.epochs):
        order = list(range(len(samples)))
        if config.minibatch_size and config.minibatch_size < len(samples):
            order = torch.randperm(len(samples), generator=gen).tolist()
        for mb_idx in _chunks(order, config.minibatch_size):
            minibatch = [samples[i] for i in mb_idx]
            num_tokens = float(sum(s.num_generated * s.weight for s in minibatch))
            num_seqs = float(sum(s.weight for s in minibatch))
            constant = config.token_sum_normalizer or float(
                len(minibatch) * max(len(s.completion_ids) for s in minibatch)
            )
            optimizer.zero_grad(set_to_none=True)
            minibatch_loss = 0.0
            for micro in _chunks(minibatch, config.micro_batch_size):
                new_lp = stack_logprobs(_sequence_logprobs(policy, micro)).to(device)
                shape = new_lp.shape
                old_lp = _padded([s.old_logprobs for s in micro], shape, device)
                adv = _padded([s.advantages for s in micro], shape, device)
                mask = _padded([s.mask for s in micro], shape, device)
                weights = torch.tensor([s.weight for s in micro], device=device).unsqueeze(-1)
                ref = None
                if config.kl_coef > 0:
                    ref = _padded([s.ref_logprobs for s in micro], shape, device)
                per_token, stats = clipped_pg_loss(
                    new_lp,
                    old_lp,
                    adv,
                    mask,
                    clip_low=config.clip_low,
                    clip_high=config.clip_high,
                    ref_logprobs=ref,
                    kl_coef=config.kl_coef,
                )
                loss = aggregate(
                    per_token * weights,
                    mask,
                    config.aggregation,
                    num_tokens=num_tokens,
                    num_sequences=num_seqs,
                    constant=constant,
                )
                loss.backward()
                minibatch_loss += float(loss.detach())
                n = float(mask.sum())
                if n:
                    add("clip_frac", float((stats["clipped"] * mask).sum()) / n, n)
                    add("ratio", float((stats["ratio"] * mask).sum()) / n, n)
                    if "kl" in stats:
                        add("kl", float((stats["kl"] * mask).sum()) / n, n)
            if config.max_grad_norm is not None:
                norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
            else:
                grads = [p.grad.detach().norm() for p in params if p.grad is not None]
                norm = float(torch.stack(grads).norm()) if grads else 0.0
            if math.isfinite(norm):
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
            else:  # a NaN/inf gradient would poison the weights: skip this step, report it
                skipped += 1
            add("loss", minibatch_loss)
            add("grad_norm", norm)
            steps += 1
    metrics = {k: totals[k] / counts[k] for k in totals}
    metrics["optimizer_steps"] = float(steps)
    metrics["skipped_steps"] = float(skipped)
    metrics["num_samples"] = float(len(samples))
    metrics["num_tokens"] = float(sum(s.num_generated for s in samples))
    metrics["lr"] = float(optimizer.param_groups[0]["lr"])
    return metrics


def nll_update(
    policy: Any,
    optimizer: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
) -> float:
    """One supervised step on demonstrations: minimise their mean token negative log-likelihood.

    Behaviour cloning / SFT, e.g. to teach a model an answer format before RL. Returns the loss.
    """
    import torch

    logprobs = policy.sequence_logprobs(prompt_ids, completion_ids)
    tokens = sum(int(lp.shape[0]) for lp in logprobs)
    loss = -torch.stack([lp.sum() for lp in logprobs]).sum() / max(tokens, 1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def _padded(rows: Sequence[Sequence[float] | None], shape: Any, device: Any):
    import torch

    out = torch.zeros(tuple(shape), dtype=torch.float32)
    for i, row in enumerate(rows):
        if row is None:
            raise ValueError("missing per-token values for a sample")
        n = min(len(row), shape[1])
        if n:
            out[i, :n] = torch.tensor(list(row[:n]), dtype=torch.float32)
    return out.to(device)
