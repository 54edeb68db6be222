"""`format_report`: the plain-text table of an evaluation report (any env, any family).

::

    humaneval_single-v0  (coder=qwen; 10 sample(s) per problem)
    benchmark   pass@1  pass@10  problems  errors  reward  tests
    humaneval   61.2    85.4     164       0       1.743   78%
      ± s.e.    3.4     2.6                        0.061
    average     61.2    85.4                       1.743   78%
    ± s.e.: standard error over problems of the mean above it (pass@k in points)
    errors: episodes lost to infrastructure failures (API, sandbox, grader); excluded from every score, never counted as failures
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_SPREAD = "  ± s.e."
_NOTE_SPREAD = "± s.e.: standard error over problems of the mean above it (pass@k in points)"
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

    def cells(values: Mapping[str, Any], suffix: str = "") -> list[str]:
        if not with_success:
            return []
        return [_fmt(values.get(key + suffix), "score") for key in pass_keys]

    for name, b in benchmarks.items():
        row = [name, *cells(b), str(b["num_problems"]), str(b["num_errors"])]
        row.append(_fmt(b.get("mean_reward"), "number"))
        row += [_fmt(b.get(c["key"]), c["style"]) for c in extra]
        rows.append(row)
        spread = [*cells(b, "_se"), _fmt(b.get("mean_reward_se"), "number")]
        if any(s != "-" for s in spread):  # the standard errors, under the means they belong to
            rows.append([_SPREAD, *cells(b, "_se"), "", "", spread[-1]] + [""] * len(extra))
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
    lines.append(_NOTE_SPREAD)
    lines += _cost_lines(benchmarks)
    lines.append(_NOTE_ERRORS)
    if not with_success:
        lines.append("pass@k: the env reports no success; the score is the mean reward")
    return "\n".join(lines)


def _cost_lines(benchmarks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The cost table: per benchmark, one column per agent and the team, what an episode
    spent: its cost when priced, else its tokens; then calls and seconds."""
    costs = {name: b.get("cost") or {} for name, b in benchmarks.items()}
    agents = list(dict.fromkeys(a for c in costs.values() for a in c if a != "team"))
    if not agents:
        return []
    priced = any(v.get("cost") is not None for c in costs.values() for v in c.values())
    header = ["cost per episode"] + [*agents, "team"]
    rows = [header]
    for name, c in costs.items():
        row = [name]
        for agent in [*agents, "team"]:
            v = c.get(agent)
            row.append("-" if not v else _spend(v, priced))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    unit = "cost (price table)" if priced else "tokens (prompt + completion)"
    lines.append(f"cost: {unit}, generate calls and seconds per episode, frozen agents included")
    return lines


def _spend(v: Mapping[str, Any], priced: bool) -> str:
    head = f"{v['cost']:.4g}" if priced and v.get("cost") is not None else f"{v['tokens']:.0f} tok"
    return f"{head} / {v['calls']:.3g} calls / {v['seconds']:.3g}s"


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
