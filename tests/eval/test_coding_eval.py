"""code_eval: pass@k on the coding benchmarks with scripted canonical solutions, in a sandbox."""

from __future__ import annotations

import ast
import math
import os
import threading
from collections import Counter
from dataclasses import replace

import pytest

import llm_marl
from llm_marl.data.loading import DATA_DIR_ENV
from llm_marl.errors import ConfigError
from llm_marl.eval import code_eval, format_report, read_episodes
from llm_marl.eval.coding import CODE_SAMPLING
from llm_marl.policies.base import Completion, ScriptedPolicy

TURNS = "num_rounds"  # the coding env's write -> feedback rounds


@pytest.fixture(scope="module")
def sandbox():
    from llm_marl.tools.sandbox import ProcessSandbox

    box = ProcessSandbox(workers=2)
    yield box
    box.close()


@pytest.fixture(scope="module")
def humaneval():
    return llm_marl.make("humaneval_single-v0").unwrapped.tasks


def solution_of(tasks, conv) -> dict:
    """The task whose stub the agent's prompt shows."""
    text = conv[0]["content"]
    (task,) = [t for t in tasks if t["prompt"].strip() in text]
    return task


def canonical_coder(tasks, right=lambda task: True):
    def coder(conv):
        task = solution_of(tasks, conv)
        if not right(task):
            return f"```python\ndef {task['entry_point']}(*args):\n    return None\n```"
        return "```python\n" + task["prompt"] + task["canonical_solution"] + "\n```"

    return ScriptedPolicy(coder, "canonical")


def canonical_pair(tasks):
    """helper: the canonical function renamed aux; main: a wrapper that calls it."""

    def helper(conv):
        task = solution_of(tasks, conv)
        stub = task["prompt"].replace(f"def {task['entry_point']}(", "def aux(", 1)
        return stub.rstrip() + "\n" + task["canonical_solution"]

    def main(conv):
        task = solution_of(tasks, conv)
        node = next(
            n
            for n in ast.parse(task["prompt"]).body
            if isinstance(n, ast.FunctionDef) and n.name == task["entry_point"]
        )
        names = ", ".join(a.arg for a in node.args.args)
        return f"def {task['entry_point']}({names}):\n    return aux({names})\n"

    return {"helper": ScriptedPolicy(helper), "main": ScriptedPolicy(main)}


@pytest.mark.slow  # 10 s in the fast loop at load 17 (#22)
def test_canonical_solutions_pass_everything_and_wrong_ones_nothing(sandbox, humaneval):
    report = code_eval(
        {"coder": canonical_coder(humaneval)},
        "humaneval",
        limit=40,
        env_kwargs={"sandbox": sandbox},
        progress=False,
    )
    b = report["benchmarks"]["humaneval"]
    assert report["env_id"] == "humaneval_single-v0" and b["env_id"] == "humaneval_single-v0"
    assert b["pass@1"] == 1.0 and b["num_problems"] == 40 and b["num_errors"] == 0
    assert b["test_pass_rate"] == 1.0 and b["mean_reward"] == pytest.approx(2.1)

    report = code_eval(
        canonical_pair(humaneval), ["humaneval"], limit=12, env_kwargs={"sandbox": sandbox},
        progress=False,
    )  # fmt: skip
    b = report["benchmarks"]["humaneval"]
    assert report["env_id"] == "humaneval-v0" and b["pass@1"] == 1.0 and b["num_problems"] == 12

    wrong = canonical_coder(humaneval, right=lambda task: False)
    report = code_eval({"coder": wrong}, "humaneval", limit=12, env_kwargs={"sandbox": sandbox},
                       progress=False)  # fmt: skip
    b = report["benchmarks"]["humaneval"]
    assert b["pass@1"] == 0.0 and b["num_success"] == 0 and b["test_pass_rate"] < 0.2


@pytest.mark.slow  # among the slowest of the fast loop (issue 22: under 3 minutes)
def test_the_bundled_cooperative_sample_with_its_reference_split(sandbox):
    tasks = llm_marl.make("coop_humaneval-v0", dataset="sample").unwrapped.tasks
    team = {
        "helper": ScriptedPolicy(lambda conv: solution_of(tasks, conv)["reference_aux"]),
        "main": ScriptedPolicy(lambda conv: solution_of(tasks, conv)["reference_main"]),
    }
    report = code_eval(team, "sample", env_kwargs={"sandbox": sandbox}, progress=False)
    b = report["benchmarks"]["sample"]
    assert report["env_id"] == "coop_humaneval-v0"
    assert b["pass@1"] == 1.0 and b["num_problems"] == 16 and b["mean_reward"] == 4.0
    eval_only = code_eval(team, "sample", split="eval", env_kwargs={"sandbox": sandbox},
                          progress=False)  # fmt: skip
    assert eval_only["benchmarks"]["sample"]["num_problems"] == 4


def test_mixed_samples_give_the_unbiased_pass_at_k(sandbox, humaneval):
    n, successes = 4, [0, 1, 2, 4, 3]
    chosen = humaneval[:5]
    index = {t["task_id"]: i for i, t in enumerate(chosen)}
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def right(task):
        with lock:
            seen[task["task_id"]] += 1
            return seen[task["task_id"]] <= successes[index[task["task_id"]]]

    report = code_eval(
        {"coder": canonical_coder(chosen, right)}, "humaneval", limit=5, samples=n, k=[1, 2, 4],
        env_kwargs={"sandbox": sandbox}, progress=False, return_episodes=True,
    )  # fmt: skip
    b = report["benchmarks"]["humaneval"]
    for k in (1, 2, 4):
        expected = sum(1 - math.comb(n - c, k) / math.comb(n, k) for c in successes) / 5
        assert b[f"pass@{k}"] == pytest.approx(expected), k
    records = report["episodes"]["humaneval"]
    assert [r["sample"] for r in records[:4]] == [0, 1, 2, 3]
    assert [r["success"] for r in records[4:8]] == [True, False, False, False]
    assert records[0]["infos"]["coder"]["tests_total"] > 0


