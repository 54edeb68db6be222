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
  ``save_freq=100``, ``val_before_train=False`` (``True`` in 8987a7e, ``False`` from the next
  commit, 3d557c8, on); ``MODEL_PATH`` Qwen2.5-3B-Instruct,
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

Team topologies (``math_debate-v0``, ``math_roles-v0``: one collaborator among frozen solvers,
the team's answer a majority vote; :mod:`llm_marl.envs.math.team`):

* ``agentpo-math-debate`` follows the release's multi-agent-debate run, commit 1a91658 ("mad").
  Its ``scripts/train.sh`` keeps every optimisation, sampling, data and schedule value of the
  hint/critic run above (lines 14-34, 47, 66-69, 81, 133, 148-156, 166-174, 189-192),
  so the preset shares them, and changes the team: ``cooperation_mode=mad`` (line 84),
  ``mad_num_agents=3``, ``mad_debate_rounds=2``, ``mad_topology=full``,
  ``mad_multi_persona=False`` (lines 87-90), and the frozen model
  ``actor_model=Qwen2.5-7B-SiliconFlow`` (line 83), which ``agentpo/llm_fn.py`` (line 22)
  resolves to ``Qwen/Qwen2.5-7B-Instruct``. The debaters' decoding is ``MADConfig``'s
  (``agentpo/debate/config.py`` lines 12-16, not overridden by the script): greedy
  (``temperature=0.0``, ``top_p=1.0``), ``max_tokens=2048``, peers' responses cut to
  ``max_peer_chars=2000``; ``use_majority_vote=True`` (line 21). ``agentpo/main_dapo.py``
  (lines 191-214) gives the same ``mad`` config to the validation reward, so evaluation decodes
  the debaters the same way. The release validates on ``test_solutions_50.parquet`` (train.sh line 59, unpublished);
  the preset evaluates on the paper's five benchmarks, the list of the release's own evaluation
  script of that commit (``scripts/eval_llama_api.sh`` line 19, ``DATA_NAMES``).
* ``agentpo-math-roles``: the release has no role-assignment code (``math_roles-v0`` is our
  design, see its docstring), so no value of this preset is the release's for this topology.
  They are taken from the closest released setting, the debate run above with its revision
  rounds removed (a collaborator writes once, three frozen solvers answer once, majority vote):
  its optimisation, sampling and data (as every preset here), three solvers
  (``mad_num_agents=3``), the solvers' model (Qwen2.5-7B-Instruct) and decoding (greedy, 2,048
  tokens, ``MADConfig``). Ours: the role prompt and ``max_role_chars`` (the env's defaults).

A frozen spec named by several agents builds one model that plays all of them (as the release
calls one actor model N times): the three solvers cost one 7B model's memory. The CPU smoke
version (``docs/reproduce.md``, ``tests/train/test_team_presets.py``) is the same preset with
``--model tiny`` (its tiny version: every frozen agent ``tiny``, the bundled math sample's 24
training and 6 held-out problems, at most 16 tokens per turn; see :mod:`llm_marl.train.presets`)
and one step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl.envs.math.datasets import AGENTPO_EVAL_BENCHMARKS
from llm_marl.envs.math.team import solver_names
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
            # lr 1e-3 warmed up linearly over the first 20 optimizer steps (10 RL steps of 2
            # epochs); the former values were lr 2e-3, no warm-up. Chosen for llm_marl's CPU
            # toys. Why: there is no KL term, and after the format warm-up the speaker writes
            # the same uniform digit whatever the target; at full lr from the first update
            # (Adam's first steps move every weight by about lr) what the speaker learned for
            # one target moved its digits for all of them, and it could settle on one digit
            # for two or more targets: no advantage in those targets' groups, no gradient, for
            # good. Measured (sampled evaluation, 16 episodes per task; chance 0.4), team
            # reward at steps 30 / 40 / 60 (tests/algos/test_learning.py trains this run to 40;
            # 30 before):
            #   lr 2e-3, no warm-up, seeds 0-5: 0.99/0.99/0.99 0.97/0.96/0.97 0.40/0.40/0.40
            #     (one digit for every target from step 4) 0.96/0.99/1.00 0.79/0.79/0.79
            #     (3 targets of 4) 0.98/0.98/0.98
            #   lr 2e-3, warm-up 20, seeds 0-9: 0.99/0.99/1.00 0.59/0.78/0.77 0.96/0.99/0.99
            #     0.80/0.78/0.80 0.99/0.96/0.99 0.35/0.37/0.78 0.96/0.96/0.97 0.96/0.99/1.00
            #     0.98/0.99/0.99 0.99/0.99/1.00
            #   lr 1e-3, warm-up 20, seeds 0-9: 1.00/0.99/1.00 0.97/0.97/0.97 0.98/0.98/0.96
            #     0.96/1.00/0.99 0.80/0.80/0.95 0.41/0.97/0.97 0.97/0.97/0.97 0.94/0.98/1.00
            #     0.91/0.98/0.99 0.99/0.99/1.00
            # lr 1e-3 still sat on 3 targets of 4 for a while on seed 4 (0.80 at steps 20-50).
            "lr": 1e-3,
            "weight_decay": 0.0,
            "warmup_steps": 20,
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

# The training problems: the first 500 (dataset_num=500) of the stand-in for math8k_hard.
_TRAIN_DATA: dict[str, Any] = {"dataset": "math_level3to5", "split": "train", "limit": 500}

# The tiny version's data (``--model tiny``, see llm_marl.train.presets): the bundled math
# sample, 24 training and 6 held-out problems, instead of MATH level 3-5 and the benchmarks.
_TINY: dict[str, Any] = {
    "env_kwargs": {"dataset": "sample", "split": "train", "limit": None},
    "eval_env_kwargs": {"dataset": "sample", "split": "eval", "limit": None},
}

_RELEASED: dict[str, Any] = {
    "trainer": {
        # 500 problems, 4 per step, 1 epoch.
        "env_kwargs": _TRAIN_DATA,
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


def _released(
    collaborator: str, frozen: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The per-agent sampling of the released config for the topology whose trained agent is
    ``collaborator``; ``frozen`` is each frozen agent's sampling, in training and evaluation
    alike (default: the hint/critic release's actor)."""
    frozen = {"actor": _ACTOR_SAMPLING} if frozen is None else frozen
    return {
        "trainer": {
            "sampling": {collaborator: _COLLABORATOR_SAMPLING, **frozen},
            "eval_sampling": {collaborator: _COLLABORATOR_EVAL_SAMPLING, **frozen},
        },
        "algorithm": {"collaborator": collaborator},
        # The collaborator's prompt is left-truncated to 256 tokens: max_prompt_length=256 and
        # data.truncation='left' (scripts/train.sh lines 21 and 87, commits 8987a7e-1a91658).
        # (The release truncates the dataset prompt; here each prompt the collaborator reads.)
        "policies": {"max_prompt_tokens": {collaborator: 256}},
    }


# Loss: the clipped surrogate with clip-higher and dual-clip, token-mean (the release's).
AGENTPO_MATH_HINT = preset(
    "agentpo",
    "agentpo-math-hint",
    "the paper's hint topology: Qwen2.5-3B-Instruct hint agent, greedy frozen Llama-3.2-3B actor",
    {"trainer": {"env": "math_hint-v0"}},
    defaults=(_RUN, _RELEASED, _released("hint")),
    tiny=_TINY,
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
    tiny=_TINY,
)


# ------------------------------------------------------- team topologies (release commit 1a91658)

# The mad run's frozen model: actor_model=Qwen2.5-7B-SiliconFlow (scripts/train.sh line 83),
# i.e. Qwen/Qwen2.5-7B-Instruct (agentpo/llm_fn.py line 22). One spec for every solver: one model.
_TEAM_MODEL = "hf:Qwen/Qwen2.5-7B-Instruct"
# The debaters' decoding: MADConfig's temperature=0.0, top_p=1.0, max_tokens=2048
# (agentpo/debate/config.py lines 12-14), in training and validation (main_dapo.py 191-214).
_SOLVER_SAMPLING = {"max_new_tokens": 2048, "temperature": 0.0, "top_p": 1.0}
_NUM_SOLVERS = 3  # mad_num_agents=3 (scripts/train.sh line 87)


def _frozen_team(collaborator: str, solvers: Sequence[str]) -> dict[str, Any]:
    """:func:`_released` for a ``collaborator`` that leads the frozen ``solvers``: each one is
    the mad run's model (:data:`_TEAM_MODEL`) and decodes greedily (:data:`_SOLVER_SAMPLING`)."""
    layer = _released(collaborator, dict.fromkeys(solvers, _SOLVER_SAMPLING))
    layer["policies"]["frozen"] = dict.fromkeys(solvers, _TEAM_MODEL)
    return layer


_DEBATERS = solver_names("debater", _NUM_SOLVERS)
# Loss, optimiser, data, schedule, collaborator sampling: as agentpo-math-hint (the mad
# train.sh keeps them). The team: debate/config.py and train.sh lines 87-90.
AGENTPO_MATH_DEBATE = preset(
    "agentpo",
    "agentpo-math-debate",
    "the release's multi-agent debate: Qwen2.5-3B-Instruct coordinator, 3 greedy frozen "
    "Qwen2.5-7B-Instruct debaters, 2 rounds, majority vote",
    {
        "trainer": {
            "env": "math_debate-v0",
            "env_kwargs": {
                **_TRAIN_DATA,
                "num_debaters": _NUM_SOLVERS,
                "rounds": 2,  # mad_debate_rounds=2 (train.sh line 88)
                "topology": "full",  # mad_topology=full (line 89)
                "personas": False,  # mad_multi_persona=False (line 90)
                "max_peer_chars": 2000,  # MADConfig.max_peer_chars (debate/config.py line 16)
                "aggregate": "vote",  # MADConfig.use_majority_vote=True (line 21)
            },
        },
    },
    defaults=(_RUN, _RELEASED, _frozen_team("coordinator", _DEBATERS)),
    tiny=_TINY,
)

_ROLE_SOLVERS = solver_names("solver", _NUM_SOLVERS)
# No released code: every value is the debate run's (its closest released setting: the debate
# without revision rounds), documented as such in the module docstring.
AGENTPO_MATH_ROLES = preset(
    "agentpo",
    "agentpo-math-roles",
    "our role-assignment topology with the debate run's values: Qwen2.5-3B-Instruct assigner, "
    "3 greedy frozen Qwen2.5-7B-Instruct solvers, majority vote",
    {
        "trainer": {
            "env": "math_roles-v0",
            "env_kwargs": {**_TRAIN_DATA, "num_solvers": _NUM_SOLVERS, "aggregate": "vote"},
        },
    },
    defaults=(_RUN, _RELEASED, _frozen_team("assigner", _ROLE_SOLVERS)),
    tiny=_TINY,
)
