"""The Trainer stops a run whose updates keep being non-finite, naming the step and the agent."""

from __future__ import annotations

import math

import pytest

from llm_marl.algos import MAGRPO, MAGRPOConfig
from llm_marl.errors import TrainingError
from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import HFPolicy
from llm_marl.train import Trainer, TrainerConfig


def test_a_run_of_nan_losses_stops_naming_the_step_and_the_agent(tmp_path, algo_lm_path):
    left = HFPolicy(algo_lm_path, trainable=True, name="left", seed=0)
    right = HFPolicy(algo_lm_path, trainable=True, name="right", seed=1)
    scored = left.sequence_logprobs

    def nan_logprobs(*args, **kwargs):
        return [x * math.nan for x in scored(*args, **kwargs)]

    left.sequence_logprobs = nan_logprobs  # type: ignore[method-assign]
    cfg = TrainerConfig(
        env="coordination-v0",
        steps=4,
        tasks_per_step=1,
        group_size=2,
        sampling=SamplingParams(max_new_tokens=2, temperature=1.0),
        output_dir=str(tmp_path / "run"),
        progress=False,
        plot=False,
        eval_at_start=False,
    )
    algo = MAGRPO(MAGRPOConfig(lr=1e-3, max_nonfinite_steps=2))
    with pytest.raises(TrainingError, match=r"training step 2: agent 'left': 2 optimizer steps"):
        Trainer(algo, {"left": left, "right": right}, cfg).train()
