"""The AgentPO team-topology presets (agentpo-math-debate, agentpo-math-roles): their values are
the release's cited ones, and their CPU smoke version trains with the frozen solvers untouched.

``tests/train/test_presets_paper.py`` checks every preset, these included, for train/eval
overlap and for the released loss.
"""

from __future__ import annotations

import pytest

from llm_marl.envs.math.datasets import AGENTPO_EVAL_BENCHMARKS
from llm_marl.envs.registration import make
from llm_marl.policies import SamplingParams, build_tiny_lm
from llm_marl.train import build_policies, parse_run_config, preset_config, run
from llm_marl.train.models import TINY

TEAMS = {
    # preset: (env, collaborator, solvers)
    "agentpo-math-debate": (
        "math_debate-v0",
        "coordinator",
        ["debater_1", "debater_2", "debater_3"],
    ),
    "agentpo-math-roles": ("math_roles-v0", "assigner", ["solver_1", "solver_2", "solver_3"]),
}


@pytest.mark.parametrize("name", list(TEAMS))
def test_a_team_preset_holds_the_released_values(name):
    env, collaborator, solvers = TEAMS[name]
    config = preset_config("agentpo", name)
    tc, algo, pc = config.trainer, config.algorithm, config.policies
    assert tc.env == env and algo.collaborator == collaborator
    # The mad run's scripts/train.sh (1a91658): as the hint/critic run.
    assert (tc.steps, tc.tasks_per_step, tc.group_size) == (125, 4, 16)  # 500 / 4, n=16
    assert (tc.eval_every, tc.save_every, tc.eval_at_start, tc.eval_group_size) == (
        100,
        100,
        False,
        1,
    )
    assert (algo.lr, algo.warmup_steps, algo.weight_decay, algo.max_grad_norm) == (
        1e-6,
        10,
        0.1,
        1.0,
    )
    assert (algo.loss, algo.clip_low, algo.clip_high, algo.clip_ratio_c) == (
        "clipped",
        0.2,
        0.28,
        10.0,
    )
    assert (algo.kl_coef, algo.aggregation, algo.epochs, algo.reward_component) == (
        0.0,
        "token-mean",
        1,
        None,
    )
    assert (pc.model, pc.dtype, pc.format_warmup_steps) == (
        "Qwen/Qwen2.5-3B-Instruct",
        "bfloat16",
        0,
    )
    assert tc.sampling[collaborator] == SamplingParams(768, 1.0, 1.0)
    assert tc.eval_sampling[collaborator] == SamplingParams(768, 1.0, 0.7)
    # The team: three frozen Qwen2.5-7B-Instruct solvers (actor_model=Qwen2.5-7B-SiliconFlow),
    # greedy with 2,048 tokens (MADConfig) in training and evaluation.
    assert pc.frozen == dict.fromkeys(solvers, "hf:Qwen/Qwen2.5-7B-Instruct")
    greedy = SamplingParams(max_new_tokens=2048, temperature=0.0, top_p=1.0)
    assert set(tc.sampling) == set(tc.eval_sampling) == {collaborator, *solvers}
    assert all(tc.sampling[s] == tc.eval_sampling[s] == greedy for s in solvers)
    assert make(env, **{**tc.env_kwargs, "limit": 1}).possible_agents == [collaborator, *solvers]
    # Data: the first 500 MATH level 3-5 problems; the five held-out benchmarks.
    assert {k: tc.env_kwargs[k] for k in ("dataset", "split", "limit")} == {
        "dataset": "math_level3to5",
        "split": "train",
        "limit": 500,
    }
    assert tc.eval_env_kwargs == {
        "dataset": list(AGENTPO_EVAL_BENCHMARKS),
        "split": None,
        "limit": None,
    }


