"""The math envs: phases, observations, rewards, prompts, datasets, and the full benchmark scan."""

from __future__ import annotations

import re
import time

import pytest

import llm_marl
from llm_marl.algos.advantages import turn_returns
from llm_marl.data.loading import DATA_DIR_ENV
from llm_marl.envs.base import InfrastructureError
from llm_marl.envs.math import datasets as mds
from llm_marl.envs.math import prompts as P
from llm_marl.envs.math.critic import MathCriticEnv
from llm_marl.envs.math.hint import MathHintEnv
from llm_marl.envs.math.single import MathSingleEnv
from llm_marl.policies.base import SamplingParams, ScriptedPolicy
from llm_marl.rollout import FrozenAgents
from llm_marl.rollout.collect import collect

MATH_IDS = ("math_hint-v0", "math_critic-v0", "math_single-v0")
# Every math benchmark file of shared/data, by (dataset name, split).
BENCHMARK_FILES = [
    ("math500", None),
    ("aime24", None),
    ("amc23", None),
    ("minerva_math", None),
    ("olympiadbench", None),
    ("gsm8k", None),
    ("gsm8k", "train"),
    ("math_level3to5", None),
]
SOLVE_X = "sample/1"  # "Solve for $x$: $3x - 7 = 11$." -> 6


@pytest.fixture
def shared_data(monkeypatch, data_dir):
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    mds.clear_cache()
    yield data_dir
    mds.clear_cache()


def active(env, infos):
    return [a for a in env.agents if infos[a]["active"]]


def boxed(answer: str) -> str:
    return f"Working it out carefully, the answer is $\\boxed{{{answer}}}$."


# ----------------------------------------------------------------------------- registry
def test_ids_are_registered_with_string_entry_points():
    for env_id in MATH_IDS:
        spec = llm_marl.spec(env_id)
        assert isinstance(spec.entry_point, str) and spec.entry_point.startswith(
            "llm_marl.envs.math."
        )
        assert spec.description


