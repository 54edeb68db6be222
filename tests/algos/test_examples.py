"""The examples: --help, presets, the custom algorithm through the unchanged Trainer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_marl.train.logging import read_jsonl

from .conftest import EXAMPLES, load_example


@pytest.mark.parametrize("name", ["train_magrpo", "train_agentpo", "custom_algorithm"])
def test_examples_have_help(name):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--env", "--model", "--steps", "--out"):
        assert flag in proc.stdout


def test_presets_hold_the_papers_settings_and_flags_override_them():
    magrpo = load_example("train_magrpo")
    parser = magrpo.build_parser()
    paper = magrpo.resolve(parser.parse_args(["--preset", "magrpo-coop-humaneval"]))
    assert paper["model"] == "Qwen/Qwen2.5-Coder-3B" and paper["env"] == "coop_humaneval-v0"
    assert (paper["lr"], paper["group_size"], paper["temperature"], paper["top_p"]) == (
        2e-5,
        4,
        0.6,
        0.6,
    )
    assert paper["warmup_steps"] == 0
    mine = magrpo.resolve(
        parser.parse_args(["--preset", "magrpo-coop-humaneval", "--lr", "1e-5", "--lora"])
    )
    assert mine["lr"] == 1e-5 and mine["lora"] is True
    default = magrpo.resolve(parser.parse_args([]))
    assert default["env"] == "coordination-v0" and default.get("model") is None
    # Another registered env: no toy format warm-up (it only knows the toy envs).
    other = magrpo.resolve(parser.parse_args(["--env", "math_hint-v0"]))
    assert other["env"] == "math_hint-v0" and other["warmup_steps"] == 0

    agentpo = load_example("train_agentpo")
    released = agentpo.resolve(agentpo.build_parser().parse_args(["--preset", "agentpo-math-hint"]))
    assert (released["lr"], released["weight_decay"], released["lr_warmup_steps"]) == (
        1e-6,
        0.1,
        10,
    )
    assert (released["group_size"], released["tasks_per_step"]) == (16, 4)


def test_custom_algorithm_trains_through_the_trainer(tmp_path):
    custom = load_example("custom_algorithm")
    out = tmp_path / "reinforce"
    result = custom.main(["--steps", "2", "--group-size", "2", "--out", str(out)])
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
            "--out",
            str(tmp_path / "agentpo"),
            "--no-plot",
            "--no-progress",
        ]
    )
    assert result.final_step == 2
    assert "frozen listener weights bit-identical after training: True" in capsys.readouterr().out


@pytest.mark.parametrize("env", ["math_hint-v0", "math_critic-v0"])
def test_agentpo_runs_on_both_paper_topologies(tmp_path, capsys, env):
    # Feedforward (hint -> actor) and feedback (actor -> critic -> actor): the collaborator acts
    # before or in the middle of the episode; the env's binary reward reaches it either way.
    agentpo = load_example("train_agentpo")
    args = ["--env", env, "--steps", "1", "--max-new-tokens", "8", "--group-size", "2"]
    args += ["--tasks-per-step", "2", "--out", str(tmp_path), "--no-plot", "--no-progress"]
    result = agentpo.main(args)
    assert result.final_step == 1
    row = result.history[-1]
    assert row["episodes"] == 4 and "reward/correct" in row
    assert "frozen actor weights bit-identical after training: True" in capsys.readouterr().out
