"""A newcomer's mistakes print one line and exit 2, never a traceback (issue 28, item 9)."""

from __future__ import annotations

import pytest

from llm_marl.cli import main


def _one_line(capsys, *words):
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps", "tpu", "cuda:x"])
def test_train_on_a_device_that_is_not_there(tmp_path, capsys, device):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available() and device.startswith("cuda"):
        device = "cuda:99"  # there is CUDA here, but not that many devices
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1", "--device", device]
    assert main(argv) == 2
    _one_line(capsys, "device", device)


@pytest.mark.parametrize(
    "model",
    ["/does/not/exist", "./nowhere/model", "~/no-such-model-dir", "a/b/c/d", "bad id!"],
)
def test_train_with_a_model_that_is_not_there(tmp_path, capsys, model):
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1", "--model", model]
    assert main(argv) == 2
    _one_line(capsys, "model")


@pytest.mark.parametrize("lora", [[], ["--lora"]], ids=["full", "lora"])
def test_hub_lookups_fail_fast_offline(tmp_path, capsys, monkeypatch, lora):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1"]
    assert main([*argv, "--model", "nobody-here/no-such-model-xyz", *lora]) == 2
    _one_line(capsys, "nobody-here/no-such-model-xyz", "HF_HUB_OFFLINE")


def test_hub_lookups_fail_fast_when_the_hub_is_unreachable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused at once
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1"]
    assert main([*argv, "--model", "nobody-here/no-such-model-xyz"]) == 2
    _one_line(capsys, "nobody-here/no-such-model-xyz", "reach")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--task-id", "nope"], ["nope", "task"]),
        (["--task-id", ""], ["task"]),
        (["--seed", "-1"], ["seed", "-1"]),
        (["--seed", "99999999999999999999999"], ["seed"]),
        (["--env-arg", "max_steps=abc"], ["max_steps", "str"]),
        (["--env-arg", "max_steps=1.5"], ["max_steps", "float"]),
    ],
    ids=[
        "unknown-task",
        "empty-task",
        "negative-seed",
        "huge-seed",
        "str-for-int",
        "float-for-int",
    ],
)
def test_play_mistakes(capsys, argv, words):
    assert main(["play", "referential-v0", "--random", *argv]) == 2
    _one_line(capsys, *words)


def test_play_env_arg_of_the_wrong_type_names_the_argument_and_its_type(capsys):
    assert main(["play", "tldr-v0", "--random", "--env-arg", "guards=maybe"]) == 2
    _one_line(capsys, "guards", "str")
