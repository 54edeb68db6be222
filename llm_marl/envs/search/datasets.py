"""Questions (and, where the data has them, the paragraphs that answer them) as search tasks.

``load_search_data(dataset)`` returns ``(tasks, corpus)``; ``corpus`` is None when the data holds
no paragraphs (answering then needs a live engine or the user's own corpus):

``"sample"`` (default)
    Six two-hop questions about invented places and people, written for llm_marl and shipped with
    it, with two supporting and two distracting paragraphs each: the offline smoke test.
``"hotpotqa"``
    ``$LLM_MARL_DATA_DIR/hotpotqa/dev_subsampled.jsonl``: 500 HotpotQA (distractor) dev questions
    with their ~10 paragraphs each; the corpus is every paragraph of every question (4,858
    unique), so the env is fully offline. Gold: ``answers_objects[0].spans``.
``"frames"``
    ``$LLM_MARL_DATA_DIR/frames/frames.jsonl``: the 824 FRAMES questions (no corpus).
``"webwalkerqa"``
    ``$LLM_MARL_DATA_DIR/webwalkerqa/test.json``: the 680 WebWalkerQA questions (no corpus).
A path to a ``.json`` / ``.jsonl`` / ``.csv`` / ``.parquet`` file
    Records with a question (``question``, ``question_text``, ``Question``, ``Prompt``), gold
    answers (``answers`` list, ``answer``, ``Answer``, or HotpotQA's ``answers_objects``) and,
    optionally, paragraphs (``paragraphs`` or ``contexts``: ``title``, ``text`` or
    ``paragraph_text``, ``supporting`` or ``is_supporting``).

Each task: ``task_id``, ``question``, ``answers`` (non-empty list of str), ``supporting`` (ids of
the supporting documents in the corpus; may be empty) and ``dataset``. A record without a
question or without a gold answer is a :class:`~llm_marl.errors.DataError` naming its row: a
question that cannot be scored is never played silently.

These benchmarks have a single split each (dev or test): use them for evaluation; train on the
sample, on a corpus of your own, or on a split you hold out yourself (``tasks[:n]``).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from llm_marl.data.loading import DATA_DIR_ENV, data_dir, load_records
from llm_marl.errors import DataError
from llm_marl.tools.search import Document

__all__ = ["BENCHMARKS", "SAMPLE_PATH", "load_search_data"]

SAMPLE_PATH = Path(__file__).with_name("data") / "sample.jsonl"
BENCHMARKS: dict[str, str] = {
    "hotpotqa": "hotpotqa/dev_subsampled.jsonl",
    "frames": "frames/frames.jsonl",
    "webwalkerqa": "webwalkerqa/test.json",
}
"""Benchmark name -> file under ``$LLM_MARL_DATA_DIR``."""

_QUESTION_KEYS = ("question", "question_text", "Question", "Prompt", "problem")
_CACHE: dict[str, tuple[list[dict[str, Any]], list[Document] | None]] = {}
_LOCK = threading.Lock()


def _resolve(dataset: str) -> tuple[str, Path]:
    if dataset == "sample":
        return "sample", SAMPLE_PATH
    if dataset in BENCHMARKS:
        root = data_dir()
        if root is None or not (root / BENCHMARKS[dataset]).is_file():
            raise DataError(
                f"dataset {dataset!r} is read from ${DATA_DIR_ENV}/{BENCHMARKS[dataset]}; set "
                f"{DATA_DIR_ENV} to the directory holding it, or pass a file path"
            )
        return dataset, root / BENCHMARKS[dataset]
    path = Path(dataset).expanduser()
    if not path.is_file():
        raise DataError(
            f"unknown search dataset {dataset!r}: use 'sample', one of {sorted(BENCHMARKS)}, "
            "or a path to a .json/.jsonl/.csv/.parquet file of questions and answers"
        )
    return path.stem, path


def _answers(row: dict[str, Any]) -> list[str]:
    if "answers_objects" in row:
        spans = [s for obj in row["answers_objects"] or [] for s in (obj or {}).get("spans", [])]
        return [str(s) for s in spans if str(s).strip()]
    for key in ("answers", "answer", "Answer", "gold_answers"):
        value = row.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        return [str(v) for v in values if v is not None and str(v).strip()]
    return []


def doc_id(title: str, text: str) -> str:
    """A document's id: a hash of its title and text (one paragraph shared by several
    questions is one document)."""
    return hashlib.sha1(f"{title}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _parse(
    name: str, rows: list[dict[str, Any]], where: str
) -> tuple[list[dict[str, Any]], list[Document] | None]:
    tasks: list[dict[str, Any]] = []
    docs: dict[str, Document] = {}
    groups: dict[str, list[str]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{where}: row {i} is not an object")
        question = next((row[k] for k in _QUESTION_KEYS if isinstance(row.get(k), str)), None)
        if not question or not question.strip():
            raise DataError(f"{where}: row {i} has no question (one of {list(_QUESTION_KEYS)})")
        answers = _answers(row)
        if not answers:
            raise DataError(
                f"{where}: row {i} has no gold answer; fill 'answer'/'answers' or drop the row "
                "(an unanswerable question cannot be scored)"
            )
        raw_id = next((row[k] for k in ("id", "question_id", "unique_id") if k in row), i)
        task_id = str(raw_id) if str(raw_id).startswith(f"{name}/") else f"{name}/{raw_id}"
        supporting: list[str] = []
        for para in row.get("paragraphs") or row.get("contexts") or []:
            text = para.get("text", para.get("paragraph_text"))
            title = str(para.get("title", ""))
            if not isinstance(text, str) or not text.strip():
                continue
            key = doc_id(title, text)
            docs.setdefault(key, Document(id=key, title=title, text=text))
            groups.setdefault(key, []).append(task_id)
            if para.get("supporting", para.get("is_supporting")):
                supporting.append(key)
        tasks.append(
            {
                "task_id": task_id,
                "question": question.strip(),
                "answers": answers,
                "supporting": supporting,
                "dataset": name,
            }
        )
    if not tasks:
        raise DataError(f"{where}: no questions")
    corpus = [
        Document(id=d.id, title=d.title, text=d.text, groups=tuple(groups[d.id]))
        for d in docs.values()
    ]
    return tasks, corpus or None


def load_search_data(
    dataset: str = "sample", limit: int | None = None
) -> tuple[list[dict[str, Any]], list[Document] | None]:
    """``(tasks, corpus)`` of a dataset (see the module docstring); cached per file.

    ``limit`` keeps the first ``limit`` questions (the corpus stays whole: the other questions'
    paragraphs are distractors).
    """
    name, path = _resolve(dataset)
    key = str(path.resolve())
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _parse(name, load_records(path), str(path))
        tasks, corpus = _CACHE[key]
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        tasks = tasks[:limit]
    return [dict(t) for t in tasks], corpus
