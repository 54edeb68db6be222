"""`Family`: what evaluating one env family needs beyond :func:`~llm_marl.eval.evaluate`.

A family (math, math team, coding, writing, search) knows its roles, how a team and a benchmark name
pick an env and its tasks, its default sampling, and its extra metrics, record fields and table
columns. Its :meth:`Family.evaluate` is the family's evaluation function, and the command line
(:mod:`llm_marl.eval.cli`) drives every family through the same methods. Adding a family is one
subclass (see :mod:`llm_marl.eval.math`, :mod:`llm_marl.eval.coding`,
:mod:`llm_marl.eval.writing` and :mod:`llm_marl.eval.search`) and one entry in ``llm_marl.eval.cli.FAMILIES``.

:class:`EnvFamily` is the family of any other env: each env id is one benchmark with the env's
own tasks, and nothing is added to the generic scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Benchmark, Column, EvalOptions, evaluate
from llm_marl.eval.metrics import Record
from llm_marl.policies.base import Policy, SamplingParams, per_agent_sampling
from llm_marl.rollout.types import Episode

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Family:
    """Base of the eval families. Subclasses set the class attributes, :meth:`owns` and
    :meth:`benchmark` (and :meth:`env_rows` or :meth:`benchmarks_for` where the base class's do
    not fit)."""

    name: ClassVar[str] = "env"
    """The family's name (``llm-marl eval --family NAME``)."""
    roles: ClassVar[tuple[str, ...]] = ()
    """The agent names of the family's envs (``llm-marl eval --ROLE SPEC`` shortcuts)."""
    collaborators: ClassVar[tuple[str, ...]] = ()
    """Roles whose token budget is ``--collaborator-max-new-tokens`` instead of
    ``--max-new-tokens`` (math: the hint and the critic)."""
    default_benchmarks: ClassVar[tuple[str, ...]] = ()
    """Benchmarks evaluated when none are named."""
    columns: ClassVar[tuple[Column, ...]] = ()
    """Extra columns of the printed table (keys of :meth:`metrics`)."""

    def owns(self, env_id: str) -> bool:
        """Whether ``env_id`` is one of the family's envs."""
        return False

    def check_envs(self, env_ids: Sequence[str]) -> None:
        """Raise :class:`ConfigError` naming the env ids that are not the family's."""
        foreign = [e for e in env_ids if not self.owns(e)]
        if foreign:
            raise ConfigError(f"not {self.name} envs: {', '.join(foreign)}")

    def rows(
        self,
        team: Sequence[str],
        names: Sequence[str] | None = None,
        env_ids: Sequence[str] | None = None,
        *,
        split: str | None = None,
        limit: int | None = None,
    ) -> list[Benchmark]:
        """The benchmarks to play: the envs ``env_ids`` names (each must be the family's, see
        :meth:`owns`; played by :meth:`env_rows`), else one :meth:`benchmark` per name
        (``names``, default :meth:`benchmarks_for` the team)."""
        if env_ids:
            self.check_envs(env_ids)
            return self.env_rows(env_ids, list(names or ()), split=split, limit=limit)
        chosen = list(names or self.benchmarks_for(team))
        if not chosen:
            raise ConfigError("name at least one env id to evaluate")
        return [self.benchmark(team, n, split=split, limit=limit) for n in chosen]

    def benchmarks_for(self, team: Sequence[str]) -> Sequence[str]:
        """The benchmarks a team plays when none are named (base class:
        :attr:`default_benchmarks`)."""
        return self.default_benchmarks

    def benchmark(
        self, team: Sequence[str], name: str, *, split: str | None, limit: int | None
    ) -> Benchmark:
        """The row of benchmark ``name``, played in the env ``team`` picks. The base class
        knows no benchmark names: an arbitrary env is named by its id."""
        raise ConfigError(
            f"benchmark name {name!r} means nothing for an arbitrary env: name the env ids to "
            "evaluate (each is played on its own tasks)"
        )

    def env_rows(
        self, env_ids: Sequence[str], names: Sequence[str], *, split: str | None, limit: int | None
    ) -> list[Benchmark]:
        """The rows of the family's ``env_ids``. Base class: each env is played on its own
        tasks (of ``split``), so benchmark names are refused."""
        if names:
            raise ConfigError(
                f"name benchmarks or env ids, not both: each env id is played on its own tasks "
                f"(got benchmarks {list(names)} and env ids {list(env_ids)})"
            )
        return [Benchmark(e, e, env_kwargs=split_kwargs(split)) for e in env_ids]

    def check_team(self, team: Sequence[str]) -> None:
        """Raise :class:`ConfigError` if the family has no env for a team of these agents (the
        command line checks this before it loads any model). Base class: any team."""

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        """Each agent's sampling when the caller gives none (base class: ``SamplingParams()``)."""
        return dict.fromkeys(team, SamplingParams())

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        """Extra per-benchmark metrics from the benchmark's scored records."""
        return {}

    def record_fields(self, episode: Episode) -> dict[str, Any]:
        """Extra top-level fields of an episode's record."""
        return {}

    def resolve_team(
        self, policies: Mapping[str, Policy], env_ids: Sequence[str] | None, options: EvalOptions
    ) -> dict[str, Policy]:
        """The team by agent name, before anything is played (:meth:`evaluate` asks first).

        Base class: ``policies`` as given. A family whose role stands for several agents (the
        math team's ``solvers``) names each of them here, in ``policies`` and in a per-agent
        ``options["sampling"]`` (``options`` is :meth:`evaluate`'s own, so it may be updated).
        """
        return dict(policies)

    def evaluate(
        self,
        policies: Mapping[str, Policy],
        benchmarks: Sequence[str] | str | None = None,
        *,
        env_ids: Sequence[str] | None = None,
        split: str | None = None,
        **options: Unpack[EvalOptions],
    ) -> dict[str, Any]:
        """Evaluate a team on the family's benchmarks (or on ``env_ids``).

        ``benchmarks`` are names (a comma-separated string is split; default
        :meth:`benchmarks_for` the team unless ``env_ids`` are given); ``split`` is every
        benchmark's split (default: each one's own). ``options`` go to
        :func:`~llm_marl.eval.evaluate` (``samples``, ``k``, ``limit``, ``env_kwargs``,
        ``episodes_path``...); agents that ``sampling`` leaves out get
        :meth:`default_sampling`. The team is ``policies`` as :meth:`resolve_team` reads it.
        """
        policies = self.resolve_team(policies, env_ids, options)
        team = list(policies)
        rows = self.rows(
            team, split_names(benchmarks), env_ids, split=split, limit=options.get("limit")
        )
        default = self.default_sampling(team)
        options["sampling"] = per_agent_sampling(options.get("sampling"), team, default=default)
        return evaluate(
            rows,
            policies,
            metrics=self.metrics,
            record_fields=self.record_fields,
            columns=self.columns,
            **options,
        )


class EnvFamily(Family):
    """Any env: each env id is one benchmark, played on the env's own tasks."""

    def owns(self, env_id: str) -> bool:
        return True


def split_kwargs(split: str | None, **kwargs: Any) -> dict[str, Any]:
    """Env arguments ``kwargs`` plus ``split`` when one is given (``None`` keeps the env's own)."""
    return {**kwargs, "split": split} if split is not None else kwargs


def split_names(names: Sequence[str] | str | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (empty entries dropped)."""
    if names is None:
        return []
    items = names.split(",") if isinstance(names, str) else list(names)
    return [n.strip() for n in items if n and n.strip()]
