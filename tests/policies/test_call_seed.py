"""``call_seed``: the caller's seed wins; without one, the policy's own generator decides."""

from __future__ import annotations

import random

from llm_marl.policies.base import SamplingParams, call_seed


def test_a_given_seed_is_used_and_the_generator_is_not_touched():
    rng = random.Random(7)
    state = rng.getstate()
    assert call_seed(SamplingParams(seed=0), rng) == 0  # 0 is a seed, not "unset"
    assert call_seed(SamplingParams(seed=123), rng) == 123
    assert rng.getstate() == state


def test_without_a_seed_draws_differ_per_call_and_replay_with_the_policy_seed():
    a, b = random.Random(7), random.Random(7)
    draws_a = [call_seed(SamplingParams(), a) for _ in range(4)]
    draws_b = [call_seed(SamplingParams(), b) for _ in range(4)]
    assert draws_a == draws_b  # a policy built with a seed replays its stream
    assert len(set(draws_a)) == 4  # unseeded calls sample differently
    assert all(0 <= d < 2**63 for d in draws_a)  # fits torch.manual_seed / vLLM seeds
