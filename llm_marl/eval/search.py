"""The search family of ``llm-marl eval``: MATPO's web-search benchmarks (EM, F1, format, judge).

A planner and a worker play ``websearch-v0`` (MATPO's planner-worker setting); a lone agent plays
``websearch_single-v0`` (name it with ``--env websearch_single-v0 --agent agent=SPEC``).
Benchmark names are the env's datasets: ``hotpotqa`` (offline: BM25 over its own paragraphs),
``frames`` and ``webwalkerqa`` (questions only: they need a live engine), and ``sample`` (the
bundled offline sample, the default). Columns: ``EM`` and ``F1`` (SQuAD normalisation, best over
the gold answers), ``format`` (MATPO's tool-format score) and, with a judge, ``judge`` (the LLM
judge's verdict, which is then also the success behind pass@k, as MATPO grades)::

    llm-marl eval --planner hf:runs/matpo --worker hf:runs/matpo --benchmarks frames,webwalkerqa \\
        --engine serper --search-cache runs/search-cache \\
        --judge openai:gpt-4o-mini,api_key_env=OPENAI_API_KEY

The engine (:func:`search_engine`): ``local`` (BM25 over the dataset's corpus, no network),
``serper`` / ``brave`` (API keys from ``$SERPER_API_KEY`` / ``$BRAVE_API_KEY``) or ``searxng``
(``$SEARXNG_URL``); a live engine's answers are kept in a response cache (``cache_mode``:
``use``, ``replay`` for an exact rerun without network or key, ``refresh``, ``off``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Benchmark, Column
from llm_marl.eval.family import Family, split_kwargs
from llm_marl.eval.metrics import Record
from llm_marl.policies.base import SamplingParams

__all__ = ["ENGINES", "SEARCH", "SEARCH_SAMPLING", "SearchFamily", "search_engine"]

ENGINES = ("local", "serper", "brave", "searxng")
"""The ``--engine`` choices: ``local`` is the dataset's own corpus (no engine object)."""

SEARCH_SAMPLING = SamplingParams(max_new_tokens=4096, temperature=1.0)
"""Default sampling per turn: the MATPO preset's evaluation (4096 tokens a turn, temperature 1;
``llm_marl/train/presets/matpo.py``)."""

_ENV_BY_TEAM = {("planner", "worker"): "websearch-v0", ("agent",): "websearch_single-v0"}


class SearchFamily(Family):
    """The web-search envs: planner + worker (MATPO) or a lone agent."""

    name: ClassVar[str] = "search"
    roles: ClassVar[tuple[str, ...]] = ("planner", "worker")
    default_benchmarks: ClassVar[tuple[str, ...]] = ("sample",)
    columns: ClassVar[tuple[Column, ...]] = (
        Column("em", "EM", "score"),
        Column("f1", "F1", "score"),
        Column("format", "format", "percent"),
        Column("judge", "judge", "score"),
    )

    def owns(self, env_id: str) -> bool:
        return env_id in _ENV_BY_TEAM.values()

    def env_for(self, team: Sequence[str]) -> str:
        """``planner`` + ``worker`` -> ``websearch-v0``; ``agent`` -> ``websearch_single-v0``."""
        env = _ENV_BY_TEAM.get(tuple(sorted(team)))
        if env is None:
            raise ConfigError(
                f"a search team is planner+worker (websearch-v0) or one agent "
                f"(websearch_single-v0: --agent agent=SPEC); got agents {list(team)}"
            )
        return env

    def check_team(self, team: Sequence[str]) -> None:
        self.env_for(team)

    def benchmark(
        self, team: Sequence[str], name: str, *, split: str | None, limit: int | None
    ) -> Benchmark:
        """Dataset ``name`` (``hotpotqa``, ``frames``, ``webwalkerqa``, ``sample`` or a file)
        in the team's env."""
        kwargs = split_kwargs(split, dataset=name)
        return Benchmark(name, self.env_for(team), env_kwargs=kwargs)

    def env_rows(
        self, env_ids: Sequence[str], names: Sequence[str], *, split: str | None, limit: int | None
    ) -> list[Benchmark]:
        """Every dataset of ``names`` (default :attr:`default_benchmarks`) in the one search
        env ``env_ids`` names."""
        if len(env_ids) > 1:
            raise ConfigError(f"name one search env (it plays every benchmark), got {env_ids}")
        return [
            Benchmark(n, env_ids[0], env_kwargs=split_kwargs(split, dataset=n))
            for n in names or self.default_benchmarks
        ]

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        return dict.fromkeys(team, SEARCH_SAMPLING)

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("em", "f1", "format", "judge"):
            values = [float(r["components"][key]) for r in records if key in r["components"]]
            if values:
                out[key] = sum(values) / len(values)
        return out


SEARCH = SearchFamily()


def search_engine(name: str, cache: str | Path | None = None, cache_mode: str = "use") -> Any:
    """The search engine ``--engine name`` means (``None`` for ``local``).

    ``cache`` is the response cache directory of a live engine (``None``: no cache; then
    ``cache_mode`` must be ``use`` or ``off``). Raises :class:`ConfigError` for an unknown name,
    a missing API key, or a cache option that does not fit.
    """
    if name not in ENGINES:
        raise ConfigError(f"--engine {name!r}: choose one of {', '.join(ENGINES)}")
    if name == "local":
        if cache is not None or cache_mode != "use":
            raise ConfigError(
                "--search-cache and --cache-mode apply to live engines (serper, brave, "
                "searxng); the local engine searches the dataset's own corpus"
            )
        return None
    from llm_marl.tools.search import BraveSearch, SearXNGSearch, SerperSearch

    engine_class = {"serper": SerperSearch, "brave": BraveSearch, "searxng": SearXNGSearch}[name]
    return engine_class(cache=cache, cache_mode=cache_mode)
