"""The run's console, metrics backends and reward plot (issue 14, items 2 and 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_marl.errors import ConfigError
from llm_marl.policies.quiet import quiet_transformers
from llm_marl.train.logging import MetricsLogger, check_logging_backends, plot_rewards

ROOT = Path(__file__).resolve().parents[2]
# The toy preset, shrunk to seconds: the console's shape does not depend on the run's length.
SHORT = ["--group-size", "2", "--tasks-per-step", "1", "--eval-group-size", "1"]
SHORT += ["--format-warmup-steps", "2", "--no-plot"]


def _train_console(tmp_path: Path, *extra: str) -> str:
    """stdout + stderr of ``llm-marl train --algo magrpo --preset toy-coordination --steps 3``."""
    argv = ["train", "--algo", "magrpo", "--preset", "toy-coordination", "--steps", "3"]
    argv += [*SHORT, "--output-dir", str(tmp_path / "run"), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "llm_marl.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _check_one_table(console: str) -> None:
    for noise in ("Loading weights", "Writing model shards", "generation flags"):
        assert noise not in console, noise
    lines = console.splitlines()
    headers = [line.split() for line in lines if line.split()[:2] == ["step", "reward"]]
    # The metrics table's header, printed once, then after training the evaluation summary.
    assert len(headers) == 2 and "eval" in headers[0] and "eval" not in headers[1], headers
    assert headers[0].count("step") == 1 and headers[0][-1] == "sec/step", headers[0]
    assert sum(line.startswith("team reward (") for line in lines) == 1


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_console_of_a_short_run_is_one_bar_and_one_table(tmp_path):
    console = _train_console(tmp_path)
    _check_one_table(console)
    # One progress bar: every bar update is the "train" bar (tqdm redraws it with \r).
    bars = {part.split(":", 1)[0].strip() for part in console.split("\r") if "it/s]" in part}
    assert not bars - {"train"}, bars
    assert "train:" in console


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_console_without_progress_has_no_bar_at_all(tmp_path):
    console = _train_console(tmp_path, "--no-progress")
    _check_one_table(console)
    assert "%|" not in console  # no tqdm bar of ours or of transformers


def test_quiet_transformers_hides_bars_and_restores_the_setting():
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()  # whatever $HF_HUB_DISABLE_PROGRESS_BARS says
    with quiet_transformers():
        with quiet_transformers():  # nested: the outer block still hides them afterwards
            assert not hf_logging.is_progress_bar_enabled()
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with quiet_transformers():
            pass
        assert not hf_logging.is_progress_bar_enabled()  # a user's own choice is kept
    finally:
        hf_logging.enable_progress_bar()


def test_tensorboard_scalars_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = {1: {"reward": 0.25, "loss": 1.5}, 2: {"reward": 0.5, "loss": 1.0}, 3: {"reward": 0.75}}
    with MetricsLogger(tmp_path, tensorboard=True) as logger:
        for step, metrics in rows.items():
            logger.log(step, {**metrics, "note": "text is not a scalar"})
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["loss", "reward"]
    reward = [(e.step, e.value) for e in events.Scalars("reward")]
    assert reward == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 1.5), (2, 1.0)]


def test_missing_logging_package_fails_before_any_model(tmp_path, monkeypatch, capsys):
    import importlib
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("wandb", "tensorboard") else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r"--wandb needs the 'wandb' package.*llm-marl\[wandb\]"):
        check_logging_backends(wandb=True)
    with pytest.raises(ConfigError, match=r"pip install tensorboard"):
        MetricsLogger(tmp_path, tensorboard=True)
    check_logging_backends()  # nothing asked, nothing needed

    from llm_marl.cli import main

    built = []  # the module, not the function llm_marl.train.run that shadows it
    run_module = importlib.import_module("llm_marl.train.run")
    monkeypatch.setattr(run_module, "_build_policies", lambda c, *rest: built.append(c))
    argv = ["train", "--output-dir", str(tmp_path / "run"), "--wandb", "--steps", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("llm-marl train: error: --wandb needs the 'wandb' package")
    assert err.count("\n") == 1 and not built


def test_reward_plot_draws_chance_level_and_integer_steps(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = [{"step": s, "reward": 0.1 * s} for s in range(1, 4)]
    history.append({"step": 3, "eval/reward": 0.4})
    captured = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(fig, *args, **kwargs):
        captured["ax"] = fig.axes[0]
        return real_savefig(fig, *args, **kwargs)

    matplotlib.figure.Figure.savefig = spy
    try:
        path = plot_rewards(history, tmp_path / "reward.png", chance=0.36)
    finally:
        matplotlib.figure.Figure.savefig = real_savefig
        plt.close("all")
    assert path.read_bytes().startswith(b"\x89PNG")
    ax = captured["ax"]
    chance = [line for line in ax.get_lines() if line.get_label().startswith("chance level")]
    assert len(chance) == 1 and list(chance[0].get_ydata()) == [0.36, 0.36]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_trainer_plots_the_env_chance_level(tmp_path):
    """The toy env documents its chance level; the trainer draws that one."""
    from llm_marl.envs.toy.coordination import CoordinationEnv
    from llm_marl.train.trainer import Trainer, TrainerConfig

    config = TrainerConfig(env="coordination-v0", output_dir=str(tmp_path))
    trainer = Trainer.__new__(Trainer)  # only the env matters for the chance level
    trainer.env, trainer.config, trainer.env_kwargs = config.env, config, {}
    assert trainer._chance_level() == pytest.approx(CoordinationEnv().chance_level())
    assert trainer._chance_level() == pytest.approx(0.36)
