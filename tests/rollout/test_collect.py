"""collect() with scripted policies: batching, grouping, ordering, bad input, failures."""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.algos.advantages import turn_returns
from llm_marl.policies.base import Completion, PolicyError, SamplingParams, ScriptedPolicy
from llm_marl.rollout import FrozenAgents, collect, group_episodes


def target_of(conversation):
    return conversation[0]["content"].split(":")[1].split(".")[0].strip()


def listener_reads(conversation):
    return conversation[-1]["content"].split("Message:")[1].strip()[:1]


def test_groups_order_and_rewards():
    calls = []
    eps = collect(
        "referential-v0",
        {"speaker": ScriptedPolicy(target_of), "listener": ScriptedPolicy(listener_reads)},
        group_size=3,
        on_generate=lambda policy, n: calls.append((policy.name, n)),
        progress=False,
    )
    assert len(eps) == 4 * 3
    assert [e.task_index for e in eps] == [i for i in range(4) for _ in range(3)]
    assert [e.group_index for e in eps] == [0, 1, 2] * 4
    assert all(e.total_reward == 1.0 and e.terminated and e.ok for e in eps)
    groups = group_episodes(eps)
    assert len(groups) == 4 and all(len({e.task_id for e in g}) == 1 for g in groups)
    # One batched call per policy per step: speaker at step 0, listener at step 1, 12 envs each.
    assert calls == [("target_of", 12), ("listener_reads", 12)]
    traj = eps[0].trajectories["listener"]
    assert traj.turns[0].step == 1 and traj.turns[0].text == "0"
    assert turn_returns(eps[0], "speaker") == [1.0], "the speaker is credited the later reward"
    assert turn_returns(eps[0], "speaker", gamma=0.5) == [0.5]


def test_shared_policy_is_one_call_per_step():
    calls = []
    both = ScriptedPolicy(lambda c: "1", name="both")
    collect(
        "coordination-v0",
        {"left": both, "right": both},
        tasks=2,
        group_size=4,
        on_generate=lambda p, n: calls.append(n),
        progress=False,
    )
    assert calls == [16], "left and right of 8 envs in one batch"


def test_task_count_sampling_is_seeded():
    pol = {"left": ScriptedPolicy(lambda c: "1"), "right": ScriptedPolicy(lambda c: "1")}

    def ids(seed):
        eps = collect("coordination-v0", pol, tasks=3, seed=seed, progress=False)
        return [e.task_id for e in eps]

    assert ids(5) == ids(5)


def test_bad_input():
    pol = {"left": ScriptedPolicy(lambda c: "1"), "right": ScriptedPolicy(lambda c: "1")}
    with pytest.raises(ValueError, match="no policy for agents \\['right'\\]"):
        collect("coordination-v0", {"left": pol["left"]}, progress=False)
    with pytest.raises(ValueError, match="unknown agents \\['middle'\\]"):
        collect("coordination-v0", {**pol, "middle": pol["left"]}, progress=False)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="group_size"):
            collect("coordination-v0", pol, group_size=bad, progress=False)
    with pytest.raises(ValueError, match="empty"):
        collect("coordination-v0", pol, tasks=[], progress=False)
    with pytest.raises(ValueError, match="task_id"):
        collect("coordination-v0", pol, tasks=[{"target": 1}], progress=False)
    with pytest.raises(KeyError, match="Did you mean"):
        collect("coordinaton-v0", pol, progress=False)
    with pytest.raises(ValueError, match="sampling given for unknown"):
        collect("coordination-v0", pol, sampling={"x": SamplingParams()}, progress=False)


class GenerateOnly:
    """Has generate() but not the Policy protocol's ``name`` and ``trainable``."""

    def generate(self, conversations, sampling, contexts=None):
        raise AssertionError("never asked: refused before the first request")


def test_a_policy_without_the_protocol_attributes_is_refused_up_front():
    pol = {"left": ScriptedPolicy(lambda c: "1"), "right": GenerateOnly()}
    with pytest.raises(TypeError, match="'right' has no name or trainable attribute"):
        collect("coordination-v0", pol, progress=False)


class FailingPolicy:
    """Fails the whole batch (server down) or single items (one request timed out)."""

    trainable = False

    def __init__(self, mode):
        self.name = f"failing-{mode}"
        self.mode = mode

    def generate(self, conversations, sampling, contexts=None):
        if self.mode == "batch":
            raise PolicyError("connection refused")
        return [
            Completion(text="", finish_reason="error", metadata={"error": "timed out after 1s"})
            if i % 2
            else Completion(text=target_of(c))
            for i, c in enumerate(conversations)
        ]


def test_policy_failures_mark_episodes_not_crash():
    listener = ScriptedPolicy(listener_reads)
    eps = collect(
        "referential-v0", {"speaker": FailingPolicy("batch"), "listener": listener}, progress=False
    )
    assert all(not e.ok and "connection refused" in e.error for e in eps)
    assert all(e.total_reward == 0.0 and e.truncated for e in eps)

    eps = collect(
        "referential-v0", {"speaker": FailingPolicy("item"), "listener": listener}, progress=False
    )
    assert [e.ok for e in eps] == [True, False, True, False]
    assert "timed out" in eps[1].error
    assert [e.total_reward for e in eps if e.ok] == [1.0, 1.0]


def test_collect_through_frozen_agents_and_a_factory():
    speaker = ScriptedPolicy(target_of)
    factory = lambda: FrozenAgents(llm_marl.make("referential-v0"), {"speaker": speaker})  # noqa: E731
    eps = collect(
        factory, {"listener": ScriptedPolicy(listener_reads)}, group_size=2, progress=False
    )
    assert len(eps) == 8 and all(e.total_reward == 1.0 for e in eps)
    assert list(eps[0].trajectories) == ["listener"]


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "0"])
def test_a_bad_base_seed_is_refused_before_any_episode_is_played(seed):
    # It used to reach the envs' resets, where every episode with a negative seed failed alone.
    from llm_marl.errors import ConfigError
    from llm_marl.eval import evaluate
    from llm_marl.rollout import collect_tree

    played = []
    team = {a: ScriptedPolicy(lambda c: played.append(c) or "1") for a in ("left", "right")}
    with pytest.raises(ConfigError, match="seed must be an int in \\[0, 2\\*\\*32\\)"):
        collect("coordination-v0", team, 2, seed=seed, progress=False)
    with pytest.raises(ConfigError, match="seed must be an int in"):
        collect_tree("coordination-v0", team, 1, 2, seed=seed, progress=False)
    with pytest.raises(ConfigError, match="seed must be an int in"):
        evaluate("coordination-v0", team, seed=seed, progress=False)
    assert not played
