"""``--preset toy-coordination --lora``: the format warm-up teaches the base on full weights
before the adapters exist, so the LoRA team starts at the env's chance level (0.36) writing
valid answers. Warm-up through rank-8 adapters on the random-init tiny base did not teach the
format: the team went 0.055 -> 0.005 (issue 23 item 8)."""

from __future__ import annotations

import pytest

from llm_marl.cli import main
from llm_marl.train.logging import read_jsonl


@pytest.mark.slow  # ~20 s: 60 supervised warm-up steps and a sampled evaluation
def test_toy_coordination_with_lora_starts_at_chance_with_the_answer_format(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--algo", "magrpo", "--preset", "toy-coordination", "--lora"]
    argv += ["--steps", "1", "--tasks-per-step", "2", "--no-progress", "--no-plot"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    first, step = read_jsonl(out / "metrics.jsonl")[:2]
    assert first["eval/reward/format"] >= 0.9, first  # before: ~0.1, adapters never learnt it
    assert 0.2 <= first["eval/reward"] <= 0.55, first  # chance level 0.36 (before: 0.055)
    assert step["reward/format"] >= 0.9, step
    assert (out / "models" / "lora-base-warmed-up" / "config.json").is_file()
