"""Corrupt, torn and unwritable checkpoints: a CheckpointError naming the checkpoint and file,
resume falls back to the previous complete checkpoint, torn temp dirs are removed, and a full
disk says "no space left" and where."""

from __future__ import annotations

import errno
import json
import pickle
import random

import pytest
import torch

from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.policies.hf import HFPolicy
from llm_marl.train.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    resume_latest,
    save_checkpoint,
)

from .conftest import BigramPolicy


def _two_checkpoints(tmp_path):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy(seed=1)}, {"updates": 1}, keep=None)
    save_checkpoint(tmp_path, 2, {"a": BigramPolicy(seed=2)}, {"updates": 2}, keep=None)
    return tmp_path / "checkpoints" / "step-000002"


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path):
    path.write_bytes(b"\x00\xff garbage \x13" * 50)


def _empty(path):
    path.write_bytes(b"")


def _pickle(obj):
    def write(path):
        path.write_bytes(pickle.dumps(obj))

    return write


def _torch_obj(obj):
    def write(path):
        torch.save(obj, path)

    return write


def _text(text):
    def write(path):
        path.write_text(text, encoding="utf-8")

    return write


def _bytes(data):
    def write(path):
        path.write_bytes(data)

    return write


CORRUPTIONS = {
    # (file, how, words the message must contain)
    "weights-truncated": ("policies/a/table.pt", _truncate, "policies/a"),
    "weights-garbage": ("policies/a/table.pt", _garbage, "policies/a"),
    "weights-missing": ("policies/a/table.pt", lambda p: p.unlink(), "policies/a"),
    "algorithm-truncated": ("algorithm.pt", _truncate, "algorithm.pt"),
    "algorithm-garbage": ("algorithm.pt", _garbage, "algorithm.pt"),
    "algorithm-empty": ("algorithm.pt", _empty, "algorithm.pt"),
    "algorithm-not-a-dict": ("algorithm.pt", _torch_obj([1, 2, 3]), "algorithm.pt"),
    "algorithm-missing": ("algorithm.pt", lambda p: p.unlink(), "algorithm.pt"),
    "rng-truncated": ("rng.pt", _truncate, "rng.pt"),
    "rng-garbage": ("rng.pt", _garbage, "rng.pt"),
    "rng-not-a-dict": ("rng.pt", _torch_obj("hello"), "rng.pt"),
    "rng-no-numpy": ("rng.pt", _torch_obj({"python": random.getstate(), "torch": 1}), "rng.pt"),
    "rng-bad-python": (
        "rng.pt",
        _torch_obj({"python": (3, (1, 2), None), "numpy": None, "torch": None}),
        "rng.pt",
    ),
    "rng-bad-torch": (
        "rng.pt",
        lambda p: torch.save({**torch.load(p, weights_only=False), "torch": torch.ones(3)}, p),
        "rng.pt",
    ),
    "rng-bad-numpy": (
        "rng.pt",
        lambda p: torch.save({**torch.load(p, weights_only=False), "numpy": ("MT", [1])}, p),
        "rng.pt",
    ),
    "json-torn": ("trainer.json", lambda p: p.write_text(p.read_text()[:-9]), "trainer.json"),
    "json-garbage": ("trainer.json", _bytes(b"\xff\xfe\x00{"), "trainer.json"),
    "json-a-list": ("trainer.json", _text("[1, 2]"), "trainer.json"),
    "json-step-string": ("trainer.json", _text('{"step": "7", "policies": {}}'), "trainer.json"),
    "json-step-negative": ("trainer.json", _text('{"step": -1, "policies": {}}'), "trainer.json"),
    "json-deep": ("trainer.json", _text("[" * 100_000 + "]" * 100_000), "trainer.json"),
    "json-key-escapes": (
        "trainer.json",
        _text('{"step": 2, "policies": {"a": "../../elsewhere"}}'),
        "trainer.json",
    ),
    "json-policies-not-a-map": (
        "trainer.json",
        _text('{"step": 2, "policies": ["a"]}'),
        "trainer.json",
    ),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_corrupt_file_names_the_checkpoint_and_the_file(tmp_path, name):
    file, corrupt, words = CORRUPTIONS[name]
    ckpt = _two_checkpoints(tmp_path)
    corrupt(ckpt / file)
    torch.manual_seed(5)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(ckpt, {"a": BigramPolicy()})
    message = str(info.value)
    assert str(ckpt) in message and words in message and "Delete" in message, message
    if not name.startswith("weights"):  # checked before anything changed: the RNG too
        torch.manual_seed(5)
        expected = torch.rand(2)
        torch.manual_seed(5)
        with pytest.raises(CheckpointError):
            load_checkpoint(ckpt, {"a": BigramPolicy()})
        assert torch.equal(torch.rand(2), expected)


@pytest.mark.parametrize("name", ["weights-truncated", "rng-garbage", "json-torn"])
def test_resume_falls_back_to_the_previous_checkpoint(tmp_path, name):
    file, corrupt, _ = CORRUPTIONS[name]
    ckpt = _two_checkpoints(tmp_path)
    corrupt(ckpt / file)
    policy = BigramPolicy()
    with pytest.warns(UserWarning, match=rf"step-000002.*{file.split('/')[0]}.*previous"):
        path, step, state, _ = resume_latest(tmp_path, {"a": policy})
    assert path.name == "step-000001" and step == 1 and state == {"updates": 1}
    assert torch.equal(policy.table, BigramPolicy(seed=1).table)
    # The corrupt one is set aside (kept as evidence), so it cannot shadow the good one again.
    assert (tmp_path / "checkpoints" / "corrupt-step-000002").is_dir()
    assert latest_checkpoint(tmp_path).name == "step-000001"


def test_an_algorithm_state_that_does_not_fit_stops_the_resume_and_moves_nothing(tmp_path):
    # An intact algorithm.pt the algorithm refuses is a differently set-up run, not damage:
    # falling back to (and renaming) the run's good checkpoints would lose them.
    _two_checkpoints(tmp_path)
    seen = []

    def load_state(state):
        seen.append(state["updates"])
        if state["updates"] == 2:
            raise KeyError("optimizers")

    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    with pytest.raises(ConfigError, match="algorithm.pt does not fit this run's algorithm"):
        resume_latest(tmp_path, {"a": BigramPolicy()}, load_state)
    assert seen == [2]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before


def test_when_no_checkpoint_loads_the_error_lists_them_all(tmp_path):
    _two_checkpoints(tmp_path)
    for step in (1, 2):
        _garbage(tmp_path / "checkpoints" / f"step-00000{step}" / "algorithm.pt")
    with pytest.warns(UserWarning), pytest.raises(CheckpointError) as info:
        resume_latest(tmp_path, {"a": BigramPolicy()})
    assert "step-000001" in str(info.value) and "step-000002" in str(info.value)
    assert resume_latest(tmp_path / "nowhere", {"a": BigramPolicy()}) is None


@pytest.mark.parametrize("pointer", [b"\xff\xfe\x00", b"../../etc", b"step-000009", b""])
def test_a_garbage_latest_pointer_is_ignored(tmp_path, pointer):
    _two_checkpoints(tmp_path)
    (tmp_path / "checkpoints" / "latest").write_bytes(pointer)
    assert latest_checkpoint(tmp_path).name == "step-000002"


def test_torn_temporary_checkpoints_are_removed(tmp_path):
    _two_checkpoints(tmp_path)
    root = tmp_path / "checkpoints"
    torn = [root / ".step-000003.abc123", root / ".step-000002.old.xyz"]
    for d in torn:
        (d / "policies" / "a").mkdir(parents=True)
        (d / "algorithm.pt").write_bytes(b"half")
    (root / ".latest.999.tmp").write_text("step-000003")
    resume_latest(tmp_path, {"a": BigramPolicy()})
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step-000001", "step-000002"]
    (torn[0]).mkdir()
    save_checkpoint(tmp_path, 3, {"a": BigramPolicy()}, {}, keep=None)
    assert not torn[0].exists()


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "/fake/file")


