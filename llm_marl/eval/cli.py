"""``llm-marl eval``: evaluate a team on benchmarks of any env family and print the table.

::

    # math (AgentPO): the team picks the env (actor / actor+hint / actor+critic)
    llm-marl eval --actor openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 \\
        --hint hf:runs/agentpo/hint --benchmarks math500,aime24

    # math teams (AgentPO debate / roles): the collaborator picks the env; one spec plays
    # every frozen solver (--agent debater_2=SPEC gives one its own)
    llm-marl eval --coordinator hf:runs/agentpo/coordinator \\
        --solvers openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 --benchmarks math500

    # coding (MAGRPO): helper+main play <benchmark>-v0, a lone coder <benchmark>_single-v0
    llm-marl eval --helper hf:runs/magrpo/helper --main hf:runs/magrpo/main \\
        --benchmarks coophumaneval,humaneval --split eval --samples 10 --k 1,5,10

    # any env: name it; --env-arg sets the evaluation's own env config
    llm-marl eval --env coop_humaneval-v0 --agent helper=hf:H --agent main=hf:M \\
        --env-arg num_rounds=1 --episodes-out episodes.jsonl

    # coding with expert edits between rounds (the expert is frozen, never scored)
    llm-marl eval --helper hf:H --main hf:M --benchmarks coophumaneval --env-arg num_rounds=2 \\
        --env-arg feedback=expert --expert openai:deepseek-coder@https://api.deepseek.com

    # search (MATPO): planner+worker play websearch-v0 on each dataset; a live engine with a
    # response cache (--cache-mode replay reruns it offline); an LLM judge adds its column
    llm-marl eval --planner hf:runs/matpo --worker hf:runs/matpo --benchmarks frames,webwalkerqa \\
        --engine serper --search-cache runs/search-cache --judge openai:gpt-4o-mini

Policies are spec strings (:mod:`llm_marl.policies.factory`): ``hf:PATH[,adapter=DIR]``,
``openai:MODEL[@URL][,api_key_env=VAR]``, ``scripted:MODULE:FUNCTION``. ``--agent ROLE=SPEC``
names any role; ``--actor``, ``--hint``, ``--critic``, ``--coordinator``, ``--assigner``,
``--solvers``, ``--helper``, ``--main``, ``--coder``, ``--planner`` and ``--worker`` are
shortcuts for the roles of the math, math team, coding and search families.

The family (what benchmark names mean, default sampling, extra columns) is ``--family``, else
the family of the ``--env`` ids, else the one whose roles the team uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from llm_marl.checks import check_int, check_run_seed
from llm_marl.envs.registration import parse_env_args
from llm_marl.errors import ConfigError, DataError, OneLineArgumentParser
from llm_marl.eval.coding import CODING
from llm_marl.eval.family import EnvFamily, Family, split_names
from llm_marl.eval.math import MATH
from llm_marl.eval.math_team import MATH_TEAM
from llm_marl.eval.metrics import check_k
from llm_marl.eval.report import format_report
from llm_marl.eval.search import ENGINES, SEARCH, search_engine
from llm_marl.eval.writing import WRITING
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.policies.factory import SPEC_FORMS, build_policy, parse_policy_spec
from llm_marl.policies.quiet import quiet_transformers
from llm_marl.rollout.judges import AnswerJudge, CodeExpert
from llm_marl.rollout.tokenizers import with_agent_tokenizer
from llm_marl.tools.files import check_writable
from llm_marl.tools.search.cache import CACHE_MODES

__all__ = ["FAMILIES", "main"]

FAMILIES: dict[str, Family] = {f.name: f for f in (MATH, MATH_TEAM, CODING, WRITING, SEARCH)}
"""The eval families the command line knows, by name; any other env is played as is."""

ANY_ENV = EnvFamily()

EXIT_NOTHING_SCORED = 1
"""Exit status when every episode of a benchmark failed (the table is still printed)."""
_MAX_ERROR_CHARS = 400


def _parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="llm-marl eval",
        description=(
            "Evaluate a team of policies: pass@1 and unbiased pass@k where the env reports "
            "success, mean reward everywhere, one table row per benchmark"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="policy specs: " + "  |  ".join(SPEC_FORMS),
    )
    what = p.add_argument_group("what to evaluate")
    what.add_argument(
        "--family",
        choices=sorted(FAMILIES),
        default=None,
        help="the env family (default: inferred)",
    )
    what.add_argument(
        "--env", default=None, metavar="ID[,ID...]", help="env ids to play, each on its own tasks"
    )
    what.add_argument(
        "--benchmarks",
        "--datasets",
        dest="benchmarks",
        default=None,
        metavar="NAMES",
        help="comma-separated benchmark names of the family (math: math500,aime24,...; "
        "coding: coophumaneval,humaneval,mbpp) or dataset files (default: the family's set)",
    )
    what.add_argument("--split", default=None, help="dataset split (default: the benchmark's)")
    what.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    what.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the evaluation's env config, e.g. --env-arg num_rounds=1 (repeatable)",
    )

    team = p.add_argument_group("the team (policy specs)")
    team.add_argument(
        "--agent", action="append", default=[], metavar="ROLE=SPEC", help="any role (repeatable)"
    )
    roles = [r for f in FAMILIES.values() for r in f.roles]
    for role in dict.fromkeys(roles):
        owners = "/".join(f.name for f in FAMILIES.values() if role in f.roles)
        team.add_argument(f"--{role}", default=None, metavar="SPEC", help=f"the {role} ({owners})")
    team.add_argument(
        "--expert",
        default=None,
        metavar="SPEC",
        help="coding: the frozen expert that reviews the team's program between rounds "
        "(with --env-arg feedback=expert --env-arg num_rounds=N; never an agent)",
    )
    web = p.add_argument_group("search (websearch-v0, websearch_single-v0)")
    web.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="the search engine: local (BM25 over the dataset's corpus, the default) or a "
        "live API (serper, brave: key from $SERPER_API_KEY / $BRAVE_API_KEY; searxng: "
        "$SEARXNG_URL)",
    )
    web.add_argument(
        "--search-cache", default=None, metavar="DIR", help="a live engine's response cache"
    )
    web.add_argument(
        "--cache-mode",
        choices=CACHE_MODES,
        default=None,
        help="use (default), replay (only the cache: an exact rerun, no key), refresh, off",
    )
    web.add_argument(
        "--judge",
        default=None,
        metavar="SPEC",
        help="an LLM judge of the answers (a frozen policy spec): adds the judge column and "
        "grades success with it, as MATPO does",
    )
    team.add_argument("--device", default=None, help="device of hf: models (e.g. cuda)")
    team.add_argument("--dtype", default=None, help="dtype of hf: models (e.g. bfloat16)")

    how = p.add_argument_group("sampling")
    how.add_argument("--samples", type=int, default=1, help="samples per problem, n (default 1)")
    how.add_argument(
        "--k", default=None, metavar="K[,K...]", help="pass@k to report (default: 1 and n)"
    )
    how.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="token budget per turn (math: the actor's; default: the family's)",
    )
    how.add_argument(
        "--collaborator-max-new-tokens",
        type=int,
        default=None,
        help="token budget of math's collaborator: hint, critic, coordinator, assigner "
        "(default 768)",
    )
    how.add_argument(
        "--temperature", type=float, default=None, help="0 = greedy (default: the family's)"
    )
    how.add_argument("--top-p", type=float, default=None)
    how.add_argument("--batch-size", type=int, default=None, help="problems per rollout batch")
    how.add_argument("--seed", type=int, default=0)

    out = p.add_argument_group("output")
    out.add_argument("--output", default=None, metavar="FILE", help="write the JSON report here")
    out.add_argument(
        "--episodes-out", default=None, metavar="FILE", help="write one JSON line per episode"
    )
    out.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="show a progress bar (default: on)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``llm-marl eval``: run the evaluation, print the table, return 0.

    Returns :data:`EXIT_NOTHING_SCORED` (1), after the table and one line on stderr, when every
    episode of a benchmark failed (infrastructure errors: nothing was scored). User errors (bad
    specs, unknown benchmarks: :class:`~llm_marl.errors.LLMMarlError`) propagate;
    :func:`llm_marl.cli.main` prints them as one line and exits 2.
    """
    args = _parser().parse_args(argv)
    policies: dict[str, Policy] = {}
    expert: Policy | None = None
    judge: Policy | None = None
    try:
        # Everything that can be checked is checked before any model is loaded.
        specs = _team(args)
        env_ids = split_names(args.env)
        family = _family(args.family, env_ids, list(specs))
        family.check_team(list(specs))
        sampling = _sampling(family, list(specs), args)
        ks = _ints(args.k, "--k")
        check_k(ks, args.samples)
        if args.limit is not None:
            check_int(args.limit, "--limit")
        check_run_seed(args.seed, "--seed")
        if args.benchmarks is not None and not split_names(args.benchmarks):
            raise ConfigError(
                f"--benchmarks {args.benchmarks!r} names no benchmark: name one, or leave the "
                "option out for the family's set"
            )
        for flag, path in (("--output", args.output), ("--episodes-out", args.episodes_out)):
            if path is not None:
                check_writable(path, flag)
        env_kwargs = parse_env_args(args.env_arg)
        _check_expert(args.expert, env_kwargs)
        _check_search(args, family, env_kwargs)
        if family is SEARCH and args.engine is not None:
            env_kwargs["engine"] = search_engine(
                args.engine, args.search_cache, args.cache_mode or "use"
            )
        with quiet_transformers():  # no "Loading weights" bars per model
            for role, spec in specs.items():
                policies[role] = build_policy(spec, device=args.device, dtype=args.dtype)
            if args.expert is not None:  # frozen, not a role: the env asks it between rounds
                expert = build_policy(args.expert, device=args.device, dtype=args.dtype)
                env_kwargs["expert"] = CodeExpert(expert)
            if args.judge is not None:  # frozen, not a role: the env asks it at the end
                judge = build_policy(args.judge, device=args.device, dtype=args.dtype)
                env_kwargs["judge"] = AnswerJudge(judge)
                env_kwargs.setdefault("accuracy", "judge")
        if family is SEARCH:
            # The web-search envs bound tool output in the agents' tokens when told them.
            env_kwargs = with_agent_tokenizer(SEARCH.env_for(list(specs)), policies, env_kwargs)
        report = family.evaluate(
            policies,
            split_names(args.benchmarks),
            env_ids=env_ids or None,
            split=args.split,
            limit=args.limit,
            sampling=sampling,
            samples=args.samples,
            k=ks,
            env_kwargs=env_kwargs,
            batch_size=args.batch_size,
            seed=args.seed,
            progress=args.progress,
            episodes_path=args.episodes_out,
        )
    finally:
        opened = [*policies.values(), *(p for p in (expert, judge) if p is not None)]
        for policy in {id(p): p for p in opened}.values():
            close = getattr(policy, "close", None)
            if callable(close):
                close()
    # The table first: a report file that can no longer be written loses no result.
    print(format_report(report), file=sys.stdout)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2)
        except OSError as err:
            raise DataError(f"cannot write the report to {args.output}: {err.strerror}") from err
    lost = all_failed(report)
    if lost is not None:
        # Not a user error (2): the run went through and nothing could be scored (a dead
        # server, a broken sandbox). One line, after the table that shows the error counts.
        print(f"llm-marl eval: error: {lost}", file=sys.stderr)
        return EXIT_NOTHING_SCORED
    return 0


