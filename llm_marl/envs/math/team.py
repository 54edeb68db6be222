"""`MathTeamEnv`: a trainable collaborator beside a team of frozen solvers, and the team's vote.

The base of AgentPO's multi-agent topologies, :mod:`~llm_marl.envs.math.debate`
(``math_debate-v0``) and :mod:`~llm_marl.envs.math.roles` (``math_roles-v0``), whose module
docstrings are their documentation. What they share lives here:

Agents
    One collaborator (the class attribute ``collaborator``) and ``num_solvers`` solvers named
    ``<solver_prefix>_1`` ... ``<solver_prefix>_N`` (``possible_agents`` is per instance; the
    class attribute lists the default team).
The team's answer (``aggregate=``)
    ``"vote"`` (default): a majority vote over the solvers' final answers, as the AgentPO
    release aggregates its debaters (``agentpo/debate/aggregator.py``, commit 1a91658: the
    most frequent answer wins, a tie goes to the answer given first in agent order, solvers
    without an answer abstain). Ours: answers are counted as the same vote when the math grader
    finds them equivalent (``\\frac12`` and ``0.5`` are one answer), where the release compares
    lightly normalised strings. ``"first"``: the first solver is the designated final agent and
    only its answer counts.
Reward (joint, every agent, on the final step)
    ``correct`` in {0, 1}: the team's answer is equivalent to the reference
    (:func:`llm_marl.tools.grading.judge`); no answer at all scores 0. ``format_weight = w``
    gives ``(1 - w) * correct + w * format`` (off by default), ``format`` being the share of
    final responses that hold a ``\\boxed{}``. Components besides ``correct`` and ``format``
    (reported, not rewarded): ``solver_accuracy`` (share of solvers whose own final answer is
    right) and ``agreement`` (share of all solvers that voted for the team's answer).
    ``require_boxed=True``: an answer without ``\\boxed{}`` is an abstention.
Infos on the final step
    Every agent: ``answer`` (the team's), ``reference``, ``correct``, ``votes`` (answer ->
    count, in order of first appearance). Each solver also: ``own_answer``, ``own_correct``,
    ``malformed`` (no ``\\boxed{}`` in its final response).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from llm_marl.checks import check_int
from llm_marl.envs.base import InfrastructureError, Task, Transition
from llm_marl.envs.math.env import MathEnv

AGGREGATES = ("vote", "first")
"""How the team's answer is chosen (``aggregate=``)."""
MAX_SOLVERS = 8
"""The largest team: the vote compares wrong answers pairwise (at most 28 comparisons)."""


@dataclass(frozen=True)
class SolverAnswer:
    """One solver's final answer, graded on its own."""

    agent: str
    answer: str | None
    """The extracted answer, or None (an abstention)."""
    correct: bool
    boxed: bool


@dataclass(frozen=True)
class Vote:
    """The outcome of the team's vote."""

    answer: str | None
    """The winning answer (None: nobody answered)."""
    correct: bool
    counts: dict[str, int]
    """Each distinct answer (its first wording) -> its votes, in order of first appearance."""


