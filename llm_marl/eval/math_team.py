"""The team topologies on math benchmarks: a collaborator among frozen solvers, the team's answer.

``math_debate-v0`` (a coordinator's guide, then a debate) and ``math_roles-v0`` (an assigner's
roles, then the solvers) end with a majority vote of the solvers (:mod:`llm_marl.envs.math.team`).
This family scores that vote per benchmark: ``pass@1`` / unbiased ``pass@k`` are those of the
team's answer (the env's ``success``), beside the math family's columns and three of the team's
own (:attr:`MathTeamFamily.columns`: the solvers' own pass@1, their agreement with the team's
answer, and the debate's round-0 pass@1). Everything else is the math family's
(:class:`~llm_marl.eval.math.MathFamily`): benchmark names, datasets, greedy AgentPO budgets.

The collaborator picks the env (``coordinator``: debate, ``assigner``: roles). The solvers are
one policy for all (``solvers``, as the release calls one frozen model N times; N is the env's,
``num_debaters`` / ``num_solvers`` in ``env_kwargs``), and any solver named on its own
(``debater_2``; the command line then needs ``--family math_team`` or ``--env ID``, since
such a name is no family's role) gets its own policy instead::

    llm-marl eval --coordinator hf:runs/agentpo/coordinator \\
        --solvers openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 \\
        --benchmarks math500,aime24 --episodes-out episodes.jsonl
    llm-marl eval --family math_team --assigner hf:runs/agentpo/assigner \\
        --solvers hf:Qwen/Qwen2.5-7B-Instruct --agent solver_3=hf:meta-llama/Llama-3.2-3B-Instruct

From Python::

    from llm_marl.eval.math_team import MATH_TEAM
    report = MATH_TEAM.evaluate({"coordinator": guide, "solvers": frozen}, ["math500"],
                                env_kwargs={"rounds": 1}, episodes_path="episodes.jsonl")

Each episode's record also holds the team's ``votes`` (answer -> count); the solvers' own
answers are in its ``infos``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from llm_marl.envs.registration import make
from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Column, EvalOptions
from llm_marl.eval.math import ACTOR_SAMPLING, COLLABORATOR_SAMPLING, MathFamily
from llm_marl.eval.metrics import Record
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.rollout.types import Episode

__all__ = ["MATH_TEAM", "SOLVERS", "MathTeamFamily"]

SOLVERS = "solvers"
"""The role that stands for every solver of the team (``--solvers SPEC``)."""

_ENV_BY_COLLABORATOR = {"coordinator": "math_debate-v0", "assigner": "math_roles-v0"}

T = TypeVar("T")


class MathTeamFamily(MathFamily):
    """The math team topologies: debate (coordinator) and roles (assigner)."""

    name: ClassVar[str] = "math_team"
    roles: ClassVar[tuple[str, ...]] = (*_ENV_BY_COLLABORATOR, SOLVERS)
    collaborators: ClassVar[tuple[str, ...]] = tuple(_ENV_BY_COLLABORATOR)
    columns: ClassVar[tuple[Column, ...]] = (
        *MathFamily.columns,  # shown where the benchmarks have them (format)
        # The solvers' own (last-round) answers, each graded alone: the vote adds pass@1 - this.
        Column("solver_pass@1", "solver", "score"),
        Column("agreement", "agree", "percent"),
        Column("initial_pass@1", "round0", "score"),  # the debate's first answers
    )

    def owns(self, env_id: str) -> bool:
        return env_id in _ENV_BY_COLLABORATOR.values()

    def env_for(self, team: Sequence[str]) -> str:
        """``coordinator`` -> ``math_debate-v0``, ``assigner`` -> ``math_roles-v0``."""
        leads = [a for a in team if a in _ENV_BY_COLLABORATOR]
        if len(leads) != 1:
            raise ConfigError(
                "a math team has one collaborator, coordinator (math_debate-v0) or assigner "
                f"(math_roles-v0), beside its solvers; got agents {list(team)}"
            )
        if len(team) == 1:
            raise ConfigError(
                f"the {leads[0]}'s team has no solvers: give them one policy (--solvers SPEC, "
                'policies["solvers"]) or one each (--agent NAME=SPEC)'
            )
        return _ENV_BY_COLLABORATOR[leads[0]]

    def team_for(
        self, team: Mapping[str, T], env_id: str, env_kwargs: Mapping[str, Any] | None = None
    ) -> dict[str, T]:
        """``team`` by the env's agents: ``solvers`` stands for every solver not named on its
        own. The solvers are those of ``env_id`` built with ``env_kwargs``."""
        if SOLVERS not in team:
            return dict(team)
        try:
            env = make(env_id, **(env_kwargs or {}))
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{env_id}: cannot build its env: {err}") from err
        try:
            agents = list(env.possible_agents)
        finally:
            env.close()
        out: dict[str, T] = {}
        for agent in agents:
            if agent in team:
                out[agent] = team[agent]
            elif agent not in self.collaborators:
                out[agent] = team[SOLVERS]
        # Agents the env does not have stay, for the evaluator to name in its error.
        out.update({a: v for a, v in team.items() if a != SOLVERS and a not in out})
        return out

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        return {
            a: COLLABORATOR_SAMPLING if a in self.collaborators else ACTOR_SAMPLING for a in team
        }

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        out = super().metrics(records)
        for key, component in (
            ("solver_pass@1", "solver_accuracy"),
            ("agreement", "agreement"),
            ("initial_pass@1", "initial_accuracy"),
        ):
            values = [
                float(r["components"][component]) for r in records if component in r["components"]
            ]
            if values:
                out[key] = sum(values) / len(values)
        return out

    def graded_infos(self, episode: Episode) -> Mapping[str, Any]:
        # Every agent of a team env holds the team's verdict; the collaborator is always there.
        return next(
            (episode.final_infos[a] for a in self.collaborators if a in episode.final_infos), {}
        )

    def record_fields(self, episode: Episode) -> dict[str, Any]:
        return {**super().record_fields(episode), "votes": self.graded_infos(episode).get("votes")}

    def resolve_team(
        self, policies: Mapping[str, Policy], env_ids: Sequence[str] | None, options: EvalOptions
    ) -> dict[str, Policy]:
        """``solvers`` (in ``policies`` and in a per-agent ``sampling``) stands for every solver
        of the env that ``env_ids`` or the collaborator picks (see :meth:`team_for`)."""
        if env_ids:
            self.check_envs(env_ids)
        env_id = env_ids[0] if env_ids else self.env_for(list(policies))
        env_kwargs = options.get("env_kwargs")
        team = self.team_for(policies, env_id, env_kwargs)
        sampling = options.get("sampling")
        if isinstance(sampling, Mapping):
            options["sampling"] = self.team_for(sampling, env_id, env_kwargs)
        return team


MATH_TEAM = MathTeamFamily()
