"""math_eval and its CLI: pass@1 per benchmark for scripted teams with known scores."""

from __future__ import annotations

import json
import re
import textwrap
import time

import pytest

from llm_marl.data.loading import DATA_DIR_ENV
from llm_marl.envs.math import datasets as mds
from llm_marl.envs.math.datasets import EVAL_BENCHMARKS, load_math_tasks
from llm_marl.envs.math.prompts import HINT_SYSTEM, STEP_BY_STEP
from llm_marl.errors import LLMMarlError
from llm_marl.eval import math_eval as lazy_math_eval
from llm_marl.eval.cli import main
from llm_marl.eval.math import format_report, math_eval
from llm_marl.policies.base import Completion, PolicyError, SamplingParams, ScriptedPolicy


@pytest.fixture
def shared_data(monkeypatch, data_dir):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    mds.clear_cache()
    yield data_dir
    mds.clear_cache()


def answer_book(datasets) -> dict[str, str]:
    """Problem text -> reference answer over the given datasets (problems are unique in each)."""
    return {t["problem"]: t["answer"] for name in datasets for t in load_math_tasks(name)}


def problem_of(text: str) -> str:
    """The problem inside an actor request of any of the three envs."""
    if text.startswith("Problem: "):
        match = re.match(r"Problem: (.*?)(?: \(Hint: |\n\nCurrent Solution: )", text, re.S)
        return match.group(1)
    assert text.endswith(" " + STEP_BY_STEP), text[-120:]
    return text[: -len(STEP_BY_STEP) - 1]


def oracle(book):
    return ScriptedPolicy(
        lambda conv: f"$\\boxed{{{book[problem_of(conv[-1]['content'])]}}}$", "oracle"
    )


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_oracle_and_wrong_actors_on_every_benchmark(shared_data):
    book = answer_book(EVAL_BENCHMARKS)
    started = time.perf_counter()
    report = math_eval(oracle(book), datasets=EVAL_BENCHMARKS)
    elapsed = time.perf_counter() - started
    assert report["env_id"] == "math_single-v0" and report["policies"] == {"actor": "oracle"}
    sizes = {
        "math500": 500,
        "aime24": 30,
        "amc23": 40,
        "minerva_math": 272,
        "olympiadbench": 675,
        "gsm8k": 1319,
    }
    assert list(report["benchmarks"]) == list(EVAL_BENCHMARKS)
    for name, b in report["benchmarks"].items():
        assert b["pass@1"] == 1.0, name
        assert b["num_problems"] == b["num_episodes"] == b["num_correct"] == sizes[name]
        assert b["format_rate"] == 1.0 and b["num_errors"] == 0
    assert report["average"] == 1.0
    print(f"math_eval over {sum(sizes.values())} problems: {elapsed:.1f} s")

    wrong = ScriptedPolicy(lambda conv: "I am not sure, maybe $\\boxed{-987654321.5}$.", "wrong")
    report = math_eval(wrong, datasets=EVAL_BENCHMARKS, limit=50, batch_size=20)
    assert all(b["pass@1"] == 0.0 for b in report["benchmarks"].values())
    assert report["benchmarks"]["aime24"]["num_problems"] == 30
    assert report["average"] == 0.0


def test_hint_team_and_pass_at_1_over_samples():
    book = answer_book(["sample"])
    calls = []

    def hint(conv):
        calls.append(conv)
        return "Try the simplest approach."

    # Right on even-length problems only: pass@1 is the exact fraction, repeated per sample.
    def picky(conv):
        problem = problem_of(conv[-1]["content"])
        assert "(Hint: Try the simplest approach.)" in conv[-1]["content"]
        return f"\\boxed{{{book[problem] if len(problem) % 2 == 0 else 'nope'}}}"

    expected = sum(len(p) % 2 == 0 for p in book) / len(book)
    with pytest.warns(UserWarning, match="greedy decoding"):  # AgentPO's default: greedy
        report = math_eval(
            ScriptedPolicy(picky, "picky"),
            hint_policy=ScriptedPolicy(hint, "hinter"),
            datasets="sample",
            samples=3,
            return_episodes=True,
        )
    assert report["env_id"] == "math_hint-v0" and report["samples"] == 3
    b = report["benchmarks"]["sample"]
    assert b["pass@1"] == pytest.approx(expected) and b["num_episodes"] == 90
    assert len(calls) == 90 and calls[0][0]["content"] == HINT_SYSTEM
    records = report["episodes"]["sample"]
    assert len(records) == 90 and {r["sample"] for r in records} == {0, 1, 2}
    first = records[0]
    assert [t["text"] for t in first["turns"]["hint"]] == ["Try the simplest approach."]
    assert first["reference"] == book[load_math_tasks()[0]["problem"]]
    assert "format" in format_report(report) and "average" in format_report(report)


