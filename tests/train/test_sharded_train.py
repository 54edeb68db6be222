"""``llm-marl train`` with a sharded learner, launched by torchrun: 2 gloo ranks train the toy
preset (full weights; LoRA adapters with their embedding copies) and end with the
single-process run's weights and metrics; its checkpoints resume on 2 ranks (bit-identical
continuation), on 3 ranks and in one process, a single-process run's checkpoint resumes on 2
ranks, and its consolidated weights evaluate as ``hf:PATH`` in ``llm-marl eval``.

The launches are slow (torchrun, 2 processes): one module-scoped pair of runs (one process,
2 ranks) serves several tests."""

from __future__ import annotations

import json
import os
import shutil
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
    "--trainer.save_every",  # a checkpoint after step 1 too: the resumes start there
    "1",
]


def _torchrun(out: Path, *extra: str, ranks: int = 2) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free port: other runs on the machine keep theirs
        "--nproc-per-node",
        str(ranks),
        "-m",
        "llm_marl.cli",
        *RUN,
        "--policies.world_size",
        str(ranks),
        "--trainer.output_dir",
        str(out),
        *extra,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, cwd=ROOT)


def _weights(out: Path, step: int = 2) -> dict[str, dict[str, torch.Tensor]]:
    policies = out / "checkpoints" / f"step-{step:06d}" / "policies"
    return {p.name: load_file(str(p / "model.safetensors")) for p in sorted(policies.iterdir())}


