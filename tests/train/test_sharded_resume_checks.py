"""A sharded learner's checkpoint markers, checked without launching ranks: ``algorithm.pt``
naming a DCP folder that is not there is a corrupt checkpoint, and a sharded policy refuses a
single-process run's optimizer state in one line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.policies.sharded import DataParallel
from llm_marl.train.checkpoint import DCP_MARKER, _resolve_dcp, dcp_path
from llm_marl.train.sharded_checkpoint import restore_optimizers


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
