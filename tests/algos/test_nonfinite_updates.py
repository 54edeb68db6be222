"""An update refuses a non-finite loss or gradient norm (issue 28, item 7).

The optimizer step is skipped and counted (``skipped_steps``); after ``max_nonfinite_steps``
skipped steps in a row the update stops with a TrainingError naming the agent and the update.
"""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl.algos import MAGRPO, MAGRPOConfig
from llm_marl.errors import TrainingError

from .conftest import BigramPolicy
from .test_base import _episodes


class Poisoned(BigramPolicy):
    """Scores tokens as BigramPolicy, but every log-prob is ``value`` while ``poisoned``."""

    def __init__(self, value: float, **kw) -> None:
        super().__init__(**kw)
        self.value = value
        self.poisoned = True

    def sequence_logprobs(self, prompt_ids, completion_ids, *, reference=False):
        out = super().sequence_logprobs(prompt_ids, completion_ids, reference=reference)
        if self.poisoned and not reference:
            return [x * 0 + self.value for x in out]  # keeps the graph: a gradient exists
        return out


def _algo(policy, k=3):
    algo = MAGRPO(MAGRPOConfig(lr=0.05, max_nonfinite_steps=k))
    algo.setup({"a": policy}, {})
    return algo


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_a_non_finite_loss_is_skipped_counted_and_stops_after_k_in_a_row(value):
    policy = Poisoned(value, seed=1, name="learner")
    before = policy.table.detach().clone()
    algo = _algo(policy, k=3)
    for update in range(2):
        metrics = algo.update(_episodes(update, agents=("a",)))
        assert metrics["a/skipped_steps"] == 1.0
        assert torch.equal(policy.table.detach(), before), "a skipped step changes nothing"
    with pytest.raises(TrainingError, match=r"'a'.*3 optimizer steps in a row.*update 2"):
        algo.update(_episodes(2, agents=("a",)))
    assert torch.isfinite(policy.table).all()


def test_a_finite_step_between_resets_the_count():
    policy = Poisoned(math.nan, seed=1)
    algo = _algo(policy, k=2)
    for update in range(6):
        policy.poisoned = update % 2 == 0
        algo.update(_episodes(update, agents=("a",)))  # never 2 in a row: no error


def test_nan_weights_stop_the_run_naming_the_agent():
    policy = BigramPolicy(seed=1, name="learner")
    with torch.no_grad():
        policy.table[0, 0] = math.nan
    algo = _algo(policy, k=2)
    algo.update(_episodes(0, agents=("a",)))
    with pytest.raises(TrainingError, match="'a'"):
        algo.update(_episodes(1, agents=("a",)))


def test_a_corrupt_optimizer_state_stops_the_run_within_k_updates():
    """A NaN moment (a corrupt state of the right size) poisons the weights at the first step;
    the run then stops naming the agent instead of dying later naming nothing."""
    policy = BigramPolicy(seed=1)
    algo = _algo(policy, k=2)
    algo.update(_episodes(0, agents=("a",)))
    state = algo.optimizers["a"].state[policy.table]
    state["exp_avg_sq"].fill_(math.nan)
    with pytest.raises(TrainingError, match="'a'"):
        for update in range(1, 5):
            algo.update(_episodes(update, agents=("a",)))


def test_max_nonfinite_steps_must_be_positive():
    with pytest.raises(ValueError, match="max_nonfinite_steps"):
        MAGRPOConfig(max_nonfinite_steps=0)
