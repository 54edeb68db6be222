"""MAGRPO's tree mode: returns and sibling advantages on a hand-computed tree, the samples it
trains on, one Trainer step with tiny LMs. The learning measurement (slow) is
``test_magrpo_tree_learning.py``."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl.algos import MAGRPO, MAGRPOConfig
from llm_marl.algos.advantages import leaf_component_reward, tree_advantages, tree_returns
from llm_marl.errors import ConfigError
from llm_marl.policies.base import SamplingParams
from llm_marl.rollout import collect
from llm_marl.rollout.tree import RolloutTree, collect_tree

from .tree_toy import TARGET_2, LengthRounds, RoundsCoordination, scripted_team


def scripted_tree(rounds: int = 2) -> RolloutTree:
    """The tree of :func:`scripted_team` on target 2 with G = 2 (rewards in its docstring):

    root 0 (1, 1) 1.0 -> children 1.0, 1.0;  root 1 (0, x) 0.1 -> children 0.2, 1.0.
    """
    (tree,) = collect_tree(
        lambda: RoundsCoordination(rounds=rounds), scripted_team(), [TARGET_2], 2, progress=False
    )
    return tree


def by_position(tree: RolloutTree, values: dict) -> list[float]:
    return [values[n] for n in tree.nodes()]  # roots, then root 0's children, root 1's


def test_returns_are_reward_plus_discounted_mean_of_the_childrens_returns():
    tree = scripted_tree()
    # Leaves: their reward. Root 0: 1.0 + 0.5 * (1.0 + 1.0) / 2; root 1: 0.1 + 0.5 * 0.6.
    assert by_position(tree, tree_returns(tree, gamma=0.5)) == pytest.approx(
        [1.5, 0.4, 1.0, 1.0, 0.2, 1.0]
    )
    assert by_position(tree, tree_returns(tree, gamma=1.0)) == pytest.approx(
        [2.0, 0.7, 1.0, 1.0, 0.2, 1.0]
    )
    assert by_position(tree, tree_returns(tree, gamma=0.0))[:2] == pytest.approx([1.0, 0.1])


def test_advantages_are_relative_to_the_siblings_that_share_a_history():
    tree = scripted_tree()
    # Roots: 1.5 and 0.4 around 0.95. Root 0's children are equal: no signal. Root 1's: 0.2 and
    # 1.0 around 0.6 (the linear mode would have compared them with root 0's children).
    adv = tree_advantages(tree, gamma=0.5, baseline="mean", scale="none")
    assert by_position(tree, adv) == pytest.approx([0.55, -0.55, 0.0, 0.0, -0.4, 0.4])
    assert by_position(tree, adv)[2:4] == [0.0, 0.0]  # exact zeros for an equal group
    std = tree_advantages(tree, gamma=0.5, baseline="mean", scale="std")
    s = 1 / math.sqrt(2)  # two values a apart: unbiased std a / sqrt(2)
    assert by_position(tree, std) == pytest.approx([s, -s, 0.0, 0.0, -s, s], abs=1e-5)
    rloo = tree_advantages(tree, gamma=0.5, baseline="rloo")
    assert by_position(tree, rloo)[:2] == pytest.approx([1.1, -1.1])


def test_a_reward_component_is_credited_at_the_leaves():
    tree = scripted_tree()
    success = leaf_component_reward("success")
    # Leaves' success: 1, 1 under root 0; 0, 1 under root 1. Inner nodes earn 0.
    assert by_position(tree, tree_returns(tree, 1.0, success)) == pytest.approx(
        [1.0, 0.5, 1.0, 1.0, 0.0, 1.0]
    )
    with pytest.raises(ConfigError, match="no reward component 'nope'"):
        tree_returns(tree, 1.0, leaf_component_reward("nope"))


def test_early_stopped_nodes_are_leaves_of_the_returns():
    (tree,) = collect_tree(
        lambda: RoundsCoordination(rounds=3),
        scripted_team(),
        [TARGET_2],
        2,
        early_stop=0.8,
        progress=False,
    )
    returns = tree_returns(tree, gamma=1.0)
    r0, r1 = tree.roots
    assert [returns[c] for c in r0.children] == pytest.approx([1.0, 1.0])  # stopped: reward
    # Root 1's children were expanded: all their grandchildren play (1, 1) and earn 1.0.
    assert [returns[c] for c in r1.children] == pytest.approx([1.2, 2.0])
    assert returns[r0] == pytest.approx(2.0) and returns[r1] == pytest.approx(0.1 + 1.6)


@pytest.fixture
def team(algo_lm_path):
    from llm_marl.policies.hf import HFPolicy

    return {
        "left": HFPolicy(algo_lm_path, trainable=True, name="left", seed=0),
        "right": HFPolicy(algo_lm_path, trainable=True, name="right", seed=1),
    }


SAMPLING = SamplingParams(max_new_tokens=3, temperature=1.0)


def test_each_node_turn_is_one_sample_with_its_history_as_prompt(team):
    algo = MAGRPO(MAGRPOConfig(rollout="tree", gamma=0.5))
    algo.setup(team, dict.fromkeys(team, SAMPLING))
    trees = algo.collect(
        lambda: RoundsCoordination(rounds=2),
        [TARGET_2],
        group_size=2,
        sampling=dict.fromkeys(team, SAMPLING),
        seed=3,
        progress=False,
    )
    assert all(isinstance(t, RolloutTree) for t in trees)
    (tree,) = trees
    samples = algo.build_samples(trees)
    adv = tree_advantages(tree, 0.5)
    for agent in ("left", "right"):
        nodes = list(tree.nodes())
        assert len(samples[agent]) == len(nodes) == 6
        for node, sample in zip(nodes, samples[agent]):
            t = node.turns[agent]
            assert sample.prompt_ids == t.prompt_ids and sample.completion_ids == t.completion_ids
            assert sample.advantages == [adv[node]] * len(t.completion_ids)
            assert sample.mask == [1] * len(t.completion_ids) and sample.turn_spans is None
            assert sample.old_logprobs == t.logprobs
    # Siblings' samples share their prompt (the update encodes a shared prompt once).
    assert samples["left"][0].prompt_ids == samples["left"][1].prompt_ids


def test_modes_refuse_each_others_rollouts(team):
    tree = scripted_tree()
    linear = MAGRPO(MAGRPOConfig())
    linear.setup(team, dict.fromkeys(team, SAMPLING))
    with pytest.raises(TypeError, match="rollout='tree'"):
        linear.build_samples([tree])
    episodes = collect(RoundsCoordination, team, [TARGET_2], 2, SAMPLING, progress=False)
    tree_algo = MAGRPO(MAGRPOConfig(rollout="tree"))
    tree_algo.setup(team, dict.fromkeys(team, SAMPLING))
    with pytest.raises(TypeError, match="RolloutTree"):
        tree_algo.build_samples(episodes)
    # The default is the linear mode: collect gives episodes.
    assert MAGRPOConfig().rollout == "linear"
    out = linear.collect(
        RoundsCoordination,
        [TARGET_2],
        group_size=2,
        sampling=linear.sampling,
        seed=0,
        progress=False,
    )
    assert len(out) == 2 and not isinstance(out[0], RolloutTree)


def test_config_checks():
    with pytest.raises(ValueError, match="unknown rollout"):
        MAGRPOConfig(rollout="bush")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rollout='tree'"):
        MAGRPOConfig(tree_depth=2)
    with pytest.raises(ValueError, match="rollout='tree'"):
        MAGRPOConfig(early_stop=0.5)
    with pytest.raises(ValueError, match="tree_depth"):
        MAGRPOConfig(rollout="tree", tree_depth=0)
    MAGRPOConfig(rollout="tree", tree_depth=2, early_stop=-0.2)


def test_one_trainer_step_in_tree_mode_updates_both_agents(team, tmp_path):
    from llm_marl.train import Trainer, TrainerConfig

    before = {a: [p.detach().clone() for p in team[a].parameters()] for a in team}
    config = TrainerConfig(
        steps=1,
        tasks_per_step=2,
        group_size=2,
        sampling=SAMPLING,
        eval_every=0,
        output_dir=str(tmp_path),
        save_every=0,
        progress=False,
        console=False,
        plot=False,
    )
    algo = MAGRPO(MAGRPOConfig(rollout="tree", lr=1e-2, kl_coef=0.0, tree_depth=2))
    trainer = Trainer(
        algo,
        team,
        config,
        env=lambda: LengthRounds(rounds=2),
        eval_tasks=[{"task_id": "held-out", "target": 0}],
    )
    metrics = trainer.train_step(0)
    assert metrics["reward_std"] > 0  # the replies' lengths vary: there is a signal
    assert metrics["tree/nodes"] == 2 + 4
    assert metrics["episodes"] == 2 * 2  # G episodes read off each tree, for the reward metrics
    for agent in team:
        changed = any(
            not torch.equal(b, p) for b, p in zip(before[agent], team[agent].parameters())
        )
        assert changed, f"{agent} was not updated"
