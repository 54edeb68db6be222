"""``llm-marl train`` with a sharded learner, launched by torchrun: 2 gloo ranks train the toy
preset and end with the single-process run's weights and metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm_marl.cli import main

ROOT = Path(__file__).resolve().parents[2]
# Small but learning: the warm-up gives the agents non-zero rewards, so the gradients are not.
RUN = [
    "train",
    "--algo",
    "magrpo",
    "--preset",
    "toy-coordination",
    "--trainer.steps",
    "2",
    "--trainer.tasks_per_step",
    "2",
    "--policies.format_warmup_steps",
    "20",
    "--trainer.eval_at_start",
    "false",
    "--trainer.eval_tasks",
    "1",
    "--trainer.progress",
    "false",
    "--trainer.plot",
    "false",
]


def _torchrun(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free port: other runs on the machine keep theirs
        "--nproc-per-node",
        "2",
        "-m",
        "llm_marl.cli",
        *RUN,
        "--policies.world_size",
        "2",
        "--trainer.output_dir",
        str(out),
        *extra,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)


def _weights(out: Path) -> dict[str, dict[str, torch.Tensor]]:
    policies = out / "checkpoints" / "step-000002" / "policies"
    return {p.name: load_file(str(p / "model.safetensors")) for p in sorted(policies.iterdir())}


def _rows(out: Path) -> list[dict[str, float]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
def test_torchrun_two_ranks_train_like_one_process(tmp_path: Path) -> None:
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    assert main([*RUN, "--trainer.output_dir", str(single)]) == 0
    proc = _torchrun(sharded)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # Same weights at the end: the same samples (rank 0 samples with the synced weights and
    # the same seeds) and the same update maths (sliced per rank, normalisers summed). AdamW
    # turns the sums' different rounding on near-zero gradients into ~lr-sized steps on a few
    # elements, hence atol 1e-4; a missed weight sync changes the samples and much more.
    one, two = _weights(single), _weights(sharded)
    assert set(one) == set(two) == {"left", "right"}
    for agent in one:
        assert set(one[agent]) == set(two[agent])
        for name, tensor in one[agent].items():
            torch.testing.assert_close(two[agent][name], tensor, atol=1e-4, rtol=1e-3)
    # The run learned (non-zero gradients) and logged as one process would, on rank 0 only.
    rows_one, rows_two = _rows(single), _rows(sharded)
    assert [r["step"] for r in rows_two] == [1, 2]
    for a, b in zip(rows_one, rows_two):
        assert a["grad_norm"] > 0
        for key in ("reward", "loss", "grad_norm", "kl", "clip_frac", "eval/reward"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
    assert (sharded / "config.yaml").is_file()
    meta = json.loads((sharded / "checkpoints" / "step-000002" / "trainer.json").read_text())
    assert meta["sharded_learner"] == 2 and meta["policies"] == {"left": "left", "right": "right"}


def test_world_size_without_torchrun_is_one_line(monkeypatch, capsys, tmp_path: Path) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    argv = [*RUN, "--policies.world_size", "2", "--trainer.output_dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "torchrun --nproc-per-node 2 -m llm_marl.cli train" in err
    assert not any(tmp_path.iterdir())  # refused before anything was built or written


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--trainer.resume", "true", "resuming a sharded learner"),
        ("--policies.lora", "true", "LoRA"),
        ("--policies.backend", "vllm", "backend vllm"),
        ("--trainer.executor", "ray", "executor ray"),
    ],
)
def test_sharded_run_refuses_what_it_cannot_do(
    monkeypatch, capsys, tmp_path: Path, flag: str, value: str, words: str
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    argv = [*RUN, "--policies.world_size", "2", "--trainer.output_dir", str(tmp_path)]
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
    assert not any(tmp_path.iterdir())
