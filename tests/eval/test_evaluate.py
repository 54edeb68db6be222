"""The generic evaluator: scripted teams with known scores on the toy envs and envs of our own."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest

from llm_marl.envs.base import InfrastructureError, LLMParallelEnv, Transition
from llm_marl.errors import ConfigError
from llm_marl.eval import (
    Benchmark,
    evaluate,
    format_report,
    pass_at_k,
    read_episodes,
    score_records,
)
from llm_marl.policies.base import Completion, PolicyError, SamplingParams, ScriptedPolicy

TARGETS = range(5)  # coordination-v0 with 3 symbols: targets 0..4, one problem each


def target_of(conv) -> int:
    return int(re.search(r"Target: (\d+)\.", conv[-1]["content"]).group(1))


def left_right(wrong_for=()):
    """A team that solves every target except those in ``wrong_for`` (right answers '9')."""
    left = ScriptedPolicy(lambda conv: str(max(0, target_of(conv) - 2)), "left")
    right = ScriptedPolicy(
        lambda conv: "9" if target_of(conv) in wrong_for else str(min(2, target_of(conv))),
        "right",
    )
    return {"left": left, "right": right}


def counting_team(successes: dict[int, int]):
    """Solves target t in the first ``successes[t]`` of its samples, fails the rest.

    collect plays the samples of a problem in order (task-major), so the count is exact.
    """
    seen: Counter[int] = Counter()

    def right(conv):
        t = target_of(conv)
        seen[t] += 1
        return str(min(2, t)) if seen[t] <= successes.get(t, 0) else "x"

    team = left_right()
    team["right"] = ScriptedPolicy(right, "counting")
    return team


def expected_pass_at_k(n: int, successes: dict[int, int], k: int) -> float:
    """The Chen et al. estimator written with binomials (independent of the library's form)."""
    return sum(1 - math.comb(n - c, k) / math.comb(n, k) for c in successes.values()) / len(
        successes
    )


# ------------------------------------------------------------------------------ pass@k itself
@pytest.mark.parametrize("n", [1, 2, 5, 10, 37, 200])
def test_pass_at_k_equals_the_binomial_form(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            exact = 1 - math.comb(n - c, k) / math.comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
    assert pass_at_k(n, 0, 1) == 0.0 and pass_at_k(n, n, 1) == 1.0


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ConfigError, match=r"pass@5 needs at least 5 samples per problem, got 2"):
        pass_at_k(2, 1, 5)
    for args in [(3, 1, 0), (3, 4, 1), (3, -1, 1), (3.0, 1, 1), (3, True, 1)]:
        with pytest.raises(ConfigError):
            pass_at_k(*args)


# ------------------------------------------------------------------------------ known scores
def test_all_right_and_all_wrong():
    report = evaluate("coordination-v0", left_right(), progress=False)
    b = report["benchmarks"]["coordination-v0"]
    assert report["env_id"] == "coordination-v0" and report["k"] == [1]
    assert b["pass@1"] == 1.0 and b["num_success"] == 5 and b["num_problems"] == 5
    assert b["mean_reward"] == 1.0 and b["components"] == {"format": 1.0, "success": 1.0}
    assert report["average"] == 1.0 and b["num_errors"] == 0

    wrong = {"left": ScriptedPolicy(lambda c: "no digit"), "right": ScriptedPolicy(lambda c: "")}
    report = evaluate("coordination-v0", wrong, samples=3, progress=False)
    b = report["benchmarks"]["coordination-v0"]
    assert report["k"] == [1, 3] and b["pass@1"] == 0.0 and b["pass@3"] == 0.0
    assert b["num_episodes"] == 15 and b["num_success"] == 0 and b["mean_reward"] == 0.0


def test_half_right_gives_the_exact_fraction():
    report = evaluate("coordination-v0", left_right(wrong_for={1, 3}), progress=False)
    b = report["benchmarks"]["coordination-v0"]
    assert b["pass@1"] == pytest.approx(3 / 5)
    # reward = 0.2 * format + 0.8 * success; a '9' is not a valid digit (format 1/2)
    assert b["mean_reward"] == pytest.approx((3 * 1.0 + 2 * 0.1) / 5)


@pytest.mark.parametrize(
    ("n", "successes"),
    [(5, {0: 0, 1: 1, 2: 2, 3: 3, 4: 5}), (8, {0: 8, 1: 0, 2: 1, 3: 7, 4: 4})],
)
def test_mixed_samples_give_the_unbiased_pass_at_k(n, successes):
    ks = [1, 2, n]
    report = evaluate("coordination-v0", counting_team(successes), samples=n, k=ks, progress=False)
    b = report["benchmarks"]["coordination-v0"]
    assert b["num_episodes"] == 5 * n and b["num_success"] == sum(successes.values())
    for k in ks:
        assert b[f"pass@{k}"] == pytest.approx(expected_pass_at_k(n, successes, k)), k
    assert b["pass@1"] == pytest.approx(sum(successes.values()) / (5 * n))
    table = format_report(report)
    assert re.search(rf"coordination-v0\s+{100 * b['pass@1']:.1f}\s+{100 * b['pass@2']:.1f}", table)


def test_k_larger_than_samples_is_rejected_before_anything_runs():
    calls = []
    team = {"left": ScriptedPolicy(calls.append), "right": ScriptedPolicy(calls.append)}
    with pytest.raises(ConfigError, match=r"pass@5 needs at least 5 samples .* samples=2"):
        evaluate("coordination-v0", team, samples=2, k=[1, 5], progress=False)
    for bad in ([0], [], ["1"], 1.5):
        with pytest.raises(ConfigError):
            evaluate("coordination-v0", team, samples=2, k=bad, progress=False)
    with pytest.raises(ConfigError, match="samples"):
        evaluate("coordination-v0", team, samples=0, progress=False)
    assert calls == []


# ------------------------------------------------------------------------------ errors
class FlakyEnv(LLMParallelEnv):
    """One agent says a number; the env's 'grader' crashes on task 'down' (an infra error)."""

    metadata = {"name": "flaky-v0"}
    possible_agents = ["solver"]

    def default_tasks(self):
        return [{"task_id": tid} for tid in ("a", "b", "down", "c")]

    def setup_episode(self, task):
        self.say("solver", f"task {task['task_id']}")
        self.set_active(["solver"])

    def transition(self, actions):
        if self.task["task_id"] == "down":
            raise InfrastructureError("grader crashed")
        ok = actions["solver"] == "42"
        return Transition(reward=float(ok), components={"ok": float(ok)}, done=True, success=ok)


def test_infrastructure_errors_are_counted_and_excluded():
    class HalfDown:
        """Answers right, but its API fails on the odd calls for task 'a'."""

        name, trainable = "half-down", False
        calls = 0

        def generate(self, conversations, sampling, contexts=None):
            out = []
            for conv in conversations:
                if conv[-1]["content"] == "task a":
                    HalfDown.calls += 1
                    if HalfDown.calls % 2:
                        out.append(Completion("", finish_reason="error", metadata={"error": "503"}))
                        continue
                out.append(Completion("42" if conv[-1]["content"] != "task c" else "41"))
            return out

    report = evaluate(
        FlakyEnv, {"solver": HalfDown()}, samples=4, k=[1, 3, 4], progress=False,
        return_episodes=True,
    )  # fmt: skip
    b = report["benchmarks"]["FlakyEnv"]
    assert report["env_id"] == "flaky-v0"
    # a: 2 of 4 samples lost to the API; down: 4 lost to the grader; b right, c wrong.
    assert b["num_errors"] == 6 and b["num_scored"] == 10 and b["num_problems"] == 4
    assert b["num_success"] == 2 + 4  # a's two scored samples and b's four
    # pass@1 is over problems with a scored sample (a: 2/2, b: 4/4, c: 0/4; 'down' has none)
    assert b["pass@1"] == pytest.approx((1 + 1 + 0) / 3)
    # pass@3/4 need 3/4 scored samples: a (2 scored) has no estimate
    assert b["pass@3"] == pytest.approx((1 + 0) / 2) and b["pass@4"] == pytest.approx(0.5)
    assert b["mean_reward"] == pytest.approx(6 / 10)
    errors = [r for r in report["episodes"]["FlakyEnv"] if r["error"]]
    assert len(errors) == 6 and all(r["success"] is None for r in errors)
    assert {r["error"] for r in errors} == {"grader crashed", "policy 'half-down' failed: 503"}
    table = format_report(report)
    assert re.search(r"FlakyEnv\s+66\.7\s+50\.0\s+50\.0\s+4\s+6\s", table)
    assert "never counted as failures" in table


def test_a_policy_that_is_down_scores_nothing():
    class Down:
        name, trainable = "down", False

        def generate(self, conversations, sampling, contexts=None):
            raise PolicyError("connection refused")

    report = evaluate("coordination-v0", {"left": Down(), "right": Down()}, progress=False)
    b = report["benchmarks"]["coordination-v0"]
    assert b["num_errors"] == 5 and b["pass@1"] is None and b["mean_reward"] is None
    assert report["average"] is None and b["components"] == {}
    assert "coordination-v0  -" in format_report(report)


# ------------------------------------------------------------------------------ envs and rows
class NoSuccessEnv(FlakyEnv):
    """Like FlakyEnv but reports no success (a graded, not solved/unsolved, task)."""

    metadata = {"name": "graded-v0"}

    def transition(self, actions):
        return Transition(reward=len(actions["solver"]) / 10, done=True)


def test_envs_without_success_report_mean_reward_only():
    solver = ScriptedPolicy(lambda conv: "x" * len(conv[-1]["content"]))
    report = evaluate(NoSuccessEnv, {"solver": solver}, progress=False)
    b = report["benchmarks"]["NoSuccessEnv"]
    assert b["pass@1"] is None and b["num_success"] is None
    assert b["mean_reward"] == pytest.approx((0.6 + 0.6 + 0.9 + 0.6) / 4)
    table = format_report(report)
    assert "pass@" not in table.splitlines()[1] and "the score is the mean reward" in table


def test_rows_env_kwargs_limit_and_batches():
    team = left_right()
    rows = [
        Benchmark("three", "coordination-v0"),
        Benchmark("five", "coordination-v0", env_kwargs={"num_symbols": 5}),
        Benchmark("given", "coordination-v0", tasks=[{"task_id": "t4", "target": 4}]),
    ]
    report = evaluate(rows, team, env_kwargs={"format_weight": 0.5}, progress=False)
    sizes = {n: b["num_problems"] for n, b in report["benchmarks"].items()}
    assert sizes == {"three": 5, "five": 9, "given": 1}
    assert report["env_kwargs"] == {"format_weight": 0.5}
    # num_symbols=5: targets 0..8; left answers t - 2, not a digit below 5 for t = 7, 8
    assert report["benchmarks"]["five"]["pass@1"] == pytest.approx(7 / 9)
    assert report["benchmarks"]["three"]["mean_reward"] == 1.0
    assert report["average"] == pytest.approx((1 + 7 / 9 + 1) / 3)

    whole = evaluate("coordination-v0", counting_team(dict.fromkeys(TARGETS, 2)), samples=3,
                     limit=4, return_episodes=True, progress=False)  # fmt: skip
    batched = evaluate("coordination-v0", counting_team(dict.fromkeys(TARGETS, 2)), samples=3,
                       limit=4, batch_size=3, return_episodes=True, progress=False)  # fmt: skip
    assert whole["benchmarks"]["coordination-v0"]["num_problems"] == 4
    # Wall times (the report's and each turn's share of its generate call) are measurements.
    assert _without_seconds(whole) == _without_seconds(batched)

    with pytest.raises(ConfigError, match="names must differ"):
        evaluate(["coordination-v0", "coordination-v0"], team, progress=False)
    with pytest.raises(ConfigError, match="cannot build its env.*num_symbols"):
        evaluate("coordination-v0", team, env_kwargs={"num_symbols": 99}, progress=False)
    with pytest.raises(ConfigError, match="unknown arguments"):
        evaluate("coordination-v0", team, env_kwargs={"max_turnz": 1}, progress=False)
    with pytest.raises(ConfigError, match="only apply to registered env ids"):
        evaluate(FlakyEnv, {"solver": team["left"]}, env_kwargs={"x": 1}, progress=False)


def test_a_team_that_does_not_fit_fails_before_any_episode():
    calls = []
    solver = ScriptedPolicy(lambda conv: calls.append(conv) or "1")
    with pytest.raises(ConfigError, match=r"'referential-v0'.*no policy for agents"):
        evaluate(["coordination-v0", "referential-v0"], {"left": solver, "right": solver},
                 progress=False)  # fmt: skip
    assert calls == []


# ------------------------------------------------------------------------------ records
def test_episodes_jsonl_round_trip(tmp_path):
    path = tmp_path / "episodes.jsonl"
    successes = {0: 1, 1: 3, 2: 0, 3: 2, 4: 3}
    rows = [
        Benchmark("coordination-v0", "coordination-v0"),
        Benchmark("wide", "coordination-v0", env_kwargs={"num_symbols": 4}),
    ]
    report = evaluate(
        rows, counting_team(successes), samples=3, k=[1, 2, 3], episodes_path=path,
        return_episodes=True, progress=False,
    )  # fmt: skip
    records = read_episodes(path)
    assert records == report["episodes"]["coordination-v0"] + report["episodes"]["wide"]
    assert len(records) == 15 + 21 and len(path.read_text().splitlines()) == 36
    first = records[0]
    assert first["task_id"] == "coordination/t=0" and first["task_index"] == 0
    assert first["sample"] == 0 and first["benchmark"] == "coordination-v0"
    (turn,) = first["turns"]["left"]
    assert {k: turn[k] for k in ("step", "text", "finish_reason")} == {
        "step": 0,
        "text": "0",
        "finish_reason": "stop",
    }
    # A scripted (text-only, unpriced) policy: one call, no tokens, no cost, some seconds.
    assert (turn["calls"], turn["prompt_tokens"], turn["completion_tokens"]) == (1.0, 0.0, 0.0)
    assert turn["cost"] is None and turn["seconds"] >= 0.0
    assert first["success"] is True and first["error"] is None and first["reward"] == 1.0
    assert first["infos"]["right"] == {"answer": 0, "malformed": False}
    assert [r["sample"] for r in records[:3]] == [0, 1, 2]
    rescored = score_records(records, k=[1, 2, 3])
    original = {
        name: {k: v for k, v in b.items() if k != "env_id"}
        for name, b in report["benchmarks"].items()
    }
    assert rescored == original and list(rescored) == ["coordination-v0", "wide"]
    for k in (1, 2, 3):
        got = original["coordination-v0"][f"pass@{k}"]
        assert got == pytest.approx(expected_pass_at_k(3, successes, k))


def test_records_survive_a_crash_and_bad_files_are_named(tmp_path):
    class Broken(FlakyEnv):
        def transition(self, actions):
            raise RuntimeError("a bug in the env")  # not infrastructure: evaluation stops

    path = tmp_path / "partial.jsonl"
    solver = ScriptedPolicy(lambda conv: "42")
    with pytest.raises(RuntimeError, match="a bug in the env"):
        evaluate([Benchmark("ok", FlakyEnv), Benchmark("broken", Broken)], {"solver": solver},
                 episodes_path=path, progress=False)  # fmt: skip
    assert [r["benchmark"] for r in read_episodes(path)] == ["ok"] * 4

    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{not json\n")
    with pytest.raises(Exception, match=r"bad\.jsonl:5: not valid JSON"):
        read_episodes(bad)
    bad.write_text(json.dumps({"benchmark": "x"}) + "\n")
    with pytest.raises(Exception, match=r"bad\.jsonl:1: record lacks"):
        read_episodes(bad)


def test_progress_bar_and_greedy_warning(capsys):
    with pytest.warns(UserWarning, match="greedy decoding for every agent"):
        evaluate("coordination-v0", left_right(), samples=2,
                 sampling=SamplingParams(temperature=0.0), progress=True)  # fmt: skip
    err = capsys.readouterr().err
    assert re.search(r"eval: 100%.*10/10", err)
    assert "collect" not in err, "one bar: the batches' own collect bars stay hidden"


def test_an_episode_that_cannot_start_is_an_error():
    class SearchDown(FlakyEnv):
        def setup_episode(self, task):
            if task["task_id"] == "down":
                raise InfrastructureError("search API down")
            super().setup_episode(task)

        def transition(self, actions):
            return Transition(reward=1.0, done=True, success=True)

    solver = ScriptedPolicy(lambda conv: "42")
    report = evaluate(SearchDown, {"solver": solver}, samples=2, progress=False,
                      return_episodes=True)  # fmt: skip
    b = report["benchmarks"]["SearchDown"]
    assert b["num_errors"] == 2 and b["num_scored"] == 6 and b["pass@1"] == 1.0
    down = [r for r in report["episodes"]["SearchDown"] if r["task_id"] == "down"]
    assert [r["error"] for r in down] == ["search API down"] * 2
    assert all(r["turns"]["solver"] == [] for r in down)


def _without_seconds(value):
    """``value`` with every ``seconds`` entry removed, recursively."""
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def test_each_mean_has_its_standard_error_over_problems():
    """pass@k and the mean reward come with the standard error over problems, shown in the
    table on a row under the means it belongs to."""
    import statistics

    solved = {0: [1, 1], 1: [1, 0], 2: [0, 0], 3: [1, 1]}  # problem -> success of 2 samples
    records = [
        {"benchmark": "toy", "task_index": p, "reward": 2.0 * s, "error": None, "success": bool(s)}
        for p, samples in solved.items()
        for s in samples
    ]
    scores = score_records(records, k=[1])["toy"]
    per_problem = [sum(s) / 2 for s in solved.values()]  # pass@1 and (halved) mean reward
    se = statistics.stdev(per_problem) / 2  # sqrt(4 problems)
    assert scores["pass@1"] == pytest.approx(0.625) and scores["pass@1_se"] == pytest.approx(se)
    assert scores["mean_reward_se"] == pytest.approx(2 * se)
    report = {"env_id": "toy-v0", "policies": {"a": "p"}, "samples": 2, "k": [1]}
    table = format_report({**report, "benchmarks": {"toy": scores}})
    assert re.search(r"toy\s+62\.5\s+4\s+0\s+1\.250\n\s+± s\.e\.\s+23\.9\s+0\.479\n", table)
    one = score_records(records[:2], k=[1])["toy"]  # one problem: no spread, no row
    assert one["pass@1_se"] is None and "± s.e.  " not in format_report(
        {**report, "benchmarks": {"toy": one}}
    )