def test_the_debate_preset_plays_the_released_debate():
    kwargs = preset_config("agentpo", "agentpo-math-debate").trainer.env_kwargs
    # mad_num_agents=3, mad_debate_rounds=2, mad_topology=full, mad_multi_persona=False
    # (train.sh lines 87-90); MADConfig.max_peer_chars=2000, use_majority_vote=True.
    env = make("math_debate-v0", **{**kwargs, "limit": 1})
    assert (env.num_debaters, env.rounds, env.topology, env.personas) == (3, 2, "full", False)
    assert (env.max_peer_chars, env.aggregate, env.max_steps) == (2000, "vote", 4)
    roles = make(
        "math_roles-v0",
        **{**preset_config("agentpo", "agentpo-math-roles").trainer.env_kwargs, "limit": 1},
    )
    assert (roles.num_solvers, roles.aggregate) == (3, "vote")


def smoke_args(name: str, out, frozen: str) -> list[str]:
    """The CPU smoke version of a team preset (docs/reproduce.md): the preset's tiny version
    (``--model tiny``: the bundled math sample, one held-out problem) with 8 tokens per turn
    and one step; ``frozen`` plays every solver."""
    _, collaborator, solvers = TEAMS[name]
    args = ["--preset", name, "--model", "tiny", "--dtype", "none", "--steps", "1"]
    for agent in (collaborator, *solvers):
        args += [f"--trainer.sampling.{agent}.max_new_tokens", "8"]
    for solver in solvers:
        args += [f"--policies.frozen.{solver}", frozen]
    args += ["--eval-sampling", "none", "--trainer.eval_env_kwargs.limit", "1"]
    args += ["--trainer.env_kwargs.limit", "4", "--group-size", "2", "--tasks-per-step", "2"]
    args += ["--output-dir", str(out), "--no-plot", "--no-progress", "--no-console"]
    if name == "agentpo-math-debate":
        args += ["--trainer.env_kwargs.rounds", "1"]  # one revision round: half the CPU time
    return args


@pytest.mark.parametrize(
    ("name", "frozen"),
    [("agentpo-math-debate", TINY), ("agentpo-math-roles", "hf")],
    ids=["debate-tiny-solvers", "roles-one-shared-model"],
)
def test_the_smoke_version_trains_and_leaves_the_solvers_bit_identical(
    tmp_path, capsys, name, frozen
):
    _, collaborator, solvers = TEAMS[name]
    if frozen == "hf":  # one local model named by every solver: one policy object plays all
        frozen = "hf:" + build_tiny_lm(tmp_path / "solver-lm", seed=3, num_layers=1)
    config = parse_run_config(smoke_args(name, tmp_path / "run", frozen), algo="agentpo")
    assert config.trainer.sampling[solvers[0]].temperature == 0.0  # still the preset's greedy
    result = run(config)
    assert result.final_step == 1
    row = result.history[-1]
    assert row["episodes"] == 4 and "reward/correct" in row and "reward/agreement" in row
    assert row["eval/episodes"] == 1  # the tiny version's one held-out problem
    assert row[f"{collaborator}/optimizer_steps"] > 0
    assert not any(k.startswith(solvers[0][:-2]) for k in row)  # no solver is trained
    # run() fingerprints each frozen local model and raises if one changed.
    printed = capsys.readouterr().out
    for solver in solvers:
        assert f"frozen {solver} weights bit-identical after training: True" in printed


def test_frozen_agents_with_one_spec_share_one_policy(tmp_path):
    path = build_tiny_lm(tmp_path / "lm", seed=0, num_layers=1)
    config = parse_run_config(
        [*smoke_args("agentpo-math-debate", tmp_path / "run", f"hf:{path}"),
         "--policies.frozen.debater_3", TINY],
        algo="agentpo",
    )  # fmt: skip
    policies = build_policies(config)
    assert policies["debater_1"] is policies["debater_2"]  # one model in memory
    assert policies["debater_3"] is not policies["debater_1"]  # tiny: a model of its own
    assert policies["coordinator"].trainable and not policies["debater_1"].trainable
