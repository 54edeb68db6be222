"""math_roles-v0 — an assigner gives each frozen solver its role, then the team solves (AgentPO).

Paper
    AgentPO (ICLR 2026) trains one *collaborator* inside a fixed multi-agent topology whose other
    agents are frozen, on a binary correctness reward; its strongest baseline is *Role
    Assignment* (agents prompted with hand-written roles). This env makes the role assignment
    itself the collaborator's job: it writes one role per frozen solver, the solvers answer in
    those roles, and the team's answer is graded. The paper's own text on this topology and the
    release's code for it were not available to us: the protocol, the prompts and the parser
    below are **ours**, built from the pieces the release has — roles as a solver's system
    prompt, like the debaters' personas (``agentpo/debate/prompts.py``, commit 1a91658), the
    actor's prompts of the hint/critic topologies, and the majority vote of its debate
    (``agentpo/debate/aggregator.py``).
Agents
    ``assigner`` (the collaborator, trained; ``MathRolesEnv.collaborator``) and ``solver_1`` ...
    ``solver_N`` (frozen; ``num_solvers`` N, default 3, the number of the release's personas).
Phases (one step each; ``max_steps = 2``)
    1. ``assigner`` sees ``assigner_system`` + ``assigner_user`` (the bare problem) and writes
       the roles. Default system prompt (ours): "You coordinate a team of N math solvers who
       will each solve the problem below. Assign each solver a role [...] Write one line per
       solver, exactly in the form "Solver k: <role>" for k = 1 to N. Do not solve the
       problem."
    2. Every solver, at once, solves: ``solver_system`` (its role, then AgentPO's actor system
       prompt "Please reason step by step, and put your final answer within \\boxed{}.") +
       ``solver_user`` (AgentPO's actor request: "<problem> Let's think step by step and
       output the final answer within \\boxed{}.").
Action
    ``assigner``: any text; it is read line by line (:func:`parse_roles`). A line that starts
    with "Solver k" and a separator (``:``, ``.``, ``)``, ``-``), after optional markdown
    (``-``, ``*``, ``#``, ``>``, bold), starts solver k's role; the lines after it, up to the
    next header, continue it. Headers of unknown solvers (and their lines) and repeated
    headers are ignored. A solver without a role of its own gets the text before the first
    header (all of the text when there is no header: an unformatted assignment reaches every
    solver as a shared role), or, when that is empty, the release's default persona "You are
    a careful mathematical reasoning agent." Roles are cut to ``max_role_chars`` (default
    1,000). Solvers: the solution; the answer is the last ``\\boxed{...}`` (see
    :func:`llm_marl.tools.grading.extract_answer`).
Observation
    Each agent's own chat, as above. A solver sees its own role only, never the other roles,
    the other solvers or the reference; the assigner sees nothing after its assignment.
Reward (joint, every agent, after phase 2; phase 1 gives 0)
    ``correct`` in {0, 1}: the team's answer is equivalent to the reference. The team's answer
    is the solvers' majority vote (``aggregate="vote"``, default; equivalent answers are one
    vote, a tie goes to the answer given first) or ``solver_1``'s (``aggregate="first"``, a
    designated final agent). Components: ``correct``, ``format``, ``solver_accuracy``,
    ``agreement`` (see :mod:`llm_marl.envs.math.team`) and ``roles_assigned`` (share of solvers
    the assigner gave a role of their own; not rewarded). Infos: see :mod:`llm_marl.envs.math.team`; the
    assigner's also hold ``roles`` (solver -> the role it was given) and ``malformed`` (some
    solver got no role of its own). ``format_weight``, ``require_boxed`` and ``grading_timeout`` as in
    :mod:`llm_marl.envs.math.env`.
Chance level
    A math answer is not guessed: an assigner whose text says nothing useful leaves the reward
    at the frozen team's own accuracy (with the default persona, about that of
    ``math_single-v0`` per solver); the assigner is worth what its roles add to it.
Datasets
    As every math env (``dataset=``, ``split=``, ``limit=`` or ``tasks=``; default the bundled
    30-problem sample): the benchmarks and files it reads are listed once, in
    :mod:`llm_marl.envs.math.datasets`.
Prompts
    ``prompts={...}`` with any of ``assigner_system`` (``{solvers}``: the number of solvers),
    ``assigner_user`` (``{problem}``, ``{solvers}``), ``solver_system`` (``{role}``),
    ``solver_user`` (``{problem}``, ``{role}``) overrides :data:`ROLES_PROMPTS`. An empty
    system prompt sends none.

Training: AgentPO with ``assigner`` trainable and the solvers frozen (one frozen model may play
every solver: one policy object for all), as for ``math_debate-v0``; the preset
``agentpo-math-roles`` takes the debate run's released values (no release covers this
topology), and ``llm-marl eval --assigner SPEC --solvers SPEC`` scores a team. Or fold the
solvers into the env with :class:`~llm_marl.rollout.FrozenAgents`.

>>> import llm_marl
>>> env = llm_marl.make("math_roles-v0", num_solvers=2)
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/1"})
>>> obs, _, _, _, infos = env.step({"assigner": "Solver 1: algebra.\\nSolver 2: guess."})
>>> [a for a in env.agents if infos[a]["active"]]
['solver_1', 'solver_2']
>>> obs["solver_2"][0]["content"].splitlines()[0]
'guess.'
>>> _, rewards, *_ = env.step({"solver_1": "$x = \\\\boxed{6}$", "solver_2": "$\\\\boxed{6}$"})
>>> rewards["assigner"]
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

from llm_marl.checks import check_int
from llm_marl.envs.base import Task, Transition
from llm_marl.envs.math.debate import DEFAULT_PERSONA
from llm_marl.envs.math.env import check_math_task
from llm_marl.envs.math.prompts import ACTOR_SYSTEM, ACTOR_USER
from llm_marl.envs.math.team import MathTeamEnv

ASSIGNER_SYSTEM = (
    "You coordinate a team of {solvers} math solvers who will each solve the problem below. "
    "Assign each solver a role: one or two sentences saying how that solver should approach "
    "the problem (a method to use, a step to check, a perspective to take). Different roles "
    "help the team catch each other's mistakes. Write one line per solver, exactly in the "
    'form "Solver k: <role>" for k = 1 to {solvers}. Do not solve the problem.'
)
"""The collaborator's system prompt (ours)."""

