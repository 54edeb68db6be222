"""Issue 9, item 12: hard-coding the prompt's examples earns nothing with ``score_on="hidden"``.

The docstring examples are scoring tests too, so a team that returns the shown answers from a
table scores 3.4/4 on CoopSample/2 under the paper's scoring (``score_on="all"``, the default).
With ``score_on="hidden"`` only the tests the prompt does not show count.
"""

from __future__ import annotations

import pytest

import llm_marl

GCD_TABLE = {
    "dict": "def gcd_of_list(nums):\n    r = aux(nums)\n    return {(12, 18, 24): 6, (7,): 7}.get(tuple(nums), r)\n",
    "if_chain": (
        "def gcd_of_list(nums):\n    r = aux(nums)\n    if nums == [12, 18, 24]:\n        return 6\n"
        "    if len(nums) == 1:\n        return nums[0]\n    return r\n"
    ),
    "str_key": (
        "def gcd_of_list(nums):\n    r = aux(nums)\n    k = str(nums)\n"
        "    return 6 if k == '[12, 18, 24]' else (7 if k == '[7]' else r)\n"
    ),
}
HELPER = "def aux(nums):\n    return -1\n"
HELPER_TABLE = "def aux(nums):\n    return {(12, 18, 24): 6, (7,): 7}.get(tuple(nums), 0)\n"
MAIN_USES_AUX = "def gcd_of_list(nums):\n    r = aux(nums)\n    return r + 0\n"


def _play(sandbox, helper, main, env_id="coop_humaneval-v0", task_id="CoopSample/2", **kw):
    env = llm_marl.make(env_id, dataset="sample", sandbox=sandbox, **kw)
    env.reset(seed=0, options={"task_id": task_id})
    _, rewards, _, _, infos = env.step({"helper": helper, "main": main})
    return rewards["main"], infos["main"]


@pytest.mark.parametrize("how", sorted(GCD_TABLE))
def test_hard_coded_examples_score_under_all_and_nothing_under_hidden(sandbox, how):
    reward, info = _play(sandbox, HELPER, GCD_TABLE[how])
    assert (info["tests_passed"], info["tests_total"], info["scored_on"]) == (2, 5, "all")
    assert reward == pytest.approx(3.4)
    reward, info = _play(sandbox, HELPER, GCD_TABLE[how], score_on="hidden")
    assert (info["tests_passed"], info["tests_total"], info["scored_on"]) == (0, 3, "hidden")
    assert reward == pytest.approx(1.5)


def test_a_helper_that_hard_codes_the_examples_earns_nothing_under_hidden(sandbox):
    reward, info = _play(sandbox, HELPER_TABLE, MAIN_USES_AUX, score_on="hidden")
    assert info["tests_passed"] == 0 and reward == pytest.approx(1.5)


@pytest.mark.slow  # among the slowest of the fast loop (issue 22: under 3 minutes)
def test_hidden_scoring_keeps_the_maximum_for_a_real_solution(sandbox):
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox=sandbox, score_on="hidden")
    for task in env.unwrapped.tasks:
        env.reset(seed=0, options={"task": task})
        _, rewards, _, _, infos = env.step(
            {"helper": task["reference_aux"], "main": task["reference_main"]}
        )
        assert rewards["main"] == 4.0, (task["task_id"], infos["main"])


def test_humaneval_hard_coding_under_hidden(sandbox):
    env = llm_marl.make("humaneval_single-v0", sandbox=sandbox, score_on="hidden")
    task = next(t for t in env.unwrapped.tasks if t["task_id"] == "HumanEval/145")
    code = (
        "def order_by_points(nums):\n"
        "    return {(1, 11, -1, -11, -12): [-1, -11, 1, -12, 11]}.get(tuple(nums), [])\n"
    )
    env.reset(seed=0, options={"task": task})
    _, rewards, _, _, infos = env.step({"coder": code})
    assert infos["coder"]["tests_passed"] == 0 and infos["coder"]["tests_total"] == 4
    assert rewards["coder"] == pytest.approx(1.1)


def test_multi_turn_hidden_feedback_shows_the_prompt_examples_first(sandbox):
    env = llm_marl.make(
        "coop_humaneval-v0", dataset="sample", sandbox=sandbox, num_rounds=2, score_on="hidden"
    )
    feedback, scoring = env.unwrapped.test_split(
        next(t for t in env.unwrapped.tasks if t["task_id"] == "CoopSample/2")
    )
    assert feedback == ["assert candidate([12, 18, 24]) == 6"]
    assert "assert candidate([7]) == 7" not in scoring and len(scoring) == 3


def test_score_on_is_validated():
    with pytest.raises(ValueError, match="score_on"):
        llm_marl.make("coop_humaneval-v0", dataset="sample", score_on="examples")
