"""A tabular softmax policy: a trainable learner small enough for fast, honest learning tests.

Each distinct observation (the agent's whole conversation) gets a token id of its own, and its
row of a learnable table holds the logits of the answers ``0 .. n-1``. ``generate`` samples one
answer token from that row (seeded by ``SamplingParams.seed``), records its log-prob, and
``sequence_logprobs`` scores exactly what was sampled: the whole rollout / update machinery
(``collect``, samples, the clipped update, the Trainer) runs unchanged, in milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from llm_marl.policies.base import Completion

ANSWER_BASE = 1_000_000
"""Answer ``a`` is token ``ANSWER_BASE + a``; observation ids count from 0."""


class TablePolicy:
    trainable = True
    logprob_temperature = 1.0
    reference_model = None

    def __init__(self, name: str, answers: int = 3, rows: int = 256) -> None:
        self.name = name
        self.answers = answers
        self.table = torch.nn.Parameter(torch.zeros(rows, answers))
        self.ids: dict[str, int] = {}

    def _row(self, conversation) -> int:
        key = json.dumps(conversation, sort_keys=True)
        if key not in self.ids:
            if len(self.ids) == self.table.shape[0]:
                raise RuntimeError("TablePolicy: more distinct observations than rows")
            self.ids[key] = len(self.ids)
        return self.ids[key]

    def generate(self, conversations, sampling, contexts=None):
        rows = [self._row(c) for c in conversations]
        with torch.no_grad():
            logp = torch.log_softmax(self.table[rows] / max(sampling.temperature, 1e-6), dim=-1)
        g = torch.Generator().manual_seed(sampling.seed or 0)
        picks = torch.multinomial(logp.exp(), 1, generator=g).squeeze(-1).tolist()
        return [
            Completion(
                str(a),
                token_ids=[ANSWER_BASE + a],
                prompt_ids=[r],
                logprobs=[float(logp[i, a])],
            )
            for i, (r, a) in enumerate(zip(rows, picks))
        ]

    def parameters(self):
        return [self.table]

    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        reference: bool = False,
    ) -> list[torch.Tensor]:
        rows = torch.tensor([p[-1] for p in prompt_ids])
        picks = torch.tensor([c[0] - ANSWER_BASE for c in completion_ids])
        logp = torch.log_softmax(self.table[rows], dim=-1).gather(1, picks[:, None])
        return [logp[i] for i in range(len(rows))]

    def save(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        torch.save({"table": self.table.detach(), "ids": self.ids}, Path(path) / "table.pt")

    def load(self, path: str) -> None:
        state = torch.load(Path(path) / "table.pt")
        with torch.no_grad():
            self.table.copy_(state["table"])
        self.ids = dict(state["ids"])
