"""MAGRPO raises the TL;DR lexical reward on held-out posts: the ``toy-tldr`` preset, on CPU.

Two random-init tiny LMs (``build_tiny_lm``) start low on the bundled sample's held-out posts
(about 0.8 of 3: their random text often lacks 8 words in a part, or the right length ratio).
Trained on the other posts with a fixed seed, they learn the reward's form (enough words in each
part, the detailed part longer than the concise one).
They do not learn to summarise — a 0.2M-parameter random LM cannot — so this proves the training
loop on the writing env, not summarisation quality.
"""

from __future__ import annotations

import pytest

from llm_marl.train import build_policies, preset_config

pytestmark = pytest.mark.slow


def test_magrpo_raises_the_lexical_reward_on_held_out_posts(tmp_path):
    from llm_marl.algos import MAGRPO
    from llm_marl.train import Trainer

    config = preset_config(
        "magrpo",
        "toy-tldr",
        {
            "trainer": {
                "output_dir": str(tmp_path),
                "progress": False,
                "console": False,
                "plot": False,
            }
        },
    )
    policies = build_policies(config)
    algo = MAGRPO(config.algorithm)
    trainer = Trainer(algo, policies, config.trainer)
    train_ids = {t["task_id"] for t in trainer.tasks}
    eval_ids = {t["task_id"] for t in trainer.eval_tasks}
    assert eval_ids and train_ids.isdisjoint(eval_ids), "evaluation must be on held-out posts"
    result = trainer.train()
    start, end = result.first_eval["reward"], result.last_eval["reward"]
    print(f"held-out team reward {start:.3f} -> {end:.3f}")
    assert start <= 1.0, f"random tiny LMs should start low, got {start:.3f}"
    assert end >= start + 0.3, f"MAGRPO should raise the lexical reward: {start:.3f} -> {end:.3f}"
    assert (
        result.last_eval["reward/level1_structure"] > result.first_eval["reward/level1_structure"]
    )
