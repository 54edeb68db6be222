"""Checkpoints are atomic, pruned, and refuse to load into a different team."""

from __future__ import annotations

import pytest
import torch

from llm_marl.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

from .conftest import BigramPolicy


class _Exploding(BigramPolicy):
    def save(self, path: str) -> None:
        super().save(path)
        raise OSError("disk full")


def test_a_crash_while_saving_leaves_the_previous_checkpoint_intact(tmp_path):
    policy = BigramPolicy()
    save_checkpoint(tmp_path, 1, {"a": policy}, {"updates": 1})
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, {"a": _Exploding()}, {"updates": 2})
    latest = latest_checkpoint(tmp_path)
    assert latest.name == "step-000001"
    # No half-written checkpoint is left where a later run could pick it up.
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest",
        "step-000001",
    ]


def test_weights_optimizer_state_and_rng_round_trip(tmp_path):
    policy = BigramPolicy(seed=1)
    torch.manual_seed(123)
    save_checkpoint(tmp_path, 7, {"a": policy, "b": policy}, {"updates": 7, "x": torch.ones(2)})
    expected = torch.rand(3)
    other = BigramPolicy(seed=2)
    step, state, meta = load_checkpoint(latest_checkpoint(tmp_path), {"a": other, "b": other})
    assert step == 7 and state["updates"] == 7 and torch.equal(state["x"], torch.ones(2))
    assert meta["policies"] == {"a": "a+b", "b": "a+b"}  # one shared policy, saved once
    assert torch.equal(other.table, policy.table)
    assert torch.equal(torch.rand(3), expected)  # the RNG continues where it was saved


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    policy = BigramPolicy()
    for step in range(1, 5):
        save_checkpoint(tmp_path, step, {"a": policy}, {}, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*"))
    assert names == ["step-000003", "step-000004"]


def test_loading_into_a_different_team_is_refused(tmp_path):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy()}, {})
    with pytest.raises(ValueError, match="resume with the same agents"):
        load_checkpoint(latest_checkpoint(tmp_path), {"b": BigramPolicy()})
    assert latest_checkpoint(tmp_path / "nowhere") is None
