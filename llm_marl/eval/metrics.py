"""Scores from episode records: pass@k (Chen et al. 2021), mean reward and its components.

Everything here works on the JSON records of :mod:`llm_marl.eval.records`, so a report can be
recomputed exactly from an episodes file (:func:`score_records`).

Rules
    * An episode with ``error`` set (an infrastructure failure: API down, sandbox or grader
      crash) is counted in ``num_errors`` and excluded from every score; it is never a failure.
    * ``pass@k`` needs a success signal: an env reports it as ``infos[agent]["success"]`` on its
      final step. A benchmark reports success when at least one scored episode carries one; its
      scored episodes without one (e.g. cut off by the step cap) then count as unsolved. With no
      success signal at all, ``pass@k`` is ``None`` and the mean reward is the score.
    * ``pass@k`` is the mean over problems of the unbiased estimator
      ``1 - C(n - c, k) / C(n, k)`` with ``n`` scored samples of which ``c`` succeeded (for
      ``k = 1`` that is ``c / n``). A problem with fewer than ``k`` scored samples (some were lost
      to errors) has no estimate and is left out of ``pass@k``.
    * The spread of each mean is its standard error over problems (``pass@<k>_se``,
      ``mean_reward_se``): the sample standard deviation of the per-problem values (a problem's
      pass@k estimate, its mean reward) divided by the square root of their number; ``None``
      with fewer than two problems. Samples of one problem are not independent of each other,
      so the problem is the unit.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from llm_marl.errors import ConfigError

Record = dict[str, Any]
"""One episode as a JSON-ready dict (see :func:`llm_marl.eval.records.episode_record`)."""
ExtraMetrics = Callable[[list[Record]], Mapping[str, Any]]
"""A family's extra per-benchmark metrics, computed from the benchmark's scored records."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem from ``n`` samples with ``c`` successes (Chen et al. 2021).

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``, which equals
    ``1 - C(n - c, k) / C(n, k)`` without the huge binomials.

    >>> pass_at_k(10, 0, 5), pass_at_k(10, 10, 5), pass_at_k(4, 2, 1)
    (0.0, 1.0, 0.5)

    Raises:
        ConfigError: ``k > n`` (pass@k needs at least k samples), ``k < 1`` or ``c`` outside
            ``0..n``.
    """
    for label, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"pass_at_k: {label} must be an int, got {value!r}")
    if k < 1:
        raise ConfigError(f"pass@k needs k >= 1, got k={k}")
    if k > n:
        raise ConfigError(
            f"pass@{k} needs at least {k} samples per problem, got {n}: sample more "
            f"(samples >= {k}) or ask for a smaller k"
        )
    if not 0 <= c <= n:
        raise ConfigError(f"pass_at_k: c must be in 0..n={n}, got {c}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def check_k(k: int | Sequence[int] | None, samples: int) -> list[int]:
    """The sorted, distinct ``k`` values to report; default ``[1]`` plus ``samples`` if > 1.

    Raises :class:`ConfigError` for a ``k`` below 1 or above ``samples``.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ConfigError(f"samples must be an int >= 1, got {samples!r}")
    if k is None:
        return sorted({1, samples})
    if isinstance(k, int):
        ks = [k]
    elif isinstance(k, Sequence) and not isinstance(k, str):
        ks = list(k)
    else:
        raise ConfigError(f"k must be an int or a list of ints, got {k!r}")
    if not ks:
        raise ConfigError("k is empty: give at least one k (e.g. k=[1])")
    for value in ks:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"every k must be an int >= 1, got {value!r}")
        if value > samples:
            raise ConfigError(
                f"pass@{value} needs at least {value} samples per problem but samples={samples}: "
                f"raise samples to >= {value} or drop k={value}"
            )
    return sorted(set(ks))


