"""vLLM as the sampler of trainable agents, through the Trainer and ``llm-marl train``.

``policies.backend: vllm`` attaches an engine to the trainable policies, and the Trainer syncs
it after every update: the log-probs vLLM reports for the tokens it samples stay equal to the
trained model's (measured before each step's rollout and after the last update), full weights
and LoRA. Without the sync the gap grows with every update (3.84 nats after 3 MAGRPO steps
when the issue was filed). A last test runs ``llm-marl train`` with the vLLM backend and a
frozen ``vllm:`` agent.

Runs in the vllm job of ``.ci/run`` (see tests/vllm/test_vllm_policy.py for the tiny model).
"""

from __future__ import annotations

import json

import pytest
import torch

from llm_marl.algos import get_algorithm
from llm_marl.cli import main
from llm_marl.policies import HFPolicy, SamplingParams, build_tiny_lm
from llm_marl.train import Trainer, build_policies, preset_config
from llm_marl.train.checkpoint import latest_checkpoint

pytestmark = pytest.mark.vllm

TOL = 1e-4
"""Largest |vLLM sampling log-prob - trainer log-prob| accepted (as in test_vllm_policy.py)."""
DRIFT = 1e-2
"""The training must move some log-prob by more than this, or the sync would prove nothing."""
ENGINE = {"kv_cache_memory_bytes": 32 << 20, "max_model_len": 512, "cpu_threads": 1}
PROBE = [[{"role": "user", "content": f"Target: {t}. Your answer:"}] for t in range(4)]


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory) -> str:
    return build_tiny_lm(tmp_path_factory.mktemp("vllm_lm") / "lm", hidden_size=64, num_heads=2)


def _gap(policy: HFPolicy) -> float:
    """Largest gap between the engine's sampling log-probs and the trainer's, over probes."""
    out = policy.generate(PROBE, SamplingParams(max_new_tokens=6, temperature=1.0, seed=1))
    policy.logprob_temperature = 1.0
    with torch.no_grad():
        ours = policy.sequence_logprobs([c.prompt_ids for c in out], [c.token_ids for c in out])
    return max(
        (torch.tensor(c.logprobs) - t.float()).abs().max().item()
        for c, t in zip(out, ours)
        if c.token_ids
    )


def _run(lm_path: str, tmp_path, **policies):
    return preset_config(
        "magrpo",
        "toy-coordination",
        {
            "trainer": {
                "output_dir": str(tmp_path),
                "steps": 3,
                "group_size": 2,
                "tasks_per_step": 2,
                "eval_tasks": 1,
                "eval_at_start": False,
                "sampling": {"max_new_tokens": 4, "temperature": 1.0},
                "progress": False,
                "console": False,
                "plot": False,
            },
            "algorithm": {"lr": 0.05},
            "policies": {
                "model": f"hf:{lm_path}",
                "format_warmup_steps": 0,
                "backend": "vllm",
                "vllm": ENGINE,
                **policies,
            },
        },
    )


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_the_trainer_keeps_the_engine_equal_to_the_trained_model(lm_path, tmp_path, lora):
    # Full weights: one shared policy (one engine, reloaded in place after each update);
    # LoRA: one adapter per agent over one base, both served by one engine.
    # The toy preset's LoRA layer trains a copy of the embedding, which vLLM cannot serve.
    extra = {"lora_modules_to_save": []} if lora else {}
    config = _run(lm_path, tmp_path, lora=lora, share=not lora, **extra)
    policies = build_policies(config)
    engines = {id(p.generation_engine): p.generation_engine for p in policies.values()}
    assert len(engines) == 1
    algorithm = get_algorithm("magrpo").build(config.algorithm)
    trainer = Trainer(algorithm, policies, config.trainer)
    probe = policies["left"]
    with torch.no_grad():
        start = [
            t.clone() for t in probe.sequence_logprobs([[1, 30, 31]] * 2, [[40, 41], [50, 51]])
        ]
    gaps: list[float] = []
    collect = algorithm.collect

    def measured_collect(*args, **kwargs):  # before each step's rollout: after each update
        gaps.append(max(_gap(p) for p in {id(p): p for p in policies.values()}.values()))
        return collect(*args, **kwargs)

    algorithm.collect = measured_collect  # type: ignore[method-assign]
    try:
        trainer.train()
        gaps.append(max(_gap(p) for p in policies.values()))  # after the last update
        with torch.no_grad():
            end = probe.sequence_logprobs([[1, 30, 31]] * 2, [[40, 41], [50, 51]])
    finally:
        for engine in engines.values():
            engine.close()
    assert len(gaps) == 4 and max(gaps) < TOL, gaps
    moved = max((a - b).abs().max().item() for a, b in zip(start, end))
    assert moved > DRIFT, f"3 updates barely moved the model ({moved}): the test proves nothing"


def test_llm_marl_train_with_the_vllm_backend_and_a_frozen_vllm_agent(lm_path, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--algo", "magrpo", "--preset", "toy-coordination", "--steps", "1"]
    argv += ["--model", f"hf:{lm_path}", "--format-warmup-steps", "0"]
    argv += ["--group-size", "2", "--tasks-per-step", "2", "--eval-tasks", "1"]
    argv += ["--max-new-tokens", "4", "--no-progress", "--no-plot", "--output-dir", str(out)]
    argv += ["--policies.backend", "vllm", "--policies.vllm", json.dumps(ENGINE)]
    argv += ["--policies.frozen.right", f"vllm:{lm_path},max_model_len=512"]
    assert main(argv) == 0, capsys.readouterr().err
    assert latest_checkpoint(out).name == "step-000001"
