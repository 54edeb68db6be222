"""Training metrics: a console table and a JSONL file always; TensorBoard / W&B when asked for.

:class:`MetricsLogger` receives one flat ``{name: float}`` dict per step. It prints a fixed-width
table row (the header is repeated every ``header_every`` rows), appends a JSON line to
``<output_dir>/metrics.jsonl``, and forwards the row to TensorBoard (``tensorboard`` package) and
Weights & Biases (``wandb`` package) when they were requested; asking for one that is not
installed raises an error that says what to install. :func:`plot_rewards` draws the team reward
per step into a PNG (matplotlib, imported only there).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_marl.errors import CheckpointError, ConfigError
from llm_marl.tools.files import no_space

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def check_logging_backends(*, tensorboard: bool = False, wandb: bool = False) -> None:
    """Raise :class:`~llm_marl.errors.ConfigError` if a requested logging package is missing.

    Called before any model is built (:func:`~llm_marl.train.build_policies`), so that a run
    asked to log somewhere it cannot fails in a second, not after minutes of loading.
    """
    import importlib.util

    missing = [
        (flag, package, extra)
        for flag, package, extra, wanted in (
            ("--tensorboard", "tensorboard", "tensorboard", tensorboard),
            ("--wandb", "wandb", "wandb", wandb),
        )
        if wanted and importlib.util.find_spec(package) is None
    ]
    if missing:
        flag, package, extra = missing[0]
        raise ConfigError(
            f"{flag} needs the {package!r} package, which is not installed: "
            f"pip install {package} (or pip install 'llm-marl[{extra}]'), or drop {flag}"
        )


def _fmt(value: Any, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        text = "-"
    elif isinstance(value, int) or (
        isinstance(value, float) and value.is_integer() and abs(value) >= 1000
    ):
        text = str(int(value))
    elif isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
    else:
        text = str(value)
    return text.rjust(width)


class ConsoleTable:
    """Prints rows of chosen metrics as an aligned table.

    Columns are fixed by the first row unless given: ``columns`` entries are metric names, or
    ``(name, header)`` pairs. Missing values print ``-``.
    """

    def __init__(
        self,
        columns: Sequence[str | tuple[str, str]],
        *,
        width: int = 10,
        header_every: int = 20,
        print_fn: Callable[[str], None] = print,
    ) -> None:
        self.columns = [(c, c) if isinstance(c, str) else (c[0], c[1]) for c in columns]
        self.width = width
        self.header_every = header_every
        self.print_fn = print_fn
        self._rows = 0

    def header(self) -> str:
        heads = [_short(h, self.width).rjust(self.width) for _, h in self.columns]
        line = " ".join(heads)
        return f"{line}\n{'-' * len(line)}"

    def row(self, metrics: Mapping[str, Any]) -> str:
        return " ".join(_fmt(metrics.get(name), self.width) for name, _ in self.columns)

    def log(self, metrics: Mapping[str, Any]) -> None:
        if self.header_every and self._rows % self.header_every == 0:
            self.print_fn(self.header())
        self.print_fn(self.row(metrics))
        self._rows += 1


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


class MetricsLogger:
    """Console table + JSONL (always), TensorBoard and W&B (opt-in).

    Args:
        output_dir: Where ``metrics.jsonl`` (and TensorBoard events) go; ``None`` keeps rows in
            memory only (``history``).
        columns: Console columns (see :class:`ConsoleTable`); ``None`` prints no table.
        tensorboard: Also write TensorBoard scalars (needs ``pip install tensorboard``).
        wandb: Also log to Weights & Biases (needs ``pip install wandb``; honours ``WANDB_MODE``).
        wandb_project, run_name, config: Passed to ``wandb.init``.
        resume_step: Continue an existing ``metrics.jsonl``: rows after this step (written by a
            run that was killed after its last checkpoint) are dropped, earlier rows are kept.
        print_fn: Where console lines go (e.g. ``tqdm.write`` so a progress bar stays intact).
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str] | None,
        *,
        columns: Sequence[str | tuple[str, str]] | None = None,
        tensorboard: bool = False,
        wandb: bool = False,
        wandb_project: str = "llm_marl",
        run_name: str | None = None,
        config: Mapping[str, Any] | None = None,
        resume_step: int | None = None,
        print_fn: Callable[[str], None] = print,
    ) -> None:
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.history: list[dict[str, Any]] = []
        self.table = ConsoleTable(columns, print_fn=print_fn) if columns else None
        self._file = None
        self._tb = None
        self._wandb = None
        if self.output_dir is not None:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            path = self.output_dir / METRICS_FILE
            if resume_step is not None and path.exists():
                self.history = [r for r in read_jsonl(path) if r.get("step", 0) <= resume_step]
                _rewrite_jsonl(path, self.history)
            elif path.exists():
                path.unlink()  # a fresh run in a reused directory starts a fresh file
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        check_logging_backends(tensorboard=tensorboard, wandb=wandb)
        if tensorboard:
            if self.output_dir is None:
                raise ValueError("tensorboard logging needs an output_dir")
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.output_dir / TENSORBOARD_DIR))
        if wandb:
            import wandb as wandb_module

            self._wandb = wandb_module.init(
                project=wandb_project,
                name=run_name,
                config=dict(config or {}),
                dir=str(self.output_dir) if self.output_dir is not None else None,
                resume="allow",
            )

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Record one row (``step`` is stored under ``"step"``); returns the row."""
        row: dict[str, Any] = {"step": int(step)}
        for key, value in metrics.items():
            row[key] = _jsonable(value)
        self.history.append(row)
        if self._file is not None:
            try:
                self._file.write(json.dumps(row) + "\n")
                self._file.flush()
            except OSError as exc:
                if exc.filename is None:  # a write or flush names no file: say which
                    exc.filename = self._file.name
                raise
        if self.table is not None:
            self.table.log(row)
        numeric = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, global_step=step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        return row

    def close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                # Flushing a row that could not be written (a full disk) fails again here;
                # the error of the write itself is the one reported.
                if not no_space(exc):
                    raise
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    return value


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a metrics file; a torn last line (a killed writer) is ignored.

    Any other line that is not a metrics row (bytes that are not UTF-8, text that is not JSON,
    JSON that is not an object with an integer ``step`` >= 0) raises
    :class:`~llm_marl.errors.CheckpointError` naming the file and the line: the file was
    damaged, and a resume would keep (or silently drop) rows that no run wrote.
    """
    lines = Path(path).read_bytes().splitlines()
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    rows = []
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        problem = _row_problem(raw)
        if isinstance(problem, dict):
            rows.append(problem)
        elif i == last and problem in (_NOT_JSON, _NOT_UTF8):
            continue  # torn: the writer was killed inside its last row
        else:
            raise CheckpointError(
                f"{path}: line {i + 1} is not a metrics row ({problem}); the file is damaged: "
                "delete that line (or the file) to resume"
            )
    return rows


