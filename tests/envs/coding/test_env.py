"""The coding envs end to end, with the process sandbox (no Docker needed)."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

import pytest

import llm_marl
from llm_marl.envs.coding.env import CodeCollabEnv, CodeSingleEnv
from llm_marl.envs.vector import VectorEnv
from llm_marl.errors import ConfigError


@pytest.fixture(scope="module")
def sandbox():
    from llm_marl.tools.sandbox import ProcessSandbox

    box = ProcessSandbox(workers=2)
    yield box
    box.close()


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_MARL_DATA_DIR", str(tmp_path))


def _sample_env(sandbox, **kwargs):
    return llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox=sandbox, **kwargs)


def _play(env, task, actions):
    obs, infos = env.reset(seed=0, options={"task": task})
    obs, rewards, terms, truncs, infos = env.step(actions)
    return rewards, infos, terms, truncs


def test_make_is_cheap_and_offline(offline):
    with pytest.warns(UserWarning, match="bundled cooperative sample"):
        env = llm_marl.make("coop_humaneval-v0")
    base = env.unwrapped
    assert isinstance(base, CodeCollabEnv) and base.possible_agents == ["helper", "main"]
    assert base._sandbox is None, "the sandbox starts on the first program run, not in make()"
    assert "bundled sample" in base.dataset_source and len(base.tasks) == 16
    assert base.metadata["name"] == "coop_humaneval-v0"
    single = llm_marl.make("humaneval_single-v0").unwrapped
    assert isinstance(single, CodeSingleEnv) and single.possible_agents == ["coder"]
    assert single.metadata["name"] == "humaneval_single-v0" and len(single.tasks) == 164


def test_prompts_are_private_and_name_the_entry_point(sandbox):
    env = _sample_env(sandbox)
    obs, infos = env.reset(seed=0, options={"task_id": "CoopSample/2"})
    assert all(infos[a]["active"] for a in env.agents)
    helper, main = obs["helper"][0]["content"], obs["main"][0]["content"]
    assert "`aux`" in helper and "gcd_of_list" in helper
    assert "def gcd_of_list(nums):" in main and "Do not define `aux`" in main
    assert "assert" not in helper + main, "no test is shown"


@pytest.mark.slow  # 14 s in the fast loop at load 17 (#22)
def test_reference_team_gets_the_maximum_on_every_sample_problem(sandbox):
    env = _sample_env(sandbox)
    for task in env.tasks:
        rewards, infos, terms, _ = _play(
            env, task, {"helper": task["reference_aux"], "main": task["reference_main"]}
        )
        assert rewards == {"helper": 4.0, "main": 4.0}, (task["task_id"], infos["main"])
        assert infos["main"]["pass_rate"] == 1.0 and all(terms.values())
        comps = infos["main"]["reward_components"]
        assert sum(comps.values()) == pytest.approx(4.0)


BROKEN = [
    "",
    "I cannot solve this.",
    "```python\n```",
    "def aux(:\n    return 1",
    "x = 1",
    "Zq9(]{;'!",
    "1+" * 100_000 + "1",
]


@pytest.mark.parametrize("bad", BROKEN)
def test_empty_or_broken_team_gets_the_minimum(sandbox, bad):
    env = _sample_env(sandbox)
    for task in env.tasks[:4]:
        rewards, infos, _, _ = _play(env, task, {"helper": bad, "main": bad})
        assert rewards["main"] == 0.0 and infos["main"]["tests_passed"] == 0
        assert infos["main"]["malformed"] and infos["helper"]["malformed"]


def _humaneval_split(task):
    """HumanEval's canonical solution as a team: aux holds the solution, main forwards to it."""
    module = ast.parse(task["prompt"])
    entry = task["entry_point"]
    node = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == entry][-1]
    stub = "\n".join(task["prompt"].split("\n")[node.lineno - 1 :])
    helper = stub.replace(f"def {entry}(", "def aux(", 1).rstrip() + "\n"
    helper += task["canonical_solution"]
    names = ", ".join(a.arg for a in node.args.args)
    main = f"def {entry}({names}):\n    return aux({names})\n"
    return helper, main, stub.rstrip() + "\n" + task["canonical_solution"]


@pytest.mark.slow  # all of HumanEval in the sandbox; 85 s in the fast loop at load 17 (#22)
def test_humaneval_reference_solutions_pass_every_test_and_empty_gets_zero(sandbox):
    tasks = llm_marl.make("humaneval-v0", sandbox=sandbox).unwrapped.tasks
    assert len(tasks) == 164

    def play(task):
        team = llm_marl.make("humaneval-v0", sandbox=sandbox)
        single = llm_marl.make("humaneval_single-v0", sandbox=sandbox)
        helper, main, whole = _humaneval_split(task)
        r_team, i_team, _, _ = _play(team, task, {"helper": helper, "main": main})
        r_single, i_single, _, _ = _play(single, task, {"coder": whole})
        r_empty, i_empty, _, _ = _play(team, task, {"helper": "", "main": ""})
        return (
            task["task_id"],
            i_team["main"]["pass_rate"],
            r_team["main"],
            i_single["coder"]["pass_rate"],
            r_single["coder"],
            r_empty["main"],
        )

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(play, tasks))
    not_max = [r for r in results if r[1] != 1.0 or r[3] != 1.0]
    assert not not_max
    # main only forwards to aux: everything but the anti-wrapper bonus (4.0 - 1.0).
    assert {r[2] for r in results} == {3.0}
    assert all(r[4] == pytest.approx(2.1) for r in results)
    assert {r[5] for r in results} == {0.0}