@pytest.mark.parametrize(
    ("env_id", "cls", "agents", "collaborator"),
    [
        ("math_hint-v0", MathHintEnv, ["hint", "actor"], "hint"),
        ("math_critic-v0", MathCriticEnv, ["actor", "critic"], "critic"),
        ("math_single-v0", MathSingleEnv, ["actor"], None),
    ],
)
def test_make_defaults_to_the_offline_sample(env_id, cls, agents, collaborator, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    env = llm_marl.make(env_id)
    assert type(env) is cls and env.possible_agents == agents
    assert cls.collaborator == collaborator and cls.actor == "actor"
    assert len(env.tasks) == 30 and env.tasks[0]["dataset"] == "sample"
    doc = __import__(cls.__module__, fromlist=["_"]).__doc__
    for section in ("Roles", "Observation", "Action", "Reward", "Datasets", "Prompts", ">>>"):
        assert section in doc, f"{env_id}'s docstring lacks {section!r}"


# ----------------------------------------------------------------------------- hint
def test_hint_env_phases_and_partial_observability():
    env = llm_marl.make("math_hint-v0")
    obs, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert active(env, infos) == ["hint"]
    assert obs["hint"] == [
        {"role": "system", "content": P.HINT_SYSTEM},
        {"role": "user", "content": "Solve for $x$: $3x - 7 = 11$."},
    ]
    assert obs["actor"] == [], "the actor sees nothing before the hint"

    obs, rewards, terms, truncs, infos = env.step({"hint": "  Isolate x: add 7 first.  "})
    assert active(env, infos) == ["actor"]
    assert rewards == {"hint": 0.0, "actor": 0.0} and not any(terms.values())
    assert obs["actor"] == [
        {"role": "system", "content": P.ACTOR_SYSTEM},
        {
            "role": "user",
            "content": "Problem: Solve for $x$: $3x - 7 = 11$. (Hint: Isolate x: add 7 first.) "
            "Let's think step by step and output the final answer within \\boxed{}.",
        },
    ]
    assert all("6" not in m["content"] for m in obs["actor"]), "the reference must not leak"

    obs, rewards, terms, truncs, infos = env.step({"actor": "3x = 18 so $\\boxed{6}$"})
    assert rewards == {"hint": 1.0, "actor": 1.0}
    assert all(terms.values()) and not any(truncs.values()) and env.agents == []
    assert infos["hint"]["reward_components"] == {"correct": 1.0, "format": 1.0}
    assert infos["actor"]["answer"] == "6" and infos["actor"]["reference"] == "6"
    assert infos["actor"]["correct"] is True and infos["actor"]["malformed"] is False
    assert all("18" not in m["content"] for m in obs["hint"]), "the hint never sees the solution"


def test_hint_env_wrong_unboxed_and_ignored_actions():
    env = MathHintEnv()
    _, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    # The actor's action during the hint phase is ignored and flagged.
    _, _, _, _, infos = env.step({"hint": "h", "actor": "\\boxed{6}"})
    assert infos["actor"]["ignored_action"] is True and active(env, infos) == ["actor"]
    _, rewards, _, _, infos = env.step({"actor": "\\boxed{7}"})
    assert rewards["actor"] == 0.0 and infos["actor"]["correct"] is False

    env.reset(seed=0, options={"task_id": SOLVE_X})
    env.step({"hint": ""})
    # No box: the grader falls back to the last number (correct) but the format flag is 0.
    _, rewards, _, _, infos = env.step({"actor": "x equals 6"})
    assert rewards["actor"] == 1.0
    assert infos["actor"]["reward_components"] == {"correct": 1.0, "format": 0.0}
    assert infos["actor"]["malformed"] is True


def test_format_shaping_is_optional():
    env = MathSingleEnv(format_weight=0.25)
    for text, expected in [("\\boxed{6}", 1.0), ("\\boxed{5}", 0.25), ("6", 0.75), ("five", 0.0)]:
        env.reset(options={"task_id": SOLVE_X})
        _, rewards, *_ = env.step({"actor": text})
        assert rewards["actor"] == pytest.approx(expected), text
    with pytest.raises(ValueError, match="format_weight"):
        MathSingleEnv(format_weight=1.0)


def test_require_boxed_scores_unboxed_answers_zero():
    env = MathCriticEnv(require_boxed=True, grading_timeout=2.0)
    env.reset(options={"task_id": SOLVE_X})
    env.step({"actor": "x = 6"})  # right but unboxed draft
    env.step({"critic": "box it"})
    _, rewards, _, _, infos = env.step({"actor": "The answer is 6."})
    assert rewards["actor"] == 0.0 and infos["actor"]["correct"] is False
    assert infos["actor"]["reward_components"] == {
        "correct": 0.0,
        "format": 0.0,
        "draft_correct": 0.0,
    }
    env.reset(options={"task_id": SOLVE_X})
    env.step({"actor": "x = 6"})
    env.step({"critic": "box it"})
    _, rewards, *_ = env.step({"actor": "$\\boxed{6}$"})
    assert rewards["actor"] == 1.0
    with pytest.raises(ValueError, match="grading_timeout"):
        MathSingleEnv(grading_timeout=0)


# ----------------------------------------------------------------------------- critic
def test_critic_env_draft_critique_revision():
    env = llm_marl.make("math_critic-v0")
    obs, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert active(env, infos) == ["actor"] and obs["critic"] == []
    assert obs["actor"][1]["content"].startswith("Solve for $x$: $3x - 7 = 11$. Let's think")

    draft = "3x = 4, so $x = \\boxed{\\frac{4}{3}}$."
    obs, rewards, _, _, infos = env.step({"actor": draft})
    assert active(env, infos) == ["critic"] and rewards["critic"] == 0.0
    assert obs["critic"] == [
        {"role": "system", "content": P.CRITIC_SYSTEM},
        {
            "role": "user",
            "content": f"Question: Solve for $x$: $3x - 7 = 11$.\n\nCurrent Solution: {draft}",
        },
    ]

    obs, rewards, _, _, infos = env.step({"critic": "Adding 7 gives 3x = 18, not 4."})
    assert active(env, infos) == ["actor"] and rewards["actor"] == 0.0
    # AgentPO's revision request is a new chat that holds the draft and the comment.
    assert obs["actor"] == [
        {"role": "system", "content": P.REVISE_SYSTEM},
        {
            "role": "user",
            "content": f"Problem: Solve for $x$: $3x - 7 = 11$.\n\nCurrent Solution: {draft}\n\n"
            "Comment: Adding 7 gives 3x = 18, not 4. Let's think step by step and output the "
            "final answer within \\boxed{}.",
        },
    ]

    _, rewards, terms, _, infos = env.step({"actor": "Right: $\\boxed{6}$."})
    assert rewards == {"actor": 1.0, "critic": 1.0} and all(terms.values())
    assert infos["critic"]["reward_components"] == {
        "correct": 1.0,
        "format": 1.0,
        "draft_correct": 0.0,
    }
    assert infos["actor"]["draft_answer"] == "\\frac{4}{3}"
    # The full transcript keeps the draft even though the actor's chat was restarted.
    transcript = llm_marl.make("math_critic-v0", render_mode="ansi")
    transcript.reset(options={"task_id": SOLVE_X})
    for action in ({"actor": draft}, {"critic": "c"}, {"actor": "\\boxed{6}"}):
        transcript.step(action)
    assert draft in transcript.render()


def test_critic_env_breaking_a_correct_draft_scores_zero():
    env = MathCriticEnv()
    env.reset(options={"task_id": SOLVE_X})
    env.step({"actor": "\\boxed{6}"})
    env.step({"critic": "You should double it."})
    _, rewards, _, _, infos = env.step({"actor": "\\boxed{12}"})
    assert rewards["critic"] == 0.0
    assert infos["actor"]["reward_components"]["draft_correct"] == 1.0


# ----------------------------------------------------------------------------- prompts
def test_prompt_overrides_and_no_system_message():
    env = MathHintEnv(
        prompts={
            "hint_system": "",
            "hint_user": "Give a hint for: {problem}",
            "actor_system": None,
            "actor_user": "{problem}\nHint from a friend: {hint}\nBox the answer, e.g. \\boxed{42}.",
        }
    )
    obs, _ = env.reset(options={"task_id": SOLVE_X})
    assert obs["hint"] == [
        {"role": "user", "content": "Give a hint for: Solve for $x$: $3x - 7 = 11$."}
    ]
    obs, *_ = env.step({"hint": "my {problem} hint"})
    assert obs["actor"] == [
        {
            "role": "user",
            # One-pass filling: a placeholder inside the hint is not expanded again.
            "content": "Solve for $x$: $3x - 7 = 11$.\nHint from a friend: my {problem} hint\n"
            "Box the answer, e.g. \\boxed{42}.",
        }
    ]


def test_bad_prompt_overrides_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"unknown prompt 'critic_user'.*hint_system"):
        MathHintEnv(prompts={"critic_user": "x"})
    with pytest.raises(ValueError, match=r"'hint_user' uses \['\{hint\}'\].*\['\{problem\}'\]"):
        MathHintEnv(prompts={"hint_user": "{problem} {hint}"})
    with pytest.raises(ValueError, match=r"'critic_user' uses \['\{critique\}'\]"):
        MathCriticEnv(prompts={"critic_user": "{critique}"})
    with pytest.raises(ValueError, match="must be a str"):
        MathSingleEnv(prompts={"actor_user": 3})
    with pytest.raises(TypeError, match="unknown arguments"):
        llm_marl.make("math_hint-v0", num_problems=3)


