"""MATPO's credit assignment as the paper / official code: one group advantage per rollout."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl.algos.losses import clipped_pg_loss
from llm_marl.algos.matpo import MATPO, MATPOConfig, matpo_samples
from llm_marl.rollout.types import Trajectory

from .helpers import episode, turn


def _rollout(g, reward, planner_turns, worker_parents):
    """A planner with ``planner_turns`` turns (step 2k) and worker turns spawned by the given
    planner turns; the reward arrives at the last step."""
    planner = Trajectory(
        "planner",
        "shared",
        True,
        [turn("planner", 2 * k, [1, k + 2], [3, 4 + g]) for k in range(planner_turns)],
    )
    worker = Trajectory(
        "worker",
        "shared",
        True,
        [
            turn("worker", 2 * p + 1, [6, i + 7], [8, 9, 10], parent=("planner", p))
            for i, p in enumerate(worker_parents)
        ],
    )
    steps = 2 * planner_turns
    return episode(0, g, [0.0] * (steps - 1) + [reward], {"planner": planner, "worker": worker})


def _by_agent(samples):
    out = {}
    for s in samples:
        out.setdefault(s.agent, []).append(s)
    return out


def test_the_issue_example_failing_rollouts_early_turns_get_negative_advantage():
    # rewards [1, 0, 0, 1], planner turns [1, 3, 3, 1]; the 3-turn rollouts delegate twice.
    group = [
        _rollout(0, 1.0, 1, []),
        _rollout(1, 0.0, 3, [0, 1]),
        _rollout(2, 0.0, 3, [0, 1]),
        _rollout(3, 1.0, 1, []),
    ]
    samples = _by_agent(matpo_samples(group, "planner", ["worker"]))
    std = math.sqrt(sum((r - 0.5) ** 2 for r in (1, 0, 0, 1)) / 3)
    expected = [0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std]
    planner_adv = [[a for a, m in zip(s.advantages, s.mask) if m] for s in samples["planner"]]
    # one sample per turn here (prompts do not extend each other); every token of a rollout's
    # planner carries that rollout's advantage -- the early turns of the failing ones included
    per_rollout = [1, 3, 3, 1]
    flat = iter(planner_adv)
    for adv, n in zip(expected, per_rollout):
        for _ in range(n):
            assert next(flat) == pytest.approx([adv, adv], rel=1e-5)
    assert expected[1] < 0
    # every worker rollout inherits its planner's advantage
    worker_adv = [s.advantages[0] for s in samples["worker"]]
    assert worker_adv == pytest.approx([expected[1]] * 2 + [expected[2]] * 2, rel=1e-5)


def test_constant_group_gives_no_signal_and_scale_none_is_the_plain_difference():
    group = [_rollout(g, 1.0, 2, [0]) for g in range(3)]
    assert all(a == 0.0 for s in matpo_samples(group, "planner", ["worker"]) for a in s.advantages)
    group = [_rollout(0, 1.0, 1, [0]), _rollout(1, 0.0, 2, [1])]
    samples = _by_agent(matpo_samples(group, "planner", ["worker"], scale="none"))
    assert [s.advantages[0] for s in samples["worker"]] == [0.5, -0.5]


def test_official_defaults():
    cfg = MATPOConfig()
    assert (cfg.lr, cfg.clip_low, cfg.clip_high, cfg.clip_ratio_c) == (1e-5, 0.2, 0.2, 3.0)
    assert (cfg.weight_decay, cfg.kl_coef, cfg.aggregation, cfg.balance) == (
        0.01,
        0.0,
        "token-mean",
        False,
    )
    with pytest.raises(ValueError, match="token-mean"):
        MATPOConfig(aggregation="sequence-mean")
    with pytest.raises(ValueError, match="clip_ratio_c"):
        MATPOConfig(clip_ratio_c=0.5)


def test_dual_clip_bounds_the_loss_of_negative_advantage_tokens():
    logp = torch.tensor([[math.log(10.0), math.log(10.0), 0.0]])  # ratio 10, 10, 1
    old = torch.zeros(1, 3)
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    mask = torch.ones(1, 3)
    plain, _ = clipped_pg_loss(logp, old, adv, mask)
    dual, _ = clipped_pg_loss(logp, old, adv, mask, clip_ratio_c=3.0)
    assert plain[0, 0].item() == pytest.approx(10.0)  # -A * ratio, unbounded
    assert dual[0, 0].item() == pytest.approx(3.0)  # bounded by -c * A
    assert dual[0, 1].item() == plain[0, 1].item()  # positive advantages untouched
    assert dual[0, 2].item() == plain[0, 2].item()  # ratio 1: below the bound


def test_matpo_config_is_usable_by_the_algorithm():
    algo = MATPO()
    assert algo.config.workers == ("worker",)
