"""Math problems as env tasks: benchmark names, local files and Hugging Face ids.

>>> from llm_marl.envs.math.datasets import load_math_tasks
>>> tasks = load_math_tasks()                    # the bundled offline sample (30 problems)
>>> sorted(tasks[0])
['answer', 'dataset', 'problem', 'source_index', 'task_id']

``load_math_tasks(dataset)`` accepts:

``None`` or ``"sample"``
    30 problems written for llm_marl and shipped with it (``data/sample.jsonl``), so the envs
    work on a fresh machine with no network. Not a benchmark: use it for smoke runs. Its
    ``split`` is ``None`` / ``"test"`` (all 30), ``"eval"`` (the first 6), ``"train"`` (the
    other 24), ``"all"`` or a slice ``"a:b"``.
A benchmark name (:data:`BENCHMARKS`)
    ``math500``, ``aime24``, ``amc23``, ``minerva_math``, ``olympiadbench``, ``gsm8k`` (test set;
    ``split="train"`` for the training set) and ``math_level3to5`` (the MATH level 3-5 training
    problems AgentPO trains on; ``split="train"`` only, local file only). Resolution order:

    1. ``$LLM_MARL_DATA_DIR/<name>/<file>`` when that variable is set and the file exists (the
       layout of the project's ``shared/data``: ``math500/test.jsonl`` ...);
    2. else the Hugging Face id listed in :data:`BENCHMARKS` (needs the ``datasets`` package and
       network access; offline, the error says to set ``LLM_MARL_DATA_DIR`` or pass a path).
       The hub copies are not byte-identical to the local files (the reference answer is read
       by the benchmark's rule, or inferred from the fields a hub record has), so scores may
       differ slightly from runs on the local files. The hub ids are documented, not tested:
       the tests run offline.
A list of the above (e.g. ``["math500", "aime24", "amc23", "minerva_math", "olympiadbench"]``,
:data:`AGENTPO_EVAL_BENCHMARKS`)
    Their tasks in order, each with its own ``task_id`` prefix; ``split`` and ``limit`` apply to
    each one (``split=None``: each benchmark's default split).
A local ``.json`` / ``.jsonl`` / ``.csv`` / ``.parquet`` path, or any Hugging Face id ``org/name``
    Records need a problem field (``problem``, ``question``, ``Question``, ``input``, or a verl
    ``prompt`` message list) and a reference (``answer``, ``final_answer``, a verl
    ``reward_model.ground_truth``, or a ``\\boxed{}`` answer in ``solution``).

Each task is a dict with ``task_id`` (``"<dataset>/<row index>"``), ``problem``, ``answer`` (the
reference answer as text, from :func:`llm_marl.envs.math.answers.reference_answer`), ``dataset``
and ``source_index``, plus ``draft`` when the record carries a fixed draft solution (a ``draft``
field, or AgentPO's ``solutions`` list: see ``math_critic-v0``'s ``drafts="task"``). Loaded task lists are cached per (source, split,
``$LLM_MARL_DATA_DIR``), so building many envs (one per rollout slot) reads a file once.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_marl.data.loading import (
    DATA_DIR_ENV,
    DataError,
    TaskCache,
    data_dir,
    load_records,
    select_split,
)

SAMPLE_NAME = "sample"
SAMPLE_PATH = Path(__file__).with_name("data") / "sample.jsonl"
SAMPLE_EVAL_ROWS = slice(0, 6)
"""The bundled sample's held-out rows (``split="eval"``); ``"train"`` is the other 24."""

# The instruction verl-format training files append to each problem; the envs add their own.
_VERL_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."


@dataclass(frozen=True)
class Benchmark:
    """Where a named benchmark lives, locally and on the Hugging Face hub."""

    files: Mapping[str, str]
    """Split -> path relative to ``$LLM_MARL_DATA_DIR``."""
    hub_id: str | None = None
    """Hugging Face dataset id used when no local file is found."""
    hub_config: str | None = None
    hub_splits: Mapping[str, str] | None = None
    """Our split name -> the hub's split name (the hub stores some test sets as ``train``)."""
    default_split: str = "test"


BENCHMARKS: dict[str, Benchmark] = {
    "math500": Benchmark({"test": "math500/test.jsonl"}, "HuggingFaceH4/MATH-500"),
    "aime24": Benchmark(
        {"test": "aime24/test.jsonl"}, "HuggingFaceH4/aime_2024", hub_splits={"test": "train"}
    ),
    "amc23": Benchmark({"test": "amc23/test.jsonl"}, "math-ai/amc23"),
    "minerva_math": Benchmark({"test": "minerva_math/test.jsonl"}, "math-ai/minervamath"),
    "olympiadbench": Benchmark({"test": "olympiadbench/test.jsonl"}, "math-ai/olympiadbench"),
    "gsm8k": Benchmark(
        {"test": "gsm8k/test.jsonl", "train": "gsm8k/train.jsonl"},
        "openai/gsm8k",
        hub_config="main",
    ),
    # No hub copy of exactly this subset is known; it needs the local file (or a path).
    "math_level3to5": Benchmark(
        {"train": "math_level3to5_train/train.jsonl"}, default_split="train"
    ),
}
"""The benchmark names :func:`load_math_tasks` knows (the AgentPO evaluation suite + training)."""