def all_failed(report: Mapping[str, Any]) -> str | None:
    """One line naming the benchmarks of ``report`` whose every episode failed, or None."""
    failed = {
        name: b
        for name, b in report["benchmarks"].items()
        if b["num_episodes"] and not b["num_scored"]
    }
    if not failed:
        return None
    which = ", ".join(
        f"{n!r} ({b['num_errors']} of {b['num_episodes']})" for n, b in failed.items()
    )
    first = " ".join(str(next(iter(failed.values())).get("first_error") or "").split())
    if len(first) > _MAX_ERROR_CHARS:
        first = first[: _MAX_ERROR_CHARS - 3] + "..."
    return f"every episode of {which} failed, nothing was scored; first error: {first}"


def _team(args: argparse.Namespace) -> dict[str, str]:
    """Role -> spec from ``--agent ROLE=SPEC`` and the role shortcuts."""
    specs: dict[str, str] = {}
    pairs = [(r, getattr(args, r)) for f in FAMILIES.values() for r in f.roles]
    for item in args.agent:
        role, sep, spec = item.partition("=")
        if not sep or not role.strip() or not spec.strip():
            raise ConfigError(f"--agent expects ROLE=SPEC (e.g. coder=hf:path), got {item!r}")
        pairs.append((role.strip(), spec.strip()))
    for role, spec in pairs:
        if spec is None:
            continue
        if role in specs and specs[role] != spec:
            raise ConfigError(f"two policies for the role {role!r}: {specs[role]!r} and {spec!r}")
        specs[role] = spec
    if not specs:
        raise ConfigError(
            "no policy given: name the team with --ROLE SPEC or --agent ROLE=SPEC, e.g. "
            "--actor openai:gpt-4o-mini (math) or --coder hf:path/to/model (coding)"
        )
    return specs