def _rows(out: Path) -> list[dict[str, float]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def _cut_after_step_1(src: Path, dest: Path) -> Path:
    """A copy of a finished 2-step run as if it had been killed after step 1's checkpoint."""
    shutil.copytree(src, dest)
    shutil.rmtree(dest / "checkpoints" / "step-000002")
    (dest / "checkpoints" / "latest").write_text("step-000001")
    return dest


def _assert_close(
    a: dict[str, dict[str, torch.Tensor]], b: dict[str, dict[str, torch.Tensor]]
) -> None:
    assert set(a) == set(b) == {"left", "right"}
    for agent in a:
        assert set(a[agent]) == set(b[agent])
        for name, tensor in a[agent].items():
            torch.testing.assert_close(b[agent][name], tensor, atol=1e-4, rtol=1e-3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same 2-step run in one process and on 2 torchrun ranks."""
    tmp = tmp_path_factory.mktemp("sharded-train")
    single, sharded = tmp / "single", tmp / "sharded"
    assert main([*RUN, "--trainer.output_dir", str(single)]) == 0
    proc = _torchrun(sharded)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return single, sharded


@pytest.mark.slow
def test_torchrun_two_ranks_train_like_one_process(runs: tuple[Path, Path]) -> None:
    single, sharded = runs
    # Same weights at the end: the same samples (rank 0 samples with the synced weights and
    # the same seeds) and the same update maths (sliced per rank, normalisers summed). AdamW
    # turns the sums' different rounding on near-zero gradients into ~lr-sized steps on a few
    # elements, hence atol 1e-4; a missed weight sync changes the samples and much more.
    _assert_close(_weights(single), _weights(sharded))
    # The run learned (non-zero gradients) and logged as one process would, on rank 0 only.
    rows_one, rows_two = _rows(single), _rows(sharded)
    assert [r["step"] for r in rows_two] == [1, 2]
    for a, b in zip(rows_one, rows_two):
        assert a["grad_norm"] > 0
        for key in ("reward", "loss", "grad_norm", "kl", "clip_frac", "eval/reward"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
    assert (sharded / "config.yaml").is_file()
    ckpt = sharded / "checkpoints" / "step-000002"
    meta = json.loads((ckpt / "trainer.json").read_text())
    assert meta["sharded_learner"] == 2 and meta["policies"] == {"left": "left", "right": "right"}
    # Every rank's DCP shards are in the checkpoint, listed and checksummed with the rest.
    for agent in ("left", "right"):
        assert (ckpt / "sharded" / agent / ".metadata").is_file()
        shards = {f for f in meta["sha256"] if f.startswith(f"sharded/{agent}/")}
        assert {f"sharded/{agent}/__0_0.distcp", f"sharded/{agent}/__1_0.distcp"} <= shards


@pytest.mark.slow
def test_torchrun_resume_on_two_ranks_continues_bit_identically(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    _, sharded = runs
    cut = _cut_after_step_1(sharded, tmp_path / "cut")
    proc = _torchrun(cut, "--trainer.resume", "true")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming from step 1" in proc.stdout
    # The optimizer moments, the scheduler, the RNG and the weights came back exactly.
    whole, resumed = _weights(sharded), _weights(cut)
    for agent in whole:
        for name, tensor in whole[agent].items():
            assert torch.equal(resumed[agent][name], tensor), (agent, name)
    assert _rows(cut) == _rows(sharded)


@pytest.mark.slow
def test_sharded_checkpoint_resumes_in_one_process(runs: tuple[Path, Path], tmp_path: Path) -> None:
    single, sharded = runs
    cut = _cut_after_step_1(sharded, tmp_path / "cut")
    assert main([*RUN, "--trainer.output_dir", str(cut), "--trainer.resume", "true"]) == 0
    # The same continuation as the uninterrupted runs, to the float tolerance of 2 vs 1 ranks.
    _assert_close(_weights(single), _weights(cut))
    _assert_close(_weights(sharded), _weights(cut))
    rows_two, rows_cut = _rows(sharded), _rows(cut)
    assert [r["step"] for r in rows_cut] == [1, 2]
    assert rows_cut[0] == rows_two[0]  # kept from the sharded run
    for key in ("reward", "loss", "grad_norm", "kl", "eval/reward"):
        if key in rows_two[1]:
            assert rows_cut[1][key] == pytest.approx(rows_two[1][key], rel=1e-4, abs=1e-6), key


def _assert_same_continuation(
    whole: Path, resumed: Path, *others: Path, proc: subprocess.CompletedProcess[str]
) -> None:
    """``resumed`` (a run cut after step 1 and resumed) ended as the uninterrupted ``whole``
    (and ``others``) did, to float tolerance, and logged step 2 as ``whole`` did."""
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming from step 1" in proc.stdout
    for run in (whole, *others):
        _assert_close(_weights(run), _weights(resumed))
    rows_whole, rows_cut = _rows(whole), _rows(resumed)
    assert [r["step"] for r in rows_cut] == [1, 2]
    assert rows_cut[0] == rows_whole[0]  # kept from the cut run
    for key in ("reward", "loss", "grad_norm", "kl", "eval/reward"):
        if key in rows_whole[1]:
            assert rows_cut[1][key] == pytest.approx(rows_whole[1][key], rel=1e-4, abs=1e-6), key


@pytest.mark.slow
def test_sharded_checkpoint_resumes_on_three_ranks(runs: tuple[Path, Path], tmp_path: Path) -> None:
    # 2 -> 3: DCP re-slices the 2 ranks' shards for 3 (uneven: e.g. 64 rows in three).
    single, sharded = runs
    cut = _cut_after_step_1(sharded, tmp_path / "cut")
    proc = _torchrun(cut, "--trainer.resume", "true", ranks=3)
    _assert_same_continuation(sharded, cut, single, proc=proc)
    meta = json.loads((cut / "checkpoints" / "step-000002" / "trainer.json").read_text())
    assert meta["sharded_learner"] == 3 and "sharded/left/__2_0.distcp" in meta["sha256"]


@pytest.mark.slow
def test_single_process_checkpoint_resumes_on_two_ranks(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    # 1 -> 2: no DCP folder; rank 0 reads the consolidated weights and the plain optimizer
    # state and sends them to the ranks (set_model/optimizer_state_dict from rank 0).
    single, sharded = runs
    cut = _cut_after_step_1(single, tmp_path / "cut")
    assert not (cut / "checkpoints" / "step-000001" / "sharded").exists()
    proc = _torchrun(cut, "--trainer.resume", "true")
    _assert_same_continuation(single, cut, sharded, proc=proc)


@pytest.mark.slow
def test_sharded_run_consolidated_weights_evaluate_as_hf(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    reports = []
    for run in runs:  # one process, then 2 ranks: the same weights play the same episodes
        ckpt = run / "checkpoints" / "step-000002" / "policies"
        out = tmp_path / f"{run.name}.json"
        argv = ["eval", "--env", "coordination-v0", "--samples", "2", "--no-progress"]
        argv += ["--agent", f"left=hf:{ckpt / 'left'}", "--agent", f"right=hf:{ckpt / 'right'}"]
        assert main([*argv, "--output", str(out)]) == 0
        reports.append(json.loads(out.read_text())["benchmarks"]["coordination-v0"])
    assert reports[0]["num_problems"] == reports[1]["num_problems"] > 0
    for key in ("mean_reward", "pass@1"):
        assert reports[1][key] == pytest.approx(reports[0][key]), key


def _adapters(out: Path) -> dict[str, dict[str, torch.Tensor]]:
    policies = out / "checkpoints" / "step-000002" / "policies"
    return {
        p.name: load_file(str(p / "adapter_model.safetensors")) for p in sorted(policies.iterdir())
    }


EMBEDDING_COPY = "base_model.model.model.embed_tokens.weight"
"""The toy preset adapters' trained copy of the embedding, in peft's adapter file."""


def _adapter_logprobs(out: Path, agent: str) -> list[torch.Tensor]:
    """Log-probs of fixed completions under ``agent``'s consolidated adapter, loaded by peft
    over the run's (warmed-up) base; checks every saved entry was loaded."""
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.policies.sharded import full_weights

    adapter = out / "checkpoints" / "step-000002" / "policies" / agent
    loaded = HFPolicy(str(out / "models" / "lora-base-warmed-up"), adapter=str(adapter))
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    held = dict(full_weights(loaded, adapter_only=True))
    assert set(held) == set(saved)
    for name, tensor in saved.items():
        assert torch.equal(held[name], tensor), name
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 400, (4 + i,), generator=gen).tolist() for i in range(3)]
    completions = [torch.randint(10, 400, (3 + i,), generator=gen).tolist() for i in range(3)]
    with torch.no_grad():
        return loaded.sequence_logprobs(prompts, completions)


