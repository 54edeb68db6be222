"""HFPolicy's per-request sampler: each row follows its own distribution, from its own seed."""

from __future__ import annotations

import torch

from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import _RowSampler

LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]])


def _draw(seeds: list[int], sampling: SamplingParams, logits: torch.Tensor) -> torch.Tensor:
    out = _RowSampler(seeds, sampling, "cpu")(torch.zeros(len(seeds), 1, dtype=torch.long), logits)
    assert torch.isfinite(out).sum(-1).eq(1).all()  # one finite score per row: greedy keeps it
    return out.argmax(-1)


def test_rows_follow_the_tempered_distribution():
    n = 4000
    picked = _draw(list(range(n)), SamplingParams(temperature=1.0), LOGITS.repeat(n, 1))
    freq = torch.bincount(picked, minlength=5).double() / n
    assert torch.allclose(freq, torch.softmax(LOGITS[0].double(), -1), atol=0.03)
    picked = _draw(list(range(n)), SamplingParams(temperature=1.0, top_k=2), LOGITS.repeat(n, 1))
    assert set(picked.tolist()) == {0, 1}  # top-k truncation


def test_a_rows_draw_is_its_seeds_whatever_the_batch():
    alone = _draw([7], SamplingParams(), LOGITS)
    together = _draw([3, 7, 11], SamplingParams(), LOGITS.repeat(3, 1))
    assert together[1] == alone[0]
