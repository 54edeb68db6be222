"""``llm-marl eval``: families, any env, policy specs, sampling flags, outputs and clear errors."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from llm_marl.cli import main as top_main
from llm_marl.eval.cli import main
from tests.policies.spec_table import BAD


@pytest.fixture
def team(tmp_path, monkeypatch):
    """A module of scripted agents (``scripted:cli_team:NAME``) that records what it is asked."""
    (tmp_path / "cli_team.py").write_text(
        textwrap.dedent(
            """
            import re
            import llm_marl
            from llm_marl.policies import Completion

            TASKS = llm_marl.make("humaneval_single-v0").unwrapped.tasks
            SEEN = []

            def coder(conv):
                text = conv[0]["content"]
                (task,) = [t for t in TASKS if t["prompt"].strip() in text]
                return task["prompt"] + task["canonical_solution"]

            def left(conv):
                t = int(re.search(r"Target: (\\d+)", conv[-1]["content"]).group(1))
                return str(max(0, t - 2))

            SAMPLE = llm_marl.make("websearch-v0").unwrapped.tasks

            def worker_knows(conv):
                # The worker's report: the gold answer of the question its subtask quotes.
                text = " ".join(str(m.get("content")) for m in conv)
                (task,) = [t for t in SAMPLE if t["question"] in text]
                return task["answers"][0]

            def flaky_left(conv):
                if "Target: 0" in conv[-1]["content"]:
                    raise llm_marl.errors.PolicyError("rate limited")
                return left(conv)

            def right(conv):
                t = int(re.search(r"Target: (\\d+)", conv[-1]["content"]).group(1))
                return str(min(2, t))

            class Recorder:
                trainable = False

                def __init__(self, name, text):
                    self.name, self.text = name, text

                def generate(self, conversations, sampling, contexts=None):
                    SEEN.append((self.name, sampling))
                    return [Completion(self.text) for _ in conversations]

            EXPERT_ASKED = []

            def expert(conv):
                EXPERT_ASKED.append(conv[-1]["content"])
                return 'Edits: {"main": "return the reference solution"}'

            def reviser(conv):
                # Wrong until an expert's edit is in the latest message, then right.
                (task,) = [t for t in TASKS if t["prompt"].strip() in conv[0]["content"]]
                if len(conv) > 1 and "expert" in conv[-1]["content"]:
                    return task["prompt"] + task["canonical_solution"]
                return task["prompt"] + "    return None\\n"

            ACTOR = Recorder("actor", "\\\\boxed{1}")
            HINT = Recorder("hint", "think")
            CODER = Recorder("coder", "no code")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    sys.modules.pop("cli_team", None)
    return importlib.import_module("cli_team")


