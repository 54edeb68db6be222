"""AgentPO trains the collaborator of the multi-agent topologies (math_debate-v0, math_roles-v0)
through the run API, beside frozen solvers that stay bit-identical."""

from __future__ import annotations

import textwrap

import pytest

from llm_marl.train import preset_config, run

TASKS = [
    {"task_id": "a", "problem": "What is 2 + 3?", "answer": "5"},
    {"task_id": "b", "problem": "What is 7 - 4?", "answer": "3"},
]
EVAL_TASKS = [{"task_id": "e", "problem": "What is 2 * 4?", "answer": "8"}]

# A frozen solver whose success depends on what the collaborator wrote (the parity of the
# conversation's length), so that a group's rewards differ and the collaborator gets a gradient.
SOLVER = textwrap.dedent(
    """
    ANSWERS = {"What is 2 + 3?": "5", "What is 7 - 4?": "3", "What is 2 * 4?": "8"}

    def parity_solver(conversation):
        text = "".join(m["content"] for m in conversation)
        answer = next(a for q, a in ANSWERS.items() if q in text)
        return "\\\\boxed{%s}" % (answer if len(text) % 2 == 0 else "0")
    """
)


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "lead", "solvers"),
    [
        ("math_debate-v0", {"num_debaters": 2, "rounds": 1}, "coordinator", "debater"),
        ("math_roles-v0", {"num_solvers": 2}, "assigner", "solver"),
    ],
)
@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_agentpo_run_trains_the_collaborator_and_leaves_the_frozen_solvers_bit_identical(
    tmp_path, monkeypatch, capsys, env_id, env_kwargs, lead, solvers
):
    (tmp_path / "topology_solvers.py").write_text(SOLVER)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    config = preset_config(
        "agentpo",
        "toy-referential",
        {
            "trainer": {
                "env": env_id,
                "env_kwargs": {**env_kwargs, "tasks": TASKS},
                "eval_env_kwargs": {**env_kwargs, "tasks": EVAL_TASKS},
                "steps": 2,
                "tasks_per_step": 2,
                "group_size": 4,
                "sampling": {"max_new_tokens": 4, "temperature": 1.0},
                "eval_every": 2,
                "eval_at_start": False,
                "save_every": 0,
                "output_dir": str(out),
                "progress": False,
                "console": False,
                "plot": False,
            },
            "algorithm": {"collaborator": lead, "reward_component": None, "lr": 1e-2},
            "policies": {
                "model": "tiny",
                "format_warmup_steps": 0,
                "frozen": {
                    f"{solvers}_1": "scripted:topology_solvers:parity_solver",
                    f"{solvers}_2": "tiny",  # a local model: its weights are fingerprinted
                },
            },
        },
    )
    result = run(config)
    rows = result.history
    assert result.final_step == 2 and [r["step"] for r in rows] == [1, 2]
    # The frozen solvers made the reward depend on the collaborator: groups had a spread, so
    # the collaborator (and only it) took optimizer steps with a nonzero gradient.
    assert any(r["reward_std"] > 0 for r in rows)
    assert all(r[f"{lead}/optimizer_steps"] > 0 for r in rows)
    assert any(r[f"{lead}/grad_norm"] > 0 for r in rows)
    assert not any(k.startswith(f"{solvers}_") for r in rows for k in r)
    assert {"reward/correct", "reward/solver_accuracy", "reward/agreement"} <= set(rows[0])
    assert "eval/reward" in rows[-1]  # evaluated on its own tasks
    # run() fingerprints every frozen local model before training and raises if one changed.
    printed = capsys.readouterr().out
    assert f"frozen {solvers}_2 weights bit-identical after training: True" in printed


def test_one_frozen_model_can_play_every_debater_as_in_the_release(tmp_path):
    # The release's debaters are N calls of one frozen actor model: one policy object for all.
    from llm_marl.algos import AgentPO, AgentPOConfig
    from llm_marl.policies import HFPolicy, SamplingParams, build_tiny_lm
    from llm_marl.train import FrozenWeights
    from llm_marl.train.trainer import Trainer, TrainerConfig

    path = build_tiny_lm(tmp_path / "lm", seed=0, num_layers=1)
    actor = HFPolicy(path, trainable=False, name="actor", seed=0)
    coordinator = HFPolicy(path, trainable=True, name="coordinator", seed=1)
    policies = {"coordinator": coordinator, "debater_1": actor, "debater_2": actor}
    config = TrainerConfig(
        env="math_debate-v0",
        env_kwargs={"num_debaters": 2, "rounds": 1, "tasks": TASKS},
        eval_env_kwargs={"num_debaters": 2, "rounds": 1, "tasks": EVAL_TASKS},
        steps=1,
        tasks_per_step=2,
        group_size=2,
        sampling=SamplingParams(max_new_tokens=3, temperature=1.0),
        output_dir=str(tmp_path / "run"),
        eval_at_start=False,
        progress=False,
        console=False,
        plot=False,
    )
    guard = FrozenWeights(policies)
    trainer = Trainer(AgentPO(AgentPOConfig(lr=1e-2, warmup_steps=0)), policies, config)
    result = trainer.train()
    guard.verify(report=False)
    assert result.history[0]["coordinator/num_samples"] == 4  # only the coordinator learns
    assert result.history[0]["episodes"] == 4
    assert result.history[0]["coordinator/optimizer_steps"] > 0
