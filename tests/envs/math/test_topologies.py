"""AgentPO's multi-agent topologies: math_debate-v0 and math_roles-v0 (phases, what each agent
sees, the team's vote, bad input, frozen solvers)."""

from __future__ import annotations

import doctest

import pytest

import llm_marl
from llm_marl.envs.math import debate as debate_module
from llm_marl.envs.math import roles as roles_module
from llm_marl.envs.math.debate import MathDebateEnv
from llm_marl.envs.math.roles import MathRolesEnv, parse_roles
from llm_marl.policies.base import ScriptedPolicy
from llm_marl.rollout import FrozenAgents
from llm_marl.rollout.collect import collect

SOLVE_X = "sample/1"  # "Solve for $x$: $3x - 7 = 11$." -> 6
HALF = [{"task_id": "half", "problem": "What is 1/2 as a number?", "answer": "1/2"}]


def active(env, infos):
    return [a for a in env.agents if infos[a]["active"]]


def boxed(answer: str) -> str:
    return f"Working carefully, the answer is $\\boxed{{{answer}}}$."


def play_debate(env, guide, rounds_of_answers, task_id=SOLVE_X):
    """Play an episode: the guide, then one dict of debater answers per round. Returns the
    phases (who was active at each step) and the last step's results."""
    obs, infos = env.reset(seed=0, options={"task_id": task_id})
    phases = [active(env, infos)]
    result = env.step({"coordinator": guide})
    phases.append(active(env, result[4]))
    for answers in rounds_of_answers:
        result = env.step(answers)
        if env.agents:
            phases.append(active(env, result[4]))
    return phases, result


# ----------------------------------------------------------------------------- registry / docs
@pytest.mark.parametrize("env_id", ["math_debate-v0", "math_roles-v0"])
def test_ids_are_registered_lazily_and_documented(env_id):
    spec = llm_marl.spec(env_id)
    assert isinstance(spec.entry_point, str) and spec.entry_point.startswith("llm_marl.envs.math.")
    assert "AgentPO" in spec.description


@pytest.mark.parametrize("module", [debate_module, roles_module])
def test_the_module_examples_run(module):
    failures, tried = doctest.testmod(module, verbose=False)
    assert tried >= 8 and failures == 0


# ----------------------------------------------------------------------------- debate
def test_debate_phases_guide_then_rounds_and_a_right_vote_scores_1():
    env = llm_marl.make("math_debate-v0")  # the release's 3 debaters, 2 revision rounds
    assert env.possible_agents == ["coordinator", "debater_1", "debater_2", "debater_3"]
    assert env.max_steps == 4 and env.unwrapped.collaborator == "coordinator"
    debaters = ["debater_1", "debater_2", "debater_3"]
    right = dict.fromkeys(debaters, boxed("6"))
    phases, (obs, rewards, terms, truncs, infos) = play_debate(
        env, "Move 7 over first.", [right, right, right]
    )
    assert phases == [["coordinator"], debaters, debaters, debaters]
    assert rewards == dict.fromkeys(env.possible_agents, 1.0)
    assert all(terms.values()) and not any(truncs.values())
    assert infos["coordinator"]["success"] is True
    assert infos["coordinator"]["answer"] == "6" and infos["coordinator"]["votes"] == {"6": 3}
    assert infos["debater_2"]["own_correct"] is True


def test_debate_a_wrong_vote_scores_0_and_intermediate_steps_score_0():
    env = MathDebateEnv(num_debaters=2, rounds=1)
    obs, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    _, rewards, terms, *_ = env.step({"coordinator": "guide"})
    assert set(rewards.values()) == {0.0} and not any(terms.values())
    _, rewards, *_ = env.step({"debater_1": boxed("6"), "debater_2": boxed("4")})
    assert set(rewards.values()) == {0.0}
    _, rewards, terms, _, infos = env.step({"debater_1": boxed("4"), "debater_2": boxed("4")})
    assert set(rewards.values()) == {0.0} and all(terms.values())
    assert infos["coordinator"]["success"] is False and infos["coordinator"]["answer"] == "4"
    components = infos["coordinator"]["reward_components"]
    # Round 0 had one right answer; the debate talked the team out of it.
    assert components["initial_accuracy"] == 0.5 and components["solver_accuracy"] == 0.0


