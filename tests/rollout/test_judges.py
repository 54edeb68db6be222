"""FrozenJudge: each judge's default rubric, an explicit one, and a base judge without one."""

from __future__ import annotations

import pytest

from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.judges import (
    ANSWER_RUBRIC,
    JUDGE_RUBRIC,
    AnswerJudge,
    FrozenJudge,
    PolicyJudge,
)


def _judge_policy() -> ScriptedPolicy:
    return ScriptedPolicy(lambda conv: "CORRECT", name="judge")


def test_each_judge_defaults_to_its_own_rubric():
    assert AnswerJudge(_judge_policy()).rubric == ANSWER_RUBRIC
    assert PolicyJudge(_judge_policy()).rubric == JUDGE_RUBRIC


def test_an_explicit_rubric_is_the_one_shown_to_the_judge():
    seen: list[str] = []

    def grader(conv):
        seen.append(conv[-1]["content"])
        return "CORRECT"

    judge = AnswerJudge(ScriptedPolicy(grader, name="judge"), rubric="Be strict.")
    assert judge("Q?", "Paris", ["Paris"]) == 1.0
    assert seen[0].startswith("Be strict.") and ANSWER_RUBRIC not in seen[0]


def test_a_judge_without_a_default_rubric_needs_one():
    with pytest.raises(TypeError, match="no default rubric"):
        FrozenJudge(_judge_policy())
    assert FrozenJudge(_judge_policy(), rubric="Grade it.").rubric == "Grade it."
