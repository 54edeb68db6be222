"""MATPO with LoRA: one adapter, shared by the planner and the worker, trained by both roles'
turns on one frozen base (what one GPU needs for the 14B preset); and the combinations MATPO
cannot train are one line from ``llm-marl train``, never a traceback."""

from __future__ import annotations

import pytest
import torch

from llm_marl.algos import get_algorithm
from llm_marl.cli import main
from llm_marl.train import Trainer, build_policies, preset_config
from llm_marl.train.checkpoint import latest_checkpoint

FAST = ["--algo", "matpo", "--preset", "toy-delegation", "--format-warmup-steps", "0"]
FAST += ["--group-size", "4", "--tasks-per-step", "2", "--eval-group-size", "1"]
FAST += ["--no-progress", "--no-plot"]


def _tensors(model, lora: bool) -> dict[str, torch.Tensor]:
    return {
        n: p.detach().clone()
        for n, p in model.named_parameters()
        if ("lora_" in n) == lora and p.dtype.is_floating_point
    }


@pytest.mark.slow  # ~25 s: a format warm-up, so that the planner delegates and workers play
def test_matpo_lora_trains_one_adapter_from_both_roles_turns(tmp_path):
    config = preset_config(
        "matpo",
        "toy-delegation",
        {
            "trainer": {
                "output_dir": str(tmp_path),
                "steps": 1,
                "group_size": 4,
                "tasks_per_step": 2,
                "eval_at_start": False,
                "eval_tasks": 1,
                "eval_group_size": 1,
                "progress": False,
                "console": False,
                "plot": False,
            },
            # A short format warm-up (of the adapter): the planner delegates, so workers play.
            "policies": {"lora": True, "format_warmup_steps": 20},
        },
    )
    policies = build_policies(config)
    planner, worker = policies["planner"], policies["worker"]
    assert planner is worker and planner.adapter == "planner+worker" and planner.trainable
    base, adapter = _tensors(planner.model, lora=False), _tensors(planner.model, lora=True)
    assert adapter and base
    algorithm = get_algorithm("matpo").build(config.algorithm)
    roles_trained = []
    build = algorithm.build_samples

    def recorded(episodes):
        samples = build(episodes)
        roles_trained.extend(s.agent for group in samples.values() for s in group)
        return samples

    algorithm.build_samples = recorded
    Trainer(algorithm, policies, config.trainer).train()
    assert {"planner", "worker"} <= set(roles_trained)  # both roles' turns were trained on
    after_base, after_adapter = _tensors(planner.model, False), _tensors(planner.model, True)
    assert all(torch.equal(base[n], after_base[n]) for n in base)  # the base stays frozen
    assert any(not torch.equal(adapter[n], after_adapter[n]) for n in adapter)


def test_llm_marl_train_matpo_lora_runs_and_checkpoints(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *FAST, "--lora", "--steps", "1", "--output-dir", str(out)]) == 0
    assert latest_checkpoint(out).name == "step-000001"


@pytest.mark.parametrize("extra", [["--no-policies.share", "--lora"], ["--no-policies.share"]])
def test_matpo_without_one_shared_policy_is_one_line(tmp_path, capsys, extra):
    argv = ["train", *FAST, *extra, "--steps", "1", "--output-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "MATPO trains ONE policy object playing every role" in err
    assert err.count("\n") == 1 and "Traceback" not in err
