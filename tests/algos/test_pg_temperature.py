"""The ``policy-gradient`` loss scores log-probs at temperature 1, as CoMLRL's
``log_softmax(logits)`` (issue 24 item 7); the clipped loss keeps the sampling temperature."""

from __future__ import annotations

import pytest
import torch

from llm_marl.algos.samples import Sample
from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update
from llm_marl.policies import HFPolicy

PROMPTS = [[3, 4, 5], [6, 7]]
COMPLETIONS = [[8, 9, 10], [11, 12]]
ADVANTAGES = [0.7, -1.2]


def _samples(old: list[list[float]] | None = None) -> list[Sample]:
    return [
        Sample(p, c, [1] * len(c), [a] * len(c), None if old is None else old[i])
        for i, (p, c, a) in enumerate(zip(PROMPTS, COMPLETIONS, ADVANTAGES))
    ]


def _hand_logprobs(policy: HFPolicy, temperature: float) -> list[torch.Tensor]:
    """Each completion's token log-probs from a plain forward pass, as CoMLRL computes them."""
    out = []
    with torch.no_grad():
        for prompt, completion in zip(PROMPTS, COMPLETIONS):
            ids = torch.tensor([prompt + completion[:-1]])
            logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1 :].float()
            logp = torch.log_softmax(logits / temperature, dim=-1)
            out.append(logp[torch.arange(len(completion)), torch.tensor(completion)])
    return out


def test_the_policy_gradient_loss_is_the_hand_computation_at_temperature_one(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    policy.logprob_temperature = 0.6  # what the Trainer sets for sampling at 0.6
    cfg = PGConfig(lr=1e-9, loss="policy-gradient", aggregation="sequence-sum", max_grad_norm=None)
    at_one, at_sampling = _hand_logprobs(policy, 1.0), _hand_logprobs(policy, 0.6)
    expected = -sum(a * lp.sum() for a, lp in zip(ADVANTAGES, at_one)) / len(ADVANTAGES)
    not_expected = -sum(a * lp.sum() for a, lp in zip(ADVANTAGES, at_sampling)) / 2
    assert abs(float(expected) - float(not_expected)) > 1e-3  # the test can tell them apart
    opt, _ = make_optimizer(policy.parameters(), cfg)
    metrics = policy_gradient_update(policy, opt, _samples(), cfg)
    assert metrics["loss"] == pytest.approx(float(expected), rel=1e-4)
    assert policy.logprob_temperature == 0.6  # restored for the next rollout's clipped use


def test_the_clipped_loss_keeps_the_sampling_temperature(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    policy.logprob_temperature = 0.6
    old = [lp.tolist() for lp in _hand_logprobs(policy, 0.6)]  # the rollout's log-probs
    cfg = PGConfig(lr=1e-9, loss="clipped", aggregation="token-mean", max_grad_norm=None)
    opt, _ = make_optimizer(policy.parameters(), cfg)
    metrics = policy_gradient_update(policy, opt, _samples(old), cfg)
    assert metrics["ratio"] == pytest.approx(1.0, abs=1e-4)