def test_debaters_see_the_guide_every_round_and_their_peers_in_a_new_chat():
    env = MathDebateEnv(num_debaters=2, rounds=2)
    obs, _ = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert obs["coordinator"][-1]["content"] == "Solve for $x$: $3x - 7 = 11$."
    assert "debate coordinator" in obs["coordinator"][0]["content"]
    obs, *_ = env.step({"coordinator": "  GUIDE-XYZ: isolate x.  "})
    for d in ("debater_1", "debater_2"):
        system, user = obs[d]
        assert (
            system["role"] == "system"
            and "one debater in a multi-agent debate" in system["content"]
        )
        assert "<Debate Guide>\nGUIDE-XYZ: isolate x.\n" in user["content"]
        assert "3x - 7 = 11" in user["content"]
    obs, *_ = env.step({"debater_1": "ONE " + boxed("6"), "debater_2": "TWO " + boxed("5")})
    for me, peer, mine, theirs in (
        ("debater_1", "debater_2", "ONE", "TWO"),
        ("debater_2", "debater_1", "TWO", "ONE"),
    ):
        assert len(obs[me]) == 2, "a revision is a new chat (system + request)"
        text = obs[me][1]["content"]
        assert "GUIDE-XYZ" in text and "<Peer Responses From Round 0>" in text
        assert f"<Your Previous Response>\n{mine} " in text
        assert f"[{peer} previous response]\n{theirs} " in text
        assert f"[{me} previous response]" not in text
        assert "revising your answer" in obs[me][0]["content"]
    obs, *_ = env.step({"debater_1": boxed("6"), "debater_2": boxed("6")})
    assert "<Peer Responses From Round 1>" in obs["debater_1"][1]["content"]
    # The coordinator saw nothing after its guide.
    assert [m["role"] for m in obs["coordinator"]] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        (
            "full",
            {
                "debater_1": ["debater_2", "debater_3", "debater_4"],
                "debater_3": ["debater_1", "debater_2", "debater_4"],
            },
        ),
        (
            "sparse",
            {"debater_1": ["debater_4", "debater_2"], "debater_3": ["debater_2", "debater_4"]},
        ),
        (
            "centralized",
            {"debater_1": ["debater_2", "debater_3", "debater_4"], "debater_3": ["debater_1"]},
        ),
    ],
)
def test_each_topology_shows_a_debater_the_peers_it_names(topology, expected):
    env = MathDebateEnv(num_debaters=4, rounds=1, topology=topology)
    env.reset(seed=0, options={"task_id": SOLVE_X})
    env.step({"coordinator": "g"})
    obs, *_ = env.step({d: f"SAID-BY-{d} " + boxed("6") for d in env.solvers})
    for me, peers in expected.items():
        assert env.peers(me) == peers
        text = obs[me][1]["content"]
        shown = [d for d in env.solvers if f"[{d} previous response]\nSAID-BY-{d}" in text]
        assert shown == sorted(peers)


def test_small_teams_have_sensible_peers():
    assert MathDebateEnv(num_debaters=2, topology="sparse").peers("debater_1") == ["debater_2"]
    lone = MathDebateEnv(num_debaters=1, rounds=1, topology="sparse")
    lone.reset(seed=0, options={"task_id": SOLVE_X})
    lone.step({"coordinator": "g"})
    obs, *_ = lone.step({"debater_1": boxed("6")})
    assert "[No peer responses provided]" in obs["debater_1"][1]["content"]


