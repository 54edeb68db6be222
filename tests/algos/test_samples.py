"""Samples: trajectories cut into token streams with per-token advantages."""

from __future__ import annotations

import random

import pytest

from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.rollout.types import Trajectory

from .helpers import turn


def test_continuing_turns_form_one_stream_with_env_tokens_masked():
    traj = Trajectory(
        "a",
        "p",
        True,
        [
            turn("a", 0, [1, 2], [3, 4], [-0.1, -0.2]),
            turn("a", 1, [1, 2, 3, 4, 7, 7], [5], [-0.3], continues=True),
        ],
    )
    (s,) = trajectory_samples(traj, [1.0, -2.0])
    assert s.prompt_ids == [1, 2]
    assert s.completion_ids == [3, 4, 7, 7, 5]
    assert s.mask == [1, 1, 0, 0, 1]
    assert s.advantages == [1.0, 1.0, 0.0, 0.0, -2.0]
    assert s.old_logprobs == [-0.1, -0.2, 0.0, 0.0, -0.3]
    assert s.num_generated == 3
    # The sample is exactly the trajectory's one token stream.
    (segment,) = traj.segments()
    assert s.prompt_ids + s.completion_ids == segment.token_ids == [1, 2, 3, 4, 7, 7, 5]
    assert (s.mask, s.old_logprobs) == (segment.mask, segment.logprobs)
    # Its two turns stay two completions for the sequence-level losses.
    assert s.turn_spans == [(0, 2), (4, 5)]
    assert (s.num_turns, s.turn_lengths()) == (2, [2, 2, 0, 0, 1])


def test_a_turn_that_does_not_extend_the_stream_starts_a_new_sample():
    traj = Trajectory(
        "a", "p", True, [turn("a", 0, [1, 2], [3]), turn("a", 1, [9, 9], [4], continues=False)]
    )
    samples = trajectory_samples(traj, [0.5, 0.25])
    assert [s.prompt_ids for s in samples] == [[1, 2], [9, 9]]
    assert [s.advantages for s in samples] == [[0.5], [0.25]]
    assert samples[0].old_logprobs is None


def test_text_without_tokens_on_a_trainable_agent_is_an_error():
    traj = Trajectory("a", "api", True, [turn("a", 0, [], [], text="hello")])
    with pytest.raises(ValueError, match="token-in/token-out"):
        trajectory_samples(traj, [1.0])
    with pytest.raises(ValueError, match="advantages for"):
        trajectory_samples(traj, [1.0, 2.0])


def test_streams_where_the_agent_generated_nothing_are_left_out():
    # A prompt-only turn (a backend that generated zero tokens) starts a stream with nothing to
    # learn from; the next turn, which does not extend it, is the only sample.
    traj = Trajectory(
        "a", "p", True, [turn("a", 0, [1, 2], [], text=""), turn("a", 1, [5], [6], [-0.5])]
    )
    (s,) = trajectory_samples(traj, [3.0, 1.0])
    assert (s.prompt_ids, s.completion_ids, s.advantages, s.old_logprobs) == (
        [5],
        [6],
        [1.0],
        [-0.5],
    )


def test_a_turn_that_claims_to_continue_but_does_not_extend_the_stream_starts_a_new_one():
    traj = Trajectory(
        "a",
        "p",
        True,
        [turn("a", 0, [1, 2], [3], [-0.1]), turn("a", 1, [1, 9, 3], [4], [-0.2], continues=True)],
    )
    samples = trajectory_samples(traj, [1.0, 2.0])
    assert [s.prompt_ids + s.completion_ids for s in samples] == [[1, 2, 3], [1, 9, 3, 4]]
    assert [s.advantages for s in samples] == [[1.0], [2.0]]


# ------------------------------------------------------------------ equivalence (fuzzed)


def _walk_turns(trajectory: Trajectory, advantages: list[float]) -> list[Sample]:
    """An independent oracle: the turn-by-turn walk trajectory_samples did before it was built
    on Trajectory.segments() (it extends the previous sample by the bridge and completion)."""
    samples: list[Sample] = []
    spans: list[list[tuple[int, int]]] = []  # per sample, where each of its turns stands
    stream: list[int] = []
    for t, adv in zip(trajectory.turns, advantages):
        lps = list(t.logprobs) if t.logprobs is not None else None
        if t.continues_stream and samples and t.prompt_ids[: len(stream)] == stream:
            cur = samples[-1]
            bridge = t.prompt_ids[len(stream) :]
            start = len(cur.completion_ids) + len(bridge)
            spans[-1].append((start, start + len(t.completion_ids)))
            cur.completion_ids += bridge + t.completion_ids
            cur.mask += [0] * len(bridge) + [1] * len(t.completion_ids)
            cur.advantages += [0.0] * len(bridge) + [adv] * len(t.completion_ids)
            if cur.old_logprobs is not None and lps is not None:
                cur.old_logprobs += [0.0] * len(bridge) + lps
            else:
                cur.old_logprobs = None
        else:
            n = len(t.completion_ids)
            spans.append([(0, n)])
            samples.append(
                Sample(list(t.prompt_ids), list(t.completion_ids), [1] * n, [adv] * n, lps)
            )
        stream = t.prompt_ids + t.completion_ids
    for s, turn_spans in zip(samples, spans):
        s.agent = trajectory.agent
        s.turn_spans = turn_spans if len(turn_spans) > 1 else None
    return samples


def _random_trajectory(rng: random.Random) -> Trajectory:
    """Multi-turn trajectories mixing continued streams (with env bridges of 0-4 tokens), fresh
    streams, false continuation claims, and turns without sampling log-probs."""
    turns = []
    stream: list[int] = []
    for step in range(rng.randint(1, 6)):
        mode = rng.choice(["continue", "continue", "fresh", "false-claim"])
        if mode == "continue" and stream:
            prompt = stream + [rng.randint(50, 99) for _ in range(rng.randint(0, 4))]
        elif mode == "false-claim" and stream:
            prompt = [rng.randint(100, 150)] + stream[1:]
        else:
            prompt = [rng.randint(0, 49) for _ in range(rng.randint(1, 5))]
        completion = [rng.randint(0, 200) for _ in range(rng.randint(1, 5))]
        lps = None if rng.random() < 0.15 else [-rng.random() for _ in completion]
        turns.append(turn("a", step, prompt, completion, lps, continues=mode != "fresh"))
        stream = prompt + completion
    return Trajectory("a", "p", True, turns)


def test_samples_equal_the_turn_by_turn_walk_on_random_multi_turn_trajectories():
    bridged = 0
    for seed in range(300):
        rng = random.Random(seed)
        traj = _random_trajectory(rng)
        advantages = [rng.uniform(-2, 2) for _ in traj.turns]
        got = trajectory_samples(traj, advantages)
        assert got == _walk_turns(traj, advantages), f"seed {seed}"
        # One sample per segment; each sample's stream is the segment's stream.
        segments = traj.segments()
        assert [s.prompt_ids + s.completion_ids for s in got] == [g.token_ids for g in segments]
        bridged += sum(0 in s.mask for s in got)
    assert bridged > 50, "the fuzzer must produce streams with env tokens between turns"
