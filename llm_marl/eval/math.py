"""`math_eval`: pass@1 (and pass@k) per math benchmark for a team of policies (AgentPO's table).

>>> from llm_marl.eval.math import math_eval
>>> from llm_marl.policies import build_policy
>>> actor = build_policy("openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1")  # doctest: +SKIP
>>> hint = build_policy("hf:runs/agentpo/hint,device=cuda")                           # doctest: +SKIP
>>> report = math_eval(actor, hint_policy=hint, datasets=["math500", "aime24"])      # doctest: +SKIP
>>> report["benchmarks"]["aime24"]["pass@1"], report["average"]                      # doctest: +SKIP

The team picks the env: an actor alone plays ``math_single-v0``, with ``hint_policy``
``math_hint-v0``, with ``critic_policy`` ``math_critic-v0``. It runs on the generic evaluator
(:func:`llm_marl.eval.evaluate`), with math's extra metrics (``format_rate``, ``num_correct``,
``draft_pass@1`` for the critic team) and record fields (``answer``, ``reference``,
``correct``).

The same from the command line (``llm-marl eval``, :mod:`llm_marl.eval.cli`)::

    llm-marl eval --actor openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 \\
        --hint hf:runs/agentpo/hint --device cuda \\
        --benchmarks math500,aime24,amc23,minerva_math,olympiadbench --output results.json

Defaults follow AgentPO's evaluation: greedy decoding, at most 2048 new tokens for the actor and
768 for the collaborator, one sample per problem. With ``samples=n > 1`` (and a temperature
above 0) pass@1 is the mean correctness over the n samples of each problem, and pass@n is
reported too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from llm_marl.envs.math.datasets import EVAL_BENCHMARKS, load_math_tasks
from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Benchmark, Column, EvalOptions
from llm_marl.eval.family import Family, split_names
from llm_marl.eval.metrics import Record
from llm_marl.eval.report import format_report
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.rollout.types import Episode

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ACTOR_SAMPLING",
    "COLLABORATOR_SAMPLING",
    "MATH",
    "MathFamily",
    "format_report",
    "math_eval",
]

ACTOR_SAMPLING = SamplingParams(max_new_tokens=2048, temperature=0.0)
"""Default sampling of the actor (AgentPO: greedy, 2048 tokens)."""
COLLABORATOR_SAMPLING = SamplingParams(max_new_tokens=768, temperature=0.0)
"""Default sampling of the hint / critic (AgentPO: greedy, 768 tokens)."""

_ENV_BY_COLLABORATOR = {None: "math_single-v0", "hint": "math_hint-v0", "critic": "math_critic-v0"}


class MathFamily(Family):
    """The math envs: an actor alone, with a hint agent, or with a critic (AgentPO)."""

    name: ClassVar[str] = "math"
    roles: ClassVar[tuple[str, ...]] = ("actor", "hint", "critic")
    collaborators: ClassVar[tuple[str, ...]] = ("hint", "critic")
    default_benchmarks: ClassVar[tuple[str, ...]] = EVAL_BENCHMARKS
    columns: ClassVar[tuple[Column, ...]] = (
        Column("format_rate", "format", "percent"),
        Column("draft_pass@1", "draft", "score"),
    )

    def owns(self, env_id: str) -> bool:
        return env_id in _ENV_BY_COLLABORATOR.values()

    def env_for(self, team: Sequence[str]) -> str:
        """The env a team plays: ``actor`` -> single, ``+hint`` -> hint, ``+critic`` -> critic."""
        others = sorted(set(team) - {"actor"})
        if "actor" not in team:
            raise ConfigError(f"a math team needs an actor; got agents {list(team)}")
        if others == ["critic", "hint"]:
            raise ConfigError(
                "pass hint_policy or critic_policy, not both: a team is actor+hint "
                "(math_hint-v0) or actor+critic (math_critic-v0)"
            )
        if len(others) > 1 or (others and others[0] not in _ENV_BY_COLLABORATOR):
            raise ConfigError(
                f"a math team is actor, actor+hint or actor+critic; got agents {list(team)}"
            )
        return _ENV_BY_COLLABORATOR[others[0] if others else None]

    def check_team(self, team: Sequence[str]) -> None:
        self.env_for(team)

    def benchmark(
        self, team: Sequence[str], name: str, *, split: str | None, limit: int | None
    ) -> Benchmark:
        """Dataset ``name`` (benchmark name, file path or Hugging Face id) in the team's env."""
        return Benchmark(name, self.env_for(team), tasks=load_math_tasks(name, split, limit))

    def env_rows(
        self, env_ids: Sequence[str], names: Sequence[str], *, split: str | None, limit: int | None
    ) -> list[Benchmark]:
        """Every dataset of ``names`` (default :attr:`default_benchmarks`) in the one math env
        ``env_ids`` names: its team plays every benchmark."""
        if len(env_ids) > 1:
            raise ConfigError(f"name one math env (its team plays every benchmark), got {env_ids}")
        return [
            Benchmark(n, env_ids[0], tasks=load_math_tasks(n, split, limit))
            for n in names or self.default_benchmarks
        ]

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        return {a: ACTOR_SAMPLING if a == "actor" else COLLABORATOR_SAMPLING for a in team}

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        def total(key: str) -> float:
            return sum(float(r["components"].get(key, 0.0)) for r in records)

        out: dict[str, Any] = {
            "num_correct": int(total("correct")),
            "format_rate": total("format") / len(records) if records else 0.0,
        }
        if any("draft_correct" in r["components"] for r in records):
            out["draft_pass@1"] = total("draft_correct") / len(records)
        return out

    def record_fields(self, episode: Episode) -> dict[str, Any]:
        graded = self.graded_infos(episode)
        return {
            "correct": episode.reward_components.get("correct"),
            "answer": graded.get("answer"),
            "reference": graded.get("reference"),
        }

    def graded_infos(self, episode: Episode) -> Mapping[str, Any]:
        """The final infos that hold the graded ``answer`` and its ``reference`` (the actor's)."""
        return episode.final_infos.get("actor", {})