def test_personas_and_long_responses_cut_to_max_peer_chars():
    env = MathDebateEnv(num_debaters=4, rounds=1, personas=True, max_peer_chars=40)
    obs, _ = env.reset(seed=0, options={"task_id": SOLVE_X})
    obs, *_ = env.step({"coordinator": "g"})
    firsts = [obs[d][0]["content"].splitlines()[:2] for d in env.solvers]
    assert [f[1] for f in firsts] == [
        "Role: Solver.",
        "Role: Skeptic.",
        "Role: Checker.",
        "Role: Solver.",
    ]
    assert "skeptical" in firsts[1][0]
    plain = MathDebateEnv(num_debaters=2)
    assert (
        plain.persona("debater_2")
        == "You are a careful mathematical reasoning agent.\nRole: Debater."
    )
    long = "A" * 30 + "MIDDLE" + "Z" * 30
    obs, *_ = env.step({d: long for d in env.solvers})
    text = obs["debater_2"][1]["content"]
    assert "A" * 20 + "\n...[truncated]...\n" + "Z" * 20 in text and "MIDDLE" not in text


def test_the_vote_counts_equivalent_answers_as_one_and_breaks_ties_by_order():
    env = MathDebateEnv(HALF, num_debaters=3, rounds=0)

    def final(answers):
        env.reset(seed=0, options={"task_id": "half"})
        env.step({"coordinator": "g"})
        return env.step(dict(zip(env.solvers, answers)))

    # \frac12, 0.5 and 1/2 are one answer: 3 votes, right.
    _, rewards, _, _, infos = final([boxed("\\frac{1}{2}"), boxed("0.5"), boxed("1/2")])
    assert rewards["coordinator"] == 1.0 and infos["coordinator"]["votes"] == {"\\frac{1}{2}": 3}
    # Two wrong answers written two ways still outvote one right answer.
    _, rewards, _, _, infos = final([boxed("1/2"), boxed("2/4 + 1/4"), boxed("0.75")])
    assert rewards["coordinator"] == 0.0
    assert infos["coordinator"]["votes"] == {"1/2": 1, "2/4 + 1/4": 2}
    assert infos["coordinator"]["reward_components"]["agreement"] == pytest.approx(2 / 3)
    # A tie goes to the answer given first (in agent order), as in the release.
    _, rewards, _, _, infos = final([boxed("3"), boxed("1/2"), "I do not know."])
    assert rewards["coordinator"] == 0.0 and infos["coordinator"]["answer"] == "3"
    _, rewards, _, _, _ = final(["I do not know.", boxed("1/2"), boxed("3")])
    assert rewards["coordinator"] == 1.0
    # Nobody answers: wrong, no team answer.
    _, rewards, _, _, infos = final(["", "no idea", "\\boxed{}"])
    assert rewards["coordinator"] == 0.0 and infos["coordinator"]["answer"] is None
    assert infos["coordinator"]["votes"] == {}


def test_aggregate_first_grades_the_first_solver_only():
    env = MathDebateEnv(HALF, num_debaters=3, rounds=0, aggregate="first")
    env.reset(seed=0, options={"task_id": "half"})
    env.step({"coordinator": "g"})
    _, rewards, _, _, infos = env.step(
        {"debater_1": boxed("0.5"), "debater_2": boxed("7"), "debater_3": boxed("7")}
    )
    assert rewards["coordinator"] == 1.0 and infos["coordinator"]["votes"] == {"0.5": 1}
    env.reset(seed=0, options={"task_id": "half"})
    env.step({"coordinator": "g"})
    _, rewards, *_ = env.step(
        {"debater_1": boxed("7"), "debater_2": boxed("0.5"), "debater_3": boxed("0.5")}
    )
    assert rewards["coordinator"] == 0.0


