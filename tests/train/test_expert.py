"""Frozen policies as env callables from a run config: the coding expert (``--policies.expert
SPEC`` with ``--trainer.env_kwargs.feedback expert``, llm_marl.train.run.attach_expert) and the
writing and search judges (``--policies.judge SPEC``, llm_marl.train.run.attach_judge)."""

from __future__ import annotations

import json

import pytest

import llm_marl
from llm_marl.errors import ConfigError
from llm_marl.rollout.judges import AnswerJudge, CodeExpert, PolicyJudge
from llm_marl.train import attach_expert, attach_judge, parse_run_config

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


JUDGE_MODULE = """
calls = []


def judge(conversation):
    calls.append(conversation)
    return "Score: 10"
"""


def test_a_policy_spec_becomes_the_writing_envs_judge(tmp_path, monkeypatch):
    (tmp_path / "my_writing_judge.py").write_text(JUDGE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("my_writing_judge")
    argv = ["--algo", "magrpo", "--preset", "toy-tldr", "--policies.judge"]
    argv += ["scripted:my_writing_judge:judge", "--trainer.env_kwargs.reward.judge_weight", "1"]
    config = parse_run_config(argv)
    attached = attach_judge(config)
    assert "judge" not in config.trainer.env_kwargs, "the saved config keeps only the spec"
    kwargs = attached.trainer.env_kwargs
    assert isinstance(kwargs["judge"], PolicyJudge)

    env = llm_marl.make(attached.trainer.env, **kwargs)
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({a: "A short answer." for a in env.agents})
    agent = env.possible_agents[0]
    assert infos[agent]["reward_components"]["judge"] == 1.0  # "Score: 10" -> (10 - 1) / 9
    assert len(module.calls) == 1


def test_the_search_envs_get_an_answer_judge_and_other_envs_none():
    argv = [
        "--algo",
        "matpo",
        "--preset",
        "matpo-paper",
        "--policies.judge",
        "scripted:builtins:repr",
    ]
    config = parse_run_config([*argv, "--trainer.env", "websearch-v0"])
    assert isinstance(attach_judge(config).trainer.env_kwargs["judge"], AnswerJudge)
    with pytest.raises(ConfigError, match="coop_humaneval-v0 takes no judge"):
        attach_judge(parse_run_config([*BASE, "--policies.judge", "scripted:builtins:repr"]))
    both = [*BASE, "--trainer.env", "tldr-v0", "--policies.judge", "scripted:builtins:repr"]
    with pytest.raises(ConfigError, match="set the judge once"):
        attach_judge(parse_run_config([*both, "--trainer.env_kwargs.judge", "x"]))
    assert (
        attach_judge(parse_run_config(BASE)).trainer.env_kwargs
        == parse_run_config(BASE).trainer.env_kwargs
    )