def test_default_prompts_are_the_papers():
    assert P.HINT_PROMPTS["hint_system"] == (
        "Rewrite the question below to make it easier to understand."
    )
    assert P.HINT_SYSTEMS["hint"] == "Provide hint to solve the below problem."
    assert P.CRITIC_PROMPTS["critic_system"].startswith("Given a question and its current solution")
    assert "Do not rewrite the solution, only highlight issues." in P.CRITIC_SYSTEM
    assert P.REVISE_SYSTEM.startswith("You have an opportunity to improve your solution.")
    for prompts in (P.SINGLE_PROMPTS, P.HINT_PROMPTS, P.CRITIC_PROMPTS):
        user_templates = [
            v for k, v in prompts.items() if k.startswith(("actor_user", "revise_user"))
        ]
        assert all(v.endswith("within \\boxed{}.") for v in user_templates)


# ----------------------------------------------------------------------------- tasks and data
def test_explicit_tasks_and_their_validation():
    tasks = [{"task_id": "t0", "problem": "What is 1 + 1?", "answer": 2}]
    env = MathSingleEnv(tasks=tasks)
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step({"actor": "\\boxed{2}"})
    assert rewards["actor"] == 1.0 and infos["actor"]["reference"] == "2"
    with pytest.raises(ValueError, match=r"lacks \['answer'\]"):
        MathSingleEnv(tasks=[{"task_id": "t", "problem": "p"}])
    with pytest.raises(ValueError, match="either tasks"):
        MathSingleEnv(tasks=tasks, dataset="aime24")
    # A task handed to reset() directly (as collect does) is checked too.
    with pytest.raises(ValueError, match="lacks"):
        env.reset(options={"task": {"task_id": "x", "problem": "p"}})