EVAL_BENCHMARKS = ("math500", "aime24", "amc23", "minerva_math", "olympiadbench", "gsm8k")
"""The test sets of AgentPO's results table (plus GSM8K)."""

AGENTPO_EVAL_BENCHMARKS = ("math500", "aime24", "amc23", "minerva_math", "olympiadbench")
"""The five benchmarks of AgentPO's main results table (the paper presets evaluate on them)."""

_PROBLEM_KEYS = ("problem", "question", "Question", "input")

_cache: TaskCache[list[dict[str, Any]]] = TaskCache()


def load_math_tasks(
    dataset: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    split: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Load math problems as env tasks (see the module docstring for what ``dataset`` may be).

    Args:
        dataset: ``None``/``"sample"``, a benchmark name, a local file, a Hugging Face id, or a
            list of them (concatenated in order).
        split: the split of a benchmark or hub dataset (default: the benchmark's test split).
        limit: keep the first ``limit`` problems (in file order) of each dataset.

    Returns:
        A new list of task dicts (the dicts themselves are shared between calls: do not mutate).

    Raises:
        DataError: unknown name, missing file, no problem or reference in a record, or a hub
            dataset that cannot be loaded (offline); the message says what to do.
    """
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    if isinstance(dataset, Sequence) and not isinstance(dataset, str):
        if not dataset:
            raise DataError("dataset is an empty list: name at least one dataset")
        names = [os.fspath(d) for d in dataset]
        if len(set(names)) < len(names):
            raise DataError(f"dataset lists a dataset twice: {names}")
        return [t for name in names for t in load_math_tasks(name, split, limit)]
    name = SAMPLE_NAME if dataset is None else os.fspath(dataset)
    tasks = _cache.get((name, split), lambda: _load(name, split))
    return list(tasks[:limit] if limit is not None else tasks)


def clear_cache() -> None:
    """Forget loaded task lists (after editing a data file in place)."""
    _cache.clear()


def problem_text(record: Mapping[str, Any]) -> str | None:
    """The problem statement of a record, or None if it has none."""
    for key in _PROBLEM_KEYS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            context = record.get("context")
            if isinstance(context, str) and context.strip():
                return f"{context.strip()}\n\n{value.strip()}"
            return value.strip()
    prompt = record.get("prompt")
    if isinstance(prompt, list) and prompt:  # verl / chat format: the last user message
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        content = users[-1].get("content") if users else None
        if isinstance(content, str) and content.strip():
            text = content.strip()
            if text.endswith(_VERL_SUFFIX):
                text = text[: -len(_VERL_SUFFIX)].rstrip()
            return text
    return None


# ---------------------------------------------------------------------------- internals
def _load(name: str, split: str | None) -> list[dict[str, Any]]:
    if name == SAMPLE_NAME:
        tasks = _to_tasks(load_records(SAMPLE_PATH), SAMPLE_NAME, SAMPLE_NAME)
        if split in (None, "test"):
            return tasks
        # Positional splits of the sample, for offline smoke runs that must not evaluate on
        # their training problems: "eval" is the first SAMPLE_EVAL_ROWS problems.
        return select_split(tasks, split, SAMPLE_EVAL_ROWS, "the bundled math sample")
    if name in BENCHMARKS:
        return _load_benchmark(name, BENCHMARKS[name], split)
    path = Path(name).expanduser()
    label = path.stem if path.exists() else name
    looks_like_file = name.endswith((".json", ".jsonl", ".csv", ".parquet"))
    looks_like_hub_id = "/" in name and not name.startswith((".", "/", "~"))
    if not path.exists() and not looks_like_file and not looks_like_hub_id:
        raise DataError(
            f"unknown math dataset {name!r}: use one of {sorted(BENCHMARKS)}, "
            f"{SAMPLE_NAME!r}, a local .json/.jsonl/.csv/.parquet file, or a Hugging Face id "
            "('org/name')"
        )
    records = load_records(name, split)
    return _to_tasks(records, label, None)


def _load_benchmark(name: str, bench: Benchmark, split: str | None) -> list[dict[str, Any]]:
    split = split or bench.default_split
    if split not in bench.files:
        raise DataError(f"{name} has no split {split!r}; available: {sorted(bench.files)}")
    local = data_dir()
    if local is not None:
        path = local / bench.files[split]
        if path.is_file():
            return _to_tasks(load_records(path), name, name)
    where = (
        f"${DATA_DIR_ENV}={os.environ[DATA_DIR_ENV]} has no {bench.files[split]}"
        if local is not None
        else f"${DATA_DIR_ENV} is not set"
    )
    if bench.hub_id is None:
        raise DataError(f"{name}: {where}, and it has no Hugging Face copy")
    try:
        records = _load_hub(bench, bench.hub_id, split)
    except DataError as err:
        raise DataError(
            f"cannot load benchmark {name!r} ({split}): {where}, and the Hugging Face copy "
            f"{bench.hub_id!r} failed ({err}). Set {DATA_DIR_ENV} to a directory holding "
            f"{bench.files[split]} (e.g. the project's shared/data), or pass a file path as "
            "dataset=..."
        ) from err
    return _to_tasks(records, name, name)


def _load_hub(bench: Benchmark, hub_id: str, split: str) -> list[dict[str, Any]]:
    hub_split = (bench.hub_splits or {}).get(split, split)
    if bench.hub_config is None:
        return load_records(hub_id, hub_split)
    # load_records takes no config name; the few hub sets that need one are loaded here.
    try:
        import datasets
    except ImportError as err:
        raise DataError("the datasets package is missing (pip install 'llm-marl[data]')") from err
    try:
        ds = datasets.load_dataset(hub_id, bench.hub_config, split=hub_split)
    except Exception as err:  # offline, unknown id or split: all reported the same way
        raise DataError(str(err)) from err
    return [dict(r) for r in ds]


def _to_tasks(
    records: list[dict[str, Any]], label: str, benchmark: str | None
) -> list[dict[str, Any]]:
    from llm_marl.envs.math.answers import reference_answer
    from llm_marl.envs.math.env import blank_reference

    tasks = []
    blank: list[str] = []
    for i, record in enumerate(records):
        problem = problem_text(record)
        if problem is None:
            raise DataError(
                f"{label}: record #{i} has no problem text (looked for {list(_PROBLEM_KEYS)} and "
                f"a 'prompt' message list; keys: {sorted(record)})"
            )
        try:
            answer = _reference(record, benchmark, reference_answer)
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{label}: record #{i} has no usable reference answer: {err}") from err
        if blank_reference(answer):
            blank.append(f"{label}/{i}")  # nothing to grade against: never played
            continue
        task = {
            "task_id": f"{label}/{i}",
            "problem": problem,
            "answer": answer,
            "dataset": label,
            "source_index": i,
        }
        draft = _draft(record)
        if draft is not None:
            task["draft"] = draft
        tasks.append(task)
    if blank:
        warnings.warn(
            f"{label}: {len(blank)} task(s) dropped, their reference answer is empty once "
            f"normalised (nothing to grade against): {', '.join(blank[:5])}"
            f"{' ...' if len(blank) > 5 else ''}",
            UserWarning,
            stacklevel=2,
        )
    if not tasks and blank:
        raise DataError(f"{label}: every reference answer is empty once normalised")
    return tasks


def _draft(record: Mapping[str, Any]) -> str | None:
    """A fixed draft solution for ``math_critic-v0(drafts="task")``: a record's ``draft``, or
    the first of its ``solutions`` (AgentPO's offline-draft files). A benchmark's reference
    ``solution`` is never one: it would show the critic the answer."""
    draft = record.get("draft")
    if draft is None:
        solutions = record.get("solutions")
        if isinstance(solutions, (list, tuple)) and solutions:
            draft = solutions[0]
    return draft if isinstance(draft, str) and draft.strip() else None


def _reference(record: Mapping[str, Any], benchmark: str | None, reference_answer: Any) -> str:
    """The reference answer: by the benchmark's format, else by the fields the record has."""
    if benchmark == SAMPLE_NAME:
        return str(record["answer"]).strip()
    if benchmark is not None:
        try:
            return reference_answer(record, benchmark)
        except KeyError:
            # A hub copy may keep the answer elsewhere than the local file: infer from fields.
            pass
    guessed = _guess_format(record)
    try:
        return reference_answer(record, guessed)
    except (KeyError, ValueError) as err:
        if benchmark is not None:
            raise
        # An unnamed file: say what a record needs, not which benchmark's format was guessed.
        raise ValueError(
            "expected 'answer', 'final_answer', 'reward_model.ground_truth' or a 'solution' "
            f"with \\boxed{{}} (fields found: {sorted(record)}; as {guessed}: {err})"
        ) from err


def _guess_format(record: Mapping[str, Any]) -> str:
    """The :mod:`~llm_marl.envs.math.answers` format a record of an unnamed dataset looks like."""
    if isinstance(record.get("reward_model"), Mapping):
        return "verl"
    if record.get("final_answer") not in (None, "", []):
        return "olympiadbench"
    answer = record.get("answer")
    if isinstance(answer, str) and "####" in answer:
        return "gsm8k"
    if answer not in (None, ""):
        return "math"
    if isinstance(record.get("solution"), str):
        return "minerva_math"  # the last \\boxed{} of the worked solution
    raise KeyError(
        "no 'answer', 'final_answer', 'reward_model.ground_truth' or boxed 'solution' field "
        f"(fields: {sorted(record)})"
    )
