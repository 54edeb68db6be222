"""math_debate-v0 — a coordinator guides a multi-agent debate of frozen solvers (AgentPO, debate).

Paper
    AgentPO (ICLR 2026) trains one *collaborator* inside a fixed multi-agent topology whose other
    agents are frozen, on a binary correctness reward. Beside the hint and critic topologies
    (``math_hint-v0``, ``math_critic-v0``) the authors' release adds a multi-agent debate
    (MAD): the collaborator writes a *debate guide*, ``N`` frozen debaters answer with it and
    revise over ``R`` rounds while reading each other, and a majority vote gives the team's
    answer. This env follows that release (``dreaming-madao/agentpo``, commit 1a91658 "mad":
    ``agentpo/debate/{prompts,topology,aggregator,runner,config}.py``, the ``mad`` branch of
    ``agentpo/rl_dataset.py`` and ``agentpo/reward_manager_agentpo.py``, ``scripts/train.sh``).
    The paper's own text on this topology was not available to us; where the release and this
    env differ, it says so below ("ours").
Agents
    ``coordinator`` (the collaborator, trained; ``MathDebateEnv.collaborator``) and
    ``debater_1`` ... ``debater_N`` (frozen; in the release, N calls of the one frozen actor
    model). ``num_debaters`` N (default 3) and ``rounds`` R (default 2) are the release's
    ``scripts/train.sh`` values (``mad_num_agents=3``, ``mad_debate_rounds=2``; its faster
    ``scripts/train_mad_llama3b_fast.sh`` uses 2 and 1).
Phases (one step each; ``max_steps = R + 2``)
    1. ``coordinator`` writes the guide. It sees ``coordinator_system`` + ``coordinator_user``
       (the bare problem). Default system prompt: the release's ``mad_system_prompt``: "You are
       a debate coordinator for a multi-agent reasoning system. Given a math problem, produce
       a concise debate guide [...] Do not fully solve the problem."
    2. Round 0: every debater, at once, answers independently: ``debater_system`` (its
       persona, then "You are one debater in a multi-agent debate. Solve the problem
       independently first. [...]") + ``debater_user`` ("<Problem>\\n<problem>\\n\\n<Debate
       Guide>\\n<guide>\\n\\nSolve the problem independently. [...]").
    3. Rounds 1 ... R: every debater, at once, in a *new* chat (as the release re-prompts):
       ``revise_system`` ("[...] You are revising your answer in a multi-agent debate. Use peer
       opinions carefully, but do not follow them blindly. [...]") + ``revise_user`` with the
       problem, the guide, its own previous response and its peers' previous responses
       ("<Peer Responses From Round r-1>", each "[debater_k previous response]\\n<text>").
       Responses shown again are cut to ``max_peer_chars`` (default 2,000, the release's
       ``MADConfig``; its fast script uses 600): the first and last halves, joined by
       "...[truncated]...".
    Peers (``topology=``, the release's ``select_peers``): ``"full"`` (default: every other
    debater), ``"sparse"`` (the two ring neighbours), ``"centralized"`` (``debater_1`` reads
    everyone, the others read ``debater_1``). Personas (``personas=``, the release's
    ``multi_persona``): ``False`` (default, as the release trains): every debater is "You are a
    careful mathematical reasoning agent.\\nRole: Debater."; ``True``: Solver, Skeptic and
    Checker personas in turn.
Observation
    Each agent's own chat, as above. The guide is the coordinator's text verbatim (stripped);
    debaters never see the reference; the coordinator sees nothing after its guide.
Action
    Any text. A debater's answer is the last ``\\boxed{...}`` of its response (fallbacks: an
    answer marker, then the last number; see :func:`llm_marl.tools.grading.extract_answer`).
Reward (joint, every agent, after the last round; earlier steps give 0)
    ``correct`` in {0, 1}: the team's answer, a majority vote over the last round's answers
    (``aggregate="vote"``, the release's ``use_majority_vote``), is equivalent to the
    reference. Ours: equivalent answers are one vote (the release compares normalised
    strings); ``aggregate="first"`` grades ``debater_1`` alone. Components: ``correct``,
    ``format``, ``solver_accuracy``, ``agreement`` (see :mod:`llm_marl.envs.math.team`) and
    ``initial_accuracy`` (share of round-0 answers that are right: whether the debate helped;
    not rewarded). Infos: see :mod:`llm_marl.envs.math.team`; ``format_weight``,
    ``require_boxed`` and ``grading_timeout`` as in :mod:`llm_marl.envs.math.env`.
Chance level
    A math answer is not guessed: the reward of a collaborator that writes nothing useful is the
    frozen team's own accuracy with an empty guide (compare with ``math_single-v0`` for one
    debater); the collaborator is worth what it adds to that.
Datasets
    As every math env (``dataset=``, ``split=``, ``limit=`` or ``tasks=``; default the bundled
    30-problem sample): the benchmarks and files it reads are listed once, in
    :mod:`llm_marl.envs.math.datasets`.
Prompts
    ``prompts={...}`` with any of ``coordinator_system``, ``coordinator_user`` (``{problem}``),
    ``debater_system`` (``{persona}``), ``debater_user`` (``{problem}``, ``{guide}``),
    ``revise_system`` (``{persona}``), ``revise_user`` (``{problem}``, ``{guide}``,
    ``{previous}``, ``{peers}``, ``{round}``: the previous round's number) overrides
    :data:`DEBATE_PROMPTS`. An empty system prompt sends none. Ours: the release writes the
    persona line and the prompts in Python code; here they are templates.

Training: AgentPO with ``coordinator`` trainable and the debaters frozen. As in the release, one
frozen model can play every debater (one policy object for all; collect batches their
requests)::

    policies = {"coordinator": HFPolicy(collab_path, trainable=True),
                **dict.fromkeys(["debater_1", "debater_2", "debater_3"], frozen_actor)}
    Trainer(AgentPO(), policies, TrainerConfig(env="math_debate-v0", ...)).train()

The release decodes the debaters greedily (``temperature=0``, ``max_tokens=2048``): give them
that per-agent ``sampling``. From a run config, name each debater in ``policies.frozen`` (one
spec for all: one model). The release's run is the preset ``agentpo-math-debate``
(:mod:`llm_marl.train.presets.agentpo`); ``llm-marl eval --coordinator SPEC --solvers SPEC``
scores a team (:mod:`llm_marl.eval.math_team`). Or fold the debaters into the env with
:class:`~llm_marl.rollout.FrozenAgents`.

>>> import llm_marl
>>> env = llm_marl.make("math_debate-v0", num_debaters=2, rounds=1)
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/1"})
>>> [a for a in env.agents if infos[a]["active"]]
['coordinator']
>>> obs, _, _, _, infos = env.step({"coordinator": "Isolate x; check by substitution."})
>>> [a for a in env.agents if infos[a]["active"]]
['debater_1', 'debater_2']
>>> obs, _, _, _, infos = env.step({"debater_1": "$\\\\boxed{6}$", "debater_2": "$\\\\boxed{4}$"})
>>> "[debater_1 previous response]" in obs["debater_2"][-1]["content"]
True
>>> _, rewards, *_ = env.step({"debater_1": "$\\\\boxed{6}$", "debater_2": "So $x=\\\\boxed{6}$."})
>>> rewards["coordinator"]
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from llm_marl.checks import check_int
from llm_marl.envs.base import Task, Transition
from llm_marl.envs.math.env import check_math_task
from llm_marl.envs.math.team import MathTeamEnv

TOPOLOGIES = ("full", "sparse", "centralized")
"""Whom a debater reads in a revision round (``topology=``)."""

DEFAULT_PERSONA = "You are a careful mathematical reasoning agent."
"""Every debater's persona unless ``personas=True`` (the release's default persona)."""

PERSONAS = (
    ("Solver", DEFAULT_PERSONA),
    ("Skeptic", "You are a skeptical mathematical reviewer who searches for hidden errors."),
    ("Checker", "You are a meticulous checker who verifies algebra, arithmetic, and edge cases."),
)
"""The release's ``DEFAULT_PERSONAS`` (``personas=True``), given to debaters in turn."""

