"""Math task loading: the bundled sample, benchmark names, local files, and clear errors."""

from __future__ import annotations

import json

import pytest

from llm_marl.data.loading import DATA_DIR_ENV, DataError
from llm_marl.envs.math import datasets as mds
from llm_marl.envs.math.datasets import BENCHMARKS, load_math_tasks, problem_text

EXPECTED_ROWS = {
    ("math500", None): 500,
    ("aime24", None): 30,
    ("amc23", None): 40,
    ("minerva_math", None): 272,
    ("olympiadbench", None): 675,
    ("gsm8k", None): 1319,
    ("gsm8k", "train"): 7473,
    ("math_level3to5", None): 8521,
}


@pytest.fixture
def shared_data(monkeypatch, data_dir):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    mds.clear_cache()
    yield data_dir
    mds.clear_cache()


@pytest.fixture
def offline(monkeypatch):
    """No local data dir and no hub: every benchmark name must fail fast and say what to do."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    mds.clear_cache()
    yield
    mds.clear_cache()


def test_default_is_the_bundled_sample(offline):
    tasks = load_math_tasks()
    assert tasks == load_math_tasks("sample")
    assert len(tasks) == 30
    assert len({t["task_id"] for t in tasks}) == 30
    for i, t in enumerate(tasks):
        assert t["task_id"] == f"sample/{i}"
        assert t["dataset"] == "sample" and t["source_index"] == i
        assert t["problem"].strip() and t["answer"].strip()
    assert tasks[1]["problem"] == "Solve for $x$: $3x - 7 = 11$." and tasks[1]["answer"] == "6"


def test_limit_keeps_the_first_problems_and_returns_a_new_list(offline):
    first = load_math_tasks(limit=3)
    assert [t["task_id"] for t in first] == ["sample/0", "sample/1", "sample/2"]
    first.append({"junk": 1})
    assert len(load_math_tasks(limit=3)) == 3, "the cache must not be mutated through results"
    with pytest.raises(ValueError, match="limit"):
        load_math_tasks(limit=0)


@pytest.mark.parametrize(("name", "split"), sorted(EXPECTED_ROWS, key=str))
def test_benchmarks_resolve_from_the_data_dir(shared_data, name, split):
    tasks = load_math_tasks(name, split=split)
    assert len(tasks) == EXPECTED_ROWS[(name, split)]
    assert len({t["task_id"] for t in tasks}) == len(tasks)
    assert all(t["problem"] and t["answer"] and t["dataset"] == name for t in tasks)


def test_reference_answers_and_problem_texts(shared_data):
    from llm_marl.tools.grading import grade

    gsm8k = load_math_tasks("gsm8k")
    assert gsm8k[0]["answer"] == "18"
    assert gsm8k[0]["problem"].startswith("Janet\u2019s ducks lay 16 eggs per day.")
    amc = load_math_tasks("amc23")[0]
    assert grade("\\boxed{27}", amc["answer"]).correct  # stored as the float 27.0
    minerva = load_math_tasks("minerva_math")[0]
    assert grade("\\boxed{1.6}", minerva["answer"]).correct  # taken from the solution's box
    math500 = load_math_tasks("math500")[0]
    assert math500["problem"].startswith("Convert the point $(0,3)$")
    level = load_math_tasks("math_level3to5", limit=1)[0]
    # verl-format prompts carry their own instruction; the env adds AgentPO's, so it is cut.
    assert "Let's think step by step" not in level["problem"]
    assert level["problem"].endswith("Compute $p + q$.")
    assert grade("\\boxed{118}", level["answer"]).correct


def test_unknown_split_and_name(shared_data):
    with pytest.raises(DataError, match=r"no split 'train'.*\['test'\]"):
        load_math_tasks("aime24", split="train")
    with pytest.raises(DataError, match="unknown math dataset 'aime2024'.*aime24"):
        load_math_tasks("aime2024")
    with pytest.raises(DataError, match="unknown split 'dev'"):
        load_math_tasks("sample", split="dev")


def test_the_sample_splits_by_position_without_overlap():
    train, held_out = load_math_tasks("sample", "train"), load_math_tasks("sample", "eval")
    assert (len(train), len(held_out)) == (24, 6)
    assert held_out == load_math_tasks("sample")[:6]
    assert not {t["problem"] for t in train} & {t["problem"] for t in held_out}


def test_offline_without_data_dir_says_what_to_do(offline):
    with pytest.raises(DataError) as info:
        load_math_tasks("aime24")
    message = str(info.value)
    assert DATA_DIR_ENV in message and "HuggingFaceH4/aime_2024" in message
    assert "aime24/test.jsonl" in message
    with pytest.raises(DataError, match="no Hugging Face copy"):
        load_math_tasks("math_level3to5")


def test_data_dir_without_the_file_falls_back_to_the_hub_and_names_both(
    offline, tmp_path, monkeypatch
):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DataError) as info:
        load_math_tasks("gsm8k")
    assert "has no gsm8k/test.jsonl" in str(info.value) and "openai/gsm8k" in str(info.value)


def test_local_files(offline, tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [
        {"question": "What is 2 + 2?", "answer": "4"},
        {"problem": "Compute 3 * 3.", "solution": "It is $\\boxed{9}$."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_math_tasks(str(path))
    assert [t["task_id"] for t in tasks] == ["mine/0", "mine/1"]
    assert [t["problem"] for t in tasks] == ["What is 2 + 2?", "Compute 3 * 3."]
    assert tasks[0]["answer"] == "4" and tasks[1]["answer"] == "9"

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "no problem field", "answer": "1"}) + "\n")
    with pytest.raises(DataError, match=r"record #0 has no problem text"):
        load_math_tasks(bad)
    with pytest.raises(DataError, match="not found"):
        load_math_tasks(str(tmp_path / "missing.jsonl"))


def test_problem_text_variants():
    assert problem_text({"Question": " Q? "}) == "Q?"
    assert (
        problem_text({"question": "Q?", "context": "Given a triangle."})
        == "Given a triangle.\n\nQ?"
    )
    assert problem_text({"question": "Q?", "context": None}) == "Q?"
    chat = {"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "Find x."}]}
    assert problem_text(chat) == "Find x."
    assert problem_text({"answer": "1"}) is None


def test_benchmark_table_covers_the_issue_names():
    assert {"math500", "aime24", "amc23", "minerva_math", "olympiadbench", "gsm8k"} <= set(
        BENCHMARKS
    )
    for name in mds.EVAL_BENCHMARKS:
        assert BENCHMARKS[name].hub_id, f"{name} needs a documented Hugging Face fallback"


def test_an_unnamed_file_without_a_usable_answer_says_which_fields_it_needs(tmp_path):
    import json

    from llm_marl.envs.math.datasets import load_math_tasks
    from llm_marl.errors import DataError

    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"problem": "1+1?", "solution": "It is two."}) + "\n")
    with pytest.raises(DataError) as info:
        load_math_tasks(str(path))
    message = str(info.value)
    assert "expected 'answer', 'final_answer'" in message and "'solution' with \\boxed{}" in message
    assert "fields found: ['problem', 'solution']" in message