def test_require_boxed_makes_unboxed_answers_abstain_and_format_weight_shapes():
    env = MathDebateEnv(num_debaters=3, rounds=0, require_boxed=True)
    env.reset(seed=0, options={"task_id": SOLVE_X})
    env.step({"coordinator": "g"})
    # Two unboxed 4s would win the vote if they counted.
    _, rewards, _, _, infos = env.step(
        {"debater_1": boxed("6"), "debater_2": "x = 4", "debater_3": "so 4"}
    )
    assert rewards["coordinator"] == 1.0 and infos["debater_2"]["malformed"] is True
    shaped = MathDebateEnv(num_debaters=2, rounds=0, format_weight=0.5)
    shaped.reset(seed=0, options={"task_id": SOLVE_X})
    shaped.step({"coordinator": "g"})
    _, rewards, _, _, infos = shaped.step({"debater_1": boxed("5"), "debater_2": "x is 5"})
    assert rewards["coordinator"] == pytest.approx(0.5 * 0.0 + 0.5 * 0.5)
    assert infos["coordinator"]["reward_components"]["format"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_debaters": 0}, "number of solvers must be an int in \\[1, 8\\]"),
        ({"num_debaters": 9}, "number of solvers"),
        ({"num_debaters": True}, "number of solvers"),
        ({"num_debaters": "2"}, "number of solvers"),
        ({"rounds": -1}, "rounds must be an int >= 0"),
        ({"rounds": 1.0}, "rounds must be an int >= 0"),
        ({"topology": "star"}, "topology must be one of \\['full', 'sparse', 'centralized'\\]"),
        ({"max_peer_chars": 0}, "max_peer_chars must be an int >= 2"),
        ({"aggregate": "mean"}, "aggregate must be one of \\['vote', 'first'\\]"),
        ({"prompts": {"judge_system": "x"}}, "unknown prompt 'judge_system'"),
        ({"prompts": {"debater_user": "{problem} {peers}"}}, "uses \\['\\{peers\\}'\\]"),
        ({"prompts": {"coordinator_user": "{guide}"}}, "not known at that point"),
        ({"format_weight": 1.0}, "format_weight must be in"),
    ],
)
def test_debate_bad_arguments_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        llm_marl.make("math_debate-v0", **kwargs)


def test_bad_tasks_and_actions_are_refused():
    env = MathDebateEnv(num_debaters=2, rounds=1)
    with pytest.raises(ValueError, match="lacks \\['problem'\\]"):
        env.reset(options={"task": {"task_id": "t", "answer": "1"}})
    env.reset(seed=0, options={"task_id": SOLVE_X})
    with pytest.raises(ValueError, match="active agents \\['coordinator'\\] gave no action"):
        env.step({"debater_1": "hi"})
    with pytest.raises(ValueError, match="unknown agent 'debater_3'"):
        env.step({"coordinator": "g", "debater_3": "x"})
    with pytest.raises(TypeError, match="must be a str"):
        env.step({"coordinator": 3})
    _, _, _, _, infos = env.step({"coordinator": "g", "debater_1": "too early"})
    assert infos["debater_1"]["ignored_action"] is True
    with pytest.raises(ValueError, match="active agents \\['debater_2'\\] gave no action"):
        env.step({"debater_1": boxed("6")})


# ----------------------------------------------------------------------------- roles
@pytest.mark.parametrize(
    ("text", "expected", "shared"),
    [
        ("Solver 1: algebra\nSolver 2: guess and check", {1: "algebra", 2: "guess and check"}, ""),
        (
            "- **Solver 1:** algebra\n* Solver 2 - check\n### solver 3) draw it",
            {1: "algebra", 2: "check", 3: "draw it"},
            "",
        ),
        (
            "**Solver 2**: two\ncontinues here\n\nand here\nSolver 1. one",
            {1: "one", 2: "two\ncontinues here\nand here"},
            "",
        ),
        (
            "Plan for the team:\n\nSolver 1: a\nSolver 1: again\nSolver 9: nobody\nstill nobody",
            {1: "a"},
            "Plan for the team:",
        ),
        ("Solver #3 — dash", {3: "dash"}, ""),
        ("SOLVER 2:   ", {}, ""),
        ("  no roles here at all  \n second line", {}, "no roles here at all\nsecond line"),
        (
            "Solvers: everyone\nSolver one: x\nSolver 1234: x\nSolver 1 algebra",
            {},
            "Solvers: everyone\nSolver one: x\nSolver 1234: x\nSolver 1 algebra",
        ),
        ("", {}, ""),
    ],
)
def test_parse_roles_reads_the_documented_format(text, expected, shared):
    assert parse_roles(text, 3) == (expected, shared)