COORDINATOR_SYSTEM = (
    "You are a debate coordinator for a multi-agent reasoning system.\n"
    "Given a math problem, produce a concise debate guide that helps several debaters solve it.\n"
    "Your guide should:\n"
    "1. identify the key mathematical subproblems;\n"
    "2. list likely pitfalls or shortcuts to avoid;\n"
    "3. suggest how agents should cross-check each other's reasoning;\n"
    "4. remind them to place the final answer within \\boxed{}.\n"
    "Do not fully solve the problem."
)
"""The collaborator's system prompt: the release's ``mad_system_prompt``
(``agentpo/rl_dataset.py``, commit 1a91658)."""

DEBATER_SYSTEM = (
    "{persona}\nYou are one debater in a multi-agent debate. Solve the problem independently "
    "first. Be concise but rigorous, and put the final answer within \\boxed{}."
)
"""Round 0's system prompt (the release's ``build_initial_debater_messages``)."""

DEBATER_USER = (
    "<Problem>\n{problem}\n\n<Debate Guide>\n{guide}\n\nSolve the problem independently. "
    "Reason carefully and put your final answer within \\boxed{}."
)
"""Round 0's request: the problem and the coordinator's guide."""

REVISE_SYSTEM = (
    "{persona}\nYou are revising your answer in a multi-agent debate. Use peer opinions "
    "carefully, but do not follow them blindly. Put the final answer within \\boxed{}."
)
"""A revision round's system prompt (the release's ``build_debate_messages``)."""

