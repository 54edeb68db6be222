"""`Family`: what evaluating one env family needs beyond :func:`~llm_marl.eval.evaluate`.

A family (math, coding; later writing, search) knows its roles, how a team and a benchmark name
pick an env and its tasks, its default sampling, and its extra metrics, record fields and table
columns. Its :meth:`Family.evaluate` is the family's evaluation function, and the command line
(:mod:`llm_marl.eval.cli`) drives every family through the same methods. Adding a family is one
subclass (see :mod:`llm_marl.eval.math` and :mod:`llm_marl.eval.coding`) and one entry in
``llm_marl.eval.cli.FAMILIES``.

:class:`EnvFamily` is the family of any other env: each env id is one benchmark with the env's
own tasks, and nothing is added to the generic scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Benchmark, Column, evaluate
from llm_marl.eval.metrics import Record
from llm_marl.policies.base import Policy, SamplingParams, per_agent_sampling
from llm_marl.rollout.types import Episode


class Family:
    """Base of the eval families. Subclasses set the class attributes and :meth:`rows`."""

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

    def rows(
        self,
        team: Sequence[str],
        names: Sequence[str] | None = None,
        env_ids: Sequence[str] | None = None,
        *,
        split: str | None = None,
        limit: int | None = None,
    ) -> list[Benchmark]:
        """The benchmarks to play: named ones (``names``, in the env ``team`` picks) or the
        envs named by ``env_ids``. The base class plays each env id on its own tasks."""
        if names:
            raise ConfigError(
                f"benchmark names {list(names)} mean nothing for an arbitrary env: name the env "
                "ids to evaluate (each is played on its own tasks)"
            )
        if not env_ids:
            raise ConfigError("name at least one env id to evaluate")
        kwargs = {"split": split} if split is not None else {}
        return [Benchmark(env_id, env_id, env_kwargs=kwargs) for env_id in env_ids]

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

    def evaluate(
        self,
        policies: Mapping[str, Policy],
        benchmarks: Sequence[str] | str | None = None,
        *,
        env_ids: Sequence[str] | None = None,
        split: str | None = None,
        limit: int | None = None,
        sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Evaluate a team on the family's benchmarks (or on ``env_ids``).

        ``benchmarks`` are names (a comma-separated string is split; default
        :attr:`default_benchmarks` unless ``env_ids`` are given). Agents that ``sampling``
        leaves out get :meth:`default_sampling`. Other keyword arguments go to
        :func:`~llm_marl.eval.evaluate` (``samples``, ``k``, ``env_kwargs``,
        ``episodes_path``...).
        """
        names = split_names(benchmarks)
        if not names and not env_ids:
            names = list(self.default_benchmarks)
        team = list(policies)
        rows = self.rows(team, names, env_ids, split=split, limit=limit)
        per_agent = per_agent_sampling(sampling, team, default=self.default_sampling(team))
        return evaluate(
            rows,
            policies,
            sampling=per_agent,
            limit=limit,
            metrics=self.metrics,
            record_fields=self.record_fields,
            columns=self.columns,
            **kwargs,
        )


class EnvFamily(Family):
    """Any env: each env id is one benchmark, played on the env's own tasks."""

    def owns(self, env_id: str) -> bool:
        return True


def split_names(names: Sequence[str] | str | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (empty entries dropped)."""
    if names is None:
        return []
    items = names.split(",") if isinstance(names, str) else list(names)
    return [n.strip() for n in items if n and n.strip()]