def test_help_lists_families_roles_and_spec_forms(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for word in ("--family", "{coding,math,math_team,search,writing}", "--env", "--agent", "--actor",
                 "--hint", "--critic", "--coordinator", "--assigner", "--solvers", "--helper",
                 "--main", "--coder", "--k", "--env-arg", "--episodes-out",
                 "hf:PATH", "openai:MODEL", "vllm:PATH", "scripted:MODULE:FUNCTION"):  # fmt: skip
        assert word in text, word


def test_coding_family_end_to_end(team, tmp_path, capsys):
    out, episodes = tmp_path / "report.json", tmp_path / "episodes.jsonl"
    code = top_main(
        ["eval", "--coder", "scripted:cli_team:coder", "--benchmarks", "humaneval", "--limit", "4",
         "--samples", "2", "--k", "1,2", "--temperature", "0.8",
         "--env-arg", "sandbox=process", "--output", str(out), "--episodes-out", str(episodes)]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    b = report["benchmarks"]["humaneval"]
    assert report["env_id"] == "humaneval_single-v0" and report["k"] == [1, 2]
    assert b["pass@1"] == b["pass@2"] == 1.0 and b["num_episodes"] == 8
    assert report["env_kwargs"] == {"sandbox": "process"}
    lines = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert len(lines) == 8 and all(r["success"] for r in lines)
    printed = capsys.readouterr().out
    assert re.search(r"humaneval\s+100\.0\s+100\.0\s+4\s+0\s+2\.100\s+100%", printed)

    assert main(["--env", "humaneval_single-v0", "--coder", "scripted:cli_team:coder",
                 "--limit", "2", "--env-arg", "sandbox=process", "--no-progress"]) == 0  # fmt: skip
    assert re.search(r"humaneval_single-v0\s+100\.0\s+2\s+0", capsys.readouterr().out)


def test_coding_expert_reviews_the_program_between_rounds(team, tmp_path):
    out = tmp_path / "report.json"
    argv = ["--coder", "scripted:cli_team:reviser", "--benchmarks", "humaneval", "--limit", "2",
            "--env-arg", "sandbox=process", "--env-arg", "num_rounds=2", "--output", str(out),
            "--no-progress"]  # fmt: skip
    expert = ["--env-arg", "feedback=expert", "--expert", "scripted:cli_team:expert"]
    assert main([*argv, *expert]) == 0
    report = json.loads(out.read_text())
    assert report["benchmarks"]["humaneval"]["pass@1"] == 1.0
    assert len(team.EXPERT_ASKED) == 2, "asked once per episode, after round 1"
    assert all("reviewing code written by a single agent" in t for t in team.EXPERT_ASKED)
    # The control: the same coder with the default (test-report) feedback never gets an edit.
    assert main(argv) == 0
    assert json.loads(out.read_text())["benchmarks"]["humaneval"]["pass@1"] == 0.0
    assert len(team.EXPERT_ASKED) == 2


def test_sampling_flags_reach_each_agent(team):
    main(["--actor", "scripted:cli_team:ACTOR", "--hint", "scripted:cli_team:HINT",
          "--datasets", "sample", "--limit", "2", "--no-progress"])  # fmt: skip
    seen = {name: s for name, s in team.SEEN}
    assert (seen["actor"].max_new_tokens, seen["actor"].temperature) == (2048, 0.0)
    assert (seen["hint"].max_new_tokens, seen["hint"].temperature) == (768, 0.0)
    team.SEEN.clear()
    main(["--actor", "scripted:cli_team:ACTOR", "--hint", "scripted:cli_team:HINT",
          "--datasets", "sample", "--limit", "2", "--max-new-tokens", "100",
          "--collaborator-max-new-tokens", "50", "--temperature", "0.5", "--top-p", "0.9",
          "--samples", "2", "--no-progress"])  # fmt: skip
    seen = {name: s for name, s in team.SEEN}
    assert (seen["actor"].max_new_tokens, seen["actor"].temperature) == (100, 0.5)
    assert (seen["hint"].max_new_tokens, seen["hint"].top_p) == (50, 0.9)
    team.SEEN.clear()
    main(["--agent", "coder=scripted:cli_team:CODER", "--benchmarks", "sample", "--limit", "1",
          "--env-arg", "sandbox=process", "--no-progress"])  # fmt: skip
    ((name, sampling),) = team.SEEN
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_p) == (256, 0.6, 0.6)


def test_any_env_with_its_own_config(team, capsys):
    assert main(["--env", "coordination-v0", "--agent", "left=scripted:cli_team:left",
                 "--agent", "right=scripted:cli_team:right", "--env-arg", "num_symbols=5",
                 "--no-progress"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "num_symbols=5" in printed
    assert re.search(r"coordination-v0\s+77\.8\s+9\s+0", printed)  # targets 7, 8 unreachable


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--datasets", "sample"], "no policy given: name the team"),
        (["--actor", "scripted:m:a", "--coder", "scripted:m:c"], "belong to no single family"),
        (["--family", "math", "--env", "humaneval-v0", "--actor", "x"], "not math envs"),
        (["--agent", "coder"], "--agent expects ROLE=SPEC"),
        (["--coder", "hf:a", "--agent", "coder=hf:b"], "two policies for the role 'coder'"),
        (["--coder", "scripted:m:c", "--k", "1,x"], "--k expects comma-separated integers"),
        (["--main", "scripted:m:c"], "helper\\+main .* or a lone coder"),
        (["--coder", "gpt-4o"], "bad policy spec 'gpt-4o'"),
        (["--coder", "vllm:/models/x"], "vllm:/models/x: "),  # not installed, or no such model
        (
            ["--coder", "scripted:cli_team:CODER", "--collaborator-max-new-tokens", "9"],
            "applies to a math collaborator",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--samples", "2", "--k", "5"],
            "pass@5 needs at least 5 samples",
        ),
        (["--coder", "scripted:cli_team:CODER", "--temperature", "-1"], "temperature must be"),
        (["--coder", "scripted:cli_team:CODER", "--env-arg", "oops"], "--env-arg expects"),
        (
            ["--coder", "scripted:cli_team:CODER", "--env-arg", "sandboxx=process"],
            "unknown arguments \\['sandboxx'\\]",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--expert", "scripted:cli_team:expert"],
            "never asked unless the coding env gives expert feedback",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--env-arg", "feedback=expert"],
            "needs an expert: pass --expert SPEC",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--env-arg", "feedback=expert", "--expert=x"],
            "bad policy spec 'x'",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--env-arg", "expert=x"],
            "pass --expert SPEC, not --env-arg expert",
        ),
        (
            ["--actor", "scripted:cli_team:ACTOR", "--datasets", "no_such_benchmark"],
            "no_such_benchmark",
        ),
        # Each of the following was a traceback, or a run that ignored the option: checked now
        # before any model is loaded or episode played.
        (["--actor", "scripted:cli_team:ACTOR", "--limit", "0"], "--limit must be an int >= 1"),
        (["--coder", "scripted:cli_team:CODER", "--seed", "-1"], "--seed must be an int in"),
        (["--coder", "scripted:cli_team:CODER", "--benchmarks", ""], "names no benchmark"),
        (["--coder", "scripted:cli_team:CODER", "--benchmarks", ",,"], "names no benchmark"),
        (
            ["--coder", "scripted:cli_team:CODER", "--output", "/proc/no/report.json"],
            "--output /proc/no/report.json: /proc/no is not a directory",
        ),
        (
            ["--coder", "scripted:cli_team:CODER", "--episodes-out", "/proc/episodes.jsonl"],
            "--episodes-out /proc/episodes.jsonl: cannot write there",
        ),
        (["--coder", "scripted:cli_team:CODER", "--output", "/"], "that is a directory"),
    ],
)
def test_user_errors_are_one_line(team, argv, message, capsys):
    assert top_main(["eval", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llm-marl eval: error: ") and err.count("\n") == 1, err
    assert re.search(message, err) and "Traceback" not in err


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_loading_local_models_prints_no_transformers_bars(tmp_path, capfd):
    from llm_marl.policies import build_tiny_lm

    path = build_tiny_lm(tmp_path / "lm")
    capfd.readouterr()
    assert main(["--env", "coordination-v0", "--agent", f"left=hf:{path}",
                 "--agent", f"right=hf:{path}", "--samples", "1", "--no-progress"]) == 0  # fmt: skip
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err


@pytest.mark.parametrize(("spec", "message"), BAD, ids=[s or "empty" for s, _ in BAD])
def test_bad_specs_of_the_shared_table_are_refused_by_llm_marl_eval(spec, message, capsys):
    assert top_main(["eval", "--actor", spec, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_eval_exits_non_zero_with_one_line_when_every_episode_failed(team, capsys):
    # A dead OpenAI URL: every request is refused. The table still prints (with its error
    # count); the exit status and one line on stderr say that nothing was scored.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    left = f"left=openai:m@{dead},max_retries=0,timeout=5"
    argv = ["--env", "coordination-v0", "--agent", left, "--agent", "right=scripted:cli_team:right"]
    assert top_main(["eval", *argv, "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert re.search(r"coordination-v0\s+-\s+5\s+5\s+-", captured.out), captured.out
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("llm-marl eval: error: every episode of 'coordination-v0'")
    assert "5 of 5" in captured.err and "127.0.0.1" in captured.err  # the first error


def test_eval_exits_zero_when_some_episodes_of_each_benchmark_scored(team, capsys):
    argv = ["--env", "coordination-v0", "--agent", "left=scripted:cli_team:flaky_left"]
    argv += ["--agent", "right=scripted:cli_team:right", "--no-progress"]
    assert top_main(["eval", *argv]) == 0
    assert re.search(r"coordination-v0\s+\S+\s+5\s+1\s", capsys.readouterr().out)


def test_native_openai_tool_calls_reach_the_env(team, capsys):
    # A server that answers the planner with message.tool_calls and content null (as vLLM's
    # tool parsers and the OpenAI API do): the delegation must happen, not an empty answer.
    from llm_marl.policies import PolicyServer, ScriptedPolicy

    asked = []

    def planner(n, body):
        last = body["messages"][-1]
        asked.append(last["role"])
        if last["role"] == "tool":  # the worker's report: answer with it
            message = {"role": "assistant", "content": "\\boxed{" + last["content"] + "}"}
        else:
            arguments = json.dumps({"subtask": last["content"]})
            call = {"id": "c1", "type": "function"}
            call["function"] = {"name": "delegate", "arguments": arguments}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return 200, {}, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}

    with PolicyServer(ScriptedPolicy(lambda c: ""), model_name="p", intercept=planner) as server:
        argv = ["--env", "websearch-v0", "--limit", "2", "--no-progress"]
        argv += ["--agent", f"planner=openai:p@{server.url}", "--agent"]
        argv += ["worker=scripted:cli_team:worker_knows"]
        assert top_main(["eval", *argv]) == 0
    assert sorted(asked) == ["tool", "tool", "user", "user"]  # delegated, then answered
    assert re.search(r"sample\s+100\.0\s+2\s+0\s+1\.000", capsys.readouterr().out)