REVISE_USER = (
    "<Problem>\n{problem}\n\n<Debate Guide>\n{guide}\n\n<Your Previous Response>\n{previous}"
    "\n\n<Peer Responses From Round {round}>\n{peers}\n\nRevise your answer if needed. Keep "
    "strong reasoning, fix any errors you find, and put the final answer within \\boxed{}."
)
"""A revision round's request: problem, guide, own and peers' previous responses."""

NO_PEERS = "[No peer responses provided]"
"""What ``{peers}`` holds for a debater that reads nobody (one debater alone)."""

DEBATE_PROMPTS = MappingProxyType(
    {
        "coordinator_system": COORDINATOR_SYSTEM,
        "coordinator_user": "{problem}",
        "debater_system": DEBATER_SYSTEM,
        "debater_user": DEBATER_USER,
        "revise_system": REVISE_SYSTEM,
        "revise_user": REVISE_USER,
    }
)
"""Defaults of ``math_debate-v0``."""


class MathDebateEnv(MathTeamEnv):
    """Coordinator guide, then a debate of ``num_debaters`` over ``rounds`` (see the module
    docstring)."""

    metadata = {"name": "math_debate-v0"}
    turn_order = "`coordinator`, then every debater together for rounds 0 to `rounds` (default 2)"
    chance_note = "none to guess: an empty guide leaves the frozen debaters' own accuracy"
    collaborator = "coordinator"
    solver_prefix = "debater"
    default_solvers = 3
    default_prompts = DEBATE_PROMPTS
    prompt_fields = {
        "coordinator_system": frozenset(),
        "coordinator_user": frozenset({"problem"}),
        "debater_system": frozenset({"persona"}),
        "debater_user": frozenset({"problem", "guide"}),
        "revise_system": frozenset({"persona"}),
        "revise_user": frozenset({"problem", "guide", "previous", "peers", "round"}),
    }
    max_steps = 4  # rounds + 2 with the default 2 rounds; each instance sets its own

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        num_debaters: int | None = None,
        rounds: int = 2,
        topology: str = "full",
        personas: bool = False,
        max_peer_chars: int = 2000,
        **kwargs: Any,
    ) -> None:
        """``num_debaters`` (1-8, default 3), ``rounds`` (revision rounds, >= 0), ``topology``
        (``"full"``, ``"sparse"``, ``"centralized"``), ``personas``, ``max_peer_chars`` (>= 2)
        and :class:`~llm_marl.envs.math.team.MathTeamEnv`'s ``aggregate`` (``"vote"``,
        ``"first"``) are described in the module docstring; the other arguments are
        :class:`~llm_marl.envs.math.env.MathEnv`'s."""
        name = self.metadata["name"]
        if "num_solvers" in kwargs:
            raise TypeError(f"{name}: the number of debaters is num_debaters=, not num_solvers=")
        self.rounds = check_int(rounds, f"{name}: rounds", 0)
        if topology not in TOPOLOGIES:
            raise ValueError(
                f"{name}: topology must be one of {list(TOPOLOGIES)}, got {topology!r}"
            )
        self.topology = topology
        self.personas = bool(personas)
        self.max_peer_chars = check_int(max_peer_chars, f"{name}: max_peer_chars", 2)
        super().__init__(tasks, num_solvers=num_debaters, **kwargs)
        self.max_steps = self.rounds + 2  # the guide, round 0, the revision rounds
        self.num_debaters = len(self.solvers)

    _guide: str = ""
    _round: int = 0
    """The round the debaters play next (0: the first answers)."""
    _responses: dict[str, str] = {}
    """Each debater's latest response."""
    _initial_accuracy: float = 0.0

    def persona(self, debater: str) -> str:
        """The persona text of ``debater`` (what fills ``{persona}``)."""
        if not self.personas:
            return f"{DEFAULT_PERSONA}\nRole: Debater."
        role, text = PERSONAS[self.solvers.index(debater) % len(PERSONAS)]
        return f"{text}\nRole: {role}."

    def peers(self, debater: str) -> list[str]:
        """The debaters whose previous responses ``debater`` reads (``topology``)."""
        names, i = self.solvers, self.solvers.index(debater)
        if self.topology == "sparse":
            if len(names) == 1:
                return []
            ring = [names[(i - 1) % len(names)], names[(i + 1) % len(names)]]
            return [p for k, p in enumerate(ring) if p != debater and p not in ring[:k]]
        if self.topology == "centralized":
            return names[1:] if i == 0 else [names[0]]
        return names[:i] + names[i + 1 :]

    def setup_episode(self, task: Task) -> None:
        check_math_task(task, type(self).__name__)
        self._guide, self._round, self._responses = "", 0, {}
        self._initial_accuracy = 0.0
        self._ask("coordinator", "coordinator", problem=task["problem"])
        self.set_active(["coordinator"])

    def transition(self, actions: dict[str, str]) -> Transition:
        if "coordinator" in actions:
            self._guide = actions["coordinator"].strip()
            for debater in self.solvers:
                self._ask_debater(debater, "debater")
            self.set_active(self.solvers)
            return Transition()
        self._responses = {d: actions[d] for d in self.solvers}
        if self._round == 0:
            graded = [self._grade_solver(d, self._responses[d]) for d in self.solvers]
            self._initial_accuracy = sum(g.correct for g in graded) / len(graded)
        if self._round == self.rounds:
            return self._grade_team(
                self._responses, extra={"initial_accuracy": self._initial_accuracy}
            )
        self._round += 1
        for debater in self.solvers:
            self.restart_conversation(debater)
            self._ask_debater(
                debater,
                "revise",
                previous=self._cut(self._responses[debater]),
                peers=self._peer_block(debater),
                round=str(self._round - 1),
            )
        self.set_active(self.solvers)
        return Transition()

    def _ask_debater(self, debater: str, prompt: str, **values: str) -> None:
        """Post ``prompt`` to ``debater``: every debater prompt gets its persona, the problem and
        the guide, besides ``values``."""
        self._ask(
            debater,
            prompt,
            persona=self.persona(debater),
            problem=self.task["problem"],
            guide=self._guide,
            **values,
        )

    def _peer_block(self, debater: str) -> str:
        block = [
            f"[{peer} previous response]\n{self._cut(self._responses[peer])}"
            for peer in self.peers(debater)
        ]
        return "\n\n".join(block) if block else NO_PEERS

    def _cut(self, text: str) -> str:
        """``text`` within ``max_peer_chars``: its first and last halves (the release's)."""
        if len(text) <= self.max_peer_chars:
            return text
        half = self.max_peer_chars // 2
        return text[:half] + "\n...[truncated]...\n" + text[-half:]
