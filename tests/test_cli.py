"""The llm-marl command line."""

from __future__ import annotations

import pytest

from llm_marl.cli import main


def test_list_prints_every_env(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "coop_humaneval-v0" in out and "math_hint-v0" in out


def test_play_randomly_to_the_end(capsys):
    assert main(["play", "referential-v0", "--random", "--seed", "1"]) == 0
    assert "episode over: team reward" in capsys.readouterr().out


def test_play_from_input(monkeypatch, capsys):
    answers = iter(["1", "1"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    args = ["play", "coordination-v0", "--task-id", "coordination/t=2"]
    assert main(args) == 0
    assert "team reward 1.000" in capsys.readouterr().out


def test_bad_input_is_clear(capsys):
    with pytest.raises(SystemExit):
        main(["play", "referential-v0", "--env-arg", "oops"])
    assert main(["train", "--algo", "ppo"]) == 2
    err = capsys.readouterr().err
    assert "--algo takes one of: magrpo, agentpo, matpo" in err and "Traceback" not in err


def test_train_and_eval_delegate_to_their_parsers(capsys):
    for command in (
        ["train", "--help"],
        ["train", "--algo", "agentpo", "--help"],
        ["eval", "--help"],
    ):
        with pytest.raises(SystemExit) as info:
            main(command)
        assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--preset" in out and "presets of agentpo" in out and "toy-referential" in out