def _check_expert(spec: str | None, env_kwargs: dict[str, Any]) -> None:
    """``--expert`` and ``--env-arg feedback=expert`` go together (checked before any model)."""
    if "expert" in env_kwargs:
        raise ConfigError("the expert is a policy: pass --expert SPEC, not --env-arg expert=...")
    wants = env_kwargs.get("feedback") == "expert"
    if spec is None and wants:
        raise ConfigError(
            "--env-arg feedback=expert needs an expert: pass --expert SPEC (hf:PATH, "
            "openai:MODEL@URL, vllm:PATH or scripted:MODULE:FUNCTION)"
        )
    if spec is not None and not wants:
        raise ConfigError(
            f"--expert {spec} is never asked unless the coding env gives expert feedback: add "
            "--env-arg feedback=expert --env-arg num_rounds=2 (or more), or drop --expert"
        )
    if spec is not None:
        parse_policy_spec(spec)  # a malformed spec fails here, before any model is loaded


def _check_search(args: argparse.Namespace, family: Family, env_kwargs: dict[str, Any]) -> None:
    """The search options go with the search family, and objects are not ``--env-arg`` s."""
    given = [
        flag
        for flag, value in (
            ("--engine", args.engine),
            ("--search-cache", args.search_cache),
            ("--cache-mode", args.cache_mode),
            ("--judge", args.judge),
        )
        if value is not None
    ]
    if given and family is not SEARCH:
        raise ConfigError(
            f"{', '.join(given)} apply to the search family (websearch-v0, "
            f"websearch_single-v0), not to {family.name}"
        )
    for key, flag in (("engine", "--engine NAME"), ("judge", "--judge SPEC")):
        if key in env_kwargs:
            raise ConfigError(f"the {key} is an object: pass {flag}, not --env-arg {key}=...")
    if (args.search_cache is not None or args.cache_mode is not None) and args.engine is None:
        raise ConfigError("--search-cache and --cache-mode need a live --engine")
    if args.judge is not None:
        parse_policy_spec(args.judge)  # a malformed spec fails here, before any model is loaded


