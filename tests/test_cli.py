"""The llm-marl command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import llm_marl
from llm_marl.cli import EXIT_USER_ERROR, main, read_action
from llm_marl.errors import ConfigError


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
    assert main(["play", "referential-v0", "--env-arg", "oops"]) == 2
    assert main(["train", "--algo", "ppo"]) == 2
    err = capsys.readouterr().err
    assert "--env-arg expects KEY=VALUE, got 'oops'" in err
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


def _one_line_error(capsys, argv: list[str], prefix: str, message: str) -> None:
    assert main(argv) == EXIT_USER_ERROR
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith(prefix) and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "prefix", "message"),
    [
        (
            ["play", "nosuch-v0"],
            "llm-marl play: error: ",
            "no environment registered as 'nosuch-v0'",
        ),
        (["play", "coordination-v0", "--bogus"], "llm-marl play: error: ", "--bogus"),
        (["play", "coordination-v0", "--seed", "x"], "llm-marl play: error: ", "invalid int"),
        (["frobnicate"], "llm-marl: error: ", "invalid choice: 'frobnicate'"),
        (
            ["play", "coordination-v0", "--env-arg", "num_symbols=99"],
            "llm-marl play: error: ",
            "num_symbols must be in 2..10",
        ),
        (["train", "--env", "nosuch-v0"], "llm-marl train: error: ", "nosuch-v0"),
        (["train", "--steps", "x"], "llm-marl train: error: ", "--steps: expected int"),
        (["eval", "--coder", "gpt-4o"], "llm-marl eval: error: ", "bad policy spec 'gpt-4o'"),
        (["eval", "--coder", "hf:/no/such/dir"], "llm-marl eval: error: ", "does not exist"),
        # argparse's own usage errors too: one line, not the usage block
        (["eval", "--bogus"], "llm-marl eval: error: ", "unrecognized arguments: --bogus"),
        (["eval", "--family", "nope"], "llm-marl eval: error: ", "invalid choice: 'nope'"),
        (["eval", "--limit", "x"], "llm-marl eval: error: ", "invalid int value: 'x'"),
        (["bench", "algos"], "llm-marl bench: error: ", "required: --env, --algos"),
    ],
)
def test_user_errors_are_one_line_exit_2(capsys, tmp_path, argv, prefix, message):
    if argv[0] == "train":
        argv = [*argv, "--output-dir", str(tmp_path)]
    _one_line_error(capsys, argv, prefix, message)


def test_debug_shows_the_traceback(capsys):
    assert main(["play", "nosuch-v0", "--debug"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "UnknownEnvError" in err
    assert err.splitlines()[-1].startswith("llm-marl play: error: no environment registered")


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"llm-marl {llm_marl.__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "llm-marl train --algo magrpo" in out and "--debug" in out
    assert "``" not in out and "::" not in out  # no raw reST
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: llm-marl train") and "--algo" in out


def test_exit_status_of_the_installed_command(tmp_path):
    """The real process: status 2 and one line for a user error, 0 for --version."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "llm_marl.cli"]
    bad = subprocess.run([*cmd, "play", "nosuch-v0"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    version = subprocess.run([*cmd, "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0 and llm_marl.__version__ in version.stdout


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["42"], "42"),
        (['"""', "def f(x):", "    return x", '"""'], "def f(x):\n    return x"),
        (['"""', '"""'], ""),
        (['"""', "no end"], None),  # input closed inside the block
        ([], None),
    ],
)
def test_read_action_lines_and_blocks(lines, expected):
    feed = iter(lines)

    def fake_input(prompt: str = "") -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    assert read_action(">>> ", fake_input) == expected


def test_read_action_opens_the_editor(tmp_path, monkeypatch):
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nprintf 'line one\\nline two\\n' > \"$1\"\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    assert read_action(">>> ", lambda prompt="": ":edit") == "line one\nline two"
    monkeypatch.delenv("EDITOR")
    with pytest.raises(ConfigError, match="EDITOR"):
        read_action(">>> ", lambda prompt="": ":edit")


def test_play_multi_line_action(monkeypatch, capsys):
    answers = iter(['"""', "1", "(my digit)", '"""', "1"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert main(["play", "coordination-v0", "--task-id", "coordination/t=2"]) == 0
    assert "team reward 1.000" in capsys.readouterr().out


@pytest.mark.parametrize("env_id", ["coordination-v0", "referential-v0"])
def test_random_play_on_toy_envs_is_valid(env_id, capsys):
    """Random valid digits: never malformed, and the mean reward is the env's chance level."""
    rewards = []
    for seed in range(60):
        assert main(["play", env_id, "--random", "--seed", str(seed)]) == 0
        out = capsys.readouterr().out
        assert "'format': 1.0" in out, out  # every answer was a valid digit
        rewards.append(float(out.split("team reward ")[1].split(",")[0]))
    chance = llm_marl.make(env_id).unwrapped.chance_level()
    assert abs(sum(rewards) / len(rewards) - chance) < 0.12


def test_a_preset_name_longer_than_its_column_does_not_run_into_its_summary(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--algo", "magrpo", "--help"])
    lines = capsys.readouterr().out.splitlines()
    row = next(i for i, line in enumerate(lines) if "magrpo-coop-humaneval-clipped" in line)
    assert lines[row].strip() == "magrpo-coop-humaneval-clipped"
    assert lines[row + 1].strip().startswith("magrpo-coop-humaneval with")


def test_env_prints_the_versions_for_a_bug_report(tmp_path, monkeypatch, capsys):
    """Docker and bubblewrap are asked on the PATH: fakes here, one working and one broken."""
    import importlib.metadata as metadata

    (tmp_path / "docker").write_text("#!/bin/sh\necho 27.1.0\n")
    (tmp_path / "bwrap").write_text("#!/bin/sh\necho 'bwrap: no user namespaces' >&2\nexit 1\n")
    for tool in ("docker", "bwrap"):
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert main(["env"]) == 0
    lines = {
        key.strip("- ").strip(): value.strip()
        for key, _, value in (
            line.partition(" : ") for line in capsys.readouterr().out.splitlines()
        )
    }
    assert lines["python"] == ".".join(map(str, sys.version_info[:3]))
    assert lines["torch"].startswith(metadata.version("torch"))
    assert lines["transformers"] == metadata.version("transformers")
    assert lines["vllm"] in ("-", _installed("vllm"))
    assert lines["docker"] == "27.1.0"
    assert lines["bubblewrap"] == "unusable (bwrap: no user namespaces)"
    assert f"pytest {metadata.version('pytest')}" in lines["extra [dev]"]
    assert lines["extra [math]"].startswith("math-verify ")


def _installed(dist: str) -> str:
    import importlib.metadata as metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"
