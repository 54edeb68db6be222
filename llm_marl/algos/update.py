"""The policy-gradient update loop that MAGRPO, AgentPO-GRPO and MATPO share.

:func:`policy_gradient_update` trains one policy on a list of
:class:`~llm_marl.algos.samples.Sample` s: ``epochs`` passes, each split into minibatches (one
optimizer step each), each split into micro-batches (one batched
:meth:`~llm_marl.policies.TrainablePolicy.sequence_logprobs` forward pass each, never a loop over
tokens; by default whole prompt groups packed up to a token budget) whose gradients
accumulate. The loss of a micro-batch is normalised by the size of its whole minibatch, so
micro-batching changes memory and speed, not the gradient. The loss itself is
:func:`~llm_marl.algos.losses.clipped_pg_loss` reduced by
:func:`~llm_marl.algos.losses.aggregate`; :class:`PGConfig` holds every knob of the loop, the
loss and the AdamW optimizer that :func:`make_optimizer` builds.

A policy sharded over several processes by
:func:`~llm_marl.policies.sharded.shard_policy` trains with the same loop on every rank, each
given the same samples: each rank runs its contiguous slice of every pass (a rank whose slice
is empty runs a zero-weight pass, so that all ranks run the same collectives), the normalisers
are summed over the ranks' slices, and FSDP sums the gradients: the gradient is the
single-process one.

:func:`nll_update` is the supervised counterpart (behaviour cloning on demonstrations).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from llm_marl.algos.losses import (
    AGGREGATIONS,
    LOSSES,
    Aggregation,
    LossKind,
    aggregate,
    clipped_pg_loss,
    policy_gradient_loss,
    stack_logprobs,
)
from llm_marl.algos.samples import Sample
from llm_marl.policies.base import TrainablePolicy
from llm_marl.policies.sharded import DataParallel, data_parallel

if TYPE_CHECKING:
    import torch
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

T = TypeVar("T")


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
    """Samples per forward/backward pass (gradient accumulation), in minibatch order. ``None``:
    passes of whole prompt groups (the samples sharing a prompt, e.g. a GRPO group's G
    completions, whose prompt the policy encodes once), groups of similar length packed
    together up to :attr:`micro_batch_tokens`."""
    micro_batch_tokens: int = 4096
    """With ``micro_batch_size=None``: the most padded tokens in one pass, counted as the policy
    lays them out (each distinct prompt once, plus every completion padded to the pass's
    longest). A group larger than this gets a pass of its own, never split. Bounds activation
    memory, as a token budget per pass does in verl's dynamic batching; several small groups in
    one pass cost less than one pass each (fewer, larger matrix products)."""
    max_grad_norm: float | None = 1.0
    """Clip the gradient's global L2 norm to this; ``None`` disables clipping."""
    clip_low: float = 0.2
    """The ratio is clipped below at ``1 - clip_low``."""
    clip_high: float | None = None
    """The ratio is clipped above at ``1 + clip_high``; ``None``: same as ``clip_low``.
    ``0.28`` with ``clip_low=0.2`` is DAPO's clip-higher."""
    clip_ratio_c: float | None = None
    """Dual-clip (must be > 1): for negative advantages the per-token loss is capped at
    ``-A * clip_ratio_c`` (verl's ``clip_ratio_c``); ``None`` disables it."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the reference policy (LoRA: the base with adapters
    disabled). ``0`` skips the reference forward pass entirely."""
    loss: LossKind = "clipped"
    """``clipped``: the PPO/GRPO clipped surrogate; ``policy-gradient``: ``-A * logp`` with no
    ratio and no clip (CoMLRL's MAGRPO loss, with ``aggregation="sequence-sum"``; the clip
    fields and the KL term are then unused), its log-probs at temperature 1 as CoMLRL's, not at
    the sampling temperature."""
    aggregation: Aggregation = "token-mean"
    """How per-token losses are reduced: ``token-mean``, ``sequence-mean``, ``sequence-sum``
    or ``token-sum``."""
    token_sum_normalizer: float | None = None
    """For ``token-sum``: the constant to divide by (default: the largest completion length
    in the minibatch times the number of sequences, i.e. Dr. GRPO's ``B * T_max``)."""
    seed: int = 0
    """Seeds minibatch shuffling (only used when a batch is split into several minibatches)."""
    max_nonfinite_steps: int = 3
    """An optimizer step whose loss or gradient norm is not finite is skipped (and counted in
    ``skipped_steps``); this many skipped in a row, across updates, stop training with a
    :class:`~llm_marl.errors.TrainingError` naming the agent and the update: weights or
    optimizer state that give NaN every time will not heal."""

    def __post_init__(self) -> None:
        # Every float knob finite first: NaN passes any "< 0" check, and torch refuses some
        # (betas, weight decay) only when the optimizer is built, after the models are.
        for name in (
            "lr",
            "weight_decay",
            "adam_eps",
            "max_grad_norm",
            "clip_low",
            "clip_high",
            "clip_ratio_c",
            "kl_coef",
            "token_sum_normalizer",
        ):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.adam_eps < 0:
            raise ValueError(f"adam_eps must be >= 0, got {self.adam_eps}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm}")
        if self.token_sum_normalizer is not None and self.token_sum_normalizer <= 0:
            raise ValueError(
                f"token_sum_normalizer must be > 0 or None, got {self.token_sum_normalizer}"
            )
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        for name in ("minibatch_size", "micro_batch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if self.micro_batch_tokens < 1:
            raise ValueError(f"micro_batch_tokens must be >= 1, got {self.micro_batch_tokens}")
        if self.clip_low < 0 or (self.clip_high is not None and self.clip_high < 0):
            raise ValueError("clip_low and clip_high must be >= 0")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose one of {LOSSES}")
        if self.clip_ratio_c is not None and self.clip_ratio_c <= 1.0:
            raise ValueError(
                f"clip_ratio_c (dual-clip) must be > 1 or None, got {self.clip_ratio_c}"
            )
        if self.loss == "policy-gradient" and self.kl_coef > 0:
            raise ValueError("loss='policy-gradient' has no KL term: set kl_coef=0")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"unknown aggregation {self.aggregation!r}; choose one of {AGGREGATIONS}"
            )
        if (
            not isinstance(self.max_nonfinite_steps, int)
            or isinstance(self.max_nonfinite_steps, bool)
            or self.max_nonfinite_steps < 1
        ):
            raise ValueError(
                f"max_nonfinite_steps must be an int >= 1, got {self.max_nonfinite_steps!r}"
            )
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers, got {self.betas!r}")
        self.betas = (float(self.betas[0]), float(self.betas[1]))  # JSON round-trips give lists
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must each be in [0, 1), got {self.betas}")


