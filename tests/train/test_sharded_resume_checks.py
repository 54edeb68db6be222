"""A sharded learner's checkpoint markers, checked without launching ranks: ``algorithm.pt``
naming a DCP folder that is not there is a corrupt checkpoint; a sharded policy given a
single-process run's optimizer state without the weights to load with it refuses it in one
line; that state is renamed by parameter for torch's loader, and one of another optimizer is
a corrupt checkpoint; a :class:`LearnerState` saved and loaded in one process keeps DCP's
``model`` / ``optimizer`` / ``scheduler`` top-level keys (those of earlier checkpoints).
(``test_sharded_train.py`` resumes a single-process run on 2 ranks.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from llm_marl.distributed.sharded_learner import _named_optimizer_state
from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.policies.sharded import DataParallel
from llm_marl.train.checkpoint import DCP_MARKER, _resolve_dcp, dcp_path
from llm_marl.train.sharded_checkpoint import LearnerState, restore_optimizers


def test_marker_is_resolved_inside_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "sharded" / "left").mkdir(parents=True)
    (tmp_path / "sharded" / "left" / ".metadata").write_bytes(b"x")
    plain = {"state": {}, "param_groups": []}
    state = {"optimizers": {"left": {DCP_MARKER: "sharded/left"}, "right": plain}}
    _resolve_dcp(tmp_path, state)
    assert dcp_path(state["optimizers"]["left"]) == str(tmp_path / "sharded" / "left")
    assert state["optimizers"]["right"] is plain and dcp_path(plain) is None


@pytest.mark.parametrize("rel", ["sharded/missing", "../elsewhere", "/abs/path"])
def test_marker_naming_no_dcp_folder_is_corrupt(tmp_path: Path, rel: str) -> None:
    state = {"optimizers": {"left": {DCP_MARKER: rel}}}
    with pytest.raises(CheckpointError, match="sharded optimizer"):
        _resolve_dcp(tmp_path, state)


def test_sharded_policy_refuses_a_single_process_optimizer_state() -> None:
    policy = SimpleNamespace(data_parallel=DataParallel(0, 2))
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])
    algorithm = SimpleNamespace(groups={"left": (policy, ["left"])}, optimizers={"left": optimizer})
    state = {"optimizers": {"left": optimizer.state_dict()}}
    with pytest.raises(ConfigError, match="single-process run") as info:
        restore_optimizers(algorithm, state)
    assert "\n" not in str(info.value) and "world_size 1" in str(info.value)


def test_plain_optimizer_state_is_renamed_by_parameter() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    policy = SimpleNamespace(model=model, name="left")
    head, body = list(model[1].parameters()), list(model[0].parameters())
    optimizer = torch.optim.AdamW([{"params": head}, {"params": body, "lr": 0.5}])
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    saved = optimizer.state_dict()
    named = _named_optimizer_state(policy, optimizer, saved)
    assert [g["params"] for g in named["param_groups"]] == [
        ["1.weight", "1.bias"],
        ["0.weight", "0.bias"],
    ]
    assert named["param_groups"][1]["lr"] == 0.5
    assert named["state"]["0.bias"] is saved["state"][3]
    other = torch.optim.AdamW([{"params": head + body}])
    with pytest.raises(CheckpointError, match=r"sizes \[2, 2\].*\[4\]"):
        _named_optimizer_state(policy, other, saved)


def _learner(seed: int) -> LearnerState:
    """A one-process learner whose first layer is frozen (as a LoRA policy's base), one step in."""
    from llm_marl.algos.update import PGConfig, make_optimizer

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    model[0].requires_grad_(False)
    optimizer, scheduler = make_optimizer(model.parameters(), PGConfig(lr=0.1, warmup_steps=3))
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    scheduler.step()
    return LearnerState(SimpleNamespace(model=model), optimizer, scheduler)


def test_learner_state_saves_and_loads_under_the_top_level_keys(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.stateful import Stateful

    saved, resumed = _learner(0), _learner(1)
    assert isinstance(saved, Stateful)
    saved.save(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt.tmp").exists()
    keys = dcp.FileSystemReader(str(tmp_path / "ckpt")).read_metadata().state_dict_metadata
    assert {k.split(".")[0] for k in keys} == {"model", "optimizer", "scheduler"}
    assert "model.1.weight" in keys and "model.0.weight" not in keys  # frozen: not saved
    assert "optimizer.state.1.weight.exp_avg" in keys and "scheduler.last_epoch" in keys
    frozen = resumed.policy.model[0].weight.clone()
    resumed.scheduler.step()
    resumed.load(tmp_path / "ckpt")
    model, expected = resumed.policy.model, saved.policy.model
    assert torch.equal(model[1].weight, expected[1].weight)
    assert torch.equal(model[0].weight, frozen)  # not in the checkpoint: left as it was
    moments = [s["exp_avg"] for s in resumed.optimizer.state_dict()["state"].values()]
    want = [s["exp_avg"] for s in saved.optimizer.state_dict()["state"].values()]
    assert len(moments) == 2 and all(torch.equal(a, b) for a, b in zip(moments, want))
    assert resumed.scheduler.state_dict() == saved.scheduler.state_dict()
    with pytest.raises(CheckpointError, match="no .metadata"):
        resumed.load(tmp_path)
