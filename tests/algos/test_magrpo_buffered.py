"""CoMLRL 1.4.3's update schedule (issue 24 item 6): per-policy buffers of tree nodes that carry
over between training steps, emptied every ``rollout_buffer_size`` nodes, one optimizer step per
turn's batch of ``train_batch_size`` nodes."""

from __future__ import annotations

import pytest

from llm_marl.algos import MAGRPO, MAGRPOConfig
from llm_marl.policies.base import SamplingParams
from llm_marl.train import preset_config

from .tree_toy import TARGET_2, RoundsCoordination

SAMPLING = SamplingParams(max_new_tokens=3, temperature=1.0)


@pytest.fixture
def team(algo_lm_path):
    from llm_marl.policies.hf import HFPolicy

    return {
        "left": HFPolicy(algo_lm_path, trainable=True, name="left", seed=0),
        "right": HFPolicy(algo_lm_path, trainable=True, name="right", seed=1),
    }


def _steps(algo: MAGRPO, team, updates: int) -> list[float]:
    algo.setup(team, dict.fromkeys(team, SAMPLING))
    out = []
    for i in range(updates):
        trees = algo.collect(
            lambda: RoundsCoordination(rounds=2),
            [TARGET_2],
            group_size=2,
            sampling=dict.fromkeys(team, SAMPLING),
            seed=i,
            progress=False,
        )
        out.append(algo.update(trees)["left/optimizer_steps"])
    return out


def test_the_buffered_schedule_takes_the_official_number_of_steps(team):
    # One task per step, G = 2, two turns: the nodes (sibling groups) of each tree, in CoMLRL's
    # order, are turn 0, turn 1, turn 1. With a buffer of 2 (CoMLRL's default):
    #   step 1: [0, 1] -> one step per turn: 2; [1] carries over.
    #   step 2: [1, 0] -> 2; [1, 1] -> 1 (one turn, one batch of 2 nodes): 3.
    #   step 3: [0, 1] -> 2; [1] carries over.
    algo = MAGRPO(MAGRPOConfig(rollout="tree", schedule="buffered", rollout_buffer_size=2))
    assert _steps(algo, team, 3) == [2.0, 3.0, 2.0]
    assert algo.buffers["left"] and len(algo.buffers["left"]) == 1
    # Our own schedule: one optimizer step per training step.
    assert _steps(MAGRPO(MAGRPOConfig(rollout="tree")), team, 2) == [1.0, 1.0]


def test_the_buffer_is_checkpointed(team):
    algo = MAGRPO(MAGRPOConfig(rollout="tree", schedule="buffered", rollout_buffer_size=2))
    _steps(algo, team, 1)
    resumed = MAGRPO(MAGRPOConfig(rollout="tree", schedule="buffered", rollout_buffer_size=2))
    resumed.setup(team, dict.fromkeys(team, SAMPLING))
    resumed.load_state_dict(algo.state_dict())
    assert resumed.buffers == algo.buffers and len(resumed.buffers["left"]) == 1


def test_schedule_checks_and_presets():
    with pytest.raises(ValueError, match="rollout='tree'"):
        MAGRPOConfig(schedule="buffered")
    with pytest.raises(ValueError, match="rollout_buffer_size"):
        MAGRPOConfig(rollout="tree", schedule="buffered", rollout_buffer_size=0)
    # CoopHumanEval buffers 4 nodes, HumanEval 2 (LLM_Collab_Code_Generation configs).
    for name, size in (("magrpo-coop-humaneval", 4), ("magrpo-humaneval", 2)):
        algo = preset_config("magrpo", name).algorithm
        assert (algo.schedule, algo.rollout_buffer_size) == ("buffered", size)