SOLVER_SYSTEM = "{role}\n" + ACTOR_SYSTEM
"""A solver's system prompt: its role, then AgentPO's actor system prompt."""

ROLES_PROMPTS = MappingProxyType(
    {
        "assigner_system": ASSIGNER_SYSTEM,
        "assigner_user": "{problem}",
        "solver_system": SOLVER_SYSTEM,
        "solver_user": ACTOR_USER,
    }
)
"""Defaults of ``math_roles-v0``."""

_SEPARATORS = ":.)-\u2013\u2014"
"""What may follow "Solver k" in a header (``:``, ``.``, ``)``, hyphen, en and em dash)."""
_MARKUP = " \t>*#-\u2022"
"""Markdown a header may start with (spaces, quote, bold/bullet stars, heading, dash, bullet)."""


def parse_roles(text: str, num_solvers: int, max_chars: int = 1000) -> tuple[dict[int, str], str]:
    """The roles in an assignment: ``(roles, shared)``.

    ``roles`` maps a solver number (1-based) to its own role, for the solvers the text names;
    ``shared`` is the text before the first header (all of it when there is no header), for
    the solvers without a role of their own. Line by line, in linear time (see the module
    docstring for the format). Empty roles are dropped; each text is cut to ``max_chars``.
    """
    preamble: list[str] = []
    roles: dict[int, list[str]] = {}
    current: list[str] | None = preamble
    for line in text.splitlines():
        header = _header(line)
        if header is None:
            if current is not None:
                current.append(line.strip())
            continue
        k, first = header
        current = roles.setdefault(k, []) if 1 <= k <= num_solvers and k not in roles else None
        if current is not None:
            current.append(first)
    out = {k: role for k, lines in roles.items() if (role := _joined(lines, max_chars))}
    return out, _joined(preamble, max_chars)