def test_parse_roles_caps_roles_and_stays_linear_on_hostile_text():
    assert parse_roles("Solver 1: " + "x" * 5000, 2, max_chars=100) == ({1: "x" * 100}, "")
    assert parse_roles("y" * 5000, 2, max_chars=100) == ({}, "y" * 100)
    # Shapes that make naive regexes backtrack; each is one pass here.
    hostile = [
        "*" * 200_000 + "Solver",
        "Solver " + "1" * 200_000,
        ("- " * 50_000 + "Solver 1\n") * 4,
    ]
    for text in hostile:
        roles, _ = parse_roles(text, 3)
        assert roles == {}


def test_roles_phases_and_each_solver_sees_only_its_own_role():
    env = llm_marl.make("math_roles-v0")
    assert env.possible_agents == ["assigner", "solver_1", "solver_2", "solver_3"]
    assert env.max_steps == 2 and env.unwrapped.collaborator == "assigner"
    obs, infos = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert active(env, infos) == ["assigner"]
    assert 'form "Solver k: <role>" for k = 1 to 3' in obs["assigner"][0]["content"]
    assert obs["assigner"][1]["content"] == "Solve for $x$: $3x - 7 = 11$."
    obs, _, _, _, infos = env.step({"assigner": "Solver 1: ROLE-ONE\nSolver 3: ROLE-THREE"})
    assert active(env, infos) == ["solver_1", "solver_2", "solver_3"]
    systems = {s: obs[s][0]["content"] for s in ("solver_1", "solver_2", "solver_3")}
    assert systems["solver_1"].startswith("ROLE-ONE\nPlease reason step by step")
    assert systems["solver_3"].startswith("ROLE-THREE\n")
    assert systems["solver_2"].startswith("You are a careful mathematical reasoning agent.\n")
    assert "ROLE-THREE" not in systems["solver_1"] + obs["solver_1"][1]["content"]
    assert obs["solver_2"][1]["content"].startswith("Solve for $x$: $3x - 7 = 11$. Let's think")
    _, rewards, terms, _, infos = env.step(
        {s: boxed("6") for s in ("solver_1", "solver_2", "solver_3")}
    )
    assert rewards == dict.fromkeys(env.possible_agents, 1.0) and all(terms.values())
    assigner = infos["assigner"]
    assert assigner["roles"]["solver_1"] == "ROLE-ONE" and assigner["malformed"] is True
    assert assigner["reward_components"]["roles_assigned"] == pytest.approx(2 / 3)


def test_an_assignment_without_headers_reaches_every_solver_as_a_shared_role():
    env = MathRolesEnv(num_solvers=3)
    env.reset(seed=0, options={"task_id": SOLVE_X})
    obs, _, _, _, infos = env.step({"assigner": "Team: check each step.\nSolver 2: GUESS"})
    assert obs["solver_1"][0]["content"].startswith("Team: check each step.\nPlease reason")
    assert obs["solver_3"][0]["content"].startswith("Team: check each step.\n")
    assert obs["solver_2"][0]["content"].startswith("GUESS\n")
    env.reset(seed=0, options={"task_id": SOLVE_X})
    obs, *_ = env.step({"assigner": "   "})
    assert obs["solver_1"][0]["content"].startswith("You are a careful mathematical reasoning")


