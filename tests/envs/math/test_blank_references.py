"""A math task whose reference answer is empty once normalised is refused where it is loaded
(issue 28, item 4, round 3).

Before, such a task was accepted, and every episode of it ended in a grader ``ValueError``
("reference ... is empty after normalisation") turned into an infrastructure failure: a task
that could never be scored, played (and paid for) again and again. Now ``tasks=[...]`` refuses
it in one line, and a dataset file drops it with a warning naming it.
"""

from __future__ import annotations

import json

import pytest

import llm_marl
from llm_marl.cli import main
from llm_marl.errors import DataError
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout.collect import collect

BLANK = ["", "   ", "$$", "\\boxed{}", "\\boxed{ }", "\\text{}", "\\(\\)", "\\,"]


def _task(answer: object, i: int = 0) -> dict[str, object]:
    return {"task_id": f"t{i}", "problem": "What is 1 + 1?", "answer": answer}


@pytest.mark.parametrize("answer", BLANK)
@pytest.mark.parametrize("env_id", ["math_single-v0", "math_debate-v0", "math_critic-v0"])
def test_tasks_with_a_blank_reference_are_refused(env_id, answer):
    with pytest.raises(DataError, match="empty once normalised"):
        llm_marl.make(env_id, tasks=[_task("2"), _task(answer, 1)])


@pytest.mark.parametrize("answer", ["0", "-0", "0.0", "\\boxed{0}", ".5", "\\emptyset", "-"])
def test_degenerate_but_gradable_references_are_kept(answer):
    env = llm_marl.make("math_single-v0", tasks=[_task(answer)])
    assert [t["answer"] for t in env.tasks] == [answer]


def test_a_dataset_file_drops_them_with_a_warning(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"problem": f"p{i}", "answer": a} for i, a in enumerate(["2", "$$", "3", "\\boxed{}"])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match=r"2 task\(s\) dropped.*mine/1, mine/3"):
        env = llm_marl.make("math_single-v0", dataset=str(path))
    assert [t["answer"] for t in env.tasks] == ["2", "3"]


def test_a_dataset_of_only_blank_references_is_refused(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_text(json.dumps({"problem": "p", "answer": " "}) + "\n")
    with pytest.warns(UserWarning), pytest.raises(DataError, match="every reference"):
        llm_marl.make("math_single-v0", dataset=str(path))


def test_play_refuses_them_in_one_line(capsys):
    argv = [
        "play",
        "math_single-v0",
        "--random",
        "--env-arg",
        'tasks=[{"task_id": "a", "problem": "p", "answer": "\\\\boxed{}"}]',
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "empty once normalised" in err


def test_a_blank_task_given_at_reset_fails_its_episode_only():
    # reset(options={"task": ...}) skips the constructor's check; setup_episode checks again,
    # and collect makes the DataError that episode's error.
    pol = ScriptedPolicy(lambda conv: "\\boxed{2}")
    episodes = collect(
        "math_single-v0", {"actor": pol}, tasks=[_task("2"), _task("$$", 1)], progress=False
    )
    assert episodes[0].error is None and episodes[0].reward_components["correct"] == 1.0
    assert "empty once normalised" in (episodes[1].error or "")