def make_optimizer(
    parameters: Iterable[torch.nn.Parameter], config: PGConfig
) -> tuple[Optimizer, LRScheduler]:
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


# ------------------------------------------------------------------------------------- the update


def policy_gradient_update(
    policy: TrainablePolicy,
    optimizer: Optimizer,
    samples: list[Sample],
    config: PGConfig,
    *,
    scheduler: LRScheduler | None = None,
    update_index: int = 0,
) -> dict[str, float]:
    """Train ``policy`` on ``samples`` with the clipped surrogate; return averaged metrics.

    ``update_index`` (how many updates came before) seeds the minibatch shuffle, so that a
    resumed run shuffles exactly as an uninterrupted one. A minibatch whose loss or gradient
    norm is not finite is skipped (``skipped_steps``) instead of poisoning the weights;
    ``trailing_skips`` says how many of the last optimizer steps in a row were skipped (the
    caller stops a run that keeps skipping, see :attr:`PGConfig.max_nonfinite_steps`).
    """
    import torch

    samples = [s for s in samples if s.num_generated > 0]
    if not samples:
        return {"num_samples": 0.0}
    _fill_missing(policy, samples, config)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    device = params[0].device
    means = _Means()
    gen = torch.Generator().manual_seed(config.seed * 1_000_003 + update_index)
    steps = skipped = trailing = 0
    dp = data_parallel(policy)
    for _ in range(config.epochs):
        for minibatch in _minibatches(samples, config.minibatch_size, gen):
            optimizer.zero_grad(set_to_none=True)
            micros = list(_micro_batches(minibatch, config))
            # Sharded: every rank holds the same samples and takes its slice of each pass, so
            # all ranks run the same number of passes (FSDP's gathers are collective).
            local = [_rank_slice(m, dp) for m in micros] if dp else micros
            norms = _Normalisers.of([s for m in local for s in m], config, dp)
            loss = 0.0
            for micro, mine in zip(micros, local):
                if mine:
                    loss += _backward(policy, mine, norms, config, device, means)
                else:  # nothing left for this rank: a pass that adds zero to the gradient
                    _backward(policy, micro[:1], norms, config, device, means, scale=0.0)
            if dp:
                loss = _all_reduce([loss], dp, "sum")[0]
            norm = _grad_norm(params, config.max_grad_norm)
            if math.isfinite(norm) and math.isfinite(loss):
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                trailing = 0
            else:
                skipped += 1
                trailing += 1
            means.add("loss", loss)
            means.add("grad_norm", norm)
            steps += 1
    if dp:
        # Each rank averaged over its slice's tokens: weigh the slices together.
        means.all_reduce(_TOKEN_STATS, dp)
    metrics = means.result()
    metrics["optimizer_steps"] = float(steps)
    metrics["skipped_steps"] = float(skipped)
    metrics["trailing_skips"] = float(trailing)
    metrics["num_samples"] = float(len(samples))
    metrics["num_tokens"] = float(sum(s.num_generated for s in samples))
    metrics["lr"] = float(optimizer.param_groups[0]["lr"])
    return metrics