def test_make_with_a_benchmark_name(shared_data):
    env = llm_marl.make("math_hint-v0", dataset="aime24")
    assert len(env.tasks) == 30 and env.tasks[0]["task_id"] == "aime24/0"
    env = llm_marl.make("math_critic-v0", dataset="gsm8k", split="train", limit=5)
    assert [t["task_id"] for t in env.tasks] == [f"gsm8k/{i}" for i in range(5)]
    obs, _ = env.reset(seed=1)
    assert obs["actor"][1]["content"].startswith(env.task["problem"])


def test_seeded_resets_pick_the_same_tasks():
    a, b = MathHintEnv(), MathHintEnv()
    picks_a = [a.reset(seed=s)[1]["hint"]["task_id"] for s in range(10)]
    picks_b = [b.reset(seed=s)[1]["hint"]["task_id"] for s in range(10)]
    assert picks_a == picks_b and len(set(picks_a)) > 1


def test_a_grader_crash_truncates_instead_of_scoring(monkeypatch):
    import llm_marl.tools.grading as grading

    def broken(*args, **kwargs):
        raise grading.WorkerError("worker died")

    monkeypatch.setattr(grading, "grade", broken)
    env = MathSingleEnv()
    env.reset(options={"task_id": SOLVE_X})
    _, rewards, terms, truncs, infos = env.step({"actor": "\\boxed{6}"})
    assert rewards["actor"] == 0.0 and truncs["actor"] and not terms["actor"]
    assert "math grader failed" in infos["actor"]["error"]
    assert issubclass(InfrastructureError, RuntimeError)


def test_random_and_hostile_actions_never_raise():
    env = MathCriticEnv()
    hostile = [
        "",
        "\\boxed{",
        "}" * 50,
        "\\boxed{" * 200,
        "$" * 1000,
        "9" * 5000,
        "é中🙂 \\fbox{x}",
    ]
    for text in hostile:
        env.reset(seed=0)
        while env.agents:
            _, rewards, *_ = env.step({a: text for a in env.active_agents})
        assert rewards["actor"] in (0.0, 1.0)


