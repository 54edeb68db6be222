"""The examples: --help, presets, the custom algorithm through the unchanged Trainer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_marl.train import parse_run_config
from llm_marl.train.logging import read_jsonl

from .conftest import EXAMPLES, load_example


@pytest.mark.slow  # a fresh interpreter per example; 56 s in the fast loop at load 17 (#22)
@pytest.mark.parametrize("name", ["train_magrpo", "train_agentpo", "custom_algorithm"])
def test_examples_have_help(name):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--env", "--model", "--steps", "--output-dir", "--config", "--preset"):
        assert flag in proc.stdout


def test_presets_hold_the_papers_settings_and_flags_override_them():
    paper = parse_run_config(["--preset", "magrpo-coop-humaneval"], algo="magrpo")
    assert paper.policies.model == "Qwen/Qwen2.5-Coder-3B"
    assert paper.trainer.env == "coop_humaneval-v0"
    sampling = paper.trainer.sampling
    assert (paper.algorithm.lr, paper.trainer.group_size, sampling.temperature, sampling.top_p) == (
        2e-5,
        4,
        0.6,
        0.6,
    )
    assert paper.policies.format_warmup_steps == 0
    mine = parse_run_config(["--preset", "magrpo-coop-humaneval", "--lr", "1e-5", "--lora"])
    assert mine.algorithm.lr == 1e-5 and mine.policies.lora is True
    default = parse_run_config([])
    assert default.trainer.env == "coordination-v0" and default.policies.model == "tiny"
    assert default.preset == "toy-coordination"
    # Another registered env: the generic preset, no toy format warm-up (it only knows the toys).
    other = parse_run_config(["--env", "math_hint-v0"])
    assert other.trainer.env == "math_hint-v0" and other.policies.format_warmup_steps == 0
    assert other.preset == "generic"

    released = parse_run_config(["--preset", "agentpo-math-hint"], algo="agentpo")
    algo = released.algorithm
    assert (algo.lr, algo.weight_decay, algo.warmup_steps) == (1e-6, 0.1, 10)
    assert (released.trainer.group_size, released.trainer.tasks_per_step) == (16, 4)


@pytest.mark.slow  # 47 s in the fast loop at load 17 (#22)
def test_custom_algorithm_trains_through_the_trainer(tmp_path):
    custom = load_example("custom_algorithm")
    out = tmp_path / "reinforce"
    result = custom.main(["--steps", "2", "--group-size", "2", "--output-dir", str(out)])
    assert result.final_step == 2
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "left/loss" in rows[1] and "right/loss" in rows[2]
    assert (out / "reward.png").is_file()
    assert (out / "checkpoints" / "latest").is_file()


def test_agentpo_example_runs_and_keeps_the_actor_frozen(tmp_path, capsys):
    agentpo = load_example("train_agentpo")
    result = agentpo.main(
        [
            "--steps",
            "2",
            "--format-warmup-steps",
            "2",
            "--group-size",
            "2",
            "--output-dir",
            str(tmp_path / "agentpo"),
            "--no-plot",
            "--no-progress",
        ]
    )
    assert result.final_step == 2
    assert "frozen listener weights bit-identical after training: True" in capsys.readouterr().out


@pytest.mark.parametrize("topology", ["hint", "critic"])
def test_agentpo_runs_on_both_paper_topologies(tmp_path, capsys, topology):
    # Feedforward (hint -> actor) and feedback (actor -> critic -> actor): the collaborator acts
    # before or in the middle of the episode; the env's binary reward reaches it either way.
    # The paper presets' topology with offline tiny models in place of the 3B ones.
    agentpo = load_example("train_agentpo")
    # The CPU smoke version of docs/reproduce.md: the preset's tiny version (--model tiny: the
    # bundled math sample, one held-out problem), 8 tokens per agent.
    args = ["--preset", f"agentpo-math-{topology}", "--model", "tiny"]
    args += ["--policies.frozen.actor", "tiny", "--steps", "1"]
    args += [f"--trainer.sampling.{topology}.max_new_tokens", "8"]
    args += ["--trainer.sampling.actor.max_new_tokens", "8", "--eval-sampling", "none"]
    args += ["--trainer.eval_env_kwargs.limit", "1"]
    args += ["--group-size", "2", "--tasks-per-step", "2", "--output-dir", str(tmp_path)]
    args += ["--no-plot", "--no-progress", "--dtype", "none"]
    result = agentpo.main(args)
    assert result.final_step == 1
    row = result.history[-1]
    assert row["episodes"] == 4 and "reward/correct" in row
    assert row["eval/episodes"] == 1  # the tiny version's one held-out problem
    assert "frozen actor weights bit-identical after training: True" in capsys.readouterr().out
