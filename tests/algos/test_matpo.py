"""MATPO's credit assignment and role balancing on hand-built planner/worker episodes."""

from __future__ import annotations

import pytest
import torch

from llm_marl.algos.losses import aggregate
from llm_marl.algos.matpo import MATPO, MATPOConfig, balance_roles, matpo_samples
from llm_marl.rollout.types import Trajectory

from .conftest import BigramPolicy
from .helpers import episode, turn


def _episode(g, reward, worker_len=6):
    """Planner turn 0 spawns two worker turns; planner turn 1 answers and is scored."""
    planner = Trajectory(
        "planner",
        "shared",
        True,
        [turn("planner", 0, [1, 2], [3, 3 + g]), turn("planner", 2, [4], [5])],
    )
    worker = Trajectory(
        "worker",
        "shared",
        True,
        [
            turn("worker", 1, [6], [7] * (worker_len - 1) + [g], parent=("planner", 0)),
            turn("worker", 1, [6, 6], [7] * worker_len, parent=("planner", 0)),
        ],
    )
    return episode(0, g, [0.0, 0.0, reward], {"planner": planner, "worker": worker})


def test_workers_inherit_the_advantage_of_the_planner_turn_that_spawned_them():
    group = [_episode(0, 1.0), _episode(1, 0.0)]
    samples = matpo_samples(group, "planner", ["worker"], scale="none")
    by_agent = {}
    for s in samples:
        by_agent.setdefault(s.agent, []).append(s)
    # Planner returns: turn 0 -> 1 and 0 (adv +-0.5), turn 1 -> same.
    assert [s.advantages[0] for s in by_agent["planner"]] == [0.5, 0.5, -0.5, -0.5]
    assert [s.advantages[0] for s in by_agent["worker"]] == [0.5, 0.5, -0.5, -0.5]
    assert all(len(set(s.advantages)) == 1 for s in samples)


def test_a_worker_turn_without_parent_is_rejected():
    ep = _episode(0, 1.0)
    ep.trajectories["worker"].turns[1].parent = None
    with pytest.raises(ValueError, match="must name the planner turn"):
        matpo_samples([ep, _episode(1, 0.0)], "planner", ["worker"])
    ep.trajectories["worker"].turns[1].parent = ("planner", 7)
    with pytest.raises(ValueError, match="names planner turn 7"):
        matpo_samples([ep, _episode(1, 0.0)], "planner", ["worker"])


def test_role_balancing_gives_each_role_its_share_of_the_loss():
    # Long worker transcripts: 2 x 20 worker tokens vs 3 planner tokens per episode.
    group = [_episode(0, 1.0, worker_len=20), _episode(1, 0.0, worker_len=20)]
    samples = balance_roles(
        matpo_samples(group, "planner", ["worker"], scale="none"), "planner", ["worker"], 0.5
    )
    # Give every planner token loss 1 and every worker token loss 0: the balanced token-mean
    # must be exactly 0.5 (the planner's share), however long the worker transcripts are.
    width = max(len(s.completion_ids) for s in samples)
    per_token = torch.zeros(len(samples), width)
    mask = torch.zeros(len(samples), width)
    for i, s in enumerate(samples):
        mask[i, : len(s.mask)] = torch.tensor(s.mask, dtype=torch.float32)
        if s.agent == "planner":
            per_token[i, : len(s.mask)] = 1.0
    weights = torch.tensor([s.weight for s in samples]).unsqueeze(-1)
    num_tokens = sum(s.num_generated * s.weight for s in samples)
    balanced = aggregate(per_token * mask * weights, mask, "token-mean", num_tokens=num_tokens)
    assert balanced.item() == pytest.approx(0.5)
    # Without balancing the planner is swamped: 6 planner tokens out of 86.
    plain = aggregate(per_token * mask, mask, "token-mean")
    assert plain.item() == pytest.approx(6 / 86)


def test_role_balancing_renormalises_when_a_role_is_absent():
    group = [_episode(0, 1.0), _episode(1, 0.0)]
    planner_only = [s for s in matpo_samples(group, "planner", ["worker"]) if s.agent == "planner"]
    balance_roles(planner_only, "planner", ["worker"], 0.3)
    total = sum(s.weight * s.num_generated for s in planner_only)
    assert total == pytest.approx(1.0)


def test_matpo_setup_demands_one_shared_policy():
    shared = BigramPolicy(name="shared")
    algo = MATPO(MATPOConfig(lr=0.01))
    algo.setup({"planner": shared, "worker": shared}, {})
    assert list(algo.optimizers) == ["planner+worker"]
    with pytest.raises(ValueError, match="ONE policy object"):
        MATPO().setup({"planner": shared, "worker": BigramPolicy()}, {})
    with pytest.raises(ValueError, match="not agents of this env"):
        MATPO().setup({"planner": shared}, {})
    with pytest.raises(ValueError, match="token-mean"):
        MATPOConfig(aggregation="sequence-mean")


def test_matpo_update_trains_the_shared_policy_on_both_roles():
    shared = BigramPolicy(vocab=8, name="shared")
    algo = MATPO(MATPOConfig(lr=0.05, scale="none"))
    algo.setup({"planner": shared, "worker": shared}, {})
    before = shared.table.detach().clone()
    metrics = algo.update([_episode(0, 1.0), _episode(1, 0.0)])
    changed = (shared.table.detach() != before).any(dim=-1)
    # The episodes differ in their last planner / worker tokens (3 vs 4 after context 3; 0 vs 1
    # after context 7): those rows get a net gradient from both roles.
    assert changed[3] and changed[7]
    assert metrics["planner/tokens"] == 6 and metrics["worker/tokens"] == 24
    assert algo.state_dict()["updates"] == 1
