"""Trajectory.segments(): a trajectory as contiguous token streams."""

from __future__ import annotations

import pytest

from llm_marl.rollout.types import Trajectory, Turn


def _turn(step, prompt, completion, logprobs=None, continues=False, text="x"):
    """A turn of agent "a" (``Turn``'s positional order: agent, step, text, prompt, completion)."""
    return Turn(
        "a", step, text, list(prompt), list(completion), logprobs, continues_stream=continues
    )


def test_continued_turns_form_one_segment_with_bridges_masked_and_turn_spans():
    traj = Trajectory(
        "a",
        "p",
        True,
        [
            _turn(0, [1, 2], [3, 4], [-0.1, -0.2]),
            _turn(1, [1, 2, 3, 4, 8, 8, 8], [5], [-0.3], continues=True),
            _turn(2, [1, 2, 3, 4, 8, 8, 8, 5], [6, 7], [-0.4, -0.5], continues=True),  # no bridge
        ],
    )
    (seg,) = traj.segments()
    assert seg.prompt_ids == [1, 2]
    assert seg.completion_ids == [3, 4, 8, 8, 8, 5, 6, 7]
    assert seg.token_ids == traj.turns[-1].prompt_ids + traj.turns[-1].completion_ids
    assert seg.mask == [1, 1, 0, 0, 0, 1, 1, 1]
    assert seg.logprobs == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3, -0.4, -0.5]
    assert seg.turn_spans == [(0, 0, 2), (1, 5, 6), (2, 6, 8)]
    for k, start, end in seg.turn_spans:
        assert seg.completion_ids[start:end] == traj.turns[k].completion_ids
    assert seg.num_generated == 5


def test_a_fresh_prompt_or_a_false_continuation_claim_starts_a_new_segment():
    traj = Trajectory(
        "a",
        "p",
        True,
        [
            _turn(0, [1], [2], [-1.0]),
            _turn(1, [9], [3], [-1.0]),  # fresh prompt
            _turn(2, [7, 3, 5], [4], [-1.0], continues=True),  # claims to continue; does not
        ],
    )
    segments = traj.segments()
    assert [s.token_ids for s in segments] == [[1, 2], [9, 3], [7, 3, 5, 4]]
    assert [s.turn_spans for s in segments] == [[(0, 0, 1)], [(1, 0, 1)], [(2, 0, 1)]]


def test_a_turn_without_logprobs_makes_its_segment_logprobs_unknown():
    traj = Trajectory(
        "a",
        "p",
        True,
        [_turn(0, [1], [2], [-1.0]), _turn(1, [1, 2, 5], [3], None, continues=True)],
    )
    (seg,) = traj.segments()
    assert seg.logprobs is None
    assert seg.mask == [1, 0, 1]


def test_text_only_turns_are_left_out_and_prompt_only_turns_join_the_prompt():
    traj = Trajectory(
        "a",
        "p",
        False,
        [
            _turn(0, [], [], text="from an API"),
            _turn(1, [1, 2], [], text=""),  # generated nothing
            _turn(2, [1, 2, 3], [4], [-0.5], continues=True),
        ],
    )
    (seg,) = traj.segments()
    # The prompt is everything before the first generated token.
    assert (seg.prompt_ids, seg.completion_ids, seg.mask) == ([1, 2, 3], [4], [1])
    assert seg.turn_spans == [(1, 0, 0), (2, 0, 1)]
    assert Trajectory("a", "api", False, [_turn(0, [], [], text="hi")]).segments() == []


def test_inconsistent_token_records_are_rejected():
    with pytest.raises(ValueError, match="no prompt ids"):
        Trajectory("a", "p", True, [_turn(0, [], [5])]).segments()
    with pytest.raises(ValueError, match="2 log-probs for 1 generated tokens"):
        Trajectory("a", "p", True, [_turn(0, [1], [5], [-1.0, -2.0])]).segments()


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), float("inf")])
def test_a_non_finite_sampling_logprob_is_rejected(bad):
    with pytest.raises(ValueError, match="turn 1 has a non-finite sampling log-prob"):
        Trajectory(
            "a", "p", True, [_turn(0, [1], [5], [-1.0]), _turn(1, [1, 5, 6], [7, 8], [-0.1, bad])]
        ).segments()
    # Finite ones pass, 0.0 included (a certain token).
    Trajectory("a", "p", True, [_turn(0, [1], [5, 6], [0.0, -30.0])]).segments()


def test_reprs_are_one_short_line():
    """A list of episodes prints readably: no token ids, no whole conversations."""
    from llm_marl.rollout.types import Episode, Trajectory, Turn

    turn = Turn("a", 0, "x" * 10_000, prompt_ids=list(range(500)), completion_ids=[1] * 30)
    traj = Trajectory("a", "tiny", trainable=True, turns=[turn, turn])
    episode = Episode("t/1", 0, 3, {"a": traj}, step_rewards=[0.25, 1.0], terminated=True)
    assert repr(turn) == (
        "Turn('a', step=0, text='" + "x" * 37 + "...', prompt=500 tokens, completion=30 tokens)"
    )
    assert repr(traj) == "Trajectory('a', policy='tiny', trainable, 2 turns)"
    assert repr(episode) == (
        "Episode(task_id='t/1', group_index=3, reward=1.25, steps=2, turns={a: 2}, terminated)"
    )
    broken = Episode("t/2", 1, 0, {}, error="sandbox down " * 20)
    assert repr(broken).endswith("error='sandbox down sandbox down sandbox dow...')")
    assert max(len(repr(x)) for x in (turn, traj, episode, broken)) < 160