@dataclass
class _Normalisers:
    """The denominators of :func:`~llm_marl.algos.losses.aggregate` for one whole minibatch."""

    num_tokens: float
    num_sequences: float
    constant: float

    @classmethod
    def of(
        cls, minibatch: Sequence[Sample], config: PGConfig, dp: DataParallel | None = None
    ) -> _Normalisers:
        """The counts of ``minibatch``; sharded (``dp``), of every rank's part together."""
        # Completions, not rows: each turn of a multi-turn stream counts once.
        tokens, sequences, rows = _all_reduce(
            [
                float(sum(s.num_generated * s.weight for s in minibatch)),
                float(sum(s.num_turns * s.weight for s in minibatch)),
                float(len(minibatch)),
            ],
            dp,
            "sum",
        )
        longest = _all_reduce(
            [float(max((len(s.completion_ids) for s in minibatch), default=0))], dp, "max"
        )[0]
        return cls(
            num_tokens=tokens,
            num_sequences=sequences,
            constant=config.token_sum_normalizer or rows * longest,
        )


def _all_reduce(values: list[float], dp: DataParallel | None, op: str) -> list[float]:
    """``values`` summed (``op="sum"``) or maxed over the ranks of ``dp`` (as is without one)."""
    if dp is None:
        return values
    import torch
    import torch.distributed as dist

    reduce_op = dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX
    # float64 keeps the counts exact; NCCL reduces only tensors on the GPU, gloo on the CPU.
    buf = torch.tensor(values, dtype=torch.float64, device=_group_device(dp))
    dist.all_reduce(buf, op=reduce_op, group=dp.group)
    return [float(v) for v in buf.cpu().tolist()]


def _group_device(dp: DataParallel) -> str:
    import torch.distributed as dist

    return "cuda" if dist.get_backend(dp.group) == "nccl" else "cpu"