def _quota(*args, **kwargs):
    raise OSError(errno.EDQUOT, "Disk quota exceeded")


@pytest.mark.parametrize(
    "target, fail",
    [
        ("torch.save", _no_space),
        ("os.fsync", _no_space),
        ("os.fsync", _quota),
        ("policy.save", _no_space),
    ],
)
def test_a_full_disk_says_no_space_left_and_where(tmp_path, monkeypatch, target, fail):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy(seed=1)}, {"updates": 1})
    policy = BigramPolicy(seed=2)
    if target == "policy.save":
        monkeypatch.setattr(policy, "save", fail)
    else:
        module, attr = target.split(".")
        monkeypatch.setattr({"torch": torch, "os": __import__("os")}[module], attr, fail)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(tmp_path, 2, {"a": policy}, {"updates": 2})
    monkeypatch.undo()
    message = str(info.value)
    assert "no space left" in message and str(tmp_path / "checkpoints") in message
    assert "the newest intact checkpoint is" in message and "step-000001" in message
    assert latest_checkpoint(tmp_path).name == "step-000001"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "latest",
        "step-000001",
    ]


def test_other_os_errors_are_not_reported_as_a_full_disk(tmp_path, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(torch, "save", denied)
    with pytest.raises(PermissionError):
        save_checkpoint(tmp_path, 1, {"a": BigramPolicy()}, {})


# ---------------------------------------------------------------- a real model's files


@pytest.mark.parametrize("what", ["weights", "reference"])
@pytest.mark.parametrize(
    "how", [_truncate, _garbage, _empty], ids=["truncated", "garbage", "empty"]
)
def test_corrupt_safetensors_name_the_file(tmp_path, algo_lm_path, what, how):
    from transformers import AutoModelForCausalLM

    def policy():
        ref = AutoModelForCausalLM.from_pretrained(algo_lm_path)
        return HFPolicy(algo_lm_path, trainable=True, name="a", reference_model=ref)

    ckpt = save_checkpoint(tmp_path, 1, {"a": policy()}, {})
    folder = ckpt / ("policies/a" if what == "weights" else "references")
    (file,) = folder.glob("*.safetensors")
    how(file)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(ckpt, {"a": policy()})
    assert str(ckpt) in str(info.value)
    assert ("policies/a" if what == "weights" else "references/a.safetensors") in str(info.value)
    assert json.loads((ckpt / "trainer.json").read_text())["step"] == 1
