"""The writing presets: the official configs' values reach the run; training never sees eval."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.train import preset_config

# configs/magrpo_tldr_config.yaml and configs/magrpo_arxiv_config.yaml of OpenMLRL
# LLM_Collab_Writing (commit 00ec4aa), read by hand.
OFFICIAL = {
    "model": "Qwen/Qwen3-1.7B",
    "temperature": 0.7,
    "top_p": 0.9,
    "max_new_tokens": 256,
    "num_generations": 4,
    "lr": 5e-6,
    "train_batch_size": 1,
    "epochs_x_prompts": 2 * 1100,
    "eval_interval": 20,
    "eval_num_samples": 4,
}
DATA = {
    "magrpo-tldr": ("tldr-v0", "trl-lib/tldr", "train[:1100]", "test[:1100]"),
    "magrpo-arxiv": ("arxiv_intro-v0", "OpenMLRL/arXiv_abstract", "train[:1100]", "val[:1100]"),
}


@pytest.mark.parametrize("name", list(DATA))
def test_official_values_reach_the_run(name):
    c = preset_config("magrpo", name)
    t, a, p = c.trainer, c.algorithm, c.policies
    env, dataset, train_split, eval_split = DATA[name]
    assert t.env == env
    assert t.env_kwargs == {"dataset": dataset, "split": train_split, "guards": False}
    assert t.eval_env_kwargs == {"split": eval_split}
    assert p.model == OFFICIAL["model"]
    assert (t.sampling.temperature, t.sampling.top_p) == (
        OFFICIAL["temperature"],
        OFFICIAL["top_p"],
    )
    assert t.sampling.max_new_tokens == OFFICIAL["max_new_tokens"]
    assert t.group_size == OFFICIAL["num_generations"]
    assert t.tasks_per_step == OFFICIAL["train_batch_size"]
    assert t.steps == OFFICIAL["epochs_x_prompts"]
    assert (t.eval_every, t.eval_tasks) == (OFFICIAL["eval_interval"], OFFICIAL["eval_num_samples"])
    assert a.lr == OFFICIAL["lr"] and a.kl_coef == 0.0


def test_the_toy_preset_trains_and_evaluates_on_disjoint_posts():
    c = preset_config("magrpo", "toy-tldr")
    assert c.policies.model == "tiny"
    train = llm_marl.make(c.trainer.env, **c.trainer.env_kwargs).tasks
    held_out = llm_marl.make(
        c.trainer.env, **{**c.trainer.env_kwargs, **(c.trainer.eval_env_kwargs or {})}
    ).tasks
    assert {t["task_id"] for t in train}.isdisjoint(t["task_id"] for t in held_out)
    assert len(train) == 8 and len(held_out) == 4


def test_the_toy_preset_is_chosen_for_tldr_without_a_preset_name():
    from llm_marl.train.presets import auto_preset

    assert auto_preset("magrpo", "tldr-v0").name == "toy-tldr"
    assert auto_preset("magrpo", None).name == "toy-coordination"  # the default is unchanged
