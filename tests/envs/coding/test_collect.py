"""The coding envs under llm_marl.rollout.collect (batched policies, envs stepped in threads)."""

from __future__ import annotations

import re

import pytest

from llm_marl.envs.coding.datasets import load_tasks
from llm_marl.policies import ScriptedPolicy
from llm_marl.rollout import collect

TASKS = load_tasks("coophumaneval", "sample")[0]
BY_ENTRY = {t["entry_point"]: t for t in TASKS}


def _task_of(conversation) -> dict:
    first = conversation[0]["content"]
    name = re.search(r"^def (\w+)\(", first, re.M).group(1)
    return BY_ENTRY[name]


def _helper(conversation) -> str:
    # Turn 1: a broken helper; after feedback: the reference one.
    if len(conversation) == 1:
        return "def aux(:"
    return "```python\n" + _task_of(conversation)["reference_aux"] + "```"


def _main(conversation) -> str:
    return _task_of(conversation)["reference_main"]


@pytest.mark.parametrize("num_rounds", [1, 2])
def test_collect_runs_coding_episodes(num_rounds):
    policies = {"helper": ScriptedPolicy(_helper), "main": ScriptedPolicy(_main)}
    episodes = collect(
        "coop_humaneval-v0",
        policies,
        tasks=TASKS[:3],
        group_size=2,
        env_kwargs={"dataset": "sample", "sandbox": "process", "num_rounds": num_rounds},
        progress=False,
    )
    assert len(episodes) == 6
    for ep in episodes:
        assert ep.terminated and not ep.truncated and ep.error is None
        assert len(ep.step_rewards) == num_rounds
        # Turn 1: main is fine but aux does not parse -> main_defined only (syntax fails).
        assert ep.step_rewards[0] == pytest.approx(0.6)
        if num_rounds == 2:
            assert ep.step_rewards[1] == pytest.approx(4.0)
            assert len(ep.trajectories["helper"].turns) == 2
