"""MAGRPO co-writing presets (Liu et al. 2025): TL;DR and arXiv as released, and an offline toy.

``magrpo-tldr`` / ``magrpo-arxiv`` copy OpenMLRL ``LLM_Collab_Writing``'s released configs
``configs/magrpo_tldr_config.yaml`` and ``configs/magrpo_arxiv_config.yaml`` (commit 00ec4aa):
two Qwen/Qwen3-1.7B agents, 4 generations per prompt (``num_generations``), temperature 0.7,
top-p 0.9, 256 new tokens, learning rate 5e-6 (``agent_learning_rate``), one prompt per step
(``train_batch_size: 1``), 2 epochs over ``train[:1100]`` (2,200 steps), one turn
(``num_turns: 1``), aligned joint actions, group-mean advantages divided by the group's std
(``advantage_normalization: true``; CoMLRL's population std, see
:mod:`llm_marl.algos.advantages`), an evaluation every 20 steps on 4 held-out prompts
(``eval_interval``, ``eval_num_samples``), rewards unscaled (``scale_factor: 1.0``). Data
(ours, so that the presets run offline with no extra flag): the benchmark files under
``$LLM_MARL_DATA_DIR`` (:mod:`llm_marl.envs.writing.datasets`): TL;DR ``tldr/test.jsonl``, 500
posts of the OpenAI TL;DR test set, split by position into 400 training / 100 eval posts; arXiv
``arxiv_abstracts/arxiv_data.csv``, 793 training / 200 eval abstracts (a warning and the
bundled sample when the file is missing). The configs' own data are Hugging Face's
``trl-lib/tldr`` train[:1100] / test[:1100] and ``OpenMLRL/arXiv_abstract`` train[:1100] /
val[:1100] (needs the network): pass ``--trainer.env_kwargs.dataset trl-lib/tldr
--trainer.env_kwargs.split 'train[:1100]' --trainer.eval_env_kwargs.split 'test[:1100]'``
(arXiv: ``OpenMLRL/arXiv_abstract``, ``val[:1100]``). With the local files the 2,200 steps are
5.5 epochs over 400 posts (2.8 over 793 abstracts), not the configs' 2 over 1,100. The reward
is the paper's, unguarded
(``guards: False``). Prompts are raw text as in the official code (``prompt_mode: raw``: each
agent's formatter string, ``train_magrpo.py``'s ``summary_agent_formatter`` and siblings,
tokenised with no chat template), so Qwen3 does not think; with ``--policies.prompt_mode chat``
add ``--policies.chat_template_kwargs.enable_thinking false`` to keep it from thinking (any
``<think>`` text is removed before the reward reads a completion either way). The official
trainer updates full weights; add ``--lora`` to fit one small
GPU. Values that the released configs do not state are ours and marked so: the greedy
evaluation, no KL term (none in the config). The loss is CoMLRL's, as in the coding presets:
the plain policy gradient ``-A * sum_t logp_t`` (log-probs at temperature 1) averaged over the
completions, no ratio, no clipping, AdamW with weight decay 0.01 (``loss: policy-gradient``,
``aggregation: sequence-sum``; see :mod:`llm_marl.train.presets.magrpo`).
``magrpo-tldr-comlrl-1.2`` / ``magrpo-arxiv-comlrl-1.2``: the same as CoMLRL 1.2.1 computes
it (advantage ``R - mean(R)`` with no std, weight decay 0; one turn, so the 1.2.1 discount
does not apply), the release nearest the paper in time.

``toy-tldr`` trains two offline tiny LMs on the 8 training posts of the bundled TL;DR sample on
CPU (12 steps, a few minutes) and evaluates them on its 4 held-out posts. A random-init tiny LM
cannot summarise; what it can learn, and does (``tests/envs/writing/test_learning.py``: held-out
reward about 0.8 -> 1.4 in our runs), is the reward's form: enough words in each part, the
detailed part longer than the concise one. It proves the training loop, not summarisation.
"""

from __future__ import annotations

from typing import Any

from llm_marl.train.presets import Preset, preset
from llm_marl.train.presets.magrpo import COMLRL_LOSS, with_comlrl_12

_RUN: dict[str, Any] = {
    "trainer": {"output_dir": "runs/magrpo", "save_every": 100, "log_every": None}
}

