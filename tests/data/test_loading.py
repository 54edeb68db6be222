"""The helpers the env families' task loaders share (llm_marl.data.loading)."""

from __future__ import annotations

import threading

import pytest

import llm_marl
from llm_marl.data.loading import TaskCache, hub_split_spec, select_split
from llm_marl.errors import DataError

ROWS = list(range(10))


@pytest.mark.parametrize("eval_rows", [slice(0, 3), slice(5, 7), slice(8, None)])
def test_train_and_eval_split_every_row_once(eval_rows):
    train = select_split(ROWS, "train", eval_rows, "t")
    held_out = select_split(ROWS, "eval", eval_rows, "t")
    assert held_out == ROWS[eval_rows]
    assert sorted(train + held_out) == ROWS and not set(train) & set(held_out)
    assert select_split(ROWS, "all", eval_rows, "t") == ROWS


@pytest.mark.parametrize(("split", "rows"), [("2:4", [2, 3]), ("[:2]", [0, 1]), ("-2:", [8, 9])])
def test_slices_pick_rows_by_position(split, rows):
    assert select_split(ROWS, split, slice(0, 1), "t") == rows


@pytest.mark.parametrize(
    ("split", "message"),
    [("test[:16]", "unknown split"), ("nope", "unknown split"), ("20:", "empty")],
)
def test_bad_or_empty_splits_raise(split, message):
    with pytest.raises(DataError, match=message):
        select_split(ROWS, split, slice(0, 1), "the rows")


def test_hub_split_specs_only_for_hub_ids():
    assert hub_split_spec("org/name", "test[:16]", ()) == "test[:16]"
    assert hub_split_spec("org/name", "eval", ()) is None  # ours, applied after loading
    assert hub_split_spec("org/name", "2:5", ()) is None
    assert hub_split_spec("org/name", "test", {"org/name"}) is None  # a family's own name
    assert hub_split_spec("file.jsonl", "test[:16]", ()) is None
    assert hub_split_spec(None, "test[:16]", ()) is None


def test_task_cache_loads_once_per_key_and_data_dir(tmp_path, monkeypatch):
    cache: TaskCache[list[int]] = TaskCache()
    loads: list[str] = []

    def load() -> list[int]:
        loads.append("x")
        return [len(loads)]

    monkeypatch.delenv("LLM_MARL_DATA_DIR", raising=False)
    threads = [threading.Thread(target=cache.get, args=(("a",), load)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get(("a",), load) == [1] and len(loads) == 1
    assert cache.get(("b",), load) == [2]
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(tmp_path))  # another data directory
    assert cache.get(("a",), load) == [3]
    cache.clear()
    assert cache.get(("a",), load) == [4]


@pytest.mark.parametrize(
    ("env_id", "kwargs"), [("tldr-v0", {}), ("coop_humaneval-v0", {"sandbox": "process"})]
)
def test_missing_data_warning_points_at_the_users_line(env_id, kwargs, tmp_path, monkeypatch):
    # An empty data directory: the benchmark file is missing and the bundled sample stands in.
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(tmp_path))
    with pytest.warns(UserWarning, match="not found") as record:
        env = llm_marl.make(env_id, **kwargs)
    env.close()
    assert [w.filename for w in record if "not found" in str(w.message)] == [__file__]