def _joined(lines: list[str], max_chars: int) -> str:
    return "\n".join(x for x in lines if x).strip()[:max_chars]


def _header(line: str) -> tuple[int, str] | None:
    """``(k, rest of the line)`` if ``line`` starts solver k's role, else None."""
    t = line.lstrip(_MARKUP)
    if t[:6].lower() != "solver":
        return None
    t = t[6:].lstrip(" \t#")
    digits = len(t) - len(t.lstrip("0123456789"))
    if not 1 <= digits <= 3:
        return None
    k, t = int(t[:digits]), t[digits:].lstrip(" \t*")
    if not t or t[0] not in _SEPARATORS:
        return None
    return k, t[1:].strip(" \t*")


class MathRolesEnv(MathTeamEnv):
    """Assigner roles, then ``num_solvers`` frozen solvers (see the module docstring)."""

    metadata = {"name": "math_roles-v0"}
    turn_order = "`assigner`, then every solver together (two phases, one step each)"
    chance_note = "none to guess: empty roles leave the frozen solvers' own accuracy"
    collaborator = "assigner"
    solver_prefix = "solver"
    default_solvers = 3
    default_prompts = ROLES_PROMPTS
    prompt_fields = {
        "assigner_system": frozenset({"solvers"}),
        "assigner_user": frozenset({"problem", "solvers"}),
        "solver_system": frozenset({"role"}),
        "solver_user": frozenset({"problem", "role"}),
    }
    max_steps = 2

    def __init__(
        self, tasks: Iterable[Task] | None = None, *, max_role_chars: int = 1000, **kwargs: Any
    ) -> None:
        """``max_role_chars`` (>= 1) is described in the module docstring, and so are
        :class:`~llm_marl.envs.math.team.MathTeamEnv`'s ``num_solvers`` (1-8, default 3) and
        ``aggregate`` (``"vote"``, ``"first"``); the other arguments are
        :class:`~llm_marl.envs.math.env.MathEnv`'s."""
        self.max_role_chars = check_int(max_role_chars, "math_roles-v0: max_role_chars")
        super().__init__(tasks, **kwargs)
        self.num_solvers = len(self.solvers)

    _roles: dict[str, str] = {}
    """The role each solver plays in the current episode."""
    _assigned: int = 0
    """How many solvers the assigner gave a role."""

    def setup_episode(self, task: Task) -> None:
        check_math_task(task, type(self).__name__)
        self._roles, self._assigned = {}, 0
        n = str(len(self.solvers))
        self._ask("assigner", "assigner", problem=task["problem"], solvers=n)
        self.set_active(["assigner"])

    def transition(self, actions: dict[str, str]) -> Transition:
        if "assigner" in actions:
            parsed, shared = parse_roles(
                actions["assigner"], len(self.solvers), self.max_role_chars
            )
            self._assigned = len(parsed)
            self._roles = {
                solver: parsed.get(k) or shared or DEFAULT_PERSONA
                for k, solver in enumerate(self.solvers, start=1)
            }
            for solver, role in self._roles.items():
                self._ask(solver, "solver", role=role, problem=self.task["problem"])
            self.set_active(self.solvers)
            return Transition()
        share = self._assigned / len(self.solvers)
        transition = self._grade_team(actions, extra={"roles_assigned": share})
        transition.infos["assigner"].update(
            roles=dict(self._roles), malformed=self._assigned < len(self.solvers)
        )
        return transition