@pytest.mark.slow
def test_torchrun_lora_adapters_train_like_one_process(tmp_path: Path) -> None:
    # Two adapters over one base, sharded together, each with the toy preset's trained copy of
    # the (tied) embedding; rank 0 samples with a copy of the base whose adapters, embedding
    # copies included, are refreshed after every update.
    import torch.distributed.checkpoint as dcp

    lora = ["--policies.lora", "true", "--policies.lora_rank", "4"]
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    assert main([*RUN, *lora, "--trainer.output_dir", str(single)]) == 0
    proc = _torchrun(sharded, *lora)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    one, two = _adapters(single), _adapters(sharded)
    assert set(one) == set(two) == {"left", "right"}
    base = load_file(str(single / "models" / "lora-base-warmed-up" / "model.safetensors"))
    for agent in one:
        assert set(one[agent]) == set(two[agent]) and EMBEDDING_COPY in one[agent]
        # The copy trained: a sampler or a saved adapter without it would not match.
        moved = one[agent][EMBEDDING_COPY] - base["model.embed_tokens.weight"]
        assert float(moved.abs().max()) > 1e-3
        # atol: AdamW's normalised steps (lr 1e-2 here) turn the ranks' different rounding of
        # near-zero gradients into larger moves of a few elements (measured: 4 of 1024 of
        # one matrix up to 1.8e-4, every other element within 2e-5); a sampler that missed
        # the embedding copy moved 99.6% of it by up to 4e-2.
        for name, tensor in one[agent].items():
            torch.testing.assert_close(two[agent][name], tensor, atol=5e-4, rtol=1e-3)
        # The consolidated adapter loads with peft and scores as the one-process adapter.
        for got, want in zip(_adapter_logprobs(sharded, agent), _adapter_logprobs(single, agent)):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        # The DCP checkpoint holds the copy too (what a resume reads).
        ckpt = sharded / "checkpoints" / "step-000002" / "sharded" / agent
        keys = dcp.FileSystemReader(str(ckpt)).read_metadata().state_dict_metadata
        assert f"model.base_model.model.model.embed_tokens.modules_to_save.{agent}.weight" in keys
    rows_one, rows_two = _rows(single), _rows(sharded)
    assert [r["step"] for r in rows_two] == [1, 2]
    for a, b in zip(rows_one, rows_two):
        assert a["grad_norm"] > 0
        for key in ("reward", "loss", "grad_norm", "eval/reward"):
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


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
        # Before any rank waits for the others: without vLLM, a frozen vllm: agent cannot be.
        ("--policies.frozen.right", "vllm:/nowhere", "vllm: agents ['right'] need vLLM"),
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
