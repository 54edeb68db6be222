"""The MAGRPO presets compute what CoMLRL computes (issue 24 items 8 and 9): the writing presets
use CoMLRL's loss, and every MAGRPO paper preset has a ``-comlrl-1.2`` variant with CoMLRL
1.2.1's advantage (``R - mean(R)``), tree discount (0.9) and optimizer (no weight decay)."""

from __future__ import annotations

import dataclasses

import pytest

from llm_marl.algos.advantages import group_advantages
from llm_marl.train import preset_config

PAPER = ["magrpo-coop-humaneval", "magrpo-humaneval", "magrpo-tldr", "magrpo-arxiv"]


@pytest.mark.parametrize("name", ["magrpo-tldr", "magrpo-arxiv"])
def test_the_writing_presets_use_comlrl_loss(name):
    algo = preset_config("magrpo", name).algorithm
    # -A * sum_t logp_t averaged over completions, no ratio, no clip, AdamW weight decay 0.01.
    assert (algo.loss, algo.aggregation, algo.weight_decay, algo.max_grad_norm) == (
        "policy-gradient",
        "sequence-sum",
        0.01,
        None,
    )
    assert (algo.baseline, algo.scale, algo.kl_coef, algo.epochs) == (
        "mean",
        "population-std",
        0.0,
        1,
    )


@pytest.mark.parametrize("name", PAPER)
def test_each_paper_preset_has_a_comlrl_1_2_variant(name):
    current = preset_config("magrpo", name)
    old = preset_config("magrpo", f"{name}-comlrl-1.2")
    assert (old.algorithm.scale, old.algorithm.weight_decay) == ("none", 0.0)
    assert old.algorithm.gamma == 0.9  # a tree node: r + 0.9 * mean(children) (one turn: no effect)
    # Everything else is the current preset's.
    if old.algorithm.rollout == "tree":  # 1.2.1 steps once per tree node
        assert (old.algorithm.rollout_buffer_size, old.algorithm.train_batch_size) == (1, 1)
    now = current.algorithm
    same = dataclasses.replace(
        old.algorithm, scale=now.scale, gamma=now.gamma, weight_decay=now.weight_decay,
        rollout_buffer_size=now.rollout_buffer_size, train_batch_size=now.train_batch_size,
    )  # fmt: skip
    assert same == current.algorithm
    assert old.trainer == current.trainer and old.policies == current.policies


@pytest.mark.parametrize("name", PAPER)
def test_the_two_versions_compute_their_advantages(name):
    returns = [3.0, 1.0, 0.0, 2.0]
    current = preset_config("magrpo", name).algorithm
    old = preset_config("magrpo", f"{name}-comlrl-1.2").algorithm
    # 1.2.1: returns - returns.mean(); 1.4.3: then divided by the population std.
    assert group_advantages(returns, old.baseline, old.scale) == [1.5, -0.5, -1.5, 0.5]
    expected = [a / (1.25**0.5) for a in (1.5, -0.5, -1.5, 0.5)]
    assert group_advantages(returns, current.baseline, current.scale) == pytest.approx(expected)
