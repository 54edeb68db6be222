"""The seams of a sharded rollout: a batch split over several ``collect`` calls gives exactly
the episodes of one call (per-request seeds), and its GRPO groups never merge (global ids)."""

from __future__ import annotations

import pytest

from llm_marl.policies.base import SamplingParams
from llm_marl.rollout import collect, group_episodes
from llm_marl.rollout.types import Episode

SAMPLING = SamplingParams(max_new_tokens=10, temperature=1.0, top_k=50)
TASKS = [{"task_id": f"t{t}", "target": t % 3} for t in range(4)]


def _run(policy, tasks, task_indices=None, seed=5) -> list[Episode]:
    return collect(
        "coordination-v0",
        {"left": policy, "right": policy},
        tasks,
        group_size=2,
        sampling=SAMPLING,
        seed=seed,
        progress=False,
        task_indices=task_indices,
    )


def _fingerprint(ep: Episode) -> tuple:
    """Everything a trainer reads from an episode but the log-probs: ids, tokens, rewards."""
    turns = tuple(
        (t.agent, t.step, tuple(t.prompt_ids), tuple(t.completion_ids))
        for traj in ep.trajectories.values()
        for t in traj.turns
    )
    return (ep.task_id, ep.task_index, ep.group_index, ep.group_id, turns, tuple(ep.step_rewards))


def _logprobs(episodes: list[Episode]) -> list[float]:
    return [
        x
        for e in episodes
        for tr in e.trajectories.values()
        for t in tr.turns
        for x in t.logprobs or ()
    ]


def assert_same_episodes(got: list[Episode], want: list[Episode]) -> None:
    """Same ids, tokens and rewards; log-probs equal up to float rounding: CPU matmul kernels
    may round differently for another batch shape (the samples, drawn per row, do not move)."""
    assert [_fingerprint(e) for e in got] == [_fingerprint(e) for e in want]
    assert _logprobs(got) == pytest.approx(_logprobs(want), rel=1e-5, abs=1e-6)
    assert len(_logprobs(want)) > 0


@pytest.mark.parametrize("cut", [1, 2])
def test_a_batch_split_into_calls_gives_the_episodes_of_one_call(tiny_policy, cut):
    whole = _run(tiny_policy, TASKS)
    head = _run(tiny_policy, TASKS[:cut], task_indices=list(range(cut)))
    tail = _run(tiny_policy, TASKS[cut:], task_indices=list(range(cut, len(TASKS))))
    assert_same_episodes(head + tail, whole)
    # The episodes really sampled (a greedy or degenerate policy would pass trivially).
    completions = {tuple(t.completion_ids) for e in whole for t in e.trajectories["left"].turns}
    assert len(completions) > 1


def test_the_seed_still_matters(tiny_policy):
    a = [_fingerprint(e) for e in _run(tiny_policy, TASKS[:2], seed=5)]
    b = [_fingerprint(e) for e in _run(tiny_policy, TASKS[:2], seed=6)]
    assert a != b


def test_groups_of_two_shards_never_merge(tiny_policy):
    # Two shards that each number their tasks from 0 locally: keyed by a batch-local index,
    # shard 1's task 0 and shard 2's task 0 would form one group of 4.
    head = _run(tiny_policy, TASKS[:2], task_indices=[0, 1])
    tail = _run(tiny_policy, TASKS[2:], task_indices=[2, 3])
    groups = group_episodes(head + tail)
    assert [len(g) for g in groups] == [2, 2, 2, 2]
    assert [{e.task_id for e in g} for g in groups] == [{"t0"}, {"t1"}, {"t2"}, {"t3"}]


def test_naive_shards_without_global_indices_still_keep_their_tasks_apart(tiny_policy):
    # Each shard numbers its tasks 0, 1: the group id still names the task.
    head = _run(tiny_policy, TASKS[:2])
    tail = _run(tiny_policy, TASKS[2:])
    groups = group_episodes(head + tail)
    assert [{e.task_id for e in g} for g in groups] == [{"t0"}, {"t1"}, {"t2"}, {"t3"}]


def test_bad_task_indices_are_refused(tiny_policy):
    with pytest.raises(ValueError, match="distinct"):
        _run(tiny_policy, TASKS[:2], task_indices=[1, 1])
    with pytest.raises(ValueError, match="2 entries for 1 tasks"):
        _run(tiny_policy, TASKS[:1], task_indices=[0, 1])
