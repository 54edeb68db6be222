"""Kill a training run with SIGKILL after a checkpoint, resume it, and check it finishes right."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from llm_marl.train.checkpoint import latest_checkpoint
from llm_marl.train.logging import read_jsonl

pytestmark = pytest.mark.slow

STEPS = 30


def _cmd(out, *extra):
    return [
        sys.executable,
        "-m",
        "llm_marl.cli",
        "train",
        "--output-dir",
        str(out),
        "--steps",
        str(STEPS),
        "--save-every",
        "3",
        "--group-size",
        "4",
        "--tasks-per-step",
        "2",
        "--format-warmup-steps",
        "5",
        "--eval-every",
        "10",
        "--eval-group-size",
        "2",
        "--threads",
        "1",
        "--no-plot",
        "--no-progress",
        *extra,
    ]


def _checkpoint_step(out):
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        return None
    return json.loads((ckpt / "trainer.json").read_text())["step"]


def _without_times(rows):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def test_a_killed_run_resumes_from_its_last_checkpoint_and_finishes(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_cmd(out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 300
        while _checkpoint_step(out) is None:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 5 minutes"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    killed_at = _checkpoint_step(out)
    assert killed_at is not None and killed_at < STEPS, "the run finished before it was killed"

    resumed = subprocess.run(
        _cmd(out, "--resume"), capture_output=True, text=True, env=env, timeout=600
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"resuming from step {killed_at} " in resumed.stdout
    assert _checkpoint_step(out) == STEPS
    rows = read_jsonl(out / "metrics.jsonl")
    steps = [r["step"] for r in rows]
    # One row per step 1..STEPS plus the start evaluation (step 0), no duplicates: rows the
    # killed run wrote after its last checkpoint were replaced by the resumed run's.
    assert steps == list(range(0, STEPS + 1))
    assert "eval/reward" in rows[-1]

    # The resumed run is the uninterrupted run: same rollouts, losses and KL to the same
    # (warmed-up) reference, step for step.
    straight = subprocess.run(
        _cmd(tmp_path / "straight"), capture_output=True, text=True, env=env, timeout=600
    )
    assert straight.returncode == 0, straight.stdout[-3000:] + straight.stderr[-3000:]
    expected = _without_times(read_jsonl(tmp_path / "straight" / "metrics.jsonl"))
    assert _without_times(rows) == expected
