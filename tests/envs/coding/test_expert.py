"""Expert feedback in the coding envs (feedback="expert"): what the expert is shown, what each
agent reads, the scoring-test guarantee, failures, and whole episodes (process sandbox)."""

from __future__ import annotations

import json
import random
import re

import pytest

import llm_marl
from llm_marl.envs.coding import expert as ex
from llm_marl.envs.coding import prompts
from llm_marl.envs.coding.datasets import load_tasks
from llm_marl.policies import ScriptedPolicy
from llm_marl.policies.base import Completion, SamplingParams
from llm_marl.rollout import collect
from llm_marl.rollout.judges import EXPERT_SAMPLING, CodeExpert
from llm_marl.rollout.tree import collect_tree
from llm_marl.tools.text import FENCE_NOTE

TASKS = load_tasks("coophumaneval", "sample")[0]
BY_ENTRY = {t["entry_point"]: t for t in TASKS}


@pytest.fixture(scope="module")
def sandbox():
    from llm_marl.tools.sandbox import ProcessSandbox

    box = ProcessSandbox(workers=2)
    yield box
    box.close()


def _env(sandbox, expert, **kwargs):
    kwargs.setdefault("num_rounds", 2)
    if "tasks" not in kwargs:
        kwargs["dataset"] = "sample"
    return llm_marl.make(
        "coop_humaneval-v0",
        sandbox=sandbox,
        feedback="expert",
        expert=expert,
        **kwargs,
    )


def _reply(aux: object = "", main: object = "") -> str:
    return "Here are my edits.\n```json\n" + json.dumps({"aux": aux, "main": main}) + "\n```"


class Recorder:
    """A scripted expert: records every request, answers with a fixed reply."""

    def __init__(self, reply: str = "") -> None:
        self.reply = reply or _reply("AUX-EDIT", "MAIN-EDIT")
        self.requests: list[list[dict[str, str]]] = []

    def __call__(self, conversation):
        self.requests.append(conversation)
        return self.reply

    def seen(self) -> str:
        return "\n".join(m["content"] for conv in self.requests for m in conv)


# ----------------------------------------------------------------------------- the request


def test_the_request_holds_the_problem_the_code_and_the_failing_feedback_tests():
    facts = ex.ExpertFacts(
        program="def f(x):\n    return -1\n",
        problems=["The helper's code (`aux`) has a syntax error: invalid syntax (line 1)"],
        program_error="Loading the program failed: NameError: name 'g' is not defined",
        failures=[("assert f(2) == 3", "AssertionError")],
        passed=1,
        total=2,
    )
    (message,) = ex.expert_request('def f(x):\n    """Add one."""\n', facts, single_agent=False)
    text = message["content"]
    assert message["role"] == "user"
    assert text.startswith(
        "You are an expert reviewing code collaboratively written by two agents for the task: "
        'def f(x):\n    """Add one."""\nThe auxiliary agent implements'
    )
    assert "JSON with keys 'aux' and 'main'" in text
    assert text.index(
        "Here is the current combined code to consider:\n<code>\ndef f(x):"
    ) < text.index("What happened when the code ran")
    for line in (
        "<test_results>",
        "- The helper's code (`aux`) has a syntax error: invalid syntax (line 1)",
        "- Loading the program failed: NameError: name 'g' is not defined",
        "- Unit tests passed: 1/2.",
        "  FAILED: assert f(2) == 3",
        "    -&gt; AssertionError",
        "</test_results>",
    ):
        assert line in text.splitlines()


def test_a_single_coder_is_reviewed_under_the_key_main_and_quiet_runs_add_no_results():
    facts = ex.ExpertFacts(program="def f(x):\n    return x + 1\n")
    (message,) = ex.expert_request("def f(x): ...", facts, single_agent=True)
    text = message["content"]
    assert "written by a single agent" in text and "with the key 'main'" in text
    assert "'aux'" not in text and "What happened" not in text
    assert text.endswith(
        "Here is the current code to consider:\n<code>\ndef f(x):\n    return x + 1\n</code>\n\n"
        + FENCE_NOTE
    )


