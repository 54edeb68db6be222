"""AgentPO-GRPO presets (Sun et al., ICLR 2026): the toy referential game, the paper's math setups.

One trainable collaborator (``algorithm.collaborator``) beside frozen agents
(``policies.frozen``). Every preset here also sets ``_RUN``: output under ``runs/agentpo``, about
20 console rows. Values a preset leaves out are the config defaults (``AgentPOConfig``: the
released loss, see :mod:`llm_marl.algos.agentpo`; ``TrainerConfig``).

Sources of the paper presets' values, all in the official release ``dreaming-madao/agentpo``,
initial commit 8987a7e (the release that matches the paper's hint/critic runs; later commits
switched ``scripts/train.sh`` to a multi-agent-debate experiment):

* ``scripts/train.sh`` — the collaborator's optimisation and sampling: ``dataset_num=500``,
  ``train_prompt_bsz=4``, ``n_resp_per_prompt=16``, ``total_epochs=1``, ``optim.lr=1e-6``,
  ``lr_warmup_steps=10``, ``weight_decay=0.1``, ``grad_clip=1.0``, ``clip_ratio_low=0.2``,
  ``clip_ratio_high=0.28``, ``clip_ratio_c=10.0``, ``loss_agg_mode=token-mean``, no KL,
  ``max_response_length=768``, rollout ``temperature=1.0``, ``top_p=1.0``; validation
  ``val_kwargs`` temperature 1.0, ``top_p=0.7``, ``n=1``; ``test_freq=100``,
  ``save_freq=100``, ``val_before_train=False``; ``MODEL_PATH`` Qwen2.5-3B-Instruct,
  ``actor_model=Llama-3.2-3B``.
* ``agentpo/reward_manager_agentpo.py`` — the frozen actor is queried with ``max_tokens=2048``,
  ``temperature=0``, ``top_p=1.0`` (greedy), in training and validation alike.
* ``agentpo/rl_dataset.py`` — the first ``dataset_num`` rows of the training file are used
  (``select(range(dataset_num))``); the hint prompt (see :mod:`llm_marl.envs.math.prompts`).
* ``scripts/test.sh`` — the evaluation benchmarks ``aime24, math500, olympiadbench,
  minerva_math, amc23``.

Training data: the release trains on the first 500 rows of
``math8k_hard_solutions_1000.parquet``, which is not published. ``scripts/prepare_math8k_data.py``
(added in a later commit) builds it from the MATH training set: levels 3-5, shuffled with
``random.Random(0)``, the first 1,000 kept. The presets use the closest public stand-in: the
first 500 problems of ``math_level3to5`` (the MATH level 3-5 training problems in LEAD's verl
copy, whose order is already mixed: 125 level 3, 175 level 4, 200 level 5; none is in
MATH-500). Same distribution, not the same 500 problems. Evaluation is on the five benchmarks,
never on training problems.

The paper's frozen actor can be served by any OpenAI-compatible server instead::

    llm-marl train --algo agentpo --preset agentpo-math-critic \\
        --policies.frozen.actor openai:meta-llama/Llama-3.2-3B-Instruct@http://localhost:8000/v1
"""

from __future__ import annotations

from typing import Any

from llm_marl.envs.math.datasets import AGENTPO_EVAL_BENCHMARKS
from llm_marl.train.presets import preset

_RUN: dict[str, Any] = {"trainer": {"output_dir": "runs/agentpo", "log_every": None}}


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
            "save_every": 20,
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

# The collaborator: the released rollout and validation sampling (scripts/train.sh).
_COLLABORATOR_SAMPLING = {"max_new_tokens": 768, "temperature": 1.0, "top_p": 1.0}
_COLLABORATOR_EVAL_SAMPLING = {"max_new_tokens": 768, "temperature": 1.0, "top_p": 0.7}
# The frozen actor: greedy with its own 2,048-token budget (reward_manager_agentpo.py).
_ACTOR_SAMPLING = {"max_new_tokens": 2048, "temperature": 0.0, "top_p": 1.0}

_RELEASED: dict[str, Any] = {
    "trainer": {
        # 500 problems, 4 per step, 1 epoch.
        "env_kwargs": {"dataset": "math_level3to5", "split": "train", "limit": 500},
        "eval_env_kwargs": {
            "dataset": list(AGENTPO_EVAL_BENCHMARKS),
            "split": None,  # each benchmark's test split
            "limit": None,
        },
        "steps": 125,
        "group_size": 16,
        "tasks_per_step": 4,
        "eval_every": 100,
        "eval_group_size": 1,
        "eval_at_start": False,
        "save_every": 100,
    },
    "algorithm": {
        "reward_component": None,  # the math envs' reward is already binary correctness
        "lr": 1e-6,
        "weight_decay": 0.1,
        "warmup_steps": 10,  # learning-rate warmup
        "max_grad_norm": 1.0,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "clip_ratio_c": 10.0,
        "kl_coef": 0.0,
        "aggregation": "token-mean",
        "loss": "clipped",
        "epochs": 1,
    },
    "policies": {
        "model": "Qwen/Qwen2.5-3B-Instruct",
        "frozen": {"actor": "hf:meta-llama/Llama-3.2-3B-Instruct"},
        "format_warmup_steps": 0,
        "dtype": "bfloat16",
    },
}


def _released(collaborator: str) -> dict[str, Any]:
    """The per-agent sampling of the released config for the topology whose trained agent is
    ``collaborator``."""
    return {
        "trainer": {
            "sampling": {collaborator: _COLLABORATOR_SAMPLING, "actor": _ACTOR_SAMPLING},
            "eval_sampling": {
                collaborator: _COLLABORATOR_EVAL_SAMPLING,
                "actor": _ACTOR_SAMPLING,
            },
        },
        "algorithm": {"collaborator": collaborator},
    }


# Loss: the clipped surrogate with clip-higher and dual-clip, token-mean (the release's).
AGENTPO_MATH_HINT = preset(
    "agentpo",
    "agentpo-math-hint",
    "the paper's hint topology: Qwen2.5-3B-Instruct hint agent, greedy frozen Llama-3.2-3B actor",
    {"trainer": {"env": "math_hint-v0"}},
    defaults=(_RUN, _RELEASED, _released("hint")),
)

# Loss: as agentpo-math-hint. The release critiques fixed offline drafts (the first worked
# solution of each training problem): every critique of a GRPO group critiques one draft. Here
# the frozen actor writes the draft in the episode, and share_frozen keeps one draft per group:
# the actor's identical requests within a group (the draft prompt, and a revision prompt when
# two critiques coincide) are generated once. The released actor is greedy
# (reward_manager_agentpo.py: temperature=0), so this is the text each of the 16 episodes
# would have drafted, generated once instead of 16 times (and equal by construction, not up to
# batched bf16 numerics); with a sampling actor (--trainer.sampling.actor.temperature 0.7) it
# is one sampled draft per task. Evaluation does not share (one episode per task anyway).
AGENTPO_MATH_CRITIC = preset(
    "agentpo",
    "agentpo-math-critic",
    "the paper's critic topology: Qwen2.5-3B-Instruct critic, greedy frozen Llama-3.2-3B actor",
    {"trainer": {"env": "math_critic-v0", "share_frozen": ["actor"]}},
    defaults=(_RUN, _RELEASED, _released("critic")),
)
