"""``llm-marl bench algos``: train several algorithms on the same env, tasks and seeds; compare.

Every (algorithm, seed) run is an ordinary training run (:func:`llm_marl.train.run.run`) of
the algorithm's preset for the env (``--preset`` names one; otherwise the algorithm's automatic
preset for the env), with the same overrides for all: so the runs share the env, its tasks,
the models, the sampling, the steps and the seeds, and differ in the algorithm only. Each run
writes its usual outputs under ``OUTPUT_DIR/<algo>/seed-<seed>``; the comparison is
``OUTPUT_DIR/bench.md`` (the table), ``bench.json`` (every run's eval curve) and
``curves.png`` (the mean eval reward per algorithm over steps, with a band of one standard
deviation over seeds).

The table, per algorithm, over seeds (mean ± sample std):

* **final**: the eval reward at the last step;
* **best**: the best eval reward of the run;
* **steps to threshold**: the first eval step at which the run's eval reward reached the
  threshold (``--threshold``; default: halfway between the mean eval reward before training
  and the best eval reward of any run), over the runs that reached it, with how many did;
* **wall time**: seconds per run, model building and warm-up included.

``--workers N`` runs N runs at once in separate processes (one torch thread each), for a
machine with cores to spare. Every run is seeded; a run's numbers can still differ in the last
bits between thread counts (torch's CPU reductions split their work by thread).

Example (the docs' CPU table)::

    llm-marl bench algos --env coordination-v0 --algos magrpo,at-grpo,drmas,rae \\
        --seeds 0,1,2 --steps 40 --eval-every 10 --set trainer.tasks_per_step=3 --workers 2
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from llm_marl.envs.registration import parse_env_args
from llm_marl.errors import ConfigError, OneLineArgumentParser

__all__ = ["BenchRun", "bench_algos", "bench_table", "main", "plot_curves"]


@dataclass
class BenchRun:
    """One (algorithm, seed) training run of a benchmark."""

    algo: str
    seed: int
    steps: list[int]
    """The steps at which the run evaluated."""
    rewards: list[float]
    """The eval reward at each of :attr:`steps`."""
    wall_s: float
    """Seconds the run took (building the models and warm-up included)."""

    @property
    def final(self) -> float:
        """The eval reward at the last eval."""
        return self.rewards[-1]

    @property
    def best(self) -> float:
        """The best eval reward of the run."""
        return max(self.rewards)

    def steps_to(self, threshold: float) -> int | None:
        """The first eval step whose reward reached ``threshold`` (None: never)."""
        return next((s for s, r in zip(self.steps, self.rewards) if r >= threshold), None)


def _overrides(
    env: str,
    seed: int,
    out: Path,
    algo: str,
    steps: int | None,
    eval_every: int | None,
    env_kwargs: Mapping[str, Any],
    extra: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    trainer: dict[str, Any] = {
        "env": env,
        "seed": seed,
        "output_dir": str(out / algo / f"seed-{seed}"),
        "progress": False,
        "console": False,
        "plot": False,
        "save_every": 0,
    }
    if steps is not None:
        trainer["steps"] = steps
    if eval_every is not None:
        trainer["eval_every"] = eval_every
    if env_kwargs:
        trainer["env_kwargs"] = dict(env_kwargs)
    data: dict[str, Any] = {section: dict(fields) for section, fields in extra.items()}
    data["trainer"] = {**data.get("trainer", {}), **trainer}
    return data


def _preset_name(algo: str, preset: str | None, env: str) -> str:
    """The preset of one bench run: the named one, or the algorithm's automatic one for env."""
    from llm_marl.algos.registry import get_algorithm
    from llm_marl.train.presets import auto_preset

    get_algorithm(algo)  # an unknown name: the registry's error, naming the choices
    if preset is not None:
        return preset
    chosen = auto_preset(algo, env)
    if chosen is None:
        raise ConfigError(f"{algo} has no preset for env {env!r}; name one with --preset")
    return chosen.name


