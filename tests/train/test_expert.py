"""The coding expert from a run config: ``--policies.expert SPEC`` with
``--trainer.env_kwargs.feedback expert`` (llm_marl.train.run.attach_expert)."""

from __future__ import annotations

import json

import pytest

import llm_marl
from llm_marl.errors import ConfigError
from llm_marl.eval.coding import CodeExpert
from llm_marl.train import attach_expert, parse_run_config

EXPERT_MODULE = """
import json

calls = []


def expert(conversation):
    calls.append(conversation)
    return json.dumps({"aux": "HELPER-FIX", "main": "MAIN-FIX"})
"""

BASE = [
    "--algo",
    "magrpo",
    "--preset",
    "magrpo-coop-humaneval",
    "--trainer.env_kwargs.dataset",
    "sample",
    "--trainer.env_kwargs.sandbox",
    "process",
]


@pytest.fixture
def expert_module(tmp_path, monkeypatch):
    (tmp_path / "my_code_expert.py").write_text(EXPERT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    return importlib.import_module("my_code_expert")


def test_a_policy_spec_becomes_the_envs_expert(expert_module, tmp_path):
    argv = [*BASE, "--trainer.env_kwargs.feedback", "expert"]
    argv += ["--policies.expert", "scripted:my_code_expert:expert"]
    argv += ["--trainer.output-dir", str(tmp_path / "run")]
    config = parse_run_config(argv)
    assert config.policies.expert == "scripted:my_code_expert:expert"
    attached = attach_expert(config)
    assert "expert" not in config.trainer.env_kwargs, "the saved config keeps only the spec"
    kwargs = attached.trainer.env_kwargs
    assert isinstance(kwargs["expert"], CodeExpert) and kwargs["num_rounds"] == 2
    json.dumps(config.trainer.env_kwargs)  # still plain data

    env = llm_marl.make(attached.trainer.env, **kwargs)
    task = env.unwrapped.tasks[0]
    env.reset(seed=0, options={"task": task})
    obs, _, _, truncs, infos = env.step({"helper": "", "main": ""})
    assert not any(truncs.values()) and infos["main"]["expert_read"]
    assert "HELPER-FIX" in obs["helper"][-1]["content"]
    assert "MAIN-FIX" in obs["main"][-1]["content"]
    assert len(expert_module.calls) == 1


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--trainer.env_kwargs.feedback", "expert"], "no expert is set: pass --policies.expert"),
        (["--policies.expert", "scripted:builtins:repr"], "add --trainer.env_kwargs.feedback"),
    ],
)
def test_the_expert_and_the_feedback_mode_must_agree(extra, message):
    config = parse_run_config([*BASE, *extra])
    with pytest.raises(ConfigError, match=message):
        attach_expert(config)


def test_a_malformed_expert_spec_fails_when_the_config_is_read():
    with pytest.raises(ConfigError, match="bad policy spec"):
        parse_run_config([*BASE, "--policies.expert", "gpt-4"])


def test_without_an_expert_the_config_is_unchanged():
    config = parse_run_config(BASE)
    assert attach_expert(config) is config
