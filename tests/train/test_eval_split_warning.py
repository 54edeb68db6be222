"""The "evaluates on its training tasks" warning only where an eval split exists (issue 28,
item 10): the toy envs have no split, so the advice to set ``split="eval"`` cannot be followed."""

from __future__ import annotations

import warnings

import pytest

from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.envs.toy.referential import ReferentialEnv
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.train import Trainer, TrainerConfig
from tests.train.test_disk_full import _Recorder


def _build(env, agents, tmp_path):
    policies = {a: ScriptedPolicy(lambda c: "1") for a in agents}
    cfg = TrainerConfig(
        env=env if isinstance(env, str) else "coordination-v0",
        steps=1,
        output_dir=str(tmp_path / "run"),
        progress=False,
        plot=False,
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        Trainer(_Recorder(), policies, cfg, env=None if isinstance(env, str) else env)
    return [str(w.message) for w in seen if "training tasks" in str(w.message)]


@pytest.mark.parametrize(
    ("env", "agents"),
    [
        ("coordination-v0", ["left", "right"]),
        ("referential-v0", ["speaker", "listener"]),
        ("delegation_toy-v0", ["planner", "worker"]),
        (CoordinationEnv, ["left", "right"]),
        (ReferentialEnv, ["speaker", "listener"]),
    ],
    ids=["coordination", "referential", "delegation", "coordination-class", "referential-class"],
)
def test_no_warning_where_the_env_has_no_split(tmp_path, env, agents):
    assert _build(env, agents, tmp_path) == []


def test_the_warning_stays_where_an_eval_split_exists(tmp_path):
    assert len(_build("tldr-v0", ["concise", "detailed"], tmp_path)) == 1