def _one_run(
    algo: str, seed: int, preset: str, overrides: Mapping[str, Any], threads: int | None
) -> BenchRun:
    """Train one run and read its eval curve (runs in a worker process with ``--workers``;
    the config is rebuilt there from plain data, which pickles)."""
    import warnings

    import torch

    from llm_marl.train.run import preset_config, run

    config = preset_config(algo, preset, overrides)
    if threads is not None:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # The toys evaluate on their training tasks (their tasks are the whole task space).
        warnings.filterwarnings("ignore", message=".*evaluates on its training tasks.*")
        result = run(config)
    wall = time.perf_counter() - start
    evals = [row for row in result.history if "eval/reward" in row]
    return BenchRun(
        algo,
        seed,
        [int(row["step"]) for row in evals],
        [float(row["eval/reward"]) for row in evals],
        wall,
    )


def bench_algos(
    env: str,
    algos: Sequence[str],
    seeds: Sequence[int],
    output_dir: str | Path,
    *,
    preset: str | None = None,
    steps: int | None = None,
    eval_every: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    workers: int = 1,
    progress: bool = True,
) -> list[BenchRun]:
    """Train every algorithm of ``algos`` with every seed of ``seeds`` on ``env``.

    All configs are resolved (and checked) before the first run starts. ``workers > 1`` runs
    that many at once in worker processes, one torch thread each.
    """
    if not algos or not seeds:
        raise ConfigError("bench needs at least one algorithm and one seed")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    out = Path(output_dir)
    from llm_marl.train.run import preset_config

    jobs = [
        (
            algo,
            seed,
            _preset_name(algo, preset, env),
            _overrides(env, seed, out, algo, steps, eval_every, env_kwargs or {}, overrides or {}),
        )
        for algo in algos
        for seed in seeds
    ]
    for algo, _, name, data in jobs:
        preset_config(algo, name, data)  # every config checked before the first run
    runs: list[BenchRun] = []
    bar = tqdm(total=len(jobs), desc="bench runs", unit="run", disable=not progress)
    try:
        if workers == 1:
            for algo, seed, name, data in jobs:
                bar.set_postfix_str(f"{algo} seed {seed}")
                runs.append(_one_run(algo, seed, name, data, None))
                bar.update()
        else:
            import multiprocessing

            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                futures = [pool.submit(_one_run, a, s, n, d, 1) for a, s, n, d in jobs]
                for future in as_completed(futures):
                    run = future.result()
                    bar.set_postfix_str(f"{run.algo} seed {run.seed} done")
                    runs.append(run)
                    bar.update()
    finally:
        bar.close()
    order = {(a, s): k for k, (a, s, _, _) in enumerate(jobs)}
    return sorted(runs, key=lambda r: order[(r.algo, r.seed)])


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def default_threshold(runs: Sequence[BenchRun]) -> float:
    """Halfway between the mean eval reward before training and the best eval reward of any
    run: a level that says "learned", whatever the env's reward scale."""
    start = _mean_std([r.rewards[0] for r in runs])[0]
    return start + 0.5 * (max(r.best for r in runs) - start)


def bench_table(runs: Sequence[BenchRun], threshold: float) -> str:
    """The comparison as a Markdown table (one row per algorithm, in the runs' order)."""
    algos = list(dict.fromkeys(r.algo for r in runs))

    def fmt(values: Sequence[float], digits: int = 3) -> str:
        mean, std = _mean_std(values)
        return f"{mean:.{digits}f} ± {std:.{digits}f}"

    lines = [
        f"| algorithm | final eval reward | best eval reward | steps to {threshold:.3f} "
        "| wall time (s) |",
        "|---|---|---|---|---|",
    ]
    for algo in algos:
        mine = [r for r in runs if r.algo == algo]
        reached = [s for r in mine if (s := r.steps_to(threshold)) is not None]
        to = (fmt([float(s) for s in reached], 1) if reached else "—") + (
            f" ({len(reached)}/{len(mine)} reached)"
        )
        lines.append(
            f"| {algo} | {fmt([r.final for r in mine])} | {fmt([r.best for r in mine])} "
            f"| {to} | {fmt([r.wall_s for r in mine], 0)} |"
        )
    return "\n".join(lines)