def test_critic_team_reports_draft_and_final_accuracy():
    book = answer_book(["sample"])

    def actor(conv):
        text = conv[-1]["content"]
        if "Comment: " in text:  # revising: fixed only when the critic found the error
            fixed = "Comment: the draft is wrong" in text
            return f"\\boxed{{{book[problem_of(text)] if fixed else 'nope'}}}"
        return "\\boxed{nope}"  # every draft is wrong

    def critic(conv):
        assert "Current Solution: \\boxed{nope}" in conv[-1]["content"]
        return "the draft is wrong"

    report = math_eval(
        ScriptedPolicy(actor), critic_policy=ScriptedPolicy(critic), datasets=["sample"], limit=7
    )
    b = report["benchmarks"]["sample"]
    assert report["env_id"] == "math_critic-v0"
    assert b["pass@1"] == 1.0 and b["draft_pass@1"] == 0.0 and b["num_problems"] == 7


def test_infrastructure_failures_are_counted_not_scored():
    class Flaky:
        name = "flaky"
        trainable = False

        def generate(self, conversations, sampling, contexts=None):
            return [
                Completion(text="\\boxed{0}", finish_reason="error", metadata={"error": "HTTP 503"})
                if "$x$" in conv[-1]["content"]
                else Completion(text="\\boxed{0}")
                for conv in conversations
            ]

    report = math_eval(Flaky(), datasets="sample")
    b = report["benchmarks"]["sample"]
    failed = sum("$x$" in t["problem"] for t in load_math_tasks())
    assert failed >= 1 and b["num_errors"] == failed
    assert b["num_episodes"] == 30 and b["pass@1"] == 0.0  # over the episodes that ran

    class Down:
        name = "down"
        trainable = False

        def generate(self, conversations, sampling, contexts=None):
            raise PolicyError("connection refused")

    report = math_eval(Down(), datasets="sample", limit=4)
    assert report["benchmarks"]["sample"]["pass@1"] is None and report["average"] is None
    assert report["benchmarks"]["sample"]["num_errors"] == 4


def test_bad_arguments():
    actor = ScriptedPolicy(lambda c: "")
    with pytest.raises(ValueError, match="not both"):
        math_eval(actor, hint_policy=actor, critic_policy=actor, datasets="sample")
    with pytest.raises(ValueError, match="samples"):
        math_eval(actor, datasets="sample", samples=0)
    with pytest.raises(ValueError, match="sampling given for"):
        math_eval(actor, datasets="sample", sampling={"hint": SamplingParams()})
    with pytest.raises(ValueError, match="datasets is empty"):
        math_eval(actor, datasets="")


def test_default_sampling_is_greedy_with_agentpo_budgets():
    seen = {}

    class Recorder:
        trainable = False

        def __init__(self, name):
            self.name = name

        def generate(self, conversations, sampling, contexts=None):
            seen[self.name] = sampling
            return [Completion(text="\\boxed{1}") for _ in conversations]

    math_eval(Recorder("a"), hint_policy=Recorder("h"), datasets="sample", limit=1)
    assert seen["a"].temperature == 0.0 and seen["a"].max_new_tokens == 2048
    assert seen["h"].temperature == 0.0 and seen["h"].max_new_tokens == 768


def test_lazy_export_is_the_same_function():
    report = lazy_math_eval(ScriptedPolicy(lambda c: "\\boxed{91}"), datasets="sample", limit=1)
    assert report["benchmarks"]["sample"]["pass@1"] == 1.0  # sample/0: divisors of 36 -> 91


def test_cli_main_with_scripted_policies(tmp_path, monkeypatch, capsys, shared_data):
    book = answer_book(["sample", "aime24"])
    (tmp_path / "book.json").write_text(json.dumps(book))
    (tmp_path / "team_mod.py").write_text(
        textwrap.dedent(
            f"""
            import json, re
            BOOK = json.load(open({str(tmp_path / "book.json")!r}))

            def hint(conv):
                return "think about it"

            def actor(conv):
                text = conv[-1]["content"]
                problem = re.match(r"Problem: (.*?) \\(Hint: ", text, re.S).group(1)
                return "\\\\boxed{{" + BOOK[problem] + "}}"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out, episodes = tmp_path / "report.json", tmp_path / "episodes.jsonl"
    code = main(
        [
            "--actor", "scripted:team_mod:actor",
            "--hint", "scripted:team_mod:hint",
            "--datasets", "sample,aime24", "--limit", "5",
            "--output", str(out), "--episodes-out", str(episodes),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert report["env_id"] == "math_hint-v0"
    assert {n: b["pass@1"] for n, b in report["benchmarks"].items()} == {
        "sample": 1.0,
        "aime24": 1.0,
    }
    lines = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert len(lines) == 10 and {line["benchmark"] for line in lines} == {"sample", "aime24"}
    assert all(line["correct"] == 1.0 for line in lines)
    printed = capsys.readouterr().out
    assert "math_hint-v0" in printed and re.search(r"aime24\s+100\.0\s+5", printed)


def test_cli_errors_are_clear():
    with pytest.raises(LLMMarlError, match="no policy given: name the team"):
        main(["--datasets", "sample"])
    with pytest.raises(LLMMarlError, match="not both"):
        main(["--actor", "scripted:m:f", "--hint", "scripted:m:h", "--critic", "scripted:m:c"])
    with pytest.raises(LLMMarlError, match="scripted:MODULE:FUNCTION"):
        main(["--actor", "scripted:no_colon", "--datasets", "sample"])
    with pytest.raises(LLMMarlError, match="bad policy spec 'gpt-4o'"):
        main(["--actor", "gpt-4o", "--datasets", "sample"])