def test_roles_wrong_team_answer_scores_0():
    env = MathRolesEnv(num_solvers=2)
    env.reset(seed=0, options={"task_id": SOLVE_X})
    _, rewards, *_ = env.step({"assigner": "Solver 1: a\nSolver 2: b"})
    assert set(rewards.values()) == {0.0}
    _, rewards, _, _, infos = env.step({"solver_1": boxed("5"), "solver_2": boxed("5")})
    assert set(rewards.values()) == {0.0} and infos["assigner"]["success"] is False
    assert infos["assigner"]["malformed"] is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_solvers": 0}, "number of solvers"),
        ({"max_role_chars": 0}, "max_role_chars must be an int >= 1"),
        ({"aggregate": "best"}, "aggregate must be one of"),
        ({"prompts": {"solver_system": "{guide}"}}, "uses \\['\\{guide\\}'\\]"),
        ({"num_debaters": 2}, "unexpected keyword|unknown arguments"),
    ],
)
def test_roles_bad_arguments_fail_at_construction(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        llm_marl.make("math_roles-v0", **kwargs)


def test_roles_custom_prompts_fill_the_team_size():
    env = MathRolesEnv(
        num_solvers=5,
        prompts={"assigner_system": None, "assigner_user": "{solvers} solvers: {problem}"},
    )
    obs, _ = env.reset(seed=0, options={"task_id": SOLVE_X})
    assert obs["assigner"] == [
        {"role": "user", "content": "5 solvers: Solve for $x$: $3x - 7 = 11$."}
    ]


# ----------------------------------------------------------------------------- frozen solvers
def _recording(log, name, answer):
    def fn(conversation):
        log.append((name, [m["content"] for m in conversation]))
        return boxed(answer)

    return ScriptedPolicy(fn, name=name)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "lead", "text", "steps_per_solver"),
    [
        ("math_debate-v0", {"num_debaters": 3, "rounds": 2}, "coordinator", "GUIDE-123", 3),
        ("math_roles-v0", {"num_solvers": 3}, "assigner", "Solver 2: ROLE-123", 1),
    ],
)
@pytest.mark.parametrize(("answer", "reward"), [("6", 1.0), ("7", 0.0)])
def test_frozen_scripted_solvers_leave_only_the_collaborator_to_act(
    env_id, kwargs, lead, text, steps_per_solver, answer, reward
):
    env = llm_marl.make(env_id, **kwargs)
    solvers = env.possible_agents[1:]
    log: list = []
    wrapped = FrozenAgents(env, {s: _recording(log, s, answer) for s in solvers})
    assert wrapped.possible_agents == [lead]
    obs, infos = wrapped.reset(seed=0, options={"task_id": SOLVE_X})
    assert list(obs) == [lead] and infos[lead]["active"] and log == []
    obs, rewards, terms, truncs, infos = wrapped.step({lead: text})
    assert rewards == {lead: reward} and terms == {lead: True} and truncs == {lead: False}
    assert infos[lead]["success"] is (reward == 1.0)
    # Every solver acted in every phase, and read the collaborator's text.
    assert sorted(name for name, _ in log) == sorted(solvers * steps_per_solver)
    seen_by = {name for name, messages in log if any("123" in m for m in messages)}
    assert seen_by == (set(solvers) if lead == "coordinator" else {"solver_2"})
    assert [a for a, _ in wrapped.frozen_turns] == [a for a, _ in log]
    with pytest.raises(ValueError, match="frozen"):
        wrapped.reset(seed=0, options={"task_id": SOLVE_X})
        wrapped.step({lead: "x", solvers[0]: "y"})


@pytest.mark.parametrize("env_id", ["math_debate-v0", "math_roles-v0"])
def test_collect_plays_the_team_with_one_shared_frozen_policy(env_id):
    env = llm_marl.make(env_id)
    lead, solvers = env.possible_agents[0], env.possible_agents[1:]
    team = ScriptedPolicy(lambda conv: boxed("6"), name="team")
    lead_policy = ScriptedPolicy(lambda conv: "Solver 1: check.", name="lead")
    episodes = collect(
        env_id,
        {lead: lead_policy, **dict.fromkeys(solvers, team)},
        tasks=[env.tasks[0]],
        group_size=2,
        progress=False,
    )
    assert len(episodes) == 2 and all(len(e.trajectories[lead].turns) == 1 for e in episodes)


def test_debate_names_its_solver_count_num_debaters():
    with pytest.raises(TypeError, match="num_debaters="):
        llm_marl.make("math_debate-v0", num_solvers=2)