# ----------------------------------------------------------------------------- rollouts
def test_collect_with_a_scripted_team_and_frozen_actor_wrapper():
    answers = {t["problem"]: t["answer"] for t in mds.load_math_tasks()}
    seen_hints = []

    def hint(conv):
        return f"hint for {len(conv[-1]['content'])} chars"

    def actor(conv):
        text = conv[-1]["content"]
        seen_hints.append("(Hint: hint for" in text)
        problem = re.match(r"Problem: (.*) \(Hint: ", text, re.S).group(1)
        return boxed(answers[problem])

    episodes = collect(
        "math_hint-v0",
        {"hint": ScriptedPolicy(hint), "actor": ScriptedPolicy(actor)},
        tasks=None,
        group_size=2,
        sampling=SamplingParams(max_new_tokens=8),
        progress=False,
    )
    assert len(episodes) == 60 and all(seen_hints)
    assert all(ep.ok and ep.total_reward == 1.0 for ep in episodes)
    assert all(turn_returns(ep, "hint") == [1.0] for ep in episodes), "the hint is credited"

    # The trainer's view: the actor folded into the dynamics, only the hint agent left.
    env = FrozenAgents(MathHintEnv(), {"actor": ScriptedPolicy(lambda c: "\\boxed{6}")})
    obs, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert env.possible_agents == ["hint"] and infos["hint"]["active"]
    _, rewards, terms, _, infos = env.step({"hint": "add 7"})
    assert rewards == {"hint": 1.0} and terms["hint"]


@pytest.mark.slow  # every benchmark file; 189 s in the fast loop at load 17 (#22)
def test_scripted_actor_scores_one_with_each_reference_and_zero_otherwise_on_every_benchmark(
    shared_data,
):
    """Through the env, every problem of every benchmark file: right -> 1.0, wrong -> 0.0."""
    started = time.perf_counter()
    total = 0
    for name, split in BENCHMARK_FILES:
        env = MathSingleEnv(dataset=name, split=split)
        failures = []
        for i, task in enumerate(env.tasks):
            reference = task["answer"]
            wrong = ["-987654321.5"]
            if re.fullmatch(r"-?\d{1,9}", reference):
                wrong.append(str(int(reference) + 1))  # a near miss must not pass either
            for text, expected in [(boxed(reference), 1.0)] + [(boxed(w), 0.0) for w in wrong]:
                env.reset(options={"task_index": i})
                _, rewards, terms, _, infos = env.step({"actor": text})
                if rewards["actor"] != expected or not terms["actor"]:
                    failures.append((task["task_id"], reference, text, infos["actor"]))
        assert not failures, f"{name}/{split}: {len(failures)} failures, e.g. {failures[:3]}"
        total += len(env.tasks)
    assert total == 500 + 30 + 40 + 272 + 675 + 1319 + 7473 + 8521
    print(f"scanned {total} problems in {time.perf_counter() - started:.1f} s")


def test_tiny_models_cpu_smoke_run(tiny_lm_path):
    """Two tiny HF policies through collect: hint trainable (LoRA), actor frozen."""
    from peft import LoraConfig

    from llm_marl.policies.hf import HFPolicy

    hint = HFPolicy(
        tiny_lm_path,
        name="hint",
        trainable=True,
        lora_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
        seed=0,
    )
    actor = HFPolicy(tiny_lm_path, name="actor", seed=1)
    episodes = collect(
        "math_hint-v0",
        {"hint": hint, "actor": actor},
        tasks=3,
        group_size=2,
        sampling=SamplingParams(max_new_tokens=12, temperature=1.0),
        progress=False,
    )
    assert len(episodes) == 6
    for ep in episodes:
        assert ep.ok and ep.terminated and ep.total_reward in (0.0, 1.0)
        h, a = ep.trajectories["hint"], ep.trajectories["actor"]
        assert h.trainable and not a.trainable
        assert len(h.turns) == 1 and len(a.turns) == 1
        assert h.turns[0].completion_ids and h.turns[0].logprobs is not None
        # The actor's prompt holds the hint the hint policy actually wrote.
        assert h.turns[0].text.strip() in a.turns[0].observation[-1]["content"]
        assert set(ep.reward_components) == {"correct", "format"}


def test_tiny_model_critic_episode_restarts_the_actor_stream(tiny_policy):
    """The revision is a new chat: its prompt does not extend the draft's token stream."""
    episodes = collect(
        "math_critic-v0",
        {"actor": tiny_policy, "critic": tiny_policy},
        tasks=2,
        sampling=SamplingParams(max_new_tokens=8),
        progress=False,
    )
    for ep in episodes:
        assert ep.ok and ep.terminated and len(ep.step_rewards) == 3
        draft, revision = ep.trajectories["actor"].turns
        assert not revision.continues_stream
        assert revision.observation[0]["content"] == P.REVISE_SYSTEM
        assert draft.text.strip() in revision.observation[-1]["content"]
        assert len(list(ep.trajectories["actor"].segments())) == 2


