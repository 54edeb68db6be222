"""``llm-marl eval`` on MATPO's search benchmarks: the search family, its engines and its judge."""

from __future__ import annotations

import re
import textwrap

import pytest

import llm_marl
from llm_marl.cli import main
from llm_marl.errors import ConfigError


@pytest.fixture
def team(tmp_path, monkeypatch):
    """``scripted:search_team:NAME``: a planner that delegates the question and answers with the
    worker's report; workers that report the gold answer, or search first; a judge."""
    (tmp_path / "search_team.py").write_text(
        textwrap.dedent(
            """
            import json
            import llm_marl

            SAMPLE = llm_marl.make("websearch-v0").unwrapped.tasks
            JUDGED = []

            def _call(name, **arguments):
                body = json.dumps({"name": name, "arguments": arguments})
                return f"<tool_call>{body}</tool_call>"

            def planner(conv):
                if conv[-1]["role"] == "tool":
                    return "\\\\boxed{" + conv[-1]["content"] + "}"
                return _call("delegate", subtask=conv[-1]["content"])

            def worker(conv):
                text = " ".join(str(m.get("content")) for m in conv)
                (task,) = [t for t in SAMPLE if t["question"] in text]
                return task["answers"][0]

            def searching_worker(conv):
                if conv[-1]["role"] == "tool":
                    return "nothing found"
                return _call("search", query="Tamsen Prize")

            def judge(conv):
                JUDGED.append(conv[-1]["content"])
                return "CORRECT"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import search_team

    return search_team


TEAM = ["--planner", "scripted:search_team:planner", "--worker", "scripted:search_team:worker"]


def test_the_sample_benchmark_reports_em_f1_and_format(team, capsys):
    assert main(["eval", *TEAM, "--benchmarks", "sample", "--limit", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("websearch-v0  (")
    header = out.splitlines()[1].split()
    assert header[-3:] == ["EM", "F1", "format"] and "judge" not in header
    assert re.search(r"sample\s+100\.0\s+3\s+0\s+1\.000\s+100\.0\s+100\.0\s+100%", out), out


def test_a_judge_adds_its_column_and_grades_success(team, capsys):
    argv = [*TEAM, "--limit", "2", "--judge", "scripted:search_team:judge", "--no-progress"]
    assert main(["eval", *argv]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[-4:] == ["EM", "F1", "format", "judge"]
    assert re.search(r"sample\s+100\.0\s+2\s+0\s+.*100\.0\s*$", out, re.M), out
    assert len(team.JUDGED) == 2 and "Predicted answer" in team.JUDGED[0]


def test_a_live_engine_replayed_from_an_empty_cache_fails_every_episode(team, tmp_path, capsys):
    # --engine reaches the env as an engine object: in replay mode, with no recorded answer,
    # every search is an infrastructure failure (no network is touched), so nothing is scored.
    argv = ["--planner", "scripted:search_team:planner"]
    argv += ["--worker", "scripted:search_team:searching_worker", "--limit", "2"]
    argv += ["--engine", "brave", "--search-cache", str(tmp_path / "cache")]
    argv += ["--cache-mode", "replay", "--no-progress"]
    assert main(["eval", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "every episode of 'sample' (2 of 2) failed" in err
    assert "replay" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--env", "websearch-v0", "--env-arg", "engine=serper"], "pass --engine NAME"),
        (["--engine", "serper"], "SerperSearch needs an API key"),
        (["--search-cache", "x"], "need a live --engine"),
        (["--engine", "local", "--cache-mode", "replay"], "apply to live engines"),
        (["--judge", "gpt4"], "bad policy spec 'gpt4'"),
        (["--benchmarks", "frames", "--limit", "1"], "frames"),
    ],
)
def test_search_user_errors_are_one_line(team, capsys, monkeypatch, argv, message):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    monkeypatch.setenv("LLM_MARL_DATA_DIR", "/nonexistent")
    assert main(["eval", *TEAM, *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and message in err, err


def test_search_options_belong_to_the_search_family(capsys):
    assert main(["eval", "--actor", "scripted:m:f", "--engine", "serper"]) == 2
    assert "apply to the search family" in capsys.readouterr().err


def test_the_env_refuses_an_engine_that_is_not_one():
    with pytest.raises(ConfigError, match="engine must be a search engine"):
        llm_marl.make("websearch-v0", engine="serper")
