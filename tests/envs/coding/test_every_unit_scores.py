"""Every test unit scores by default in multi-round coding, as the official code scores every
assert and shows the first as feedback (issue 24 item 5); the held-out split stays an option."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.envs.coding.testsuite import build_suite


def units(env_id: str, split: str, **kwargs) -> tuple[int, int]:
    """``(feedback, scoring)`` units summed over the split's tasks, in two-round episodes."""
    env = llm_marl.make(env_id, split=split, num_rounds=2, **kwargs).unwrapped
    pairs = [env.test_split(task) for task in env.tasks]
    return sum(len(f) for f, _ in pairs), sum(len(s) for _, s in pairs)


@pytest.mark.parametrize(
    ("env_id", "split", "tasks", "total", "held_out"),
    [("coop_humaneval-v0", "eval", 16, 87, 18), ("humaneval-v0", ":32", 32, 139, 37)],
)
@pytest.mark.slow  # whole eval splits in the sandbox; 32 s in the fast loop at load 17 (#22)
def test_the_eval_split_scores_every_unit(
    data_dir, monkeypatch, env_id, split, tasks, total, held_out
):
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(data_dir))
    # Default: the first unit of each task is shown (sandbox_slice: 1), all of them score.
    assert units(env_id, split) == (tasks, total)
    # The held-out option (ours): a quarter of the units are shown and stop scoring.
    assert units(env_id, split, feedback_fraction=0.25) == (held_out, total - held_out)
    assert units(env_id, split, feedback_tests="held-out") == (held_out, total - held_out)
    assert units(env_id, split, feedback_first=0)[0] == total  # 0: every unit is shown


def test_a_solved_task_passes_every_unit_in_every_round():
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", num_rounds=2)
    _, infos = env.reset(seed=0)
    task = env.unwrapped.task
    n = len(build_suite(task["test"], task["entry_point"], task["prompt"]).tests)  # every unit
    actions = {"helper": task["reference_aux"], "main": task["reference_main"]}
    for _ in range(2):
        _, _, _, _, infos = env.step(actions)
        assert infos["main"]["tests_total"] == n and infos["main"]["tests_passed"] == n
    env.close()


def test_feedback_options_are_checked():
    with pytest.raises(ValueError, match="feedback_tests"):
        llm_marl.make("coop_humaneval-v0", dataset="sample", num_rounds=2, feedback_tests="some")
    with pytest.raises(ValueError, match="held-out"):
        llm_marl.make(
            "coop_humaneval-v0",
            dataset="sample",
            num_rounds=2,
            feedback_tests="first",
            feedback_fraction=0.5,
        )
