"""AgentPO-GRPO presets (Sun et al., ICLR 2026): the toy referential game, the paper's math setups.

One trainable collaborator (``algorithm.collaborator``) beside frozen agents
(``policies.frozen``). Every preset here also sets ``_RUN``: output under ``runs/agentpo``, a
checkpoint every 20 steps, about 20 console rows. Values a preset leaves out are the config defaults
(``AgentPOConfig``: clip 0.2 / 0.28, token-mean, no KL, grad clip 1.0; ``TrainerConfig``: one
greedy evaluation episode per task).

The paper's frozen actor can be served by any OpenAI-compatible server instead::

    llm-marl train --algo agentpo --preset agentpo-math-critic \\
        --policies.frozen.actor openai:meta-llama/Llama-3.2-3B-Instruct@http://localhost:8000/v1
"""

from __future__ import annotations

from typing import Any

from llm_marl.train.presets import preset

_RUN: dict[str, Any] = {
    "trainer": {"output_dir": "runs/agentpo", "save_every": 20, "log_every": None}
}


# Offline: a tiny speaker learns to name the object for a frozen tiny listener.
TOY_REFERENTIAL = preset(
    "agentpo",
    "toy-referential",
    "an offline tiny speaker learns to name the object for a frozen tiny listener (default)",
    {
        "trainer": {
            "env": "referential-v0",
            "steps": 60,
            "group_size": 16,
            "tasks_per_step": 4,
            "sampling": {"max_new_tokens": 2, "temperature": 1.0},
            "eval_every": 10,
        },
        "algorithm": {
            "collaborator": "speaker",
            "reward_component": "success",
            "lr": 2e-3,
            "weight_decay": 0.0,
            "warmup_steps": 0,  # learning-rate warmup
            "epochs": 2,
        },
        # The frozen listener: a tiny LM taught to read the digit in a message, then frozen.
        "policies": {"model": "tiny", "frozen": {"listener": "tiny"}, "format_warmup_steps": 60},
    },
    defaults=(_RUN,),
    auto=True,
)

# AgentPO's released config (scripts/train.sh, verl DAPO recipe): Qwen2.5-3B-Instruct
# collaborator, Llama-3.2-3B-Instruct frozen actor, 500 MATH level 3-5 problems, 1 epoch,
# 4 prompts x 16 responses per step, lr 1e-6, 10 warmup steps, weight decay 0.1, grad clip
# 1.0, clip 0.2 / 0.28, token-mean, no KL, temperature 1.0, 768 response tokens.
_RELEASED: dict[str, Any] = {
    "trainer": {
        "steps": 125,
        "group_size": 16,
        "tasks_per_step": 4,
        "sampling": {"max_new_tokens": 768, "temperature": 1.0},
        "eval_every": 25,
    },
    "algorithm": {
        "reward_component": None,  # the math envs' reward is already binary correctness
        "lr": 1e-6,
        "weight_decay": 0.1,
        "warmup_steps": 10,  # learning-rate warmup
        "epochs": 1,
    },
    "policies": {
        "model": "Qwen/Qwen2.5-3B-Instruct",
        "frozen": {"actor": "hf:meta-llama/Llama-3.2-3B-Instruct"},
        "format_warmup_steps": 0,
        "dtype": "bfloat16",
    },
}

AGENTPO_MATH_HINT = preset(
    "agentpo",
    "agentpo-math-hint",
    "the paper's hint topology: Qwen2.5-3B-Instruct hint agent, frozen Llama-3.2-3B actor",
    {"trainer": {"env": "math_hint-v0"}, "algorithm": {"collaborator": "hint"}},
    defaults=(_RUN, _RELEASED),
)

AGENTPO_MATH_CRITIC = preset(
    "agentpo",
    "agentpo-math-critic",
    "the paper's critic topology: Qwen2.5-3B-Instruct critic, frozen Llama-3.2-3B actor",
    {"trainer": {"env": "math_critic-v0"}, "algorithm": {"collaborator": "critic"}},
    defaults=(_RUN, _RELEASED),
)