def _family(name: str | None, env_ids: list[str], team: list[str]) -> Family:
    if name is not None:
        family = FAMILIES[name]
        family.check_envs(env_ids)
        return family
    if env_ids:
        for family in FAMILIES.values():
            if all(family.owns(e) for e in env_ids):
                return family
        return ANY_ENV
    for family in FAMILIES.values():
        if set(team) <= set(family.roles):
            return family
    raise ConfigError(
        f"which envs? The roles {team} belong to no single family "
        f"({', '.join(f'{n}: {list(f.roles)}' for n, f in FAMILIES.items())}); name them "
        "with --env ID"
    )


def _sampling(family: Family, team: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The family's default sampling with the command line's overrides."""
    collaborators = [a for a in team if a in family.collaborators]
    if args.collaborator_max_new_tokens is not None and not collaborators:
        raise ConfigError(
            "--collaborator-max-new-tokens applies to a math collaborator (hint, critic, "
            "coordinator, assigner), and the team has none"
        )
    out: dict[str, SamplingParams] = {}
    for agent, params in family.default_sampling(team).items():
        changes: dict[str, Any] = {}
        budget = args.collaborator_max_new_tokens if agent in collaborators else args.max_new_tokens
        for key, value in (
            ("max_new_tokens", budget),
            ("temperature", args.temperature),
            ("top_p", args.top_p),
        ):
            if value is not None:
                changes[key] = value
        try:
            out[agent] = replace(params, **changes)
        except ValueError as err:
            raise ConfigError(str(err)) from err
    return out


def _ints(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(v) for v in split_names(text)]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated integers, got {text!r}") from None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
