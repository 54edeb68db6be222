"""The optional LLM judge of the search envs: AnswerJudge over any frozen policy, and its faults."""

from __future__ import annotations

import math

import pytest

import llm_marl
from llm_marl.errors import InfrastructureError
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.judges import ANSWER_RUBRIC, AnswerJudge

ALIASES = {"Ostra": {"ostra", "the ostra", "ostra river", "the river ostra"}}


def _grader(seen: list[str]):
    """A scripted 'LLM': CORRECT when the predicted answer is a known alias of a gold answer."""

    def grade(conversation):
        prompt = conversation[-1]["content"]
        seen.append(prompt)
        predicted = prompt.split("<prediction>\n", 1)[1].split("\n</prediction>")[0].lower()
        golds = prompt.split("<gold_answers>\n", 1)[1].split("\n</gold_answers>")[0]
        for gold, aliases in ALIASES.items():
            if f"- {gold}" in golds and predicted in aliases:
                return "CORRECT"
        return "Verdict: INCORRECT."

    return grade


def _answer(env, text):
    env.reset(seed=0, options={"task_id": "sample/0"})  # gold answer: "Ostra"
    return env.step({"agent": text})


def test_the_judge_accepts_a_paraphrase_exact_match_rejects():
    seen: list[str] = []
    judge = AnswerJudge(ScriptedPolicy(_grader(seen), name="judge"))
    env = llm_marl.make("websearch_single-v0", judge=judge, accuracy="judge")
    try:
        _, rewards, terms, _, infos = _answer(env, r"It is \boxed{the river Ostra}")
        comps = infos["agent"]["reward_components"]
        assert terms["agent"] and comps["em"] == 0.0 and comps["judge"] == 1.0
        assert comps["accuracy"] == 1.0 and rewards["agent"] == pytest.approx(0.9 + 0.1)
        assert infos["agent"]["success"] is True
        assert ANSWER_RUBRIC in seen[0] and "Which river" in seen[0]
        _, rewards, _, _, infos = _answer(env, r"\boxed{the Danube}")
        assert infos["agent"]["reward_components"]["judge"] == 0.0
        assert rewards["agent"] == pytest.approx(0.1) and infos["agent"]["success"] is False
    finally:
        env.close()


def test_with_exact_match_accuracy_the_verdict_is_reported_not_rewarded():
    judge = AnswerJudge(ScriptedPolicy(_grader([]), name="judge"))
    env = llm_marl.make("websearch_single-v0", judge=judge)  # accuracy="em"
    try:
        _, rewards, _, _, infos = _answer(env, r"\boxed{Ostra river}")
        comps = infos["agent"]["reward_components"]
        assert (comps["judge"], comps["em"], comps["accuracy"]) == (1.0, 0.0, 0.0)
        assert rewards["agent"] == pytest.approx(0.1)
    finally:
        env.close()


def test_an_unreadable_verdict_never_rewards_and_is_counted():
    judge = AnswerJudge(ScriptedPolicy(lambda c: "Well, it depends.", name="judge"))
    with pytest.raises(InfrastructureError, match="could not be read"):
        judge("Q?", "Ostra", ["Ostra"])
    assert judge.unparsed == 1
    # "INCORRECT" contains "CORRECT": the whole word decides.
    judge = AnswerJudge(ScriptedPolicy(lambda c: "INCORRECT", name="judge"))
    assert judge("Q?", "Ostra", ["Ostra"]) == 0.0 and judge.unparsed == 0


def test_an_empty_answer_is_not_sent_and_a_huge_one_is_cut():
    seen: list[str] = []
    judge = AnswerJudge(ScriptedPolicy(_grader(seen), name="judge"))
    assert judge("Q?", "   ", ["Ostra"]) == 0.0 and not seen
    judge("Q?" * 10_000, "x" * 5_000_000, ["Ostra"] * 1000)
    assert len(seen[0]) < 10_000  # bounded whatever the agent or the data wrote


@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        (RuntimeError("judge API returned 503"), "judge API returned 503"),
        (1.5, "not a score in"),
        (math.nan, "not a score in"),
        (-0.1, "not a score in"),
    ],
)
def test_a_failing_judge_truncates_the_episode_unscored(verdict, message):
    def judge(question, answer, golds):
        if isinstance(verdict, Exception):
            raise verdict
        return verdict

    env = llm_marl.make("websearch_single-v0", judge=judge, accuracy="judge")
    try:
        _, rewards, terms, truncs, infos = _answer(env, r"\boxed{Ostra}")
        assert truncs["agent"] and not terms["agent"] and rewards["agent"] == 0.0
        assert message in infos["agent"]["error"] and "success" not in infos["agent"]
    finally:
        env.close()


def test_bad_judge_settings_are_refused_early():
    with pytest.raises(ValueError, match="needs judge="):
        llm_marl.make("websearch-v0", accuracy="judge")
    with pytest.raises(TypeError, match="callable"):
        llm_marl.make("websearch-v0", judge="gpt-4o-mini")
    with pytest.raises(ValueError, match="frozen"):

        class Learner(ScriptedPolicy):
            trainable = True

        AnswerJudge(Learner(lambda c: ""))
    with pytest.raises(TypeError, match="Policy"):
        AnswerJudge(object())  # type: ignore[arg-type]
