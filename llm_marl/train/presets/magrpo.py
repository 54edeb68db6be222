"""MAGRPO presets (Liu et al. 2025): toy games on CPU, any env, the paper's CoopHumanEval setup.

Every preset here also sets ``_RUN``: output under ``runs/magrpo``, a checkpoint every 25 steps,
about 20 console rows. Values a preset leaves out are the config defaults (``MAGRPOConfig``,
``TrainerConfig``, ``PoliciesConfig``); those the former example script filled in for every
preset (top-p 1.0, discount 1.0, token-mean aggregation, greedy evaluation) are written out below.
"""

from __future__ import annotations

from typing import Any

from llm_marl.train.presets import preset

_RUN: dict[str, Any] = {
    "trainer": {"output_dir": "runs/magrpo", "save_every": 25, "log_every": None}
}

# What the two toy presets share: tiny LMs, one-digit answers sampled at temperature 1, a KL
# term, two passes per batch.
_TOY: dict[str, Any] = {
    "trainer": {
        "group_size": 16,
        "sampling": {"max_new_tokens": 2, "temperature": 1.0, "top_p": 1.0},
        "eval_every": 25,
        # 8 sampled episodes per eval task, at the rollout sampling: the team's true
        # chance-level reward before training.
        "eval_group_size": 8,
        "eval_sampling": {"max_new_tokens": 2, "temperature": 1.0, "top_p": 1.0},
    },
    "algorithm": {
        "lr": 3e-3,
        "kl_coef": 0.1,
        "epochs": 2,
        "gamma": 1.0,
        "aggregation": "token-mean",
    },
    "policies": {"model": "tiny"},
}

# The offline default: two tiny LMs learn a coordination convention on CPU.
TOY_COORDINATION = preset(
    "magrpo",
    "toy-coordination",
    "two offline tiny LMs learn a coordination convention on CPU (the default)",
    {
        "trainer": {"env": "coordination-v0", "steps": 150, "tasks_per_step": 5},
        "policies": {"format_warmup_steps": 60},
    },
    defaults=(_RUN, _TOY),
    auto=True,
)

TOY_REFERENTIAL = preset(
    "magrpo",
    "toy-referential",
    "two offline tiny LMs learn to name an object (speaker -> listener) on CPU",
    {
        "trainer": {"env": "referential-v0", "steps": 100, "tasks_per_step": 4},
        "policies": {"format_warmup_steps": 150},
    },
    defaults=(_RUN, _TOY),
    auto=True,
)

# Any other env (used when --env names a non-toy env and no --preset is given): the
# hyperparameters of CoMLRL's MAGRPO config, with the offline tiny LM unless --model is set.
GENERIC = preset(
    "magrpo",
    "generic",
    "any env: CoMLRL's MAGRPO hyperparameters, offline tiny LMs unless --model is set",
    {
        "trainer": {
            "steps": 100,
            "group_size": 4,
            "tasks_per_step": 4,
            "sampling": {"max_new_tokens": 256, "temperature": 0.6, "top_p": 0.6},
            "eval_every": 25,
            "eval_group_size": 1,  # one greedy episode per eval task
            "eval_sampling": None,
        },
        "algorithm": {
            "lr": 5e-6,
            "kl_coef": 0.0,
            "epochs": 1,
            "gamma": 0.9,
            "aggregation": "token-mean",
        },
        "policies": {"model": "tiny", "format_warmup_steps": 0},
    },
    defaults=(_RUN,),
    auto=True,
)

# MAGRPO on CoopHumanEval as in Liu et al. 2025 / CoMLRL's released config
# (configs/magrpo_che_config.yaml): Qwen2.5-Coder-3B helper + main, 4 generations per
# task, temperature 0.6, top-p 0.6, 256 new tokens, lr 2e-5, 2 turns with discount 1.0,
# aligned joint actions, mean-baseline advantages, bf16. CoMLRL trains full weights; add
# --lora to fit one GPU. The first 16 problems are held out for evaluation in the paper.
MAGRPO_COOP_HUMANEVAL = preset(
    "magrpo",
    "magrpo-coop-humaneval",
    "CoopHumanEval as in Liu et al. 2025 / CoMLRL's config: Qwen2.5-Coder-3B helper + main",
    {
        "trainer": {
            "env": "coop_humaneval-v0",
            "steps": 528,  # 8 epochs over the 66 training problems, one task per step
            "group_size": 4,
            "tasks_per_step": 1,
            "sampling": {"max_new_tokens": 256, "temperature": 0.6, "top_p": 0.6},
            "eval_every": 32,
            "eval_tasks": 16,
            "eval_group_size": 1,  # one greedy episode per eval task
            "eval_sampling": None,
        },
        "algorithm": {
            "lr": 2e-5,
            "kl_coef": 0.0,
            "epochs": 1,
            "gamma": 1.0,
            "aggregation": "sequence-mean",
        },
        "policies": {
            "model": "Qwen/Qwen2.5-Coder-3B",
            "dtype": "bfloat16",
            "format_warmup_steps": 0,
        },
    },
    defaults=(_RUN,),
)
