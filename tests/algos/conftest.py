"""Fixtures of the algorithm tests: a bigram toy policy (exact, fast) and tiny HF models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch


class BigramPolicy:
    """A TrainablePolicy whose next-token logits depend on the previous token only.

    Small enough that every log-prob can be checked by hand, and ``sequence_logprobs`` is one
    batched, vectorised pass (``calls`` counts them).
    """

    trainable = True
    logprob_temperature = 1.0  # sequence_logprobs scores at temperature 1 only

    def __init__(self, vocab: int = 8, seed: int = 0, name: str = "bigram") -> None:
        g = torch.Generator().manual_seed(seed)
        self.table = torch.nn.Parameter(torch.randn(vocab, vocab, generator=g) * 0.5)
        self.name = name
        self.calls = 0
        self.reference_table = self.table.detach().clone()

    def generate(self, conversations, sampling, contexts=None):
        raise NotImplementedError("the bigram policy only scores tokens (the update tests)")

    def parameters(self):
        return [self.table]

    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        reference: bool = False,
    ) -> list[torch.Tensor]:
        self.calls += 1
        table = self.reference_table if reference else self.table
        width = max(len(c) for c in completion_ids)
        prev = torch.zeros(len(prompt_ids), width, dtype=torch.long)
        target = torch.zeros(len(prompt_ids), width, dtype=torch.long)
        for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
            seq = list(p) + list(c)
            prev[i, : len(c)] = torch.tensor(seq[len(p) - 1 : len(seq) - 1])
            target[i, : len(c)] = torch.tensor(list(c))
        logp = torch.log_softmax(table[prev], dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        return [logp[i, : len(c)] for i, c in enumerate(completion_ids)]

    def save(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        torch.save(self.table.detach(), Path(path) / "table.pt")

    def load(self, path: str) -> None:
        with torch.no_grad():
            self.table.copy_(torch.load(Path(path) / "table.pt"))


@pytest.fixture
def bigram():
    return BigramPolicy()


@pytest.fixture(scope="session")
def algo_lm_path(tmp_path_factory) -> str:
    """A 1-layer tiny random-init LM (fast; used for the mechanics tests)."""
    from llm_marl.policies.tiny import build_tiny_lm

    return build_tiny_lm(tmp_path_factory.mktemp("algo-lm") / "lm", seed=0, num_layers=1)