def test_a_huge_program_is_cut_before_the_expert_reads_it():
    facts = ex.ExpertFacts(program="x = 1\n" * 100_000)
    text = ex.expert_request("def f(): ...", facts, single_agent=False)[0]["content"]
    assert len(text) < ex.CODE_CHARS + 2_000
    assert "# ... (the rest of the code is cut)" in text


# ----------------------------------------------------------------------------- the reply


@pytest.mark.parametrize(
    "reply, edits",
    [
        (_reply("fix aux", "fix main"), {"aux": "fix aux", "main": "fix main"}),
        # The last JSON object with a key wins (a draft, then the answer).
        (
            '{"aux": "draft", "main": "draft"} no: {"aux": "a", "main": "m"}',
            {"aux": "a", "main": "m"},
        ),
        # Braces inside strings (code); escaped and raw newlines in strings; a key missing.
        (
            '{"aux": "def aux(d):\\n    return {k: 1 for k in d}"}',
            {"aux": "def aux(d):\n    return {k: 1 for k in d}", "main": ""},
        ),
        ('{"aux": "def aux():\n    return 1"}', {"aux": "def aux():\n    return 1", "main": ""}),
        # Nested: the inner object has the keys.
        ('{"edits": {"main": "m2"}}', {"aux": "", "main": "m2"}),
        # Non-string values are passed on as JSON text.
        (
            '{"aux": ["line 1", "line 2"], "main": null}',
            {"aux": '["line 1", "line 2"]', "main": ""},
        ),
        # A stray brace in prose before the answer does not hide it.
        ('Use a set {like this.\n{"aux": "a", "main": "m"}', {"aux": "a", "main": "m"}),
        # Nor does an unpaired quote in prose: outside braces a quote is not a string.
        ('Say "hi.\n{"aux": "a", "main": "m"}', {"aux": "a", "main": "m"}),
    ],
)
def test_edits_are_read_out_of_the_reply(reply, edits):
    assert ex.read_edits(reply, ["aux", "main"]) == edits


@pytest.mark.parametrize(
    "reply",
    ["", "Perfect! No changes needed!", '{"fix": "x"}', "[1, 2]", "{" * 1_000_000, '{"aux": '],
)
def test_replies_without_a_keyed_json_object_are_unreadable(reply):
    assert ex.read_edits(reply, ["aux", "main"]) is None


def test_only_the_start_of_the_reply_is_read_and_each_edit_is_cut():
    late = "x" * ex.REPLY_CHARS + _reply("late", "late")
    assert ex.read_edits(late, ["aux", "main"]) is None
    edits = ex.read_edits(_reply("a" * 3 * ex.EDIT_CHARS, "m"), ["aux", "main"])
    assert edits is not None and edits["main"] == "m"
    assert edits["aux"] == "a" * ex.EDIT_CHARS + "\n... (cut)"


# ----------------------------------------------------------------------------- agents' messages


def test_the_message_an_agent_reads():
    text = prompts.expert_message("gcd", "main", 1, 3, "return aux(a, b)")
    assert text.splitlines() == [
        "After turn 1 of 3, an expert reviewed the team's program.",
        "The expert's suggested edit for your `gcd`:",
        "return aux(a, b)",
        "Revise your `gcd` accordingly and reply with the complete code only.",
    ]
    assert "suggested no edit for your `aux`" in prompts.expert_message("gcd", "helper", 1, 2, "")
    assert "could not be read" in prompts.expert_message("gcd", "helper", 1, 2, None)
    assert "reviewed your program" in prompts.expert_message("gcd", "coder", 1, 2, "x")


def test_each_agent_reads_its_own_edit(sandbox):
    recorder = Recorder()
    env = _env(sandbox, recorder, num_rounds=3)
    task = env.unwrapped.tasks[0]
    obs, _ = env.reset(seed=0, options={"task": task})
    for turn in (1, 2):
        obs, rewards, terms, truncs, infos = env.step({"helper": "", "main": f"x = {turn}"})
        assert not any(terms.values()) and not any(truncs.values())
        assert infos["main"]["expert_read"] is True and infos["main"]["error"] is None
        helper, main = obs["helper"][-1]["content"], obs["main"][-1]["content"]
        assert f"After turn {turn} of 3" in helper
        assert "AUX-EDIT" in helper and "MAIN-EDIT" not in helper
        assert "MAIN-EDIT" in main and "AUX-EDIT" not in main
        assert "Feedback tests passed" not in helper + main, "no test report in expert mode"
    obs, rewards, terms, _, infos = env.step({"helper": "", "main": "x = 1"})
    assert all(terms.values()) and "expert_read" not in infos["main"]
    assert len(recorder.requests) == 2, "asked after every round but the last"


