"""`evaluate`: play benchmarks with a team of policies and report scores per benchmark.

>>> import llm_marl.eval as ev
>>> from llm_marl.policies import SamplingParams, build_policy
>>> coder = build_policy("openai:Qwen/Qwen2.5-Coder-7B-Instruct@http://127.0.0.1:8000/v1")  # doctest: +SKIP
>>> report = ev.evaluate(["humaneval_single-v0", "mbpp_single-v0"], {"coder": coder},
...                      samples=10, k=[1, 5, 10], sampling=SamplingParams(temperature=0.8),
...                      episodes_path="episodes.jsonl")                         # doctest: +SKIP
>>> print(ev.format_report(report))                                              # doctest: +SKIP

Any env works: a registered id, a zero-argument factory, or :class:`Benchmark` s that give each
row of the table its own env, tasks and env arguments. Every episode is played through
:func:`llm_marl.rollout.collect` (one batched generate call per policy and step); the scores
follow :mod:`llm_marl.eval.metrics` (pass@k where the env reports success, mean reward and its
components everywhere; infrastructure failures counted and excluded).

Evaluating with another env configuration than training (a team trained multi-turn, evaluated
on one turn; a different dataset split) is ``env_kwargs=``: they go to ``make`` for every
benchmark, under the benchmark's own.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from tqdm.auto import tqdm

from llm_marl.checks import check_int, check_run_seed
from llm_marl.envs.registration import make
from llm_marl.errors import ConfigError
from llm_marl.eval.metrics import ExtraMetrics, Record, averages, benchmark_scores, check_k
from llm_marl.eval.records import EpisodeWriter, episode_record, jsonable
from llm_marl.policies.base import Policy, SamplingParams, per_agent_sampling
from llm_marl.rollout.collect import check_policies, play
from llm_marl.rollout.types import Episode

Task = dict[str, Any]
EnvSource = str | Callable[[], Any]
RecordFields = Callable[[Episode], Mapping[str, Any]]
"""A family's extra top-level record fields, read from an episode (math: the answer)."""