def test_partial_solution_and_cooperation_terms(sandbox):
    env = _sample_env(sandbox)
    task = env.tasks[0]  # sum_prime_digits: 6 asserts
    helper = "def aux(d):\n    return d in (2, 3, 5, 7)\n"
    # Counts prime digits instead of summing them, and calls aux once for nothing.
    main = (
        "def sum_prime_digits(n):\n    aux(0)\n    return sum(1 for c in str(n) if aux(int(c)))\n"
        "\ndef aux(d):\n    return True\n"
    )
    rewards, infos, _, _ = _play(env, task, {"helper": helper, "main": main})
    comps = infos["main"]["reward_components"]
    assert 0 < infos["main"]["tests_passed"] < infos["main"]["tests_total"]
    assert comps["aux_used"] == 0.5 and comps["not_wrapper"] == 1.0
    assert comps["aux_result_ignored"] == -0.5
    assert infos["main"]["redefinition_ignored"] == "aux"
    assert "return True" not in infos["main"]["program"], "main's aux is left out"
    assert rewards["main"] == pytest.approx(sum(comps.values()))


def test_helper_defining_the_entry_point_is_ignored(sandbox):
    env = _sample_env(sandbox)
    task = env.tasks[2]  # gcd_of_list
    helper = task["reference_aux"] + "\ndef gcd_of_list(nums):\n    return 1\n"
    rewards, infos, _, _ = _play(env, task, {"helper": helper, "main": "x = 1"})
    assert infos["helper"]["redefinition_ignored"] == "gcd_of_list"
    assert rewards["main"] == pytest.approx(0.4), "only aux_defined: main wrote no entry point"


def test_runtime_errors_and_timeouts_fail_tests_without_infra_error(sandbox):
    env = _sample_env(sandbox, timeout=1.0)
    task = env.tasks[2]
    crash = "import not_a_module\ndef gcd_of_list(nums):\n    return aux(1, 2)\n"
    rewards, infos, _, truncs = _play(env, task, {"helper": task["reference_aux"], "main": crash})
    assert infos["main"]["error"] is None and not any(truncs.values())
    assert infos["main"]["tests_passed"] == 0 and rewards["main"] == pytest.approx(1.5)
    loop = "def gcd_of_list(nums):\n    while True:\n        pass\n    return 0\n"
    rewards, infos, _, truncs = _play(env, task, {"helper": "", "main": loop})
    assert infos["main"]["sandbox_status"] == "timeout" and infos["main"]["error"] is None
    assert rewards["main"] == pytest.approx(1.1)


def test_multi_turn_feedback_never_shows_scoring_tests(sandbox):
    env = _sample_env(sandbox, num_rounds=3, feedback_tests="held-out")  # the option
    task = env.tasks[0]
    feedback_tests, scoring_tests = env.unwrapped.test_split(task)
    assert len(feedback_tests) == 2 and len(scoring_tests) == 4
    obs, infos = env.reset(seed=0, options={"task": task})
    wrong = "def sum_prime_digits(n):\n    return -1\n"
    for turn in (1, 2):
        obs, rewards, terms, truncs, infos = env.step({"helper": "", "main": wrong})
        assert not any(terms.values()) and all(infos[a]["active"] for a in env.agents)
        assert infos["main"]["tests_total"] == 4, "the reward counts scoring tests only"
        for agent in ("helper", "main"):
            text = obs[agent][-1]["content"]
            assert f"after turn {turn} of 3" in text and "Feedback tests passed: 0/2" in text
            for source in scoring_tests:
                assert source.replace("candidate", "sum_prime_digits") not in text
            for source in feedback_tests:
                assert source.replace("candidate", "sum_prime_digits") in text
        assert "Your partner's function `aux`: MISSING" in obs["main"][-1]["content"]
    obs, rewards, terms, truncs, infos = env.step(
        {"helper": task["reference_aux"], "main": task["reference_main"]}
    )
    assert all(terms.values()) and rewards["main"] == 4.0 and env.agents == []
    # Each agent's conversation: prompt, then (answer, feedback) per non-final turn, then answer.
    assert [m["role"] for m in obs["main"]] == ["user", "assistant"] * 3


