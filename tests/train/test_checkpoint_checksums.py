"""Damage of the right size is caught at load (issue 28, item 7).

Every file of a checkpoint has its SHA-256 in trainer.json; a file whose bytes changed but not
its size (a flipped bit, NaN written over an optimizer moment) is corrupt: CheckpointError
naming the file, and resume sets the checkpoint aside as corrupt-step-N and uses the previous
one. An optimizer state holding NaN/inf is corrupt too, even with no checksum to compare.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from llm_marl.errors import CheckpointError
from llm_marl.train.checkpoint import load_checkpoint, resume_latest, save_checkpoint

from .conftest import BigramPolicy

ONES = torch.ones(16).numpy().tobytes()


def _state(fill: float = 1.0) -> dict:
    return {
        "updates": 2,
        "optimizers": {"a": {"state": {0: {"exp_avg_sq": torch.full((16,), fill)}}}},
    }


def _two(tmp_path):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy(seed=1)}, _state(), keep=None)
    save_checkpoint(tmp_path, 2, {"a": BigramPolicy(seed=2)}, _state(), keep=None)
    return tmp_path / "checkpoints" / "step-000002"


def _nan_over_ones(path):
    data = path.read_bytes()
    assert ONES in data
    path.write_bytes(data.replace(ONES, torch.full((16,), math.nan).numpy().tobytes()))


def _flip_last_tensor_byte(path):
    data = bytearray(path.read_bytes())
    # The table's float data sits in data/0 of the zip; flip a bit of its first value.
    start = data.find(b"data/0")
    i = data.find(b"\x00", start + 40) if start >= 0 else len(data) // 2
    data[i + 8] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("file", "damage"),
    [
        ("algorithm.pt", _nan_over_ones),
        ("policies/a/table.pt", _flip_last_tensor_byte),
        ("rng.pt", _flip_last_tensor_byte),
    ],
    ids=["optimizer-moment-nan", "weights-bit", "rng-bit"],
)
def test_same_size_damage_is_corrupt_and_resume_falls_back(tmp_path, file, damage):
    ckpt = _two(tmp_path)
    size = (ckpt / file).stat().st_size
    damage(ckpt / file)
    assert (ckpt / file).stat().st_size == size, "the damage must keep the size"
    with pytest.raises(CheckpointError, match=rf"{file}.*checksum"):
        load_checkpoint(ckpt, {"a": BigramPolicy()})
    policy = BigramPolicy()
    with pytest.warns(UserWarning, match="previous"):
        path, step, _, _ = resume_latest(tmp_path, {"a": policy})
    assert step == 1 and (tmp_path / "checkpoints" / "corrupt-step-000002").is_dir()
    assert torch.equal(policy.table, BigramPolicy(seed=1).table)


@pytest.mark.parametrize("fill", [math.nan, math.inf, -math.inf])
def test_a_non_finite_optimizer_state_is_corrupt_even_without_checksums(tmp_path, fill):
    """A checkpoint of an older version (no checksums) whose optimizer state holds NaN/inf."""
    ckpt = _two(tmp_path)
    torch.save(_state(fill), ckpt / "algorithm.pt")
    meta = json.loads((ckpt / "trainer.json").read_text())
    meta.pop("sha256")
    meta["files"]["algorithm.pt"] = (ckpt / "algorithm.pt").stat().st_size
    (ckpt / "trainer.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"algorithm.pt.*(not finite|NaN)"):
        load_checkpoint(ckpt, {"a": BigramPolicy()})


def test_an_intact_checkpoint_still_loads(tmp_path):
    ckpt = _two(tmp_path)
    policy = BigramPolicy()
    step, state, meta = load_checkpoint(ckpt, {"a": policy})
    assert step == 2 and torch.equal(policy.table, BigramPolicy(seed=2).table)
    assert set(meta["sha256"]) == set(meta["files"])