@dataclass(frozen=True)
class Benchmark:
    """One row of the report: which env plays which tasks."""

    name: str
    """The row's name in the report and the ``benchmark`` field of its records."""
    env: EnvSource
    """A registered env id or a zero-argument factory returning an env."""
    tasks: Sequence[Task] | None = None
    """The problems; ``None`` takes the env's own (``env.tasks``, after ``env_kwargs``)."""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Arguments for ``make`` (registered ids only), over the evaluation-wide ``env_kwargs``."""


@dataclass(frozen=True)
class Column:
    """An extra column of the printed table (a per-benchmark metric a family adds)."""

    key: str
    header: str
    style: str = "percent"
    """``"percent"`` (``97%``), ``"score"`` (``97.0``, like pass@k) or ``"number"`` (``0.970``)."""


class EvalOptions(TypedDict, total=False):
    """The keyword arguments of :func:`evaluate` that a family's evaluation function
    (:meth:`~llm_marl.eval.family.Family.evaluate`, :func:`~llm_marl.eval.code_eval`...) passes
    on unchanged; :func:`evaluate` documents each and gives its default."""

    env_kwargs: Mapping[str, Any] | None
    samples: int
    k: int | Sequence[int] | None
    sampling: SamplingParams | Mapping[str, SamplingParams] | None
    limit: int | None
    batch_size: int | None
    seed: int
    progress: bool
    episodes_path: str | os.PathLike[str] | None
    return_episodes: bool
    executor: Any


def evaluate(
    benchmarks: EnvSource | Benchmark | Sequence[EnvSource | Benchmark],
    policies: Mapping[str, Policy],
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    samples: int = 1,
    k: int | Sequence[int] | None = None,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    limit: int | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    progress: bool = True,
    episodes_path: str | os.PathLike[str] | None = None,
    return_episodes: bool = False,
    metrics: ExtraMetrics | None = None,
    record_fields: RecordFields | None = None,
    columns: Sequence[Column] = (),
    executor: Any = "local",
) -> dict[str, Any]:
    """Evaluate a team on benchmarks; return a JSON-ready report.

    Args:
        benchmarks: an env id or factory (one benchmark: the env's own tasks), a
            :class:`Benchmark`, or a list of them (one row each, names must differ).
        policies: one policy per agent of the env(s) (``env.possible_agents``).
        env_kwargs: the evaluation's env configuration, passed to ``make`` for every benchmark
            (a benchmark's own ``env_kwargs`` win). Independent of any training config.
        samples: episodes per problem (``n`` of pass@k; the ``group_size`` of the rollout).
        k: the pass@k to report (each ``<= samples``); default ``1`` and ``samples``.
        sampling: one :class:`SamplingParams` for every agent or one per agent (default
            ``SamplingParams()``).
        limit: evaluate the first ``limit`` problems of each benchmark.
        batch_size: problems per :func:`collect` call (default: a whole benchmark at once; set
            it to bound the memory of local models and envs).
        seed: base seed of env resets and sampling (problem ``i``'s sample ``g`` of a benchmark
            is reset with ``seed + i * samples + g``).
        progress: show one progress bar over the episodes of the whole evaluation.
        episodes_path: write one JSON record per episode here as the batches finish
            (:mod:`llm_marl.eval.records`; read back with
            :func:`~llm_marl.eval.records.read_episodes`).
        return_episodes: also return the records, ``report["episodes"][benchmark]``.
        metrics, record_fields, columns: a family's extra metrics (from the scored records of a
            benchmark), extra record fields (from each episode) and extra table columns.
        executor: ``"local"`` (play in this process), ``"ray"`` (a
            :class:`~llm_marl.distributed.RayExecutor` with default resources, started here and
            shut down at the end), or an executor object (started and stopped by the caller).
            The episodes are the same either way.

    Returns:
        ``{"env_id", "policies", "samples", "k", "env_kwargs", "benchmarks": {name: {"env_id",
        "num_problems", "num_episodes", "num_scored", "num_errors", "num_success",
        "pass@<k>"..., "mean_reward", "components", ...extra metrics}}, "averages",
        "average", "columns", "seconds"}``. ``pass@k`` is None where the env reports no
        success; ``averages`` are unweighted means over benchmarks and ``average`` is that of
        pass@1 (the headline number of a paper's table). Episodes with an infrastructure error
        are counted in ``num_errors`` and excluded from every score.
    """
    ks = check_k(k, samples)
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size")
    if limit is not None:
        limit = check_int(limit, "limit")
    check_run_seed(seed)
    rows = _benchmarks(benchmarks)
    common = dict(env_kwargs or {})
    agents = list(policies)
    per_agent = per_agent_sampling(sampling, agents, default=SamplingParams())
    if samples > 1 and all(s.temperature == 0 for s in per_agent.values()):
        warnings.warn(
            f"samples={samples} with greedy decoding for every agent: the samples of a problem "
            "are likely identical, so pass@k > 1 says little; sample with temperature > 0",
            stacklevel=2,
        )

    runner, owned = _executor(executor)
    started = time.perf_counter()
    plans = [(row, _resolve(row, common, limit, agents)) for row in rows]
    total = sum(len(tasks) for _, (tasks, _, _) in plans) * samples
    report: dict[str, Any] = {
        "env_id": ", ".join(dict.fromkeys(env_id for _, (_, _, env_id) in plans)),
        "policies": {a: getattr(p, "name", type(p).__name__) for a, p in policies.items()},
        "samples": samples,
        "k": ks,
        "env_kwargs": jsonable(common),
        "benchmarks": {},
    }
    kept: dict[str, list[Record]] = {}
    writer = EpisodeWriter(episodes_path) if episodes_path is not None else None
    bar = tqdm(total=total, desc="eval", unit="ep", disable=not progress)
    try:
        for row, (tasks, kwargs, env_id) in plans:
            bar.set_postfix_str(row.name)
            step = batch_size or len(tasks)
            records: list[Record] = []
            for start in range(0, len(tasks), step):
                episodes = play(  # samples was checked above (check_k), as samples
                    row.env,
                    policies,
                    tasks=tasks[start : start + step],
                    group_size=samples,
                    sampling=per_agent,
                    seed=seed + start * samples,
                    env_kwargs=kwargs or None,
                    progress=False,  # the one bar above counts the episodes of every batch
                    raise_if_env_always_fails=True,
                    executor=runner,
                )
                batch = [
                    episode_record(
                        ep, row.name, env_id, start, record_fields(ep) if record_fields else None
                    )
                    for ep in episodes
                ]
                if writer is not None:
                    writer.write(batch)
                records += batch
                bar.update(len(batch))
            scores = benchmark_scores(records, ks, metrics)
            report["benchmarks"][row.name] = {"env_id": env_id, **scores}
            if return_episodes:
                kept[row.name] = records
    finally:
        bar.close()
        if writer is not None:
            writer.close()
        if owned:
            runner.shutdown()
    keys = [f"pass@{k}" for k in ks] + ["mean_reward"] + [c.key for c in columns]
    report["averages"] = averages(report["benchmarks"], keys)
    report["average"] = report["averages"]["pass@1"] if 1 in ks else None
    report["columns"] = [
        {"key": c.key, "header": c.header, "style": c.style}
        for c in columns
        if any(c.key in b for b in report["benchmarks"].values())
    ]
    report["seconds"] = round(time.perf_counter() - started, 3)
    if return_episodes:
        report["episodes"] = kept
    return report


def _executor(executor: Any) -> tuple[Any, bool]:
    """``(executor object or None, whether this evaluation owns it)`` for ``executor=``."""
    if executor == "local" or executor is None:
        return None, False
    if executor == "ray":
        from llm_marl.distributed import RayExecutor

        return RayExecutor(), True
    if isinstance(executor, str) or not callable(getattr(executor, "collect", None)):
        raise ConfigError(f"executor must be 'local', 'ray' or an executor, got {executor!r:.60}")
    return executor, False


def _benchmarks(benchmarks: Any) -> list[Benchmark]:
    items = (
        [benchmarks]
        if isinstance(benchmarks, (str, Benchmark)) or callable(benchmarks)
        else list(benchmarks)
    )
    if not items:
        raise ConfigError("no benchmark to evaluate: give an env id, a factory or Benchmarks")
    rows = []
    for item in items:
        if isinstance(item, Benchmark):
            rows.append(item)
        elif isinstance(item, str):
            rows.append(Benchmark(item, item))
        elif callable(item):
            rows.append(Benchmark(getattr(item, "__name__", "env"), item))
        else:
            raise ConfigError(
                f"a benchmark is an env id, a zero-argument env factory or a Benchmark, got "
                f"{type(item).__name__}"
            )
    names = [r.name for r in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"benchmark names must differ; repeated: {duplicates}")
    return rows


def _resolve(
    row: Benchmark, common: Mapping[str, Any], limit: int | None, agents: Sequence[str]
) -> tuple[list[Task], dict[str, Any], str]:
    """The tasks, env kwargs and env id of a row.

    Builds the env once, before any episode runs, so that a bad env argument or a team that
    does not fit the env fails at once with the benchmark's name.
    """
    kwargs = {**common, **row.env_kwargs}
    if not isinstance(row.env, str) and kwargs:
        raise ConfigError(
            f"benchmark {row.name!r}: env_kwargs only apply to registered env ids; build the "
            "env with those arguments inside the factory"
        )
    try:
        env = make(row.env, **kwargs) if isinstance(row.env, str) else row.env()
    except (TypeError, ValueError) as err:
        raise ConfigError(f"benchmark {row.name!r}: cannot build its env: {err}") from err
    try:
        env_id = row.env if isinstance(row.env, str) else str(env.metadata.get("name", row.name))
        tasks = (
            list(row.tasks) if row.tasks is not None else list(getattr(env, "tasks", None) or [])
        )
        try:
            check_policies({a: _NO_POLICY for a in agents}, list(env.possible_agents))
        except ValueError as err:
            raise ConfigError(f"benchmark {row.name!r} ({env_id}): {err}") from None
    finally:
        env.close()
    if not tasks:
        raise ConfigError(f"benchmark {row.name!r} has no tasks (pass Benchmark(tasks=[...]))")
    return (tasks[:limit] if limit else tasks), kwargs, env_id


class _NoPolicy:
    """Stands for a policy when only the team's agent names are checked."""

    name = "none"
    trainable = False

    def generate(self, *args: Any, **kwargs: Any) -> list[Any]:
        raise AssertionError("never called")


_NO_POLICY = _NoPolicy()
