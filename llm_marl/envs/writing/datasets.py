"""Task data of the writing envs: Reddit TL;DR posts and arXiv abstracts, plus our samples.

Task schema (every source is normalised to it)
    TL;DR: ``task_id``, ``prompt`` (the post as the agents read it: ``SUBREDDIT: r/... TITLE: ...
    POST: ... TL;DR:``, the format of ``trl-lib/tldr``), ``post`` (the body, used by the copy
    guard and the embedding relevance), ``reference`` (the gold TL;DR, or None) and, for our
    sample only, ``reference_detailed`` (a detailed summary we wrote).
    arXiv: ``task_id``, ``title``, ``abstract`` (hard line breaks joined), and ``reference``
    (None: there is no gold introduction).

Where each dataset comes from when ``dataset`` is not given (never from the network)
    ``tldr``: ``$LLM_MARL_DATA_DIR/tldr/test.jsonl`` (500 posts of the OpenAI TL;DR test set with
    their gold TL;DRs) if it exists, else the bundled sample (with a warning).
    ``arxiv``: ``$LLM_MARL_DATA_DIR/arxiv_abstracts/arxiv_data.csv`` (1,000 rows; 7 repeat an
    abstract and are dropped, leaving 993) if it exists, else the bundled sample (warning).
    ``tldr_sample`` / ``arxiv_sample``: ``data/*.jsonl`` in this package, 12 posts and 6 abstracts
    written for llm_marl (invented, not copied from anywhere).

``dataset=`` may also be a local ``.json``/``.jsonl``/``.csv``/``.parquet`` file, a list of
dicts, or a Hugging Face id (``"trl-lib/tldr"``, ``"OpenMLRL/arXiv_abstract"``; needs network).

Splits (``split=``)
    ``"all"``, ``"train"``, ``"eval"`` or a slice ``"a:b"``. The paper trains on
    ``trl-lib/tldr`` ``train[:1100]`` and evaluates on ``test[:1100]`` (arXiv:
    ``OpenMLRL/arXiv_abstract`` ``train[:1100]`` / ``val[:1100]``); with a hub id, any other
    string is passed to the hub as the split (``split="test[:1100]"``). Offline, only the test
    posts exist, so we split them by position: TL;DR eval = rows ``[0:100]``, train = the other
    400; arXiv eval = the first 200 distinct abstracts, train = the other 793; the samples: eval
    = the first 4 posts / 2 abstracts. Train and eval never share a row (and, arXiv, never an
    abstract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from llm_marl.data.loading import DATA_DIR_ENV, data_dir, load_records, load_split_tasks, warn_user
from llm_marl.errors import DataError

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class WritingData:
    """Where a writing dataset lives and how it splits."""

    name: str
    kind: str
    """``"tldr"`` or ``"arxiv"``: the task schema."""
    title: str
    local_file: str | None
    """Under ``$LLM_MARL_DATA_DIR`` (None: bundled)."""
    bundled: Path | None
    eval_rows: slice
    sample: str | None
    """The bundled fallback when the local file is missing."""


DATASETS: dict[str, WritingData] = {
    "tldr": WritingData(
        "tldr", "tldr", "Reddit TL;DR", "tldr/test.jsonl", None, slice(0, 100), "tldr_sample"
    ),
    "arxiv": WritingData(
        "arxiv",
        "arxiv",
        "arXiv abstracts",
        "arxiv_abstracts/arxiv_data.csv",
        None,
        slice(0, 200),
        "arxiv_sample",
    ),
    "tldr_sample": WritingData(
        "tldr_sample",
        "tldr",
        "the bundled TL;DR sample",
        None,
        DATA / "tldr_sample.jsonl",
        slice(0, 4),
        None,
    ),
    "arxiv_sample": WritingData(
        "arxiv_sample",
        "arxiv",
        "the bundled arXiv sample",
        None,
        DATA / "arxiv_sample.jsonl",
        slice(0, 2),
        None,
    ),
}


def load_writing_tasks(
    kind: str, dataset: str | Path | Sequence[Mapping[str, Any]] | None = None, split: str = "all"
) -> tuple[list[dict[str, Any]], str]:
    """Load, normalise and split the tasks of a writing env.

    Args:
        kind: ``"tldr"`` or ``"arxiv"`` (the env's task schema and default data).
        dataset: ``None`` (the default source), a name of :data:`DATASETS`, a local file, a
            Hugging Face id, or a list of dicts.
        split: ``"all"``, ``"train"``, ``"eval"``, ``"a:b"``, or a hub split spec (hub ids only).

    Returns ``(tasks, source)``; raises :class:`~llm_marl.errors.DataError` on bad data.
    """
    if kind not in ("tldr", "arxiv"):
        raise ValueError(f"unknown writing task kind {kind!r}; use 'tldr' or 'arxiv'")
    if dataset is not None and str(dataset) in DATASETS and DATASETS[str(dataset)].kind != kind:
        raise DataError(f"dataset {str(dataset)!r} holds {DATASETS[str(dataset)].kind} tasks")
    return load_split_tasks(kind, dataset, split, DATASETS, _default, partial(_normalise, kind))


# ---------------------------------------------------------------------------------- internals


def _default(info: WritingData) -> tuple[list[dict[str, Any]], str, WritingData]:
    if info.bundled is not None:
        records = load_records(info.bundled)
        return _normalise(info.kind, records, info.bundled.name), f"bundled {info.title}", info
    directory = data_dir()
    assert info.local_file is not None and info.sample is not None
    if directory is not None and (directory / info.local_file).is_file():
        path = directory / info.local_file
        return _normalise(info.kind, load_records(path), str(path)), str(path), info
    sample = DATASETS[info.sample]
    warn_user(
        f"{info.title} not found at ${DATA_DIR_ENV}/{info.local_file}; using {sample.title} "
        f"instead. For the real data set ${DATA_DIR_ENV} to a directory holding "
        f"{info.local_file}, or pass dataset='path/to/file'.",
    )
    tasks, _, _ = _default(sample)
    return tasks, f"{sample.title} ({info.title} not found)", sample


def _text(record: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def tldr_prompt(subreddit: str | None, title: str | None, post: str) -> str:
    """The post as ``trl-lib/tldr`` formats it (what the official agents read)."""
    head = ""
    if subreddit:
        head += f"SUBREDDIT: r/{subreddit.removeprefix('r/')}\n\n"
    if title:
        head += f"TITLE: {title}\n\n"
    return f"{head}POST: {post}\n\nTL;DR:"


def _normalise(kind: str, records: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    if not records:
        raise DataError(f"{source}: no tasks")
    tasks: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_text: set[str] = set()
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise DataError(f"{source}: record #{i} is a {type(record).__name__}, not a dict")
        raw_id = record.get("task_id", record.get("instruction_id", record.get("id")))
        task_id = str(raw_id) if raw_id is not None else f"{kind}/{i}"
        if kind == "tldr":
            task = _tldr_task(record, task_id, source, i)
            text = task["prompt"]
        else:
            task = _arxiv_task(record, task_id, source, i)
            text = task["abstract"]
        if text in seen_text:  # a repeated text could land in both splits: keep the first
            continue
        if task_id in seen_ids:
            raise DataError(f"{source}: duplicate task_id {task_id!r}")
        seen_ids.add(task_id)
        seen_text.add(text)
        tasks.append(task)
    return tasks


def _tldr_task(record: Mapping[str, Any], task_id: str, source: str, i: int) -> dict[str, Any]:
    post = _text(record, "post", "instruction", "content")
    prompt = _text(record, "prompt")
    if post is None and prompt is None:
        raise DataError(
            f"{source}: record #{i} has no post: a TL;DR task needs 'post' (or 'instruction', "
            f"or a formatted 'prompt'); keys found: {sorted(record)}"
        )
    if prompt is None:
        assert post is not None
        prompt = tldr_prompt(_text(record, "subreddit"), _text(record, "title"), post)
    if post is None:  # a hub prompt: the body is between "POST:" and "TL;DR:"
        body = prompt.split("POST:", 1)[-1]
        post = body.rsplit("TL;DR:", 1)[0].strip()
    return {
        "task_id": task_id,
        "prompt": prompt,
        "post": post,
        "reference": _text(record, "reference", "tldr", "gold_response", "completion", "summary"),
        "reference_detailed": _text(record, "reference_detailed", "detailed"),
    }


def _arxiv_task(record: Mapping[str, Any], task_id: str, source: str, i: int) -> dict[str, Any]:
    abstract = _text(record, "abstract", "abstract_text", "summaries", "summary")
    if abstract is None:
        raise DataError(
            f"{source}: record #{i} has no abstract: an arXiv task needs 'abstract' (or "
            f"'abstract_text' / 'summaries'); keys found: {sorted(record)}"
        )
    return {
        "task_id": task_id,
        "title": _text(record, "title", "titles") or "",
        "abstract": " ".join(abstract.split()),  # arXiv's hard line breaks, joined
        "reference": None,
    }
