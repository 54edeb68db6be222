"""A checkpoint that does not fit the run is a configuration error, not corruption; a fresh run
never mixes with (or deletes) an earlier run's outputs; a resumed run uses the configured
optimizer settings; a checkpoint missing a required file is incomplete."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from llm_marl.algos import MAGRPO, MAGRPOConfig
from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import HFPolicy
from llm_marl.train import Trainer, TrainerConfig
from llm_marl.train.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    resume_latest,
    save_checkpoint,
)
from llm_marl.train.logging import read_jsonl

from .conftest import BigramPolicy


def _listing(out):
    return sorted(p.name for p in (out / "checkpoints").iterdir())


def _without_file_list(ckpt):
    """Make ``ckpt`` look like one written before trainer.json listed its files."""
    meta_file = ckpt / "trainer.json"
    meta = json.loads(meta_file.read_text())
    meta.pop("files", None)
    meta.pop("sha256", None)
    meta_file.write_text(json.dumps(meta))


# ---------------------------------------------------------------- mismatch: error, nothing moved


def test_a_shared_policy_resumed_as_two_policies_is_a_config_error(tmp_path):
    shared = BigramPolicy(seed=1)
    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"a": shared, "b": shared}, {"updates": step})
    before = _listing(tmp_path)
    with pytest.raises(ConfigError, match=r"'a' had policy 'a\+b' then, 'a' here") as info:
        resume_latest(tmp_path, {"a": BigramPolicy(), "b": BigramPolicy()})
    assert isinstance(info.value, ValueError)
    assert _listing(tmp_path) == before  # nothing renamed corrupt-*, nothing deleted
    again = BigramPolicy()
    path, step, _, _ = resume_latest(tmp_path, {"a": again, "b": again})
    assert path.name == "step-000002" and step == 2
    assert torch.equal(again.table, shared.table)


@pytest.mark.parametrize("listed", [True, False], ids=["file-list", "old-format"])
def test_a_model_of_another_shape_is_a_config_error(tmp_path, listed):
    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"a": BigramPolicy(vocab=8, seed=step)}, {}, keep=None)
    if not listed:
        for ckpt in (tmp_path / "checkpoints").glob("step-*"):
            _without_file_list(ckpt)
    before = _listing(tmp_path)
    with pytest.raises(ConfigError) as info:
        resume_latest(tmp_path, {"a": BigramPolicy(vocab=16)})
    message = str(info.value)
    assert "step-000002" in message and "policies/a" in message and "does not fit" in message
    assert "No checkpoint was changed" in message
    assert _listing(tmp_path) == before
    _, step, _, _ = resume_latest(tmp_path, {"a": BigramPolicy(vocab=8)})
    assert step == 2


def test_a_real_model_of_another_hidden_size_is_a_config_error(tmp_path, algo_lm_path):
    from llm_marl.policies.tiny import build_tiny_lm

    ckpt = save_checkpoint(tmp_path, 1, {"a": HFPolicy(algo_lm_path, trainable=True)}, {})
    wider = build_tiny_lm(tmp_path / "wider", seed=0, num_layers=1, hidden_size=128)
    with pytest.raises(ConfigError, match="size mismatch"):
        load_checkpoint(ckpt, {"a": HFPolicy(wider, trainable=True)})
    assert _listing(tmp_path) == ["latest", "step-000001"]
    load_checkpoint(ckpt, {"a": HFPolicy(algo_lm_path, trainable=True)})


def test_a_file_damaged_in_place_is_still_corrupt(tmp_path):
    # Same size as saved: its checksum tells it is damage (set aside, fall back), not a
    # mismatch.
    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"a": BigramPolicy(seed=step)}, {}, keep=None)
    table = tmp_path / "checkpoints" / "step-000002" / "policies" / "a" / "table.pt"
    table.write_bytes(b"\x00" * table.stat().st_size)
    policy = BigramPolicy()
    with pytest.warns(UserWarning, match=r"policies/a/table.pt does not match its checksum"):
        _, step, _, _ = resume_latest(tmp_path, {"a": policy})
    assert step == 1 and torch.equal(policy.table, BigramPolicy(seed=1).table)
    assert _listing(tmp_path) == ["corrupt-step-000002", "latest", "step-000001"]


# ---------------------------------------------------------------- a missing required file


@pytest.mark.parametrize("listed", [True, False], ids=["file-list", "old-format"])
@pytest.mark.parametrize("restore_rng", [True, False])
def test_a_checkpoint_without_rng_state_is_incomplete(tmp_path, listed, restore_rng):
    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"a": BigramPolicy(seed=step)}, {}, keep=None)
    ckpt = tmp_path / "checkpoints" / "step-000002"
    if not listed:
        _without_file_list(ckpt)
    (ckpt / "rng.pt").unlink()
    with pytest.raises(CheckpointError, match=r"step-000002/rng.pt is missing"):
        load_checkpoint(ckpt, {"a": BigramPolicy()}, restore_rng=restore_rng)
    with pytest.warns(UserWarning, match="rng.pt is missing"):
        _, step, _, _ = resume_latest(tmp_path, {"a": BigramPolicy()})
    assert step == 1


def test_resume_refuses_when_only_corrupt_checkpoints_are_left(tmp_path):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy()}, {})
    (tmp_path / "checkpoints" / "step-000001" / "algorithm.pt").write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="can be loaded"):
        resume_latest(tmp_path, {"a": BigramPolicy()})
    # The next resume must not take "no checkpoint" for a fresh start.
    with pytest.raises(CheckpointError, match="corrupt-step-000001.*set aside as corrupt"):
        resume_latest(tmp_path, {"a": BigramPolicy()})
    assert _listing(tmp_path) == ["corrupt-step-000001", "latest"]


# ---------------------------------------------------------------- resumed optimizer settings


def _updated_state(config: MAGRPOConfig):
    """An algorithm state after one optimizer and scheduler step (the warmup under way)."""
    algo = MAGRPO(config)
    algo.setup({"a": BigramPolicy(seed=1)}, {})
    (table,) = algo.groups["a"][0].parameters()
    table.grad = torch.ones_like(table)
    algo.optimizers["a"].step()
    algo.schedulers["a"].step()
    algo.updates = 1
    return algo.state_dict()


def test_resume_applies_the_configured_optimizer_settings(recwarn):
    state = _updated_state(MAGRPOConfig(lr=1e-2, warmup_steps=4))
    changed = MAGRPOConfig(lr=1e-4, weight_decay=0.1, betas=(0.5, 0.6), adam_eps=1e-6)
    changed.warmup_steps = 4
    algo = MAGRPO(changed)
    algo.setup({"a": BigramPolicy(seed=1)}, {})
    with pytest.warns(UserWarning, match=r"lr 0.01 -> 0.0001.*weight_decay 0 -> 0.1") as seen:
        algo.load_state_dict(state)
    assert len([w for w in seen if "optimizer settings" in str(w.message)]) == 1
    (group,) = algo.optimizers["a"].param_groups
    assert group["weight_decay"] == 0.1 and tuple(group["betas"]) == (0.5, 0.6)
    assert group["eps"] == 1e-6 and group["initial_lr"] == 1e-4
    # The warmup keeps its position (2 of 4) at the new rate, and goes on from there.
    assert group["lr"] == pytest.approx(1e-4 * 2 / 4)
    assert algo.schedulers["a"].get_last_lr() == pytest.approx([1e-4 * 2 / 4])
    # The moments and step count are the checkpoint's.
    saved = state["optimizers"]["a"]["state"][0]
    loaded = algo.optimizers["a"].state_dict()["state"][0]
    assert loaded["step"].item() == 1 and torch.equal(loaded["exp_avg"], saved["exp_avg"])
    assert algo.updates == 1
    algo.optimizers["a"].step()
    algo.schedulers["a"].step()
    assert group["lr"] == pytest.approx(1e-4 * 3 / 4)


def test_resume_with_the_same_settings_restores_the_state_exactly(recwarn):
    config = MAGRPOConfig(lr=1e-2, warmup_steps=4, weight_decay=0.01)
    state = _updated_state(config)
    algo = MAGRPO(config)
    algo.setup({"a": BigramPolicy(seed=1)}, {})
    algo.load_state_dict(state)
    assert not [w for w in recwarn if "optimizer settings" in str(w.message)]
    assert (
        algo.optimizers["a"].state_dict()["param_groups"]
        == state["optimizers"]["a"]["param_groups"]
    )
    assert algo.schedulers["a"].state_dict() == state["schedulers"]["a"]


# ---------------------------------------------------------------- the Trainer


FAST = SamplingParams(max_new_tokens=3, temperature=1.0)


def _trainer(out, policies, **kw):
    cfg = TrainerConfig(
        env="coordination-v0",
        steps=kw.pop("steps", 2),
        tasks_per_step=2,
        group_size=4,
        sampling=FAST,
        output_dir=str(out),
        progress=False,
        plot=False,
        console=False,
        eval_at_start=False,
        **kw,
    )
    # coordination-v0 has no split, so the Trainer builds quietly (no held-out advice).
    return Trainer(MAGRPO(MAGRPOConfig(lr=1e-3)), policies, cfg)


def _pair(path):
    return {
        "left": HFPolicy(path, trainable=True, name="left", seed=0),
        "right": HFPolicy(path, trainable=True, name="right", seed=1),
    }


@pytest.mark.slow  # 10 s in the fast loop at load 17 (#22)
def test_a_fresh_run_moves_an_earlier_run_aside(tmp_path, algo_lm_path):
    out = tmp_path / "run"
    _trainer(out, _pair(algo_lm_path), steps=3, save_every=1).train()
    old_rows = read_jsonl(out / "metrics.jsonl")
    assert _listing(out) == ["latest", "step-000002", "step-000003"]

    with pytest.warns(UserWarning, match=r"earlier run's outputs.*step-000003.*previous-runs"):
        _trainer(out, _pair(algo_lm_path), steps=1, seed=7).train()
    # Only the new run is where a resume looks; the old one is kept whole, apart.
    assert _listing(out) == ["latest", "step-000001"]
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [1]
    first = out / "previous-runs" / "run-1"
    assert _listing(first) == ["latest", "step-000002", "step-000003"]
    assert read_jsonl(first / "metrics.jsonl") == old_rows

    with pytest.warns(UserWarning, match="previous-runs/run-2"):
        _trainer(out, _pair(algo_lm_path), steps=1).train()
    assert _listing(first) == ["latest", "step-000002", "step-000003"]  # never merged into
    assert _listing(out / "previous-runs" / "run-2") == ["latest", "step-000001"]


def test_a_mistaken_resume_leaves_checkpoints_and_metrics_alone(tmp_path, algo_lm_path):
    out = tmp_path / "run"
    shared = HFPolicy(algo_lm_path, trainable=True, name="shared", seed=0)
    _trainer(out, {"left": shared, "right": shared}, save_every=1).train()
    metrics = (out / "metrics.jsonl").read_bytes()
    before = _listing(out)
    mistaken = _trainer(out, _pair(algo_lm_path), steps=3, resume=True)
    with pytest.raises(ConfigError, match="same sharing of policy objects"):
        mistaken.train()
    assert _listing(out) == before and (out / "metrics.jsonl").read_bytes() == metrics
    shared = HFPolicy(algo_lm_path, trainable=True, name="shared", seed=0)
    result = _trainer(out, {"left": shared, "right": shared}, steps=3, resume=True).train()
    assert result.start_step == 2 and [r["step"] for r in result.history] == [1, 2, 3]


def test_resume_with_only_corrupt_checkpoints_keeps_the_metrics(tmp_path, algo_lm_path):
    out = tmp_path / "run"
    _trainer(out, _pair(algo_lm_path), steps=1).train()
    metrics = (out / "metrics.jsonl").read_bytes()
    ckpt = latest_checkpoint(out)
    shutil.move(ckpt, ckpt.with_name(f"corrupt-{ckpt.name}"))  # as an earlier resume did
    with pytest.raises(CheckpointError, match="set aside as corrupt"):
        _trainer(out, _pair(algo_lm_path), steps=2, resume=True).train()
    assert (out / "metrics.jsonl").read_bytes() == metrics
    assert _listing(out) == ["corrupt-step-000001", "latest"]