def test_a_lone_coder_reads_the_main_edit(sandbox):
    recorder = Recorder(_reply("NOT-MINE", "CODER-EDIT"))
    env = llm_marl.make(
        "coop_humaneval_single-v0",
        dataset="sample",
        sandbox=sandbox,
        num_rounds=2,
        feedback="expert",
        expert=recorder,
    )
    env.reset(seed=0, options={"task": env.unwrapped.tasks[1]})
    obs, *_ = env.step({"coder": "def f(:"})
    text = obs["coder"][-1]["content"]
    assert "CODER-EDIT" in text and "NOT-MINE" not in text
    request = recorder.seen()
    assert "written by a single agent" in request
    assert "- The code has a syntax error:" in request


def test_an_unreadable_reply_gives_no_edit_and_the_episode_goes_on(sandbox):
    env = _env(sandbox, Recorder("I would rewrite everything."))
    env.reset(seed=0, options={"task": env.unwrapped.tasks[0]})
    obs, rewards, terms, truncs, infos = env.step({"helper": "", "main": ""})
    assert infos["helper"]["expert_read"] is False and not any(truncs.values())
    assert all("could not be read" in obs[a][-1]["content"] for a in ("helper", "main"))


def test_a_huge_edit_is_cut_before_it_enters_a_prompt(sandbox):
    env = _env(sandbox, Recorder(_reply("A" * 3 * ex.EDIT_CHARS, "M")))
    env.reset(seed=0, options={"task": env.unwrapped.tasks[0]})
    obs, *_ = env.step({"helper": "", "main": ""})
    text = obs["helper"][-1]["content"]
    assert "A" * ex.EDIT_CHARS in text and len(text) < ex.EDIT_CHARS + 500


# ----------------------------------------------------------------------------- the guarantee

# Every unit carries its own marker, in its source, its assertion message and its argument (which
# the programs below echo in their errors). The markers of scoring units must never reach the
# expert nor an agent; those of feedback units must (else the test would prove nothing).
MARKED = {
    "task_id": "Marked/0",
    "prompt": 'def echo(x):\n    """Return the text x followed by "+1"."""\n',
    "entry_point": "echo",
    "test": "def check(candidate):\n"
    + "".join(
        f'    assert candidate("UNIT{i}Q") == "UNIT{i}Q+1", "UNIT{i}MSG"\n' for i in range(8)
    ),
}
ADVERSARIAL_TEAMS = [  # (helper, main)
    ("", "def echo(x):\n    return x\n"),  # every assert fails with its message
    ("def aux(:", "def echo(x):\n    return x\n"),  # a syntax error: nothing runs
    ("", "def echo(x):\n    raise ValueError('echo got ' + x)\n    return x\n"),  # echoes input
    (
        "def aux(x):\n    return x\n",
        "def echo(x):\n    import traceback\n    raise RuntimeError(''.join(traceback.format_stack()))"
        "\n    return x\n",  # errors show the caller's stack
    ),
    ("", "import not_a_module\ndef echo(x):\n    return x + '+1'\n"),  # fails to load
    ("def aux(x):\n    raise KeyError(x)\n    return x\n", "def echo(x):\n    return aux(x)\n"),
]