def test_sandbox_failures_are_errors_not_failures(sandbox, humaneval):
    class EveryOtherRunFails:
        """Delegates to the real sandbox, but its odd-numbered runs crash (infrastructure)."""

        def __init__(self, inner):
            self.inner, self.runs, self.lock = inner, 0, threading.Lock()

        def run_tests(self, *args, **kwargs):
            with self.lock:
                self.runs += 1
                odd = self.runs % 2 == 1
            if odd:
                raise ConnectionError("docker daemon went away")
            return self.inner.run_tests(*args, **kwargs)

        def close(self):
            pass

    report = code_eval(
        {"coder": canonical_coder(humaneval)}, "humaneval", limit=10,
        env_kwargs={"sandbox": EveryOtherRunFails(sandbox)}, progress=False, return_episodes=True,
    )  # fmt: skip
    b = report["benchmarks"]["humaneval"]
    assert b["num_errors"] == 5 and b["num_scored"] == 5 and b["pass@1"] == 1.0
    errors = [r["error"] for r in report["episodes"]["humaneval"] if r["error"]]
    assert errors == ["sandbox failure: ConnectionError: docker daemon went away"] * 5
    assert "never counted as failures" in format_report(report)


def test_train_multi_turn_evaluate_single_turn(sandbox, tmp_path):
    """The evaluation's env config is its own: the same team, one turn or two."""
    wrong = {"helper": ScriptedPolicy(lambda c: "no code"), "main": ScriptedPolicy(lambda c: "")}
    path = tmp_path / "two.jsonl"
    two = code_eval(wrong, "sample", limit=3, env_kwargs={"sandbox": sandbox, TURNS: 2},
                    episodes_path=path, progress=False)  # fmt: skip
    one = code_eval(wrong, "sample", limit=3, env_kwargs={"sandbox": sandbox}, progress=False,
                    return_episodes=True)  # fmt: skip
    assert two["env_kwargs"][TURNS] == 2 and TURNS not in one["env_kwargs"]
    assert {len(r["turns"]["main"]) for r in read_episodes(path)} == {2}
    assert {len(r["turns"]["main"]) for r in one["episodes"]["sample"]} == {1}
    assert [t["step"] for t in read_episodes(path)[0]["turns"]["helper"]] == [0, 1]
    assert two["benchmarks"]["sample"]["pass@1"] == one["benchmarks"]["sample"]["pass@1"] == 0.0


@pytest.mark.slow  # among the slowest of the fast loop (issue 22: under 3 minutes)
def test_benchmark_names_pick_the_env_and_its_data(sandbox, monkeypatch, data_dir):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    seen = []

    class Recorder:
        name, trainable = "recorder", False

        def generate(self, conversations, sampling, contexts=None):
            seen.append(sampling)
            return [Completion("I will not write code.") for _ in conversations]

    report = code_eval({"coder": Recorder()}, split="eval", env_kwargs={"sandbox": sandbox},
                       progress=False)  # fmt: skip
    got = {
        n: (b["env_id"], b["num_problems"], b["pass@1"]) for n, b in report["benchmarks"].items()
    }
    assert got == {
        "coophumaneval": ("coop_humaneval_single-v0", 16, 0.0),
        "humaneval": ("humaneval_single-v0", 32, 0.0),
        "mbpp": ("mbpp_single-v0", 16, 0.0),
    }
    assert {replace(s, seed=None, request_seeds=None) for s in seen} == {CODE_SAMPLING}
    assert (CODE_SAMPLING.temperature, CODE_SAMPLING.top_p) == (0.6, 0.6)

    with pytest.raises(ConfigError, match="helper\\+main .* or a lone coder"):
        code_eval({"main": Recorder()}, "humaneval", progress=False)
    with pytest.raises(ConfigError, match="not both"):
        code_eval({"coder": Recorder()}, "humaneval", env_ids=["mbpp_single-v0"])
    with pytest.raises(ConfigError, match="not coding envs"):
        code_eval({"coder": Recorder()}, env_ids=["math_single-v0"])


def _docker_problem() -> str | None:
    from llm_marl.tools.sandbox import DEFAULT_IMAGE, SandboxUnavailableError
    from llm_marl.tools.sandbox.image import docker_client, image_exists

    try:
        client = docker_client(timeout=10)
    except SandboxUnavailableError as err:
        return str(err)
    return None if image_exists(DEFAULT_IMAGE, client) else f"image {DEFAULT_IMAGE} not found"


@pytest.mark.docker
def test_canonical_solutions_in_the_docker_sandbox(humaneval):
    problem = _docker_problem()
    if problem is not None:
        if os.environ.get("LLM_MARL_REQUIRE_DOCKER") == "1":
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    report = code_eval(
        {"coder": canonical_coder(humaneval)}, "humaneval", limit=10, samples=2, k=[1, 2],
        sampling=CODE_SAMPLING, env_kwargs={"sandbox": "docker"}, progress=False,
    )  # fmt: skip
    b = report["benchmarks"]["humaneval"]
    assert b["pass@1"] == b["pass@2"] == 1.0 and b["num_episodes"] == 20