def benchmark_scores(
    records: Sequence[Record], ks: Sequence[int], extra: ExtraMetrics | None = None
) -> dict[str, Any]:
    """The scores of one benchmark's records (see the module docstring for the rules).

    Returns ``{"num_problems", "num_episodes", "num_scored", "num_errors", "first_error",
    "num_success", "pass@<k>" and "pass@<k>_se" for each k, "mean_reward", "mean_reward_se",
    "components"}`` plus whatever
    ``extra`` returns; ``first_error`` is the error of the first failed episode (or None).
    """
    problems: dict[Any, list[Record]] = {}
    for r in records:
        problems.setdefault(r["task_index"], []).append(r)
    scored = [r for r in records if r.get("error") is None]
    reports_success = any(r.get("success") is not None for r in scored)
    out: dict[str, Any] = {
        "num_problems": len(problems),
        "num_episodes": len(records),
        "num_scored": len(scored),
        "num_errors": len(records) - len(scored),
        "first_error": next((r["error"] for r in records if r.get("error") is not None), None),
        "num_success": sum(1 for r in scored if r.get("success")) if reports_success else None,
    }
    for k in ks:
        estimates = []
        for group in problems.values():
            ok = [r for r in group if r.get("error") is None]
            if len(ok) >= k:
                estimates.append(pass_at_k(len(ok), sum(1 for r in ok if r.get("success")), k))
        out[f"pass@{k}"] = (
            sum(estimates) / len(estimates) if reports_success and estimates else None
        )
        out[f"pass@{k}_se"] = _standard_error(estimates) if reports_success else None
    out["mean_reward"] = _mean(r["reward"] for r in scored)
    per_problem = [
        _mean(r["reward"] for r in g if r.get("error") is None) for g in problems.values()
    ]
    out["mean_reward_se"] = _standard_error([m for m in per_problem if m is not None])
    names: dict[str, None] = {}
    for r in scored:
        names.update(dict.fromkeys(r.get("components", {})))
    out["components"] = {
        n: _mean(r.get("components", {}).get(n, 0.0) for r in scored) for n in names
    }
    out["cost"] = record_costs(scored)
    if extra is not None:
        out.update(extra(scored))
    return out


_SPEND_KEYS = ("calls", "prompt_tokens", "completion_tokens", "seconds")


def record_costs(records: Sequence[Record]) -> dict[str, dict[str, float | None]]:
    """Per agent and for the team (``"team"``), the mean over ``records`` of what an episode
    spent: ``calls``, ``tokens``, ``prompt_tokens``, ``completion_tokens``, ``seconds`` and
    ``cost`` (``None`` unless a turn was priced). Reads each turn's spend fields
    (:func:`llm_marl.eval.records.turn_spend`); records without them count zero."""
    if not records:
        return {}
    totals: dict[str, dict[str, float | None]] = {}
    for r in records:
        for agent, turns in r.get("turns", {}).items():
            total = totals.setdefault(agent, {**dict.fromkeys(_SPEND_KEYS, 0.0), "cost": None})
            for t in turns:
                for key in _SPEND_KEYS:
                    value = t.get(key)
                    if isinstance(value, (int, float)):
                        total[key] = (total[key] or 0.0) + float(value)
                if isinstance(t.get("cost"), (int, float)):
                    total["cost"] = (total["cost"] or 0.0) + float(t["cost"])
    n = len(records)
    out: dict[str, dict[str, float | None]] = {}
    team: dict[str, float | None] = {**dict.fromkeys(_SPEND_KEYS, 0.0), "cost": None}
    for agent, total in totals.items():
        mean = {k: None if v is None else v / n for k, v in total.items()}
        mean["tokens"] = (mean["prompt_tokens"] or 0.0) + (mean["completion_tokens"] or 0.0)
        out[agent] = mean
        for key in (*_SPEND_KEYS, "cost"):
            if mean[key] is not None:
                team[key] = (team[key] or 0.0) + float(mean[key] or 0.0)
    team["tokens"] = (team["prompt_tokens"] or 0.0) + (team["completion_tokens"] or 0.0)
    out["team"] = team
    return out


def score_records(
    records: Iterable[Record], k: int | Sequence[int] = 1, extra: ExtraMetrics | None = None
) -> dict[str, dict[str, Any]]:
    """Per-benchmark scores of records (e.g. read back with
    :func:`~llm_marl.eval.records.read_episodes`), benchmarks in order of first appearance."""
    by_benchmark: dict[str, list[Record]] = {}
    for r in records:
        by_benchmark.setdefault(r["benchmark"], []).append(r)
    ks = [k] if isinstance(k, int) else list(k)
    return {name: benchmark_scores(recs, ks, extra) for name, recs in by_benchmark.items()}


def averages(benchmarks: Mapping[str, Mapping[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """Unweighted mean of each metric over the benchmarks that have a value (as papers
    average their tables); ``None`` where no benchmark has one."""
    out: dict[str, Any] = {}
    for key in keys:
        values = [b[key] for b in benchmarks.values() if isinstance(b.get(key), (int, float))]
        out[key] = sum(values) / len(values) if values else None
    return out


def _mean(values: Iterable[float]) -> float | None:
    items = [float(v) for v in values]
    return sum(items) / len(items) if items else None


def _standard_error(values: Sequence[float]) -> float | None:
    """Standard error of the mean of ``values``; None with fewer than two."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) / len(values) ** 0.5
