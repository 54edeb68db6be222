"""Read records (a list of dicts) from a local file or a Hugging Face dataset id."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from llm_marl.errors import DataError

DATA_DIR_ENV = "LLM_MARL_DATA_DIR"


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
