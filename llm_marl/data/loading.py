"""Read records (a list of dicts) from a local file or a Hugging Face dataset id, and what the
env families' task loaders share: positional splits and a cache of loaded task lists."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from llm_marl.errors import DataError

DATA_DIR_ENV = "LLM_MARL_DATA_DIR"
SPLITS = ("all", "train", "eval")
"""The positional splits of :func:`select_split` (besides slices ``"a:b"``)."""
_SLICE_RE = re.compile(r"^\[?\s*(-?\d*)\s*:\s*(-?\d*)\s*\]?$")
T = TypeVar("T")
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def data_dir() -> Path | None:
    """The local benchmark directory named by ``$LLM_MARL_DATA_DIR``, if set and present."""
    value = os.environ.get(DATA_DIR_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataError(f"${DATA_DIR_ENV}={value!r} is not a directory")
    return path


def looks_like_hub_id(dataset: str | os.PathLike[str] | None, names: Any = ()) -> bool:
    """Whether ``dataset`` names a Hugging Face dataset (``owner/name``) rather than one of
    ``names`` (a family's dataset names) or a local file or directory."""
    if dataset is None or str(dataset) in names:
        return False
    text = str(dataset)
    return (
        "/" in text
        and not text.startswith((".", "/", "~"))
        and not text.endswith((".json", ".jsonl", ".csv", ".parquet"))
        and not Path(text).expanduser().exists()
    )


def data_dir_key() -> str | None:
    """``$LLM_MARL_DATA_DIR`` as a cache key (``"invalid"`` when it is set but unusable), so
    that loaders' caches follow a change of the data directory."""
    try:
        directory = data_dir()
    except DataError:
        return "invalid"
    return str(directory) if directory is not None else None


def load_records(source: str | os.PathLike[str], split: str | None = None) -> list[dict[str, Any]]:
    """Load a list of records.

    ``source`` is a local ``.json`` (an array, or an object holding one list), ``.jsonl``,
    ``.csv`` or ``.parquet`` file, or a Hugging Face dataset id (``"org/name"``; needs the
    ``datasets`` package and network access, ``split`` defaults to ``"test"``).
    """
    path = Path(source).expanduser()
    if path.exists():
        if path.is_dir():
            raise DataError(f"{path} is a directory; point to a .json/.jsonl/.csv/.parquet file")
        return _load_file(path)
    text = str(source)
    if text.endswith((".json", ".jsonl", ".csv", ".parquet")):
        raise DataError(f"data file not found: {path}")
    if "/" in text and not text.startswith((".", "/")):
        return _load_hub(text, split or "test")
    raise DataError(
        f"cannot load {text!r}: not an existing file and not a Hugging Face id ('org/name')"
    )


def _load_file(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            records = []
            with path.open(encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            records.append(json.loads(line))
                        except json.JSONDecodeError as err:
                            raise DataError(f"{path}:{lineno}: invalid JSON ({err.msg})") from err
        elif suffix == ".json":
            with path.open(encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict):
                lists = [v for v in data.values() if isinstance(v, list)]
                if len(lists) != 1:
                    raise DataError(f"{path}: a JSON object must hold exactly one list of records")
                data = lists[0]
            records = data
        elif suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as f:
                records = list(csv.DictReader(f))
        elif suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError as err:
                raise DataError(
                    f"{path}: reading parquet needs pyarrow (pip install 'llm-marl[data]')"
                ) from err
            records = pq.read_table(path).to_pylist()
        else:
            raise DataError(
                f"{path}: unsupported file type {suffix!r} (use .json/.jsonl/.csv/.parquet)"
            )
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: invalid JSON ({err.msg} at line {err.lineno})") from err
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text ({err})") from err
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"{path}: expected a list of records (dicts)")
    if not records:
        raise DataError(f"{path}: no records")
    return records


def _load_hub(dataset_id: str, split: str) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError as err:
        raise DataError(
            f"loading {dataset_id!r} from the Hugging Face hub needs the datasets package "
            "(pip install 'llm-marl[data]'), or pass a local file path"
        ) from err
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as err:  # network down, unknown id, unknown split...
        raise DataError(
            f"could not load {dataset_id!r} (split {split!r}) from the Hugging Face hub: {err}. "
            f"Offline? Pass a local file, or set ${DATA_DIR_ENV}."
        ) from err
    return [dict(r) for r in ds]


def hub_split_spec(dataset: str | os.PathLike[str] | None, split: str, names: Any) -> str | None:
    """``split`` when it is a split spec for the hub (``"test[:16]"``): ``dataset`` is a Hugging
    Face id (not one of ``names``) and ``split`` is none of :func:`select_split`'s; else None."""
    if looks_like_hub_id(dataset, names) and split not in SPLITS and not _SLICE_RE.match(split):
        return split
    return None


def select_split(tasks: Sequence[T], split: str, eval_rows: slice, title: str) -> list[T]:
    """The tasks of a positional split, so that train and eval never share a row.

    Args:
        tasks: every task of a source, in order.
        split: ``"all"``; ``"eval"`` (the rows ``eval_rows``, held out) or ``"train"`` (the
            others); or a slice ``"a:b"`` (or ``"[a:b]"``) of rows by position.
        eval_rows: the held-out evaluation rows of this source.
        title: the source, named in errors.

    Raises:
        DataError: an unknown split, or an empty one.
    """
    if split == "all":
        chosen = list(tasks)
    elif split in ("train", "eval"):
        held_out = set(range(len(tasks))[eval_rows])
        chosen = [t for i, t in enumerate(tasks) if (i in held_out) == (split == "eval")]
    elif m := _SLICE_RE.match(split):
        start = int(m.group(1)) if m.group(1) else None
        stop = int(m.group(2)) if m.group(2) else None
        chosen = list(tasks[start:stop])
    else:
        raise DataError(
            f"unknown split {split!r}: use 'all', 'train', 'eval' or a slice like '16:' "
            "(hub split specs such as 'test[:16]' only apply to Hugging Face ids)"
        )
    if not chosen:
        raise DataError(f"split {split!r} of {title} is empty ({len(tasks)} tasks loaded)")
    return chosen


class TaskCache(Generic[T]):
    """Loaded task lists by key, shared by every env and thread of the process, so that building
    many envs reads and validates a source once. ``$LLM_MARL_DATA_DIR`` is part of every key: a
    change of the data directory is followed."""

    def __init__(self) -> None:
        self._items: dict[tuple[Hashable, ...], T] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[Hashable, ...], load: Callable[[], T]) -> T:
        """The value cached under ``key``, loaded by ``load()`` on first use (once, under a lock:
        threads asking for a source being loaded wait for it rather than read it again)."""
        key = (*key, data_dir_key())
        with self._lock:
            if key not in self._items:
                self._items[key] = load()
            return self._items[key]

    def clear(self) -> None:
        """Forget every loaded value (after editing a data file in place)."""
        with self._lock:
            self._items.clear()


class SplitRules(Protocol):
    """How a source splits (a family's dataset description has these fields)."""

    @property
    def title(self) -> str:
        """The source in words, for errors."""
        ...

    @property
    def eval_rows(self) -> slice:
        """The held-out evaluation rows (see :func:`select_split`)."""
        ...


Tasks = list[dict[str, Any]]
Loaded = tuple[Tasks, str, SplitRules]
"""Every task of a source, where it came from (in words), and how it splits."""


R = TypeVar("R", bound=SplitRules)

_SPLIT_CACHE: TaskCache[Loaded] = TaskCache()
"""The task lists :func:`load_split_tasks` loaded, by (family's dataset names, family, source,
hub split)."""


def load_split_tasks(
    family: str,
    dataset: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None,
    split: str,
    datasets: Mapping[str, R],
    default: Callable[[R], Loaded],
    check: Callable[[Tasks, str], Tasks],
    *,
    hub_default_split: str = "train",
) -> tuple[Tasks, str]:
    """The tasks of one split of a source: what a family's task loader does around its own
    default data and validation (the coding and writing envs' loaders are this with their data).

    Args:
        family: the loader's family (part of the cache key of the loaded sources, which every
            loader shares).
        dataset: ``None`` (the family's default source), one of ``datasets``, a local file, a
            Hugging Face id, or a list of records (never cached).
        split: a split of :func:`select_split`, or a hub split spec (``"test[:16]"``, passed to
            the hub, for a Hugging Face id only).
        datasets: the family's named datasets (never taken for Hugging Face ids); ``family`` is
            one of them, and its rules split a file and a list of records.
        default: ``default(datasets[name])`` loads every task of a named dataset (``family``'s
            when ``dataset`` is None) with where it came from and how it splits.
        check: ``check(records, source)`` validates records (from a file, the hub or the
            caller) into tasks.
        hub_default_split: what a Hugging Face id loads when ``split`` is none of the hub's.

    Returns ``(tasks, source)``: fresh task dicts, and where they came from in words.
    """
    if not isinstance(split, str):
        raise TypeError(f"split must be a str, got {type(split).__name__}")
    rules = datasets[family]
    if dataset is not None and not isinstance(dataset, str | os.PathLike):
        tasks = check([dict(r) for r in dataset], "the given task list")
        return select_split(tasks, split, rules.eval_rows, rules.title), "tasks given by the caller"
    name = None if dataset is None else os.fspath(dataset)
    hub_split = hub_split_spec(name, split, datasets)

    def load() -> Loaded:
        if name is None or name in datasets:
            return default(datasets[name or family])
        if looks_like_hub_id(name, datasets):
            split_ = hub_split or hub_default_split
            records = load_records(name, split=split_)
            source = f"{name} (Hugging Face, split {split_!r})"
        else:
            records, source = load_records(name), name
        return check(records, source), source, rules

    key = (tuple(datasets), family, name, hub_split)
    tasks, source, loaded_rules = _SPLIT_CACHE.get(key, load)
    if hub_split is None:
        tasks = select_split(tasks, split, loaded_rules.eval_rows, loaded_rules.title)
    return [dict(t) for t in tasks], source


def warn_user(message: str) -> None:
    """A :class:`UserWarning` reported at the first caller outside llm_marl (the user's line
    that built the env), however deep in the loaders and caches the data was found missing."""
    frame = sys._getframe(1)
    level = 2  # stacklevel 2 is this function's caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, UserWarning, stacklevel=level)
