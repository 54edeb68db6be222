"""The Trainer's loop: logging, checkpoints, resume, frozen agents, errors, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from llm_marl.algos import MAGRPO, AgentPO, AgentPOConfig, Algorithm, MAGRPOConfig
from llm_marl.envs.base import InfrastructureError
from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.errors import ConfigError
from llm_marl.policies.base import SamplingParams, ScriptedPolicy
from llm_marl.policies.hf import HFPolicy
from llm_marl.train import Trainer, TrainerConfig
from llm_marl.train.checkpoint import latest_checkpoint
from llm_marl.train.logging import read_jsonl

FAST = SamplingParams(max_new_tokens=3, temperature=1.0)


def _config(tmp_path, **kw):
    base = dict(
        env="coordination-v0",
        steps=2,
        tasks_per_step=2,
        group_size=4,
        sampling=FAST,
        output_dir=str(tmp_path / "run"),
        progress=False,
        plot=False,
    )
    base.update(kw)
    return TrainerConfig(**base)


def _pair(path, frozen_right=False):
    left = HFPolicy(path, trainable=True, name="left", seed=0)
    right = HFPolicy(path, trainable=not frozen_right, name="right", seed=1)
    return {"left": left, "right": right}


def _state(policy):
    return {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def test_a_run_logs_every_step_plots_and_checkpoints(tmp_path, algo_lm_path, capsys):
    trainer = Trainer(
        MAGRPO(MAGRPOConfig(lr=1e-3)), _pair(algo_lm_path), _config(tmp_path, plot=True)
    )
    result = trainer.train()
    out = capsys.readouterr().out
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]  # the start eval, then every step
    assert "eval/reward" in rows[0] and "eval/reward" in rows[-1]
    assert {"reward", "reward/format", "reward/success", "left/loss", "right/loss"} <= set(rows[1])
    assert rows[1]["episodes"] == 8 and rows[1]["dropped"] == 0
    assert result.first_eval is not None and result.last_eval is not None
    assert result.final_step == 2
    # Console: the table header and the closing reward table.
    assert "reward" in out and "team reward" in out
    assert (tmp_path / "run" / "reward.png").stat().st_size > 1000
    ckpt = latest_checkpoint(tmp_path / "run")
    assert ckpt is not None and ckpt.name == "step-000002"
    meta = json.loads((ckpt / "trainer.json").read_text())
    assert meta["step"] == 2 and meta["policies"] == {"left": "left", "right": "right"}


class _TextReward(CoordinationEnv):
    """A reward every random completion earns something of: varied rewards, real gradients."""

    def transition(self, actions):
        out = super().transition(actions)
        out.reward = (len(actions["left"]) + len(actions["right"])) % 7 / 6
        return out


def test_frozen_agents_stay_bit_identical_and_get_no_optimizer(tmp_path, algo_lm_path):
    policies = _pair(algo_lm_path, frozen_right=True)
    frozen_before = _state(policies["right"])
    trained_before = _state(policies["left"])
    algo = MAGRPO(MAGRPOConfig(lr=1e-2))
    cfg = _config(tmp_path, steps=3, eval_at_start=False)
    result = Trainer(algo, policies, cfg, env=_TextReward).train()
    assert all(row["left/grad_norm"] > 0 for row in result.history)
    assert list(algo.optimizers) == ["left"]
    assert all(p.grad is None for p in policies["right"].model.parameters())
    after = _state(policies["right"])
    assert all(torch.equal(frozen_before[k], after[k]) for k in frozen_before)
    trained_after = _state(policies["left"])
    assert any(not torch.equal(trained_before[k], trained_after[k]) for k in trained_before)
    # The frozen policy is not checkpointed.
    ckpt = latest_checkpoint(tmp_path / "run")
    assert sorted(p.name for p in (ckpt / "policies").iterdir()) == ["left"]


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_resuming_continues_exactly_where_it_stopped(tmp_path, algo_lm_path):
    def run(out, steps, resume=False):
        policies = _pair(algo_lm_path)
        cfg = _config(out, steps=steps, resume=resume, save_every=1, eval_at_start=False)
        algo = MAGRPO(MAGRPOConfig(lr=1e-2))
        result = Trainer(algo, policies, cfg, env=_TextReward).train()
        return policies, result

    straight, _ = run(tmp_path / "a", 4)
    run(tmp_path / "b", 2)
    resumed, result = run(tmp_path / "b", 4, resume=True)  # fresh policies, weights from disk
    assert result.start_step == 2 and result.final_step == 4
    fresh = _pair(algo_lm_path)  # the test is only meaningful if training moved the weights
    assert not torch.equal(
        _state(fresh["left"])["model.norm.weight"], _state(resumed["left"])["model.norm.weight"]
    )
    for agent in ("left", "right"):
        a, b = _state(straight[agent]), _state(resumed[agent])
        assert all(torch.equal(a[k], b[k]) for k in a), agent
    steps = [r["step"] for r in read_jsonl(tmp_path / "b" / "run" / "metrics.jsonl")]
    assert steps == [1, 2, 3, 4]


def test_resume_without_checkpoint_starts_fresh(tmp_path, algo_lm_path):
    cfg = _config(tmp_path, steps=1, resume=True, eval_at_start=False)
    result = Trainer(MAGRPO(MAGRPOConfig(lr=1e-3)), _pair(algo_lm_path), cfg).train()
    assert result.start_step == 0 and result.final_step == 1


class _FlakyCoordination(CoordinationEnv):
    """Target 1 always hits an infrastructure failure."""

    def transition(self, actions):
        if self.task["target"] == 1:
            raise InfrastructureError("grader down")
        return super().transition(actions)


class _Recorder(Algorithm):
    name = "recorder"

    def __init__(self):
        self.seen = []

    def update(self, episodes):
        self.seen.append(episodes)
        return {"loss": 0.0}


def test_errored_episodes_are_dropped_and_counted(tmp_path):
    tasks = [{"task_id": "t1", "target": 1}, {"task_id": "t2", "target": 2}]
    algo = _Recorder()
    policies = {"left": ScriptedPolicy(lambda c: "1"), "right": ScriptedPolicy(lambda c: "1")}
    cfg = _config(tmp_path, steps=1, eval_at_start=False)
    result = Trainer(algo, policies, cfg, env=_FlakyCoordination, tasks=tasks).train()
    (episodes,) = algo.seen
    assert len(episodes) == 4 and all(ep.ok and ep.task_id == "t2" for ep in episodes)
    row = result.history[0]
    assert row["episodes"] == 8 and row["dropped"] == 4
    assert row["reward"] == 1.0  # only the scored episodes count


def test_evaluate_checks_its_group_size_argument(tmp_path):
    policies = {"left": ScriptedPolicy(lambda c: "1"), "right": ScriptedPolicy(lambda c: "1")}
    trainer = Trainer(_Recorder(), policies, _config(tmp_path, eval_group_size=2))
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="group_size must be an int >= 1"):
            trainer.evaluate(group_size=bad)
    assert trainer.evaluate(group_size=0)["reward"] >= 0  # 0: the config's eval_group_size


def test_trainer_rejects_bad_input(tmp_path, algo_lm_path):
    pair = _pair(algo_lm_path)
    with pytest.raises(ValueError, match="no policy for agents \\['right'\\]"):
        Trainer(MAGRPO(), {"left": pair["left"]}, _config(tmp_path))
    with pytest.raises(ValueError, match="unknown agents \\['speaker'\\]"):
        Trainer(MAGRPO(), {**pair, "speaker": pair["left"]}, _config(tmp_path))
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        Trainer(MAGRPO(), pair, _config(tmp_path, group_size=1))
    with pytest.raises(ValueError, match="exactly one collaborator"):
        Trainer(AgentPO(), pair, _config(tmp_path))
    frozen = {a: HFPolicy(algo_lm_path, trainable=False) for a in ("left", "right")}
    with pytest.raises(ValueError, match="at least one trainable agent"):
        Trainer(MAGRPO(), frozen, _config(tmp_path))
    with pytest.raises(TypeError, match="llm_marl.algos.Algorithm"):
        Trainer(object(), pair, _config(tmp_path))
    with pytest.raises(ValueError, match="steps must be >= 1"):
        _config(tmp_path, steps=0)
    with pytest.raises(ValueError, match="collaborator='right'"):
        Trainer(
            AgentPO(AgentPOConfig(collaborator="right")),
            {"left": pair["left"], "right": ScriptedPolicy(lambda c: "0")},
            _config(tmp_path),
        )


def test_logprob_temperature_follows_sampling(tmp_path, algo_lm_path):
    pair = _pair(algo_lm_path)
    sampling = {"left": SamplingParams(max_new_tokens=2, temperature=0.7), "right": FAST}
    Trainer(MAGRPO(), pair, _config(tmp_path, sampling=sampling))
    assert pair["left"].logprob_temperature == 0.7
    assert pair["right"].logprob_temperature == 1.0


def test_tensorboard_and_wandb_are_opt_in_with_clear_errors(tmp_path, algo_lm_path):
    import importlib.util

    from llm_marl.train.logging import MetricsLogger

    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ConfigError, match="pip install tensorboard"):
            MetricsLogger(tmp_path, tensorboard=True)
    else:
        with MetricsLogger(tmp_path, tensorboard=True) as logger:
            logger.log(1, {"reward": 0.5})
        assert any((tmp_path / "tensorboard").iterdir())
    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(ConfigError, match="pip install wandb"):
            MetricsLogger(tmp_path, wandb=True)


def test_one_forward_pass_per_micro_batch(algo_lm_path):
    from llm_marl.algos import PGConfig, Sample, make_optimizer, policy_gradient_update

    policy = HFPolicy(algo_lm_path, trainable=True)
    calls = []
    # The backbone runs once per forward pass whichever LM-head path sequence_logprobs takes
    # (the chunked head calls it directly; the full-logits path through the model).
    handle = policy.model.get_decoder().register_forward_hook(lambda *a: calls.append(1))
    policy.sequence_logprobs([[5]], [[6]])  # the chunked head's one-time probe, not counted
    calls.clear()
    samples = [
        Sample(
            [5, 6, 7][: 1 + i % 3],
            [8 + i, 9, 10, 11][: 1 + i % 4],
            [1] * (1 + i % 4),
            [0.5 - i % 2] * (1 + i % 4),
            [-1.0] * (1 + i % 4),
        )
        for i in range(12)
    ]
    cfg = PGConfig(lr=1e-3)
    opt, _ = make_optimizer(policy.parameters(), cfg)
    policy_gradient_update(policy, opt, samples, cfg)
    # By default the 3 prompt groups (4 completions each) fit one pass: the 3 distinct prompts
    # run once, then the 12 completions: 2 backbone calls, never one per row.
    assert len(calls) == 2
    # A token budget too small for two groups: one pass per group, 3 x 2 backbone calls.
    calls.clear()
    policy_gradient_update(policy, opt, samples, PGConfig(lr=1e-3, micro_batch_tokens=1))
    assert len(calls) == 6
    # Without prompt sharing each pass runs its rows whole: one backbone call per pass.
    calls.clear()
    policy.share_prompts = False
    policy_gradient_update(policy, opt, samples, PGConfig(lr=1e-3, micro_batch_tokens=1))
    assert len(calls) == 3
    calls.clear()
    cfg = PGConfig(lr=1e-3, micro_batch_size=5)
    policy_gradient_update(policy, opt, samples, cfg)
    assert len(calls) == 3
    handle.remove()


def test_lora_agents_share_one_base_and_the_kl_reference_is_the_base(tmp_path, algo_lm_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    policies = HFPolicy.shared_lora(algo_lm_path, ["left", "right"], lora, seed=0)
    model = policies["left"].model
    assert policies["right"].model is model  # one base model in memory
    base = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" not in k}
    adapters = {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}
    algo = MAGRPO(MAGRPOConfig(lr=5e-2, kl_coef=0.1))
    cfg = _config(tmp_path, steps=3, eval_at_start=False)
    result = Trainer(algo, policies, cfg, env=_TextReward).train()
    assert sorted(algo.optimizers) == ["left", "right"]  # one optimizer per agent
    assert result.history[-1]["left/kl"] > 0  # measured against the adapter-free base
    after = model.state_dict()
    assert all(torch.equal(base[k], after[k]) for k in base), "the shared base moved"
    for agent in ("left", "right"):
        mine = [k for k in adapters if f".{agent}." in k]
        assert any(not torch.equal(adapters[k], after[k]) for k in mine), agent
    ckpt = latest_checkpoint(tmp_path / "run")
    assert (ckpt / "policies" / "left" / "adapter_model.safetensors").is_file()