_NOT_UTF8 = "not UTF-8 text"
_NOT_JSON = "not JSON"


def _row_problem(raw: bytes) -> dict[str, Any] | str:
    """The metrics row ``raw`` holds, or what is wrong with it."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return _NOT_UTF8
    except (json.JSONDecodeError, RecursionError):
        return _NOT_JSON
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return f"its step is {step!r}, not an integer >= 0"
    return row


def _rewrite_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(dict(row)) + "\n")
    os.replace(tmp, path)


def plot_rewards(
    history: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str = "team reward",
    keys: Sequence[str] = ("reward", "eval/reward"),
    chance: float | None = None,
) -> Path:
    """Plot the team reward per step (train rollouts, and eval points if any) into a PNG.

    ``chance`` (the env's ``chance_level()``, e.g. uniformly random valid answers on the toy
    envs) is drawn as a dashed horizontal line: the level a team must beat to have learned.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plotting the reward curve needs matplotlib: pip install matplotlib "
            "(or pip install 'llm-marl[plot]'), or turn plotting off"
        ) from exc
    fig, ax = plt.subplots(figsize=(7, 4))
    plotted = False
    for key in keys:
        points = [(r["step"], r[key]) for r in history if isinstance(r.get(key), (int, float))]
        if not points:
            continue
        xs, ys = zip(*points)
        style = {"marker": "o"} if key.startswith("eval") else {"alpha": 0.85}
        label = {"reward": "train (rollouts)", "eval/reward": "evaluation"}.get(key, key)
        ax.plot(xs, ys, label=label, **style)
        plotted = True
    if chance is not None:
        ax.axhline(chance, color="grey", linestyle="--", label=f"chance level ({chance:.3g})")
        plotted = True
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if plotted:
        ax.legend()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
