"""`format_report`: the plain-text table of an evaluation report (any env, any family).

::

    humaneval_single-v0  (coder=qwen; 10 sample(s) per problem)
    benchmark   pass@1  pass@10  problems  errors  reward  tests
    humaneval   61.2    85.4     164       0       1.743   78%
    average     61.2    85.4                       1.743   78%
    errors: episodes lost to infrastructure failures (API, sandbox, grader); excluded from every score, never counted as failures
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_NOTE_ERRORS = (
    "errors: episodes lost to infrastructure failures (API, sandbox, grader); "
    "excluded from every score, never counted as failures"
)


def format_report(report: Mapping[str, Any]) -> str:
    """A plain-text table of a report from :func:`~llm_marl.eval.evaluate` (or a family's)."""
    benchmarks: Mapping[str, Mapping[str, Any]] = report["benchmarks"]
    pass_keys = [f"pass@{k}" for k in report.get("k", [1])]
    # pass@k columns unless the env is known to report no success (nothing scored: unknown).
    with_success = any(b.get("num_success") is not None for b in benchmarks.values()) or all(
        not b.get("num_scored") for b in benchmarks.values()
    )
    extra = list(report.get("columns", []))
    header = ["benchmark"]
    if with_success:
        header += pass_keys
    header += ["problems", "errors", "reward"] + [c["header"] for c in extra]
    rows = [header]

    def cells(values: Mapping[str, Any]) -> list[str]:
        return [_fmt(values.get(key), "score") for key in pass_keys] if with_success else []

    for name, b in benchmarks.items():
        row = [name, *cells(b), str(b["num_problems"]), str(b["num_errors"])]
        row.append(_fmt(b.get("mean_reward"), "number"))
        row += [_fmt(b.get(c["key"]), c["style"]) for c in extra]
        rows.append(row)
    avg = report.get("averages", {})
    if len(benchmarks) > 1 or avg:
        row = ["average", *cells(avg), "", "", _fmt(avg.get("mean_reward"), "number")]
        row += [_fmt(avg.get(c["key"]), c["style"]) for c in extra]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    policies = ", ".join(f"{a}={p}" for a, p in report["policies"].items())
    title = f"{report['env_id']}  ({policies}; {report['samples']} sample(s) per problem"
    if report.get("env_kwargs"):
        title += "; env " + ", ".join(
            f"{k}={v if isinstance(v, str) else json.dumps(v)}"
            for k, v in report["env_kwargs"].items()
        )
    lines = [title + ")"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append(_NOTE_ERRORS)
    if not with_success:
        lines.append("pass@k: the env reports no success; the score is the mean reward")
    return "\n".join(lines)


def _fmt(value: Any, style: str) -> str:
    if value is None:
        return "-"
    if style == "score":
        return f"{100 * value:.1f}"
    if style == "percent":
        return f"{100 * value:.0f}%"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.3f}"
