"""An empty ``\\boxed{}`` is no answer, so it earns no format reward (issue 28, round 4).

Before, the ``format`` component of every math env was "the completion holds a complete
``\\boxed{...}``", whatever the box held: with ``format_weight=w`` a policy that writes
``\\boxed{}`` (or a box of spaces, ``\\,``, ``\\text{}``...) and never answers earned ``w`` on
every task, and its completion was not ``malformed``. The team envs already refused such a box
as a vote, but still counted it in the team's format share. Now a box counts only when what it
holds is an answer once normalised as the grader reads it.
"""

from __future__ import annotations

import pytest

from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.collect import collect

TASKS = [{"task_id": "t0", "problem": "What is 6 + 7?", "answer": "13"}]
EMPTY = [
    "\\boxed{}",
    "\\boxed{ }",
    "\\boxed{\\,}",
    "\\boxed{\\text{}}",
    "\\fbox{\\quad}",
    "$\\boxed{$",
]


def _run(env_id: str, text: str, agents: list[str]) -> dict:
    policies = {a: ScriptedPolicy(lambda conv, t=text: t) for a in agents}
    env_kwargs = {"tasks": TASKS, "format_weight": 0.2}
    if env_id == "math_debate-v0":
        env_kwargs |= {"num_debaters": 2, "rounds": 1}
    (episode,) = collect(env_id, policies, tasks=1, env_kwargs=env_kwargs, progress=False)
    assert episode.error is None
    return {"reward": sum(episode.step_rewards), **episode.reward_components}


@pytest.mark.parametrize("text", EMPTY)
def test_an_empty_box_earns_no_format_reward(text):
    out = _run("math_single-v0", f"I am not sure. {text}", ["actor"])
    assert out["format"] == 0.0
    assert out["reward"] == 0.0


def test_an_empty_box_is_malformed():
    policies = {"actor": ScriptedPolicy(lambda conv: "\\boxed{ }")}
    env_kwargs = {"tasks": TASKS}
    (episode,) = collect("math_single-v0", policies, tasks=1, env_kwargs=env_kwargs, progress=False)
    assert episode.final_infos["actor"]["malformed"] is True


def test_team_format_share_ignores_empty_boxes():
    agents = ["coordinator", "debater_1", "debater_2"]
    out = _run("math_debate-v0", "\\boxed{}", agents)
    assert out["format"] == 0.0
    assert out["reward"] == 0.0


@pytest.mark.parametrize("text", ["\\boxed{13}", "\\boxed{0}", "\\boxed{\\emptyset}", "\\boxed{x}"])
def test_a_box_with_an_answer_still_counts(text):
    assert _run("math_single-v0", text, ["actor"])["format"] == 1.0
