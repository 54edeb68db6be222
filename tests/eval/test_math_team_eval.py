"""The math team family: ``llm-marl eval`` on math_debate-v0 / math_roles-v0, the team's
majority answer scored per benchmark (pass@1, unbiased pass@k), episodes to JSONL."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap

import pytest

from llm_marl.envs.math.datasets import load_math_tasks
from llm_marl.errors import ConfigError, LLMMarlError
from llm_marl.eval.cli import main
from llm_marl.eval.math import ACTOR_SAMPLING, COLLABORATOR_SAMPLING
from llm_marl.eval.math_team import MATH_TEAM
from llm_marl.eval.records import read_episodes
from llm_marl.policies import HFPolicy, SamplingParams, ScriptedPolicy

SAMPLE = {t["problem"]: t["answer"] for t in load_math_tasks("sample")}


def problem_in(text: str) -> str:
    """The sample problem a solver's request is about."""
    (problem,) = [p for p in SAMPLE if p in text]
    return problem


@pytest.fixture
def team(tmp_path, monkeypatch):
    """Scripted agents (``scripted:team_agents:NAME``): right, wrong and boxless solvers."""
    book = tmp_path / "book.json"
    book.write_text(json.dumps(SAMPLE))
    (tmp_path / "team_agents.py").write_text(
        textwrap.dedent(
            f"""
            import json
            BOOK = json.load(open({str(book)!r}))

            def answer(conv):
                return next(a for p, a in BOOK.items() if p in conv[-1]["content"])

            def right(conv):
                return "So the answer is $\\\\boxed{{" + answer(conv) + "}}$."

            def wrong(conv):
                return "$\\\\boxed{{-7}}$"

            def guide(conv):
                return "Solver 1: check the algebra. Solver 2: estimate first."
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "scripted:team_agents:"


def test_llm_marl_eval_scores_the_debate_teams_vote(team, tmp_path, capsys):
    out, episodes = tmp_path / "report.json", tmp_path / "episodes.jsonl"
    argv = [
        "--coordinator", team + "guide", "--solvers", team + "right",
        "--agent", f"debater_3={team}wrong",  # outvoted: the team is right, debater_3 is not
        "--family", "math_team", "--benchmarks", "sample", "--limit", "4",
        "--env-arg", "rounds=1", "--output", str(out), "--episodes-out", str(episodes),
        "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["env_id"] == "math_debate-v0" and report["env_kwargs"] == {"rounds": 1}
    assert list(report["policies"]) == ["coordinator", "debater_1", "debater_2", "debater_3"]
    row = report["benchmarks"]["sample"]
    assert (row["pass@1"], row["num_problems"], row["num_correct"]) == (1.0, 4, 4)
    assert row["solver_pass@1"] == pytest.approx(2 / 3)  # two right debaters of three
    assert row["agreement"] == pytest.approx(2 / 3) and row["initial_pass@1"] == pytest.approx(
        2 / 3
    )
    records = read_episodes(episodes)
    assert len(records) == 4 and all(r["env_id"] == "math_debate-v0" for r in records)
    for r in records:
        assert r["correct"] == 1.0 and r["success"] is True and r["answer"] == r["reference"]
        assert sorted(r["votes"].values()) == [1, 2]
        assert r["infos"]["debater_3"]["own_answer"] == "-7"
        assert len(r["turns"]["debater_1"]) == 2  # round 0 and one revision round
    table = capsys.readouterr().out
    assert "math_debate-v0" in table
    assert re.search(r"sample\s+100\.0\s+4\s+0\s+1\.000\s+100%\s+66\.7\s+67%\s+66\.7", table), table


def test_the_roles_team_outvoted_by_wrong_solvers_scores_zero(team, tmp_path, capsys):
    argv = [
        "--assigner", team + "guide", "--solvers", team + "wrong",
        "--benchmarks", "sample", "--limit", "3", "--env-arg", "num_solvers=2", "--no-progress",
        "--output", str(tmp_path / "r.json"),
    ]  # fmt: skip
    assert main(argv) == 0  # the family is inferred from the roles
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["env_id"] == "math_roles-v0"
    assert list(report["policies"]) == ["assigner", "solver_1", "solver_2"]
    row = report["benchmarks"]["sample"]
    assert (row["pass@1"], row["solver_pass@1"], row["agreement"]) == (0.0, 0.0, 1.0)
    assert "initial_pass@1" not in row  # a debate-only column
    assert "round0" not in capsys.readouterr().out


def test_unbiased_pass_at_k_of_the_teams_answer_with_a_sampled_tiny_coordinator(tiny_lm_path):
    # The solvers are right only when the coordinator's guide has an even length, so the
    # team's success varies with the coordinator's samples.
    def parity(conv):
        text = conv[-1]["content"]
        guide = text.split("<Debate Guide>\n", 1)[1].split("\n\nSolve the problem", 1)[0]
        return f"\\boxed{{{SAMPLE[problem_in(text)] if len(guide) % 2 == 0 else 'no'}}}"

    solver = ScriptedPolicy(parity, "parity")
    calls: list[int] = []
    generate = solver.generate

    def counted(conversations, sampling, contexts=None):
        calls.append(len(conversations))
        return generate(conversations, sampling, contexts)

    solver.generate = counted  # type: ignore[method-assign]
    coordinator = HFPolicy(tiny_lm_path, name="coordinator", seed=0)
    report = MATH_TEAM.evaluate(
        {"coordinator": coordinator, "solvers": solver},
        "sample",
        limit=6,
        samples=4,
        k=[1, 2, 4],
        env_kwargs={"num_debaters": 2, "rounds": 0},
        sampling={"coordinator": SamplingParams(max_new_tokens=6, temperature=1.0)},
        progress=False,
        return_episodes=True,
    )
    row, records = report["benchmarks"]["sample"], report["episodes"]["sample"]
    assert report["policies"] == {
        "coordinator": "coordinator",
        "debater_1": "parity",
        "debater_2": "parity",
    }
    # One policy object played both debaters: one batched call per step, both debaters in it.
    assert calls == [2 * 6 * 4]
    by_problem: dict[int, list[bool]] = {}
    for r in records:
        by_problem.setdefault(r["task_index"], []).append(r["success"])
    assert {len(v) for v in by_problem.values()} == {4}
    counts = [sum(v) for v in by_problem.values()]
    assert 0 < sum(counts) < 24, counts  # the samples differ
    from math import comb

    for k in (1, 2, 4):
        expected = sum(1 - comb(4 - c, k) / comb(4, k) for c in counts) / len(counts)
        assert row[f"pass@{k}"] == pytest.approx(expected)
    assert row["pass@1"] <= row["pass@2"] <= row["pass@4"]


def test_solvers_stand_for_every_solver_the_env_has():
    solvers = MATH_TEAM.team_for(
        {"coordinator": "C", "solvers": "S"}, "math_debate-v0", {"num_debaters": 4}
    )
    assert solvers == {
        "coordinator": "C",
        **dict.fromkeys(["debater_1", "debater_2", "debater_3", "debater_4"], "S"),
    }
    own = MATH_TEAM.team_for({"assigner": "A", "solvers": "S", "solver_2": "T"}, "math_roles-v0")
    assert own == {"assigner": "A", "solver_1": "S", "solver_2": "T", "solver_3": "S"}
    assert MATH_TEAM.team_for({"assigner": "A", "solver_1": "S"}, "math_roles-v0") == {
        "assigner": "A",
        "solver_1": "S",
    }  # no "solvers": as given (the evaluator checks it against the env)
    # Default sampling: AgentPO's greedy budgets, the collaborator's and the solvers'.
    assert MATH_TEAM.default_sampling(["coordinator", "solvers"]) == {
        "coordinator": COLLABORATOR_SAMPLING,
        "solvers": ACTOR_SAMPLING,
    }


def test_the_sampling_flags_reach_the_collaborator_and_every_solver(team):
    seen: dict[str, SamplingParams] = {}

    class Recorder(ScriptedPolicy):
        def generate(self, conversations, sampling, contexts=None):
            seen[self.name] = sampling
            return super().generate(conversations, sampling, contexts)

    policies = {
        "coordinator": Recorder(lambda c: "guide", "coordinator"),
        "solvers": Recorder(lambda c: "\\boxed{1}", "solvers"),
    }
    MATH_TEAM.evaluate(
        policies,
        "sample",
        limit=1,
        env_kwargs={"rounds": 0},
        sampling={"solvers": SamplingParams(max_new_tokens=99, temperature=0.0)},
        progress=False,
    )
    # (collect seeds each step's sampling; the rest is the family's default / the caller's)
    assert (
        dataclasses.replace(seen["coordinator"], seed=None, request_seeds=None)
        == COLLABORATOR_SAMPLING
    )
    assert (seen["solvers"].max_new_tokens, seen["solvers"].temperature) == (99, 0.0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--coordinator", "scripted:team_agents:guide"], "the coordinator's team has no solvers"),
        (["--coordinator", "scripted:team_agents:guide", "--assigner", "scripted:team_agents:guide", "--solvers", "scripted:team_agents:right"],
         "one collaborator, coordinator"),
        (["--family", "math_team", "--solvers", "scripted:team_agents:right"], "one collaborator"),
        (["--coordinator", "scripted:team_agents:guide", "--solvers", "scripted:team_agents:right", "--env-arg", "rounds=-1"],
         "rounds must be an int >= 0"),
        (["--family", "math_team", "--env", "math_hint-v0", "--coordinator", "scripted:team_agents:guide"],
         "not math_team envs: math_hint-v0"),
    ],
)  # fmt: skip
def test_bad_teams_are_refused_with_a_clear_error(team, argv, message):
    with pytest.raises(LLMMarlError, match=re.escape(message)):
        main([*argv, "--benchmarks", "sample", "--no-progress"])


def test_a_solver_the_env_does_not_have_is_named():
    with pytest.raises(ConfigError, match=r"unknown agents \['debater_4'\]"):
        MATH_TEAM.evaluate(
            {"coordinator": ScriptedPolicy(lambda c: "g", "c"), "solvers": ScriptedPolicy(lambda c: "s", "s"),
             "debater_4": ScriptedPolicy(lambda c: "s", "s")},
            "sample",
            limit=1,
            progress=False,
        )  # fmt: skip
