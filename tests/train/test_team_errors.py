"""A run config that cannot train is one line from ``llm-marl train`` (exit 2), and where the
config alone says so, before any model is built: a team the algorithm cannot train (AgentPO's
collaborator, MATPO's roles), a dtype torch does not have, LoRA copies of modules the model
does not have, a reward component the env does not report.

Each case was a traceback before (AttributeError, ValueError, KeyError), or no error at all
(peft ignores a ``modules_to_save`` entry that matches nothing); MATPO's roles were checked only
after the models were built and the format warm-up had run (minutes on CPU).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_marl.cli import main

QUICK = ["--steps", "1", "--no-progress", "--no-plot", "--trainer.eval_at_start", "false"]


def _train(capsys: pytest.CaptureFixture[str], out: Path, *argv: str) -> str:
    """Run ``llm-marl train``; assert exit 2 with one line; return that line."""
    assert main(["train", *argv, *QUICK, "--eval-tasks", "1", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            [
                "--algo",
                "agentpo",
                "--preset",
                "toy-referential",
                "--algorithm.collaborator",
                "listener",
            ],
            "AgentPOConfig.collaborator='listener' but the trainable agent is 'speaker'",
        ),
        (
            ["--algo", "agentpo", "--preset", "toy-referential", "--policies.frozen", "{}"],
            "the trainable agents are ['listener', 'speaker']",
        ),
        (
            ["--algo", "matpo", "--algorithm.planner", "boss"],
            "MATPO roles ['boss'] are not agents of this env",
        ),
        (
            ["--algo", "matpo", "--algorithm.workers", "[helper]"],
            "MATPO roles ['helper'] are not agents of this env",
        ),
        (
            ["--algo", "matpo", "--policies.frozen.worker", "tiny"],
            "MATPO trains ONE policy object playing every role",
        ),
        (["--policies.dtype", "bfloat17"], "unknown dtype 'bfloat17'"),
        (["--policies.dtype", "Tensor"], "unknown dtype 'Tensor'"),  # torch.Tensor is no dtype
        (["--policies.dtype", "int8"], "unknown dtype 'int8'"),  # not a floating-point dtype
    ],
)
def test_what_the_config_alone_refutes_is_refused_before_any_model_is_built(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], words: str
) -> None:
    err = _train(capsys, tmp_path, *argv)
    assert words in err
    assert not (tmp_path / "models").exists()


def test_lora_copies_of_modules_the_model_does_not_have_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--lora", "--policies.lora_modules_to_save", "[embed_tokens, embed_tokenz]"]
    err = _train(capsys, tmp_path, *argv, "--format-warmup-steps", "0")
    assert "lora_modules_to_save names ['embed_tokenz'], which are not modules of" in err
    assert "'embed_tokens'" in err  # the names it does have, to pick from


def test_a_reward_component_the_env_does_not_report_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--algorithm.reward_component", "correct", "--format-warmup-steps", "0"]
    err = _train(capsys, tmp_path, *argv, "--group-size", "2", "--tasks-per-step", "1")
    assert "no reward component 'correct'; it reports ['format', 'success']" in err
    assert "algorithm.reward_component" in err