def plot_curves(runs: Sequence[BenchRun], path: str | Path, title: str) -> Path:
    """One figure: per algorithm, the mean eval reward over seeds at each eval step, with a band
    of one standard deviation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    # Dashes and markers differ per algorithm: identical curves (AT-GRPO and Dr. MAS on a
    # single-turn env) stay visible on top of each other.
    styles = [("-", "o"), ("--", "s"), ("-.", "^"), (":", "D")]
    for k, algo in enumerate(dict.fromkeys(r.algo for r in runs)):
        mine = [r for r in runs if r.algo == algo]
        steps = sorted(set.intersection(*(set(r.steps) for r in mine)))
        stats = [_mean_std([r.rewards[r.steps.index(s)] for r in mine]) for s in steps]
        mean = [m for m, _ in stats]
        dash, marker = styles[k % len(styles)]
        line = ax.plot(
            steps, mean, dash, marker=marker, markersize=4, label=f"{algo} (n={len(mine)})"
        )
        ax.fill_between(
            steps,
            [m - s for m, s in stats],
            [m + s for m, s in stats],
            color=line[0].get_color(),
            alpha=0.2,
        )
    ax.set_xlabel("training step")
    ax.set_ylabel("eval reward (mean ± std over seeds)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _parse_sets(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set expects SECTION.FIELD=VALUE, got {pair!r}")
        out.setdefault(section, {})[name] = _literal(value)
    return out


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value  # a plain string


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="llm-marl bench",
        description="Compare algorithms on one env: same tasks, models, steps and seeds.",
    )
    sub = parser.add_subparsers(dest="what", required=True, parser_class=OneLineArgumentParser)
    p = sub.add_parser(
        "algos",
        help="train each algorithm with each seed; write a table and a learning-curve plot",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--env", required=True, help="registered env id")
    p.add_argument("--algos", required=True, help="comma-separated registry names")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds [0,1,2]")
    p.add_argument("--preset", default=None, help="preset name (default: each algo's for env)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: preset's)")
    p.add_argument("--eval-every", type=int, default=None, help="eval interval in steps")
    p.add_argument("--threshold", type=float, default=None, help="eval reward to reach")
    p.add_argument("--workers", type=int, default=1, help="runs at once (processes) [1]")
    p.add_argument("--output-dir", default=None, help="default: runs/bench-<env>")
    p.add_argument(
        "--env-arg", action="append", default=[], metavar="KEY=VALUE", help="env keyword"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override for every run, e.g. --set policies.device=cuda",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``llm-marl bench algos ...``: run, print the table, write the files; returns 0."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError as exc:
        raise ConfigError(f"--seeds expects comma-separated integers, got {args.seeds!r}") from exc
    out = Path(args.output_dir or f"runs/bench-{args.env}")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    runs = bench_algos(
        args.env,
        algos,
        seeds,
        out,
        preset=args.preset,
        steps=args.steps,
        eval_every=args.eval_every,
        env_kwargs=parse_env_args(args.env_arg),
        overrides=_parse_sets(args.set),
        workers=args.workers,
        progress=not args.no_progress,
    )
    threshold = args.threshold if args.threshold is not None else default_threshold(runs)
    table = bench_table(runs, threshold)
    total = time.perf_counter() - start
    title = f"{args.env}{' ' + args.preset if args.preset else ''}: eval reward"
    plot = plot_curves(runs, out / "curves.png", title)
    command = "llm-marl bench " + " ".join(argv)
    (out / "bench.md").write_text(
        f"{table}\n\nCommand: `{command}`; {len(runs)} runs in {total:.0f} s.\n"
    )
    (out / "bench.json").write_text(
        json.dumps(
            {"threshold": threshold, "command": command, "runs": [asdict(r) for r in runs]},
            indent=1,
        )
    )
    print(table)
    print(f"\n{len(runs)} runs in {total:.0f} s; table {out / 'bench.md'}, plot {plot}")
    return 0