class MathTeamEnv(MathEnv, abstract=True):
    """A collaborator and ``num_solvers`` frozen solvers; the team's answer is graded.

    Subclasses set ``collaborator``, ``solver_prefix``, ``default_solvers`` and the
    :class:`~llm_marl.envs.math.env.MathEnv` class attributes, and end their episodes with
    :meth:`_grade_team`. The class-level ``possible_agents`` (the default team) and ``actor``
    (the first solver) follow from those three.
    """

    solver_prefix: ClassVar[str] = "solver"
    """Solvers are ``<solver_prefix>_1`` ... ``<solver_prefix>_N``."""
    default_solvers: ClassVar[int] = 3
    """``num_solvers`` when none is given."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.collaborator is not None:
            cls.possible_agents = [
                cls.collaborator,
                *solver_names(cls.solver_prefix, cls.default_solvers),
            ]
            cls.actor = f"{cls.solver_prefix}_1"

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        num_solvers: int | None = None,
        aggregate: str = "vote",
        **kwargs: Any,
    ) -> None:
        name = self.metadata["name"]
        n = self.default_solvers if num_solvers is None else num_solvers
        n = check_int(n, f"{name}: the number of solvers", 1, MAX_SOLVERS)
        if aggregate not in AGGREGATES:
            raise ValueError(
                f"{name}: aggregate must be one of {list(AGGREGATES)}, got {aggregate!r}"
            )
        self.aggregate = aggregate
        self.solvers = solver_names(self.solver_prefix, n)
        assert self.collaborator is not None  # every team env names its collaborator
        self.possible_agents = [self.collaborator, *self.solvers]
        super().__init__(
            tasks,
            **kwargs,
        )

    # ------------------------------------------------------------------ the team's verdict
    def _grade_team(
        self, finals: Mapping[str, str], extra: Mapping[str, float] | None = None
    ) -> Transition:
        """Score the solvers' final responses (``agent -> text``) and end the episode."""
        graded = [self._grade_solver(agent, finals[agent]) for agent in self.solvers]
        counted = graded if self.aggregate == "vote" else graded[:1]
        vote = self._vote(counted)
        n = len(graded)
        correct = float(vote.correct)
        fmt = sum(g.boxed for g in graded) / n
        winners = vote.counts.get(vote.answer, 0) if vote.answer is not None else 0
        components = {
            "correct": correct,
            "format": fmt,
            "solver_accuracy": sum(g.correct for g in graded) / n,
            "agreement": winners / n,
            **(extra or {}),
        }
        team = {
            "answer": vote.answer,
            "reference": str(self.task["answer"]),
            "correct": vote.correct,
            "votes": dict(vote.counts),
        }
        infos: dict[str, dict[str, Any]] = {a: dict(team) for a in self.possible_agents}
        for g in graded:
            infos[g.agent].update(own_answer=g.answer, own_correct=g.correct, malformed=not g.boxed)
        w = self.format_weight
        return Transition(
            reward=correct if w == 0.0 else (1.0 - w) * correct + w * fmt,
            components=components,
            done=True,
            success=vote.correct,
            infos=infos,
        )

    def _grade_solver(self, agent: str, completion: str) -> SolverAnswer:
        from llm_marl.tools.grading import normalize_answer

        result = self._grade(completion)
        answer = result.answer
        if not result.boxed and self.require_boxed:
            answer = None  # require_boxed: an unboxed answer is no vote
        if answer is not None and not normalize_answer(answer):
            answer = None  # "\\boxed{}": nothing to vote for
        return SolverAnswer(
            agent, answer, answer is not None and self._counts(result), result.boxed
        )

    def _vote(self, graded: Sequence[SolverAnswer]) -> Vote:
        """Group equivalent answers; the biggest group wins, a tie goes to the earliest group.

        The answers equivalent to the reference are one group (no comparison needed); wrong
        answers are compared pairwise with the grader, so the vote cannot be split by writing
        one wrong value two ways.
        """
        groups: list[tuple[SolverAnswer, int]] = []  # (first member, votes)
        for g in graded:
            if g.answer is None:
                continue
            for i, (first, votes) in enumerate(groups):
                if self._same_answer(g, first):
                    groups[i] = (first, votes + 1)
                    break
            else:
                groups.append((g, 1))
        if not groups:
            return Vote(None, False, {})
        best = max(range(len(groups)), key=lambda i: (groups[i][1], -i))
        winner = groups[best][0]
        counts: dict[str, int] = {}
        for first, votes in groups:
            assert first.answer is not None  # abstentions form no group
            counts[first.answer] = counts.get(first.answer, 0) + votes
        return Vote(winner.answer, winner.correct, counts)

    def _same_answer(self, a: SolverAnswer, b: SolverAnswer) -> bool:
        if a.correct or b.correct:
            return a.correct and b.correct
        from llm_marl.tools.grading import DEFAULT_TIMEOUT, judge

        assert a.answer is not None and b.answer is not None
        timeout = self.grading_timeout or DEFAULT_TIMEOUT
        try:
            return judge(a.answer, b.answer, timeout=timeout)[0]
        except Exception as err:  # a grader bug must not be learned from as a split vote
            raise InfrastructureError(f"math grader failed: {type(err).__name__}: {err}") from err


def solver_names(prefix: str, n: int) -> list[str]:
    """``["<prefix>_1", ..., "<prefix>_n"]``."""
    return [f"{prefix}_{i}" for i in range(1, n + 1)]
