"""Numbers a run cannot use are refused in one line before any model is built (issue 28, 9).

Each of these used to pass the config and fail only later: ``--lr nan`` / ``--betas 0.9,2`` /
``--weight-decay -1`` with a traceback from torch's optimizer after minutes of building and
warming up the models, ``--lr inf`` / ``--max-grad-norm -1`` / ``--seed -1`` not at all (a
run with an infinite step, a negative clip norm, a seed numpy refuses mid-run). The config
refuses every non-finite float once, where text becomes a number.
"""

from __future__ import annotations

import importlib

import pytest

from llm_marl.algos.update import PGConfig
from llm_marl.cli import main
from llm_marl.errors import ConfigError
from llm_marl.train.config import config_from_dict
from llm_marl.train.trainer import TrainerConfig


class _Built(BaseException):
    """Raised in place of building the models: the config was accepted."""


@pytest.fixture
def no_models(monkeypatch):
    # `llm_marl.train.run` the module (the package re-exports a function of that name).
    run_module = importlib.import_module("llm_marl.train.run")

    def refuse(config, **kwargs):
        raise _Built

    monkeypatch.setattr(run_module, "build_policies", refuse)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--lr", "nan"], ["lr", "finite"]),
        (["--lr", "inf"], ["lr", "finite"]),
        (["--lr", "-inf"], ["lr", "finite"]),
        (["--temperature", "inf"], ["temperature", "finite"]),
        (["--top-p", "nan"], ["top_p", "finite"]),
        (["--max-grad-norm", "nan"], ["max_grad_norm", "finite"]),
        (["--early-stop", "nan"], ["early_stop", "finite"]),
        (["--device-memory-gib", "inf"], ["device_memory_gib", "finite"]),
        (["--max-grad-norm", "-1"], ["max_grad_norm", "> 0"]),
        (["--max-grad-norm", "0"], ["max_grad_norm", "> 0"]),
        (["--betas", "0.9,2"], ["betas", "[0, 1)"]),
        (["--betas", "-0.1,0.99"], ["betas", "[0, 1)"]),
        (["--weight-decay", "-1"], ["weight_decay", ">= 0"]),
        (["--adam-eps", "-1e-8"], ["adam_eps", ">= 0"]),
        (["--aggregation", "token-sum", "--token-sum-normalizer", "0"], ["token_sum_normalizer"]),
        (["--seed", "-1"], ["seed", "2**32"]),
        (["--seed", str(2**32)], ["seed", "2**32"]),
    ],
)
def test_train_refuses_numbers_it_cannot_use(tmp_path, capsys, no_models, flags, words):
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for word in words:
        assert word in err, err
    assert not any(tmp_path.iterdir())  # nothing written for a refused run


def test_train_still_accepts_good_numbers(tmp_path, no_models):
    argv = ["train", "--output-dir", str(tmp_path), "--steps", "1"]
    flags = ["--lr", "1e-6", "--betas", "0,0.999", "--weight-decay", "0", "--seed", "0"]
    with pytest.raises(_Built):  # the config passed; the models would be built next
        main([*argv, *flags, "--max-grad-norm", "0.5", "--adam-eps", "0"])


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf", "nan", "inf"])
def test_config_files_refuse_non_finite_numbers(text):
    import yaml

    value = yaml.safe_load(f"lr: {text}")["lr"]
    with pytest.raises(ConfigError, match="finite"):
        config_from_dict({"lr": value}, PGConfig, "algorithm")


def test_python_configs_refuse_them_too():
    with pytest.raises(ValueError, match="finite"):
        PGConfig(lr=float("nan"))
    with pytest.raises(ValueError, match="finite"):
        PGConfig(max_grad_norm=float("inf"))
    with pytest.raises(ValueError, match="seed"):
        TrainerConfig(seed=-1)


@pytest.mark.parametrize("flags", [["--temperature", "inf"], ["--top-p", "inf"]])
def test_eval_refuses_an_infinite_temperature(capsys, flags):
    argv = [
        "eval",
        "--env",
        "math_single-v0",
        "--actor",
        "scripted:builtins:str",
        "--limit",
        "1",
        *flags,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert flags[0][2:].replace("-", "_") in err, err