MATH = MathFamily()


def math_eval(
    actor_policy: Policy,
    hint_policy: Policy | None = None,
    critic_policy: Policy | None = None,
    datasets: Sequence[str] | str = EVAL_BENCHMARKS,
    *,
    split: str | None = None,
    prompts: Mapping[str, str | None] | None = None,
    **options: Unpack[EvalOptions],
) -> dict[str, Any]:
    """Evaluate a team on math benchmarks; report pass@1 (and pass@k) per benchmark.

    Args:
        actor_policy: plays ``actor`` (the solver; often a frozen API model).
        hint_policy: plays ``hint`` (``math_hint-v0``). Exclusive with ``critic_policy``.
        critic_policy: plays ``critic`` (``math_critic-v0``).
        datasets: benchmark names, file paths or Hugging Face ids (a comma-separated string is
            split); see :mod:`llm_marl.envs.math.datasets`. Default: the five AgentPO test sets
            plus GSM8K.
        split: split of every dataset (default: each benchmark's test split).
        prompts: prompt overrides passed to the env (see the env docstrings).
        options: as in :func:`llm_marl.eval.evaluate` (``samples``, the completions per
            problem; ``k``; ``limit``; ``batch_size``; ``seed``; ``progress``;
            ``episodes_path``). ``sampling`` is one :class:`SamplingParams` for every agent or
            a dict by agent; missing agents get :data:`ACTOR_SAMPLING` /
            :data:`COLLABORATOR_SAMPLING`. ``env_kwargs`` are other env arguments (e.g.
            ``require_boxed=True``). ``return_episodes`` also returns the records under
            ``"episodes"`` (task id, reference, extracted answer, correctness and every
            agent's turns), by benchmark.

    Returns:
        The report of :func:`llm_marl.eval.evaluate`; each benchmark also has ``num_correct``,
        ``format_rate`` and, for the critic team, ``draft_pass@1``. ``pass@1`` is over
        episodes without infrastructure errors (a failed API call is not a wrong answer;
        ``num_errors`` counts them) and is None when every episode failed. ``average`` is the
        unweighted mean of pass@1 over benchmarks, as in the paper's table.
    """
    if hint_policy is not None and critic_policy is not None:
        MATH.env_for(["actor", "hint", "critic"])  # raises the "not both" error
    names = split_names(datasets)
    if not names:
        raise ConfigError("datasets is empty: name at least one benchmark")
    policies: dict[str, Policy] = {"actor": actor_policy}
    if hint_policy is not None:
        policies["hint"] = hint_policy
    if critic_policy is not None:
        policies["critic"] = critic_policy
    if prompts:
        options["env_kwargs"] = {**(options.get("env_kwargs") or {}), "prompts": prompts}
    return MATH.evaluate(policies, names, split=split, **options)
