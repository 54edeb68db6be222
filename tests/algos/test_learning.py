"""Learning is measured, not assumed: tiny LMs, fixed seeds, CPU, a couple of minutes in all.

Each test starts from the recipe of the toy presets: offline tiny LMs that a few supervised steps
taught the toy env's answer format (a uniformly random valid digit; the referential listener
also learned to read the digit in a message). The team then plays at the env's chance level,
measured before training with a sampled evaluation (16 episodes per task), and must end
clearly above it. The thresholds leave room below what these seeds reach (about 0.85-0.95).

Other seeds (``trainer.seed``; the sampled evaluation at the test's last step, 16 episodes per
task), each test with its preset's learning-rate warm-up (20 optimizer steps):
coordination reached 0.78-0.89 at step 100 on each of seeds 0-7 (without the warm-up seed 3 was
at 0.570); the referential MAGRPO run 0.90-0.96 at step 60 on each of seeds 0-9 (without it
seed 1 stayed at chance: 0.425 -> 0.388); the AgentPO run, with the preset's lr 1e-3, 0.80-1.00
at step 40 on each of seeds 0-9 (0.80: seed 4, on 3 targets of 4 from step 20 to 50; 0.95 at
step 60); with the former lr 2e-3 and no warm-up, 30 steps, seed 2 stayed at 0.397 and seed 4
ended at 0.788.
"""

from __future__ import annotations

import pytest
import torch

from llm_marl.algos import MAGRPO, AgentPO, MAGRPOConfig
from llm_marl.policies.base import SamplingParams
from llm_marl.train import Trainer, TrainerConfig, build_policies, preset_config
from llm_marl.train.models import PoliciesConfig, trainable_policies
from llm_marl.train.warmup import toy_format_warmup

pytestmark = pytest.mark.slow

SAMPLING = SamplingParams(max_new_tokens=2, temperature=1.0)


def _config(out, env, steps, tasks_per_step, seed=0):
    return TrainerConfig(
        env=env,
        steps=steps,
        tasks_per_step=tasks_per_step,
        group_size=16,
        sampling=SAMPLING,
        eval_sampling=SAMPLING,  # sampled: the expected reward of the stochastic team
        eval_group_size=16,
        output_dir=str(out),
        save_every=0,
        progress=False,
        console=False,
        plot=False,
        seed=seed,
    )


def _team(tmp_path, env, agents, warmup_steps, kl_coef=0.1, seed=0):
    config = PoliciesConfig(model="tiny", device="cpu")
    models = tmp_path / "models"
    policies = trainable_policies(config, agents, models, seed=seed, reference=kl_coef > 0)
    toy_format_warmup(policies, env, steps=warmup_steps, seed=seed)
    return policies


def test_magrpo_learns_a_coordination_convention(tmp_path):
    # Chance level (uniformly random valid digits) is 0.36; a shared convention reaches 1.0.
    # The toy-coordination preset's values, its learning-rate warm-up (20 optimizer steps)
    # included: without it seed 3 was still at 0.570 by step 100.
    policies = _team(tmp_path, "coordination-v0", ["left", "right"], warmup_steps=60)
    algo = MAGRPO(
        MAGRPOConfig(lr=3e-3, kl_coef=0.1, epochs=2, aggregation="token-mean", warmup_steps=20)
    )
    result = Trainer(algo, policies, _config(tmp_path / "run", "coordination-v0", 100, 5)).train()
    start, end = result.first_eval["reward"], result.last_eval["reward"]
    print(f"team reward {start:.3f} -> {end:.3f}")
    assert start <= 0.45, f"the format-tuned team should start near chance (0.36), got {start:.3f}"
    assert end >= 0.6, f"MAGRPO should coordinate: reward {start:.3f} -> {end:.3f}"
    assert end >= start + 0.25


def test_magrpo_learns_to_communicate_in_the_referential_game(tmp_path):
    # Chance level (the listener guesses) is 0.4; naming the object every time is 1.0.
    # The toy-referential preset's values, its learning-rate warm-up (20 optimizer steps)
    # included: without it seed 1 stayed at chance (0.425 -> 0.388).
    policies = _team(tmp_path, "referential-v0", ["speaker", "listener"], warmup_steps=150)
    algo = MAGRPO(
        MAGRPOConfig(lr=3e-3, kl_coef=0.1, epochs=2, aggregation="token-mean", warmup_steps=20)
    )
    result = Trainer(algo, policies, _config(tmp_path / "run", "referential-v0", 60, 4)).train()
    start, end = result.first_eval["reward"], result.last_eval["reward"]
    print(f"team reward {start:.3f} -> {end:.3f}")
    assert start <= 0.5, f"the team should start near chance (0.4), got {start:.3f}"
    assert end >= 0.7, (
        f"MAGRPO should teach the speaker to name the object: {start:.3f} -> {end:.3f}"
    )


def test_agentpo_trains_the_collaborator_and_leaves_the_frozen_actor_untouched(tmp_path):
    # The toy-referential preset's team: a tiny listener taught to read, then frozen; a tiny
    # speaker taught the answer format (60 supervised steps each).
    config = preset_config("agentpo", "toy-referential", {"trainer": {"output_dir": str(tmp_path)}})
    policies = build_policies(config)
    listener = policies["listener"]
    assert listener.trainable is False and policies["speaker"].trainable
    frozen_before = {k: v.detach().clone() for k, v in listener.model.state_dict().items()}

    # The preset's algorithm: lr 1e-3 warmed up over 20 optimizer steps (see the preset). With
    # its former lr 2e-3 and no warm-up the speaker settled on one digit for every target on
    # seed 2 (0.487 -> 0.397, no gradient from step 4).
    algo = AgentPO(config.algorithm)
    tuned = (algo.config.lr, algo.config.weight_decay, algo.config.warmup_steps, algo.config.epochs)
    assert tuned == (1e-3, 0.0, 20, 2) and algo.config.reward_component == "success"
    assert (algo.config.clip_low, algo.config.clip_high, algo.config.kl_coef) == (0.2, 0.28, 0.0)
    assert algo.config.aggregation == "token-mean"
    result = Trainer(algo, policies, _config(tmp_path / "run", "referential-v0", 40, 4)).train()
    start, end = result.first_eval["reward"], result.last_eval["reward"]
    print(f"team reward {start:.3f} -> {end:.3f}")
    assert start <= 0.5, f"the team should start near chance (0.4), got {start:.3f}"
    assert end >= 0.75, f"AgentPO should teach the speaker: {start:.3f} -> {end:.3f}"
    assert list(algo.optimizers) == ["speaker"]
    after = listener.model.state_dict()
    assert all(torch.equal(frozen_before[k], after[k]) for k in frozen_before), "actor changed"
    assert all(p.grad is None for p in listener.model.parameters())
