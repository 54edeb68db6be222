"""`math_eval`: pass@1 per math benchmark for a team of policies (AgentPO's results table).

>>> from llm_marl.eval.math import math_eval
>>> from llm_marl.policies import OpenAIPolicy, HFPolicy
>>> actor = OpenAIPolicy("Qwen/Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1")  # doctest: +SKIP
>>> hint = HFPolicy("runs/agentpo/hint", device="cuda")                                    # doctest: +SKIP
>>> report = math_eval(actor, hint_policy=hint, datasets=["math500", "aime24"])            # doctest: +SKIP
>>> report["benchmarks"]["aime24"]["pass@1"], report["average"]                           # doctest: +SKIP

The team picks the env: an actor alone plays ``math_single-v0``, with ``hint_policy``
``math_hint-v0``, with ``critic_policy`` ``math_critic-v0``. Every problem is played through
:func:`llm_marl.rollout.collect` (one batched generate call per policy and phase).

The same from the command line (:func:`main`, wired as ``llm-marl eval``)::

    llm-marl eval --actor Qwen/Qwen2.5-7B-Instruct --actor-base-url http://localhost:8000/v1 \\
        --hint runs/agentpo/hint --hint-backend hf --device cuda \\
        --datasets math500,aime24,amc23,minerva_math,olympiadbench --output results.json

Defaults follow AgentPO's evaluation: greedy decoding, at most 2048 new tokens for the actor and
768 for the collaborator, one sample per problem. With ``samples=k > 1`` (and a temperature above
0) pass@1 is the mean correctness over the k samples of each problem.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl.envs.math.datasets import EVAL_BENCHMARKS, load_math_tasks
from llm_marl.policies.base import Policy, SamplingParams, ScriptedPolicy, per_agent_sampling

ACTOR_SAMPLING = SamplingParams(max_new_tokens=2048, temperature=0.0)
"""Default sampling of the actor (AgentPO: greedy, 2048 tokens)."""
COLLABORATOR_SAMPLING = SamplingParams(max_new_tokens=768, temperature=0.0)
"""Default sampling of the hint / critic (AgentPO: greedy, 768 tokens)."""


def math_eval(
    actor_policy: Policy,
    hint_policy: Policy | None = None,
    critic_policy: Policy | None = None,
    datasets: Sequence[str] | str = EVAL_BENCHMARKS,
    *,
    limit: int | None = None,
    split: str | None = None,
    samples: int = 1,
    sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
    prompts: Mapping[str, str | None] | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    progress: bool = False,
    return_episodes: bool = False,
) -> dict[str, Any]:
    """Evaluate a team on math benchmarks; report pass@1 per benchmark.

    Args:
        actor_policy: plays ``actor`` (the solver; often a frozen API model).
        hint_policy: plays ``hint`` (``math_hint-v0``). Exclusive with ``critic_policy``.
        critic_policy: plays ``critic`` (``math_critic-v0``).
        datasets: benchmark names, file paths or Hugging Face ids (a comma-separated string is
            split); see :mod:`llm_marl.envs.math.datasets`. Default: the five AgentPO test sets
            plus GSM8K.
        limit: evaluate the first ``limit`` problems of each benchmark.
        split: split of every dataset (default: each benchmark's test split).
        samples: completions per problem (``group_size`` of the rollout).
        sampling: one :class:`SamplingParams` for every agent, or a dict by agent; missing
            agents get :data:`ACTOR_SAMPLING` / :data:`COLLABORATOR_SAMPLING`.
        prompts: prompt overrides passed to the env (see the env docstrings).
        batch_size: problems per :func:`collect` call (default: a whole benchmark at once;
            set it to bound memory of local models).
        seed: base seed of env resets and sampling.
        progress: show progress bars.
        return_episodes: also return one record per episode under ``"episodes"`` (task id,
            reference, extracted answer, correctness and every agent's completions).

    Returns:
        ``{"env_id", "policies", "samples", "benchmarks": {name: {"pass@1", "num_problems",
        "num_episodes", "num_correct", "format_rate", "num_errors"[, "draft_pass@1"]}},
        "average", "seconds"}``. ``pass@1`` is over episodes without infrastructure errors
        (a failed API call is not a wrong answer; ``num_errors`` counts them) and is None when
        every episode failed. ``average`` is the unweighted mean over benchmarks, as in the
        paper's table.
    """
    from llm_marl.rollout.collect import collect

    if hint_policy is not None and critic_policy is not None:
        raise ValueError(
            "pass hint_policy or critic_policy, not both: a team is actor+hint "
            "(math_hint-v0) or actor+critic (math_critic-v0)"
        )
    if not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be an int >= 1, got {samples!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    if isinstance(datasets, str):
        datasets = [d.strip() for d in datasets.split(",") if d.strip()]
    datasets = list(datasets)
    if not datasets:
        raise ValueError("datasets is empty: name at least one benchmark")

    policies: dict[str, Policy] = {"actor": actor_policy}
    if hint_policy is not None:
        env_id, policies["hint"] = "math_hint-v0", hint_policy
    elif critic_policy is not None:
        env_id, policies["critic"] = "math_critic-v0", critic_policy
    else:
        env_id = "math_single-v0"
    per_agent = _sampling_for(policies, sampling)

    started = time.perf_counter()
    report: dict[str, Any] = {
        "env_id": env_id,
        "policies": {a: getattr(p, "name", type(p).__name__) for a, p in policies.items()},
        "samples": samples,
        "benchmarks": {},
    }
    episodes_out: dict[str, list[dict[str, Any]]] = {}
    for name in datasets:
        tasks = load_math_tasks(name, split, limit)
        step = batch_size or len(tasks)
        episodes = []
        for start in range(0, len(tasks), step):
            episodes += collect(
                env_id,
                policies,
                tasks=tasks[start : start + step],
                group_size=samples,
                sampling=per_agent,
                seed=seed + start * samples,
                env_kwargs={"prompts": prompts} if prompts else None,
                progress=progress,
            )
        report["benchmarks"][name] = _summarise(episodes, len(tasks), env_id)
        if return_episodes:
            episodes_out[name] = [_episode_record(ep) for ep in episodes]
    scores = [b["pass@1"] for b in report["benchmarks"].values() if b["pass@1"] is not None]
    report["average"] = sum(scores) / len(scores) if scores else None
    report["seconds"] = round(time.perf_counter() - started, 3)
    if return_episodes:
        report["episodes"] = episodes_out
    return report


def format_report(report: Mapping[str, Any]) -> str:
    """A plain-text table of a :func:`math_eval` report."""
    rows = [("benchmark", "pass@1", "problems", "format", "errors")]
    for name, b in report["benchmarks"].items():
        score = "-" if b["pass@1"] is None else f"{100 * b['pass@1']:.1f}"
        rows.append(
            (
                name,
                score,
                str(b["num_problems"]),
                f"{100 * b['format_rate']:.0f}%",
                str(b["num_errors"]),
            )
        )
    avg = report.get("average")
    rows.append(("average", "-" if avg is None else f"{100 * avg:.1f}", "", "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    policies = ", ".join(f"{a}={p}" for a, p in report["policies"].items())
    lines = [f"{report['env_id']}  ({policies}; {report['samples']} sample(s) per problem)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- internals
def _sampling_for(
    policies: Mapping[str, Policy], sampling: SamplingParams | Mapping[str, SamplingParams] | None
) -> dict[str, SamplingParams]:
    defaults = {a: ACTOR_SAMPLING if a == "actor" else COLLABORATOR_SAMPLING for a in policies}
    return per_agent_sampling(sampling, list(policies), default=defaults)


def _summarise(episodes: list[Any], num_problems: int, env_id: str) -> dict[str, Any]:
    ok = [ep for ep in episodes if ep.ok]
    correct = sum(ep.reward_components.get("correct", 0.0) for ep in ok)
    fmt = sum(ep.reward_components.get("format", 0.0) for ep in ok)
    summary: dict[str, Any] = {
        "pass@1": correct / len(ok) if ok else None,
        "num_problems": num_problems,
        "num_episodes": len(episodes),
        "num_correct": int(correct),
        "format_rate": fmt / len(ok) if ok else 0.0,
        "num_errors": len(episodes) - len(ok),
    }
    if env_id == "math_critic-v0":
        drafts = sum(ep.reward_components.get("draft_correct", 0.0) for ep in ok)
        summary["draft_pass@1"] = drafts / len(ok) if ok else None
    return summary


def _episode_record(ep: Any) -> dict[str, Any]:
    actor_info = ep.final_infos.get("actor", {})
    return {
        "task_id": ep.task_id,
        "sample": ep.group_index,
        "correct": ep.reward_components.get("correct"),
        "answer": actor_info.get("answer"),
        "reference": actor_info.get("reference"),
        "error": ep.error,
        "completions": {a: [t.text for t in traj.turns] for a, traj in ep.trajectories.items()},
    }


# ---------------------------------------------------------------------------- CLI
BACKENDS = ("openai", "hf", "vllm", "scripted")


def build_policy(
    backend: str,
    model: str,
    *,
    role: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    adapter: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
) -> Policy:
    """Build a frozen policy for evaluation from command-line style arguments.

    ``backend`` is ``openai`` (an OpenAI-compatible server: a hosted API or ``vllm serve``),
    ``hf`` (a local ``transformers`` model, optionally with a LoRA ``adapter`` directory),
    ``vllm`` (in-process vLLM, where :mod:`llm_marl.policies.vllm` is available), or
    ``scripted`` (``model = "package.module:function"``, a function ``conversation -> str``).
    """
    if backend == "openai":
        from llm_marl.policies.openai import OpenAIPolicy

        kwargs: dict[str, Any] = {"name": f"{role}:{model}"}
        if base_url:
            kwargs["base_url"] = base_url
        if api_key_env:
            kwargs["api_key_env"] = api_key_env
        return OpenAIPolicy(model, **kwargs)
    if backend == "hf":
        from llm_marl.policies.hf import HFPolicy

        return HFPolicy(model, adapter=adapter, device=device, dtype=dtype, name=role)
    if backend == "vllm":
        try:
            module = importlib.import_module("llm_marl.policies.vllm")
        except ImportError as err:
            raise SystemExit(
                f"--{role}-backend vllm needs llm_marl.policies.vllm and the vllm package ({err}). "
                f"Alternative: run `vllm serve {model}` and pass --{role}-backend openai "
                f"--{role}-base-url http://localhost:8000/v1"
            ) from err
        return module.VLLMPolicy(model, name=role)
    if backend == "scripted":
        module_name, _, attr = model.partition(":")
        if not attr:
            raise SystemExit(
                f"--{role}: a scripted policy is 'package.module:function', got {model!r}"
            )
        fn = getattr(importlib.import_module(module_name), attr)
        return ScriptedPolicy(fn, name=f"{role}:{attr}")
    raise SystemExit(f"unknown backend {backend!r}; choose one of {BACKENDS}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llm-marl eval",
        description="pass@1 of a math team (actor alone, actor+hint, or actor+critic) per benchmark",
    )
    p.add_argument(
        "--datasets",
        default=",".join(EVAL_BENCHMARKS),
        help="comma-separated benchmark names, file paths or HF ids (default: %(default)s)",
    )
    p.add_argument(
        "--split", default=None, help="dataset split (default: each benchmark's test split)"
    )
    p.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    p.add_argument("--samples", type=int, default=1, help="samples per problem (default 1)")
    p.add_argument("--batch-size", type=int, default=None, help="problems per rollout batch")
    p.add_argument("--seed", type=int, default=0)
    for role, default_backend in (("actor", "openai"), ("hint", "hf"), ("critic", "hf")):
        p.add_argument(
            f"--{role}",
            default=None,
            metavar="MODEL",
            help=f"the {role} model (a model name, a path, or module:function)",
        )
        p.add_argument(
            f"--{role}-backend",
            choices=BACKENDS,
            default=default_backend,
            help=f"how to run the {role} (default: {default_backend})",
        )
        p.add_argument(f"--{role}-base-url", default=None, help="OpenAI-compatible server URL")
        p.add_argument(f"--{role}-api-key-env", default=None, help="env var holding the API key")
        p.add_argument(
            f"--{role}-adapter", default=None, help="LoRA adapter directory (hf backend)"
        )
    p.add_argument("--device", default=None, help="device of local hf models (e.g. cuda)")
    p.add_argument("--dtype", default=None, help="dtype of local hf models (e.g. bfloat16)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=ACTOR_SAMPLING.max_new_tokens,
        help="actor's token budget (default %(default)s)",
    )
    p.add_argument(
        "--collaborator-max-new-tokens",
        type=int,
        default=COLLABORATOR_SAMPLING.max_new_tokens,
        help="hint/critic token budget (default %(default)s)",
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--output", default=None, help="write the JSON report here")
    p.add_argument("--episodes-out", default=None, help="write one JSON line per episode here")
    p.add_argument("--progress", action="store_true", help="show progress bars")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``llm-marl eval``: evaluate a math team and print pass@1 per benchmark. Returns 0."""
    args = _parser().parse_args(argv)
    if args.actor is None:
        raise SystemExit("--actor MODEL is required (e.g. --actor gpt-4o-mini)")
    if args.hint is not None and args.critic is not None:
        raise SystemExit("pass --hint or --critic, not both")

    def policy(role: str) -> Policy | None:
        model = getattr(args, role)
        if model is None:
            return None
        return build_policy(
            getattr(args, f"{role}_backend"),
            model,
            role=role,
            base_url=getattr(args, f"{role}_base_url"),
            api_key_env=getattr(args, f"{role}_api_key_env"),
            adapter=getattr(args, f"{role}_adapter"),
            device=args.device,
            dtype=args.dtype,
        )

    actor, hint, critic = policy("actor"), policy("hint"), policy("critic")
    try:
        report = _run_cli(args, actor, hint, critic)
    finally:
        for p in (actor, hint, critic):
            close = getattr(p, "close", None)
            if callable(close):
                close()
    print(format_report(report), file=sys.stdout)
    return 0


def _run_cli(args: argparse.Namespace, actor: Policy, hint: Policy | None, critic: Policy | None):
    collaborator = "hint" if hint is not None else "critic" if critic is not None else None
    sampling = {
        "actor": SamplingParams(
            max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p
        )
    }
    if collaborator is not None:
        sampling[collaborator] = SamplingParams(
            max_new_tokens=args.collaborator_max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
        )
    report = math_eval(
        actor,
        hint_policy=hint,
        critic_policy=critic,
        datasets=args.datasets,
        limit=args.limit,
        split=args.split,
        samples=args.samples,
        sampling=sampling,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=args.progress,
        return_episodes=args.episodes_out is not None,
    )
    episodes = report.pop("episodes", None)
    if args.episodes_out:
        with open(args.episodes_out, "w", encoding="utf-8") as f:
            for name, records in (episodes or {}).items():
                for record in records:
                    f.write(json.dumps({"dataset": name, **record}, ensure_ascii=False) + "\n")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