# What both released writing configs share (configs/magrpo_{tldr,arxiv}_config.yaml).
_OFFICIAL: dict[str, Any] = {
    "trainer": {
        "steps": 2200,  # num_train_epochs 2 x train[:1100], train_batch_size 1
        "group_size": 4,  # num_generations
        "tasks_per_step": 1,  # train_batch_size
        "sampling": {"max_new_tokens": 256, "temperature": 0.7, "top_p": 0.9},
        "eval_every": 20,  # eval_interval
        "eval_tasks": 4,  # eval_num_samples
        "eval_group_size": 1,  # ours: one greedy episode per eval prompt
        "eval_sampling": None,
    },
    "algorithm": {
        "lr": 5e-6,  # agent_learning_rate
        "kl_coef": 0.0,  # the config has no KL term
        "epochs": 1,
        "gamma": 1.0,  # one turn: no discounting to do
        # advantage_normalization: true, i.e. CoMLRL 1.4.3's (R - mean) / max(population std,
        # 1e-6) (comlrl/trainers/reinforce/magrpo.py line 1632).
        "baseline": "mean",
        "scale": "population-std",
    },
    "policies": {
        "model": "Qwen/Qwen3-1.7B",
        "dtype": "bfloat16",
        "format_warmup_steps": 0,
        # The formatters' strings tokenised with no chat template (train_magrpo.py's
        # *_agent_formatter -> CoMLRL's `tokenizer(prompts)`): no Qwen3 thinking either.
        "prompt_mode": "raw",
    },
}


def _official(name: str, summary: str, env: str, dataset: str) -> tuple[Preset, Preset]:
    """The preset of one released writing config and its CoMLRL 1.2.1 variant: ``env`` on the
    benchmark file ``dataset`` in $LLM_MARL_DATA_DIR (offline; the config's Hub split by flags,
    see the module docstring), and with --model tiny on the bundled ``<dataset>_sample`` (8
    training and 4 held-out TL;DR posts, 4 and 2 arXiv abstracts)."""
    values = {
        "trainer": {
            "env": env,
            "env_kwargs": {"dataset": dataset, "split": "train", "guards": False},
            "eval_env_kwargs": {"split": "eval"},
        }
    }
    tiny = {
        # A random-init tiny LM learns the reward's form, never meaning: no meaning term.
        "env_kwargs": {
            "dataset": f"{dataset}_sample",
            "split": "train",
            "reward": {"meaning_weight": 0.0},
        },
        "eval_env_kwargs": {"split": "eval"},
    }
    return with_comlrl_12(name, summary, values, defaults=(_RUN, _OFFICIAL, COMLRL_LOSS), tiny=tiny)


# The configs' trl-lib/tldr train[:1100] / test[:1100] by flags.
MAGRPO_TLDR, MAGRPO_TLDR_12 = _official(
    "magrpo-tldr",
    "TL;DR co-summarisation as in LLM_Collab_Writing's config: two Qwen3-1.7B agents",
    "tldr-v0",
    "tldr",
)
# The config's OpenMLRL/arXiv_abstract train[:1100] / val[:1100] by flags.
MAGRPO_ARXIV, MAGRPO_ARXIV_12 = _official(
    "magrpo-arxiv",
    "arXiv introduction co-writing as in LLM_Collab_Writing's config: two Qwen3-1.7B agents",
    "arxiv_intro-v0",
    "arxiv",
)

# The offline toy's sampling, in training and evaluation alike: the budgets at which a random
# tiny LM writes ~8 words (concise) and ~16 (detailed).
_TOY_SAMPLING: dict[str, Any] = {
    "concise": {"max_new_tokens": 40, "temperature": 1.0, "top_p": 1.0},
    "detailed": {"max_new_tokens": 80, "temperature": 1.0, "top_p": 1.0},
}

# The offline toy: measured in tests/envs/writing/test_learning.py (held-out reward 0 -> > 0).
TOY_TLDR = preset(
    "magrpo",
    "toy-tldr",
    "two offline tiny LMs learn the TL;DR reward's form on the bundled sample, on CPU",
    {
        "trainer": {
            "env": "tldr-v0",
            # A random-init tiny LM learns the reward's form, never meaning: no meaning term.
            "env_kwargs": {
                "dataset": "tldr_sample",
                "split": "train",
                "reward": {"meaning_weight": 0.0},
            },
            "eval_env_kwargs": {"split": "eval"},
            "steps": 12,
            "tasks_per_step": 4,
            "group_size": 8,
            "sampling": _TOY_SAMPLING,
            "eval_every": 0,  # before and after training only
            # Sampled, at the rollout sampling: the expected reward of the stochastic team.
            "eval_group_size": 4,
            "eval_sampling": _TOY_SAMPLING,
        },
        "algorithm": {
            "lr": 5e-3,
            "kl_coef": 0.05,
            "epochs": 2,
            "gamma": 1.0,
            "aggregation": "token-mean",
        },
        "policies": {"model": "tiny", "format_warmup_steps": 0},
    },
    defaults=(_RUN,),
    auto=True,
)