@pytest.mark.parametrize("feedback_fraction", [0.25, 0.0])
def test_the_expert_never_sees_a_scoring_test_nor_its_output(sandbox, feedback_fraction):
    recorder = Recorder()
    env = _env(
        sandbox,
        CodeExpert(ScriptedPolicy(recorder)),
        tasks=[MARKED],
        num_rounds=len(ADVERSARIAL_TEAMS) + 1,
        feedback_fraction=feedback_fraction,
    )
    feedback_units, scoring_units = env.unwrapped.test_split(MARKED)
    marker = re.compile(r"UNIT(\d)")
    shown = {m for src in feedback_units for m in marker.findall(src)}
    hidden = {m for src in scoring_units for m in marker.findall(src)}
    assert len(hidden) >= 6 and not shown & hidden
    assert len(shown) == (2 if feedback_fraction else 0)
    obs, _ = env.reset(seed=0, options={"task": MARKED})
    for helper, main in ADVERSARIAL_TEAMS:
        obs, _, _, truncs, infos = env.step({"helper": helper, "main": main})
        assert not any(truncs.values()), infos["main"]["error"]
    seen = recorder.seen()
    told = "\n".join(m["content"] for a in obs for m in obs[a])
    assert len(recorder.requests) == len(ADVERSARIAL_TEAMS)
    assert not {m for m in marker.findall(seen + told)} & hidden
    assert {m for m in marker.findall(seen)} == shown, "the feedback units do reach the expert"
    if shown:
        assert "echo got UNIT" in seen and "FAILED: assert echo(" in seen
    assert "No module named 'not_a_module'" in seen, "load errors reach the expert"
    assert "- The code was not run" in seen and "has a syntax error" in seen


# ----------------------------------------------------------------------------- failures


class _Flaky:
    def __init__(self, error: BaseException | None = None, result: object = None) -> None:
        self.error, self.result, self.calls = error, result, 0

    def __call__(self, conversation):
        self.calls += 1
        if self.calls == 1:
            if self.error is not None:
                raise self.error
            return self.result
        return _reply("a", "m")


@pytest.mark.parametrize(
    "expert, message",
    [
        (_Flaky(TimeoutError("the expert timed out")), "the expert timed out"),
        (_Flaky(result=None), "returned NoneType, not the text of a reply"),
        (_Flaky(result=b'{"aux": "a"}'), "returned bytes"),
    ],
)
def test_a_failing_expert_truncates_the_episode_unscored_and_is_asked_again(
    sandbox, expert, message
):
    env = _env(sandbox, expert)
    task = env.unwrapped.tasks[0]
    env.reset(seed=0, options={"task": task})
    actions = {"helper": task["reference_aux"], "main": task["reference_main"]}
    _, rewards, terms, truncs, infos = env.step(actions)
    assert all(truncs.values()) and not any(terms.values())
    assert "coding expert" in infos["main"]["error"] and message in infos["main"]["error"]
    assert rewards == {"helper": 0.0, "main": 0.0}, "an infrastructure failure is not scored"
    # A failure is not remembered: the same request asks the expert again.
    env.reset(seed=0, options={"task": task})
    _, rewards, _, truncs, infos = env.step(actions)
    assert not any(truncs.values()) and infos["main"]["expert_read"] and expert.calls == 2
    assert rewards["main"] == 4.0


def test_a_policy_error_inside_code_expert_is_an_infrastructure_failure(sandbox):
    class Down:
        name, trainable = "down", False

        def generate(self, conversations, sampling, contexts=None):
            raise ConnectionError("server unreachable")

    env = _env(sandbox, CodeExpert(Down()))
    env.reset(seed=0, options={"task": env.unwrapped.tasks[0]})
    *_, truncs, infos = env.step({"helper": "", "main": ""})
    assert all(truncs.values()) and "server unreachable" in infos["helper"]["error"]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"feedback": "expert", "num_rounds": 2}, "needs expert="),
        ({"feedback": "expert", "expert": Recorder()}, "needs num_rounds > 1"),
        ({"num_rounds": 2, "expert": Recorder()}, "only used with feedback='expert'"),
        ({"num_rounds": 2, "feedback": "oracle"}, "feedback must be one of"),
        ({"num_rounds": 2, "feedback": "expert", "expert": "openai:gpt"}, "must be callable"),
    ],
)
def test_bad_expert_arguments_are_clear_errors(kwargs, error):
    with pytest.raises((ValueError, TypeError), match=error):
        llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox="process", **kwargs)


# ----------------------------------------------------------------------------- CodeExpert