def test_single_agent_variant(sandbox):
    env = llm_marl.make("coop_humaneval_single-v0", dataset="sample", sandbox=sandbox)
    task = env.unwrapped.tasks[3]
    code = task["reference_aux"] + "\n" + task["reference_main"]
    rewards, infos, _, _ = _play(env, task, {"coder": f"```python\n{code}```"})
    assert rewards["coder"] == pytest.approx(2.1)
    assert set(infos["coder"]["reward_components"]) == {"main_defined", "syntax", "tests"}


def test_reward_weights_are_configurable(sandbox):
    env = _sample_env(sandbox, reward={"normalize": True})
    task = env.tasks[1]
    rewards, _, _, _ = _play(
        env, task, {"helper": task["reference_aux"], "main": task["reference_main"]}
    )
    assert rewards["main"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="unknown reward settings"):
        _sample_env(sandbox, reward={"bonus": 1.0})


class _BrokenSandbox:
    def run_tests(self, *args, **kwargs):
        raise OSError("engine unreachable")

    def close(self):
        pass


class _InfraSandbox(_BrokenSandbox):
    def run_tests(self, program, tests, *, entry_point=None, limits=None):
        from llm_marl.tools.sandbox import Status, TestReport

        return TestReport(status=Status.INFRA_ERROR, tests=(), error="worker crashed twice")


@pytest.mark.parametrize(
    "box, message", [(_BrokenSandbox(), "engine unreachable"), (_InfraSandbox(), "worker crashed")]
)
def test_sandbox_failures_truncate_and_are_never_scored(box, message):
    env = _sample_env(box)
    task = env.tasks[0]
    rewards, infos, terms, truncs = _play(
        env, task, {"helper": task["reference_aux"], "main": task["reference_main"]}
    )
    assert all(truncs.values()) and not any(terms.values())
    assert message in infos["main"]["error"] and rewards["main"] == 0.0


def test_copies_share_one_sandbox_and_step_concurrently(sandbox):
    envs = [_sample_env("process") for _ in range(6)]
    vec = VectorEnv(envs, max_workers=6)
    tasks = envs[0].unwrapped.tasks
    vec.reset(seeds=0, options=[{"task": tasks[i]} for i in range(6)])
    results = vec.step(
        [
            {"helper": tasks[i]["reference_aux"], "main": tasks[i]["reference_main"]}
            for i in range(6)
        ]
    )
    assert [r[1]["main"] for r in results] == [4.0] * 6
    assert len({id(e.unwrapped.sandbox) for e in envs}) == 1
    vec.close()


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"num_rounds": 0}, "num_rounds"),
        ({"feedback_fraction": 0.5}, "needs num_rounds > 1"),
        ({"num_rounds": 2, "feedback_fraction": 1.0}, "feedback_fraction"),
        ({"sandbox": "vm"}, "sandbox must be one of"),
        ({"sandbox": object()}, "Sandbox instance"),
        ({"timeout": 0}, "timeout"),
        ({"split": "nope"}, "unknown split"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error):
    with pytest.raises((ValueError, TypeError), match=error):
        llm_marl.make("coop_humaneval-v0", dataset="sample", **kwargs)


@pytest.mark.docker
def test_docker_sandbox_scores_like_the_process_sandbox():
    env = _sample_env("docker")
    for task in env.tasks:
        rewards, infos, _, _ = _play(
            env, task, {"helper": task["reference_aux"], "main": task["reference_main"]}
        )
        assert rewards["main"] == 4.0 and infos["main"]["error"] is None
    rewards, infos, _, _ = _play(
        env, env.tasks[0], {"helper": "", "main": "def sum_prime_digits(n):\n    return 0\n"}
    )
    assert infos["main"]["tests_passed"] == 2 and rewards["main"] == pytest.approx(1.1 + 2 / 6)


def test_shared_sandboxes_are_per_kind_and_can_be_closed():
    from llm_marl.envs.coding.sandboxes import close_shared_sandboxes, shared_sandbox

    env = _sample_env("process")
    first = env.unwrapped.sandbox
    assert shared_sandbox("process") is first
    close_shared_sandboxes()
    assert first.closed
    task = env.unwrapped.tasks[0]
    rewards, _, _, _ = _play(
        env, task, {"helper": task["reference_aux"], "main": task["reference_main"]}
    )
    assert rewards["main"] == 4.0, "a closed shared sandbox is replaced on the next run"
    assert env.unwrapped.sandbox is not first and not env.unwrapped.sandbox.closed
    with pytest.raises(ValueError, match="unknown sandbox kind"):
        shared_sandbox("vm")


def test_reset_with_a_malformed_task_is_a_clear_error(sandbox):
    env = _sample_env(sandbox)
    with pytest.raises(ValueError, match="lacks the text field"):
        env.reset(options={"task": {"task_id": "x", "prompt": "def f():\n    pass\n"}})
    bad_test = {"task_id": "y", "prompt": "def f():\n    pass\n", "entry_point": "f", "test": "x"}
    with pytest.raises(ValueError, match="no `check"):
        env.reset(options={"task": bad_test})
