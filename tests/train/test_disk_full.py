"""A full disk at any write of a run: one line naming the file and the newest intact checkpoint,
exit 2 (issue 28, item 8). A refused resume changes no file.

The disk fills at the OS layer: writes to files under the run's folder raise
``OSError(ENOSPC)`` once a byte budget is spent (as a small tmpfs would), whether the writer is
our JSONL logger, torch's serializer or the config writer.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path

import pytest

from llm_marl.algos import Algorithm
from llm_marl.cli import main
from llm_marl.errors import DiskFullError
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.train import Trainer, TrainerConfig
from llm_marl.train.checkpoint import latest_checkpoint, save_checkpoint

from .conftest import BigramPolicy


class _Full:
    """A writable file whose writes fail with ENOSPC once ``budget`` bytes are spent."""

    def __init__(self, inner, disk: FullDisk) -> None:
        self._inner = inner
        self._disk = disk

    def write(self, data):
        self._disk.spent += len(data)
        if self._disk.spent > self._disk.budget:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._inner.write(data)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._inner.close()


class FullDisk:
    """Patches ``open`` so that files under ``root`` opened for writing share ``budget`` bytes;
    ``only`` restricts it to paths whose name contains that text."""

    def __init__(self, monkeypatch, root: Path, budget: int, only: str = "") -> None:
        self.root, self.budget, self.only, self.spent = str(root), budget, only, 0
        real = builtins.open

        def patched(file, mode="r", *args, **kwargs):
            handle = real(file, mode, *args, **kwargs)
            name = os.fspath(file) if isinstance(file, (str, os.PathLike)) else ""
            writing = any(m in mode for m in "wax+")
            if writing and str(name).startswith(self.root) and self.only in str(name):
                return _Full(handle, self)
            return handle

        monkeypatch.setattr(builtins, "open", patched)
        monkeypatch.setattr(io, "open", patched)


class _Recorder(Algorithm):
    """An algorithm that learns nothing but has a state to checkpoint."""

    name = "recorder"

    def update(self, episodes):
        return {"loss": 0.0}

    def state_dict(self):
        return {"updates": 1}


def _trainer(tmp_path, steps=3):
    policies = {"left": ScriptedPolicy(lambda c: "1"), "right": ScriptedPolicy(lambda c: "1")}
    algo = _Recorder()
    cfg = TrainerConfig(
        env="coordination-v0",
        steps=steps,
        tasks_per_step=1,
        group_size=2,
        output_dir=str(tmp_path / "run"),
        progress=False,
        plot=False,
        console=False,
        eval_at_start=False,
        save_every=1,
    )
    return Trainer(algo, policies, cfg)


@pytest.mark.parametrize(
    ("only", "file"),
    [
        ("metrics.jsonl", "metrics.jsonl"),
        ("algorithm.pt", "algorithm.pt"),
        ("trainer.json", "trainer.json"),
    ],
)
def test_a_full_disk_names_the_file_and_the_newest_intact_checkpoint(
    tmp_path, monkeypatch, only, file
):
    trainer = _trainer(tmp_path)
    run = tmp_path / "run"
    # Enough for the first step's row and checkpoint, not for the second's.
    first = _trainer(tmp_path / "probe", steps=1)
    first.train()
    used = sum(
        p.stat().st_size for p in (tmp_path / "probe" / "run").rglob(f"*{only}*") if p.is_file()
    )
    FullDisk(monkeypatch, run, budget=used + used // 2, only=only)
    with pytest.raises(DiskFullError) as info:
        trainer.train()
    message = str(info.value)
    assert "\n" not in message and "no space left" in message and file in message, message
    assert latest_checkpoint(run) is not None and str(latest_checkpoint(run)) in message


def test_no_checkpoint_yet_is_said(tmp_path, monkeypatch):
    FullDisk(monkeypatch, tmp_path / "run", budget=0, only="metrics.jsonl")
    with pytest.raises(DiskFullError, match="metrics.jsonl: there is no checkpoint yet"):
        _trainer(tmp_path).train()


def test_torch_save_of_a_checkpoint_is_an_os_error_not_an_enforce_fail(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 1, {"a": BigramPolicy(seed=1)}, {"updates": 1})
    FullDisk(monkeypatch, tmp_path, budget=10, only="rng.pt")
    with pytest.raises(
        DiskFullError, match=r"rng.pt: the newest intact checkpoint is .*step-000001"
    ):
        save_checkpoint(tmp_path, 2, {"a": BigramPolicy(seed=2)}, {"updates": 2})


def test_the_cli_prints_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    FullDisk(monkeypatch, out, budget=0, only="config.yaml")
    argv = ["train", "--preset", "toy-coordination", "--steps", "1", "--output-dir", str(out)]
    argv += ["--group-size", "2", "--tasks-per-step", "1", "--format-warmup-steps", "0"]
    assert main([*argv, "--no-progress", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "no space left" in err and "config.yaml" in err and "no checkpoint yet" in err


def test_a_refused_resume_changes_no_file(tmp_path, capsys):
    out = tmp_path / "out"
    # A checkpoint of another team (agent "a", not left/right): the resume is refused.
    save_checkpoint(out, 1, {"a": BigramPolicy(seed=1)}, {"updates": 1})
    (out / "config.yaml").write_text("# the earlier run's config\n")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    argv = ["train", "--preset", "toy-coordination", "--steps", "1", "--output-dir", str(out)]
    assert (
        main([*argv, "--resume", "--no-progress", "--no-plot", "--format-warmup-steps", "0"]) == 2
    )
    assert "Traceback" not in capsys.readouterr().err
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    assert after.keys() - before.keys() <= {p for p in after if "models" in p.parts}
    assert {p: v for p, v in after.items() if p in before} == before