def _rank_slice(micro: list[Sample], dp: DataParallel | None) -> list[Sample]:
    """This rank's contiguous part of a forward/backward pass (maybe empty)."""
    if dp is None:
        return micro
    n, r, w = len(micro), dp.rank, dp.world_size
    return micro[r * n // w : (r + 1) * n // w]


def _backward(
    policy: TrainablePolicy,
    micro: list[Sample],
    norms: _Normalisers,
    config: PGConfig,
    device: torch.device,
    means: _Means,
    scale: float = 1.0,
) -> float:
    """One forward/backward pass over a micro-batch; returns its share of the minibatch loss.

    ``scale=0`` is a pass that only keeps a sharded rank in step with the others: its
    gradient is zero and it records no metric."""
    import torch

    with _loss_temperature(policy, config):
        new_lp = stack_logprobs(_sequence_logprobs(policy, micro)).to(device)
    shape = (int(new_lp.shape[0]), int(new_lp.shape[1]))
    mask = _padded([s.mask for s in micro], shape, device)
    advantages = _padded([s.advantages for s in micro], shape, device)
    stats: dict[str, torch.Tensor] = {}
    if config.loss == "policy-gradient":
        per_token = policy_gradient_loss(new_lp, advantages, mask)
    else:
        ref = (
            _padded([s.ref_logprobs for s in micro], shape, device) if config.kl_coef > 0 else None
        )
        per_token, stats = clipped_pg_loss(
            new_lp,
            _padded([s.old_logprobs for s in micro], shape, device),
            advantages,
            mask,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            ref_logprobs=ref,
            kl_coef=config.kl_coef,
            clip_ratio_c=config.clip_ratio_c,
        )
    weights = torch.tensor([s.weight for s in micro], device=device).unsqueeze(-1)
    loss = aggregate(
        per_token * weights,
        mask,
        config.aggregation,
        num_tokens=norms.num_tokens,
        num_sequences=norms.num_sequences,
        constant=norms.constant,
        turn_lengths=(
            _padded([s.turn_lengths() for s in micro], shape, device)
            if config.aggregation == "sequence-mean"
            else None
        ),
    )
    if scale != 1.0:
        loss = loss * scale
    loss.backward()
    n = float(mask.sum()) if scale else 0.0
    if n:
        for name, metric in zip(("clipped", "dual_clipped", "ratio", "kl"), _TOKEN_STATS):
            if name in stats:
                means.add(metric, float((stats[name] * mask).sum()) / n, n)
    return float(loss.detach())


def _grad_norm(params: list[torch.Tensor], max_norm: float | None) -> float:
    """The global gradient L2 norm, clipped to ``max_norm`` in place when one is given."""
    import torch

    if max_norm is not None:
        return _whole(torch.nn.utils.clip_grad_norm_(params, max_norm))
    grads = [p.grad.detach() for p in params if p.grad is not None]
    return _whole(torch.nn.utils.get_total_norm(grads)) if grads else 0.0


def _whole(norm: torch.Tensor) -> float:
    """A norm as a float; a sharded model's norm (a ``DTensor``) over every rank's shard."""
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def _fill_missing(policy: TrainablePolicy, samples: list[Sample], config: PGConfig) -> None:
    """Old log-probs for samples the rollout gave none, and reference log-probs for the KL."""
    import torch

    # The plain policy gradient has no ratio: it needs no old log-probs.
    need_old = [s for s in samples if s.old_logprobs is None] if config.loss == "clipped" else []
    with torch.no_grad():
        for batch in _micro_batches(need_old, config):
            for s, lp in zip(batch, _sequence_logprobs(policy, batch)):
                s.old_logprobs = lp.detach().float().cpu().tolist()
        if config.kl_coef > 0:
            for batch in _micro_batches(samples, config):
                for s, lp in zip(batch, _sequence_logprobs(policy, batch, reference=True)):
                    s.ref_logprobs = lp.detach().float().cpu().tolist()


@contextlib.contextmanager
def _loss_temperature(policy: TrainablePolicy, config: PGConfig) -> Iterator[None]:
    """The temperature the loss scores log-probs at. The clipped surrogate keeps the policy's
    (the sampling temperature: importance ratios against the rollout's log-probs). The plain
    policy gradient has no ratio and is CoMLRL's loss, which scores ``log_softmax(logits)``
    at temperature 1 whatever the sampling temperature (MAGRPOTrainer.
    _compute_loss_with_gradients, comlrl/trainers/reinforce/magrpo.py, 1.4.3): so does this."""
    if config.loss != "policy-gradient" or policy.logprob_temperature == 1.0:
        yield
        return
    saved = policy.logprob_temperature
    policy.logprob_temperature = 1.0
    try:
        yield
    finally:
        policy.logprob_temperature = saved


def _sequence_logprobs(
    policy: TrainablePolicy, batch: list[Sample], reference: bool = False
) -> list[torch.Tensor]:
    return policy.sequence_logprobs(
        [s.prompt_ids for s in batch], [s.completion_ids for s in batch], reference=reference
    )


def _minibatches(
    samples: list[Sample], size: int | None, generator: torch.Generator
) -> Iterator[list[Sample]]:
    """One epoch's minibatches: shuffled (seeded) when the batch is split, in order otherwise."""
    import torch

    order = list(range(len(samples)))
    if size and size < len(samples):
        order = torch.randperm(len(samples), generator=generator).tolist()
    for chunk in _chunks(order, size):
        yield [samples[i] for i in chunk]


def _micro_batches(samples: list[Sample], config: PGConfig) -> Iterator[list[Sample]]:
    """Forward/backward passes: ``micro_batch_size`` samples each, or packed prompt groups.

    Padding a whole minibatch into one pass wastes compute on pad columns (and memory); one
    pass per group wastes the fixed cost of a pass on every group. By default whole groups of
    samples with the same prompt (the policy encodes a shared prompt once:
    :attr:`HFPolicy.share_prompts <llm_marl.policies.HFPolicy>`) are sorted by length and
    packed into passes of at most ``micro_batch_tokens`` padded tokens.
    """
    if config.micro_batch_size is not None:
        yield from _chunks(samples, config.micro_batch_size)
        return
    groups: dict[tuple[int, ...], list[Sample]] = {}
    for sample in samples:
        groups.setdefault(tuple(sample.prompt_ids), []).append(sample)
    # Similar lengths side by side: less padding in each pass.
    ordered = sorted(groups.items(), key=lambda kv: max(len(s.completion_ids) for s in kv[1]))
    budget = config.micro_batch_tokens
    batch: list[Sample] = []
    prompts = prompt_width = rows = completion_width = 0
    for prompt, group in ordered:
        widths = (
            max(prompt_width, len(prompt)),
            max(completion_width, *(len(s.completion_ids) for s in group)),
        )
        cost = (prompts + 1) * widths[0] + (rows + len(group)) * widths[1]
        if batch and cost > budget:
            yield batch
            batch, prompts, rows = [], 0, 0
            widths = (len(prompt), max(len(s.completion_ids) for s in group))
        batch.extend(group)
        prompts, rows = prompts + 1, rows + len(group)
        prompt_width, completion_width = widths
    if batch:
        yield batch


def _chunks(items: list[T], size: int | None) -> Iterator[list[T]]:
    size = size or max(len(items), 1)
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _padded(
    rows: Sequence[Sequence[float] | Sequence[int] | None],
    shape: tuple[int, int],
    device: torch.device,
) -> torch.Tensor:
    """Right-pad per-sample rows with zeros into a ``shape`` float tensor on ``device``."""
    import torch

    out = torch.zeros(shape, dtype=torch.float32)
    for i, row in enumerate(rows):
        if row is None:
            raise ValueError("missing per-token values for a sample")
        n = min(len(row), shape[1])
        if n:
            out[i, :n] = torch.tensor(list(row[:n]), dtype=torch.float32)
    return out.to(device)


_TOKEN_STATS = ("clip_frac", "dual_clip_frac", "ratio", "kl")
"""The update's metrics that are means over generated tokens."""


class _Means:
    """Weighted running means of named metrics."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.weights: dict[str, float] = {}

    def add(self, name: str, value: float, weight: float = 1.0) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value * weight
        self.weights[name] = self.weights.get(name, 0.0) + weight

    def result(self) -> dict[str, float]:
        return {k: self.totals[k] / self.weights[k] for k in self.totals}

    def all_reduce(self, names: Sequence[str], dp: DataParallel) -> None:
        """Sum ``names``' totals and weights over the ranks (every rank calls it with the same
        names, whether or not it saw them)."""
        k = len(names)
        local = [self.totals.get(n, 0.0) for n in names] + [self.weights.get(n, 0.0) for n in names]
        summed = _all_reduce(local, dp, "sum")
        for i, name in enumerate(names):
            if summed[k + i] > 0:
                self.totals[name], self.weights[name] = summed[i], summed[k + i]


# ------------------------------------------------------------------------------------- supervised


def nll_update(
    policy: TrainablePolicy,
    optimizer: Optimizer,
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