def test_the_hint_prompt_is_the_released_one_and_the_backup_is_an_option():
    rewrite = "Rewrite the question below to make it easier to understand."
    backup = "Provide hint to solve the below problem."
    for kwargs, system in (
        ({}, rewrite),
        ({"hint_prompt": "hint"}, backup),
        ({"hint_prompt": "hint", "prompts": {"hint_system": "Mine."}}, "Mine."),
    ):
        env = llm_marl.make("math_hint-v0", **kwargs)
        obs, _ = env.reset(seed=0, options={"task_id": "sample/1"})
        assert obs["hint"][0] == {"role": "system", "content": system}
    with pytest.raises(ValueError, match=r"hint_prompt must be one of \['hint', 'rewrite'\]"):
        llm_marl.make("math_hint-v0", hint_prompt="paraphrase")


def test_a_list_of_datasets_concatenates_them_with_distinct_ids(monkeypatch, data_dir):
    from llm_marl.envs.math.datasets import AGENTPO_EVAL_BENCHMARKS, load_math_tasks

    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    tasks = load_math_tasks(list(AGENTPO_EVAL_BENCHMARKS), limit=2)
    assert [t["dataset"] for t in tasks] == [b for b in AGENTPO_EVAL_BENCHMARKS for _ in (0, 1)]
    assert len({t["task_id"] for t in tasks}) == 10
    env = llm_marl.make("math_critic-v0", dataset=["aime24", "amc23"])
    assert len(env.tasks) == 30 + 40
    with pytest.raises(mds.DataError, match="twice"):
        load_math_tasks(["aime24", "aime24"])
    with pytest.raises(mds.DataError, match="empty list"):
        load_math_tasks([])


def test_critic_mode_with_task_drafts_has_every_episode_of_a_group_critique_one_draft(tmp_path):
    import json

    from llm_marl.envs.math.datasets import load_math_tasks

    # AgentPO's offline-draft records: the critic reads the first of "solutions".
    file = tmp_path / "drafts.jsonl"
    rows = [
        {"problem": "What is 2 + 2?", "answer": "4", "solutions": ["2 + 2 = 5, so \\boxed{5}."]},
        {"problem": "What is 3 * 3?", "answer": "9", "solutions": ["3 * 3 = 9: \\boxed{9}."]},
    ]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_math_tasks(str(file))
    assert tasks[0]["draft"] == "2 + 2 = 5, so \\boxed{5}."

    seen: list[str] = []

    def critic(conv):
        seen.append(conv[-1]["content"])
        return f"critique #{len(seen)}"

    policies = {
        "actor": ScriptedPolicy(lambda conv: "\\boxed{4}", "actor"),
        "critic": ScriptedPolicy(critic, "critic"),
    }
    episodes = collect(
        "math_critic-v0",
        policies,
        tasks[:1],
        group_size=4,
        sampling=SamplingParams(),
        seed=0,
        env_kwargs={"drafts": "task", "dataset": str(file)},
        progress=False,
    )
    # One draft for the whole group: every critique saw the same one; the actor only revised.
    assert len(seen) == 4 and len(set(seen)) == 1 and "\\boxed{5}" in seen[0]
    for ep in episodes:
        assert ep.ok and [len(t.turns) for t in ep.trajectories.values()] == [1, 1]
        assert ep.reward_components["draft_correct"] == 0.0
        assert ep.total_reward == 1.0  # the revision fixed the wrong draft
    env = llm_marl.make("math_critic-v0", drafts="task")  # the bundled sample has no drafts
    with pytest.raises(mds.DataError, match="has no 'draft'"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="drafts must be one of"):
        llm_marl.make("math_critic-v0", drafts="offline")