def test_code_expert_asks_its_policy_with_the_reference_sampling_and_cuts_the_reply():
    asked = []

    class Echo:
        name, trainable = "echo", False

        def generate(self, conversations, sampling, contexts=None):
            asked.append((conversations, sampling))
            return [Completion(text="x" * 100_000) for _ in conversations]

    expert = CodeExpert(Echo())
    conversation = [{"role": "user", "content": "review this"}]
    assert expert(conversation) == "x" * ex.REPLY_CHARS
    assert asked == [([conversation], EXPERT_SAMPLING)]
    assert EXPERT_SAMPLING.max_new_tokens == 2048 and EXPERT_SAMPLING.temperature == 0.3
    greedy = SamplingParams(max_new_tokens=64, temperature=0.0)
    CodeExpert(Echo(), sampling=greedy)(conversation)
    assert asked[-1][1] is greedy


def test_code_expert_refuses_a_trainable_policy():
    class Learner:
        name, trainable = "learner", True

        def generate(self, conversations, sampling, contexts=None):
            return []

    with pytest.raises(ValueError, match="frozen"):
        CodeExpert(Learner())


# ----------------------------------------------------------------------------- whole episodes


def _task_of(conversation) -> dict:
    return BY_ENTRY[re.search(r"^def (\w+)\(", conversation[0]["content"], re.M).group(1)]


def _fixing_expert(conversation) -> str:
    """Knows the reference solution of the problem it is shown."""
    request = conversation[0]["content"]
    entry = re.search(r"for the task: def (\w+)\(", request).group(1)
    return _reply(BY_ENTRY[entry]["reference_aux"], BY_ENTRY[entry]["reference_main"])


def _follows_the_expert(conversation) -> str:
    """Writes nothing first, then exactly the edit the expert suggested."""
    if len(conversation) == 1:
        return ""
    found = re.search(
        r"suggested edit for your `\w+`:\n(.*)\nRevise", conversation[-1]["content"], re.S
    )
    return found.group(1) if found else ""


def test_collect_plays_multi_round_episodes_where_the_expert_fixes_the_team():
    team = {
        "helper": ScriptedPolicy(_follows_the_expert),
        "main": ScriptedPolicy(_follows_the_expert),
    }
    expert = CodeExpert(ScriptedPolicy(_fixing_expert))
    episodes = collect(
        "coop_humaneval-v0",
        team,
        tasks=TASKS[:3],
        group_size=2,
        env_kwargs={
            "dataset": "sample",
            "sandbox": "process",
            "num_rounds": 2,
            "feedback": "expert",
            "expert": expert,
        },
        progress=False,
    )
    assert len(episodes) == 6
    for ep in episodes:
        assert ep.error is None and ep.terminated
        assert ep.step_rewards == [0.0, 4.0], "nothing written, then the expert's fix"


def test_tree_rollouts_replay_histories_with_a_sampling_expert():
    rng = random.Random(0)

    def sampling_expert(conversation):
        return _reply(f"try {rng.random()}", f"try {rng.random()}")

    team = {"helper": ScriptedPolicy(lambda c: ""), "main": ScriptedPolicy(lambda c: "x = 1")}
    kwargs = {"dataset": "sample", "sandbox": "process", "num_rounds": 2, "feedback": "expert"}
    trees = collect_tree(
        "coop_humaneval-v0",
        team,
        TASKS[:2],
        2,
        env_kwargs={**kwargs, "expert": sampling_expert},
        progress=False,
    )
    assert all(tree.error is None for tree in trees), [tree.error for tree in trees]
    # Without the remembered replies the same expert makes every replay diverge.
    ex._REPLIES.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ex, "CACHE_SIZE", 0)
        with pytest.raises(RuntimeError, match="every replayed history diverged"):
            collect_tree(
                "coop_humaneval-v0",
                team,
                TASKS[:2],
                2,
                env_kwargs={**kwargs, "expert": sampling_expert},
                progress=False,
            )


def test_one_request_is_answered_once_across_env_copies(sandbox):
    recorder = Recorder()
    envs = [_env(sandbox, recorder) for _ in range(3)]
    task = envs[0].unwrapped.tasks[2]
    for env in envs:
        env.reset(seed=0, options={"task": task})
        obs, *_ = env.step({"helper": "", "main": "x = 1"})
        assert "MAIN-EDIT" in obs["main"][-1]["content"]
    assert len(recorder.requests) == 1
