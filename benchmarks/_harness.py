"""What the head-to-head benchmarks (``vs_comlrl.py``, ``vs_trl.py``) share: fresh-process
workers, interleaved repetitions and two clocks read at the same instants.

A head-to-head timing on a machine shared with other jobs is only fair when neither side always
runs in the busier moment, and when neither inherits the other's warm caches, allocator or
imported modules. So every (side, configuration, repetition) runs in its own subprocess (the
benchmark script itself, re-run with a hidden ``--worker SIDE`` flag, which prints one
``RESULT {json}`` line), the two sides take turns going first from one repetition to the next,
and the driver reports medians over repetitions.

Workers read both clocks around exactly the same spans (:class:`Spans`): wall seconds
(``time.perf_counter``) and the process's CPU seconds (``time.process_time``, all its threads).
With one torch thread per worker the two agree on a quiet machine; when other jobs share the
cores the wall figures swing with them and the CPU ones hardly move (they still rise somewhat,
through shared caches), so ``--clock cpu`` is the steadier comparison on a busy box.

Standard library only: the CoMLRL worker runs in CoMLRL's own venv, which has no llm_marl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
"""The checkout whose ``llm_marl`` the workers of our side import."""

RESULT_PREFIX = "RESULT "

CLOCK_HELP = (
    "what the table reports: wall seconds, or the worker process's CPU seconds (with "
    "--threads 1 the same on a quiet machine, and far steadier on a busy one)"
)

WORKER_ENV = {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
"""Set in every worker: no W&B, no network, no progress bars."""

T = TypeVar("T")


def now() -> tuple[float, float]:
    """Wall and process CPU seconds, read together."""
    return time.perf_counter(), time.process_time()


class Spans:
    """Wall and CPU seconds of a sequence of spans, both clocks read at the same instants."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._start: tuple[float, float] | None = None

    def start(self) -> None:
        self._start = now()

    def stop(self) -> None:
        if self._start is None:
            raise RuntimeError("Spans.stop() without a start()")
        wall, cpu = now()
        self.wall.append(wall - self._start[0])
        self.cpu.append(cpu - self._start[1])
        self._start = None

    def __enter__(self) -> Spans:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def add_clock_argument(parser: argparse.ArgumentParser) -> None:
    """``--clock wall|cpu`` (default wall)."""
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help=CLOCK_HELP)


def clock_key(name: str, clock: str) -> str:
    """The result key of span ``name`` in ``clock``: ``name`` for wall, ``name_cpu`` for CPU."""
    return name if clock == "wall" else f"{name}_cpu"


def emit_result(result: dict[str, Any]) -> None:
    """The worker's answer to the driver: one ``RESULT {json}`` line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(
    python: str,
    script: str | Path,
    argv: Sequence[str],
    *,
    side: str,
    llm_marl_on_path: bool,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``python script argv`` in a fresh process; return the dict of its ``RESULT`` line.

    ``llm_marl_on_path`` puts this checkout first on ``PYTHONPATH`` (a worker of our side must
    import this llm_marl, not an installed one). ``env`` adds to :data:`WORKER_ENV`.
    """
    full_env = {**os.environ, **WORKER_ENV, **(env or {})}
    if llm_marl_on_path:
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), full_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
    cmd = [python, str(script), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{side} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix(RESULT_PREFIX))


def interleaved(
    reps: int, configs: Sequence[T], sides: tuple[str, str]
) -> Iterator[tuple[int, T, str]]:
    """``(repetition, config, side)`` in run order: repetition by repetition, config by config,
    both sides of each, which side goes first alternating (``sides[0]`` at even ``rep + i``),
    so that neither always runs on a warmer or quieter machine."""
    for rep in range(reps):
        for i, config in enumerate(configs):
            for side in sides if (rep + i) % 2 == 0 else sides[::-1]:
                yield rep, config, side


class Progress:
    """``[done/total elapsed]`` lines on stderr, one per finished worker."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.t0 = total, 0, time.perf_counter()

    def report(self, text: str) -> None:
        self.done += 1
        print(
            f"[{self.done}/{self.total} {time.perf_counter() - self.t0:5.0f}s] {text}",
            file=sys.stderr,
            flush=True,
        )
