"""`code_eval`: pass@1 and unbiased pass@k on CoopHumanEval, HumanEval and MBPP (MAGRPO's table).

>>> from llm_marl.eval.coding import code_eval
>>> from llm_marl.policies import build_policy
>>> helper = build_policy("hf:runs/magrpo/helper,device=cuda")                    # doctest: +SKIP
>>> main = build_policy("hf:runs/magrpo/main,device=cuda")                        # doctest: +SKIP
>>> report = code_eval({"helper": helper, "main": main}, ["coophumaneval", "humaneval"],
...                    split="eval", samples=10, k=[1, 5, 10])                    # doctest: +SKIP

The team picks the env: ``helper`` + ``main`` play ``<benchmark>-v0``, a lone ``coder`` plays
``<benchmark>_single-v0``. Benchmarks are ``coophumaneval``, ``humaneval``, ``mbpp``,
``sample`` (the 16 bundled cooperative problems) or any dataset file / Hugging Face id in the
CoopHumanEval schema (played in ``coop_humaneval-v0``). ``split="eval"`` is the paper's
held-out slice of each benchmark (see :mod:`llm_marl.envs.coding.datasets`); the default is the
env's own (every problem).

A problem is solved when every scoring test passes (the env's ``success``). Programs run in the
env's sandbox (``env_kwargs={"sandbox": "process"}`` or ``"docker"``; default ``"auto"``); a
sandbox failure voids the episode (counted in ``num_errors``), it is never scored as a failure.
The env's configuration is the evaluation's own: a team trained with several turns is evaluated
on one turn unless ``env_kwargs`` ask for more.

Command line::

    llm-marl eval --family coding --helper hf:runs/magrpo/helper --main hf:runs/magrpo/main \\
        --benchmarks coophumaneval,humaneval --split eval --samples 10 --k 1,5,10
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from llm_marl.errors import ConfigError
from llm_marl.eval.evaluate import Benchmark, Column, EvalOptions
from llm_marl.eval.family import Family, split_kwargs
from llm_marl.eval.metrics import Record
from llm_marl.policies.base import Policy, SamplingParams

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CODING", "CODE_SAMPLING", "CodingFamily", "code_eval"]

CODE_SAMPLING = SamplingParams(max_new_tokens=256, temperature=0.6, top_p=0.6)
"""Default sampling of every coding agent: the generation settings of the MAGRPO paper
(temperature 0.6, top-p 0.6, at most 256 new tokens per turn; see :mod:`llm_marl.envs.coding.env`)."""

CODING_BENCHMARKS = ("coophumaneval", "humaneval", "mbpp")


def _env_prefixes() -> dict[str, str]:
    """Benchmark -> env id prefix (``coophumaneval`` -> ``coop_humaneval``)."""
    from llm_marl.envs.coding.env import ENV_NAMES

    return dict(ENV_NAMES)


class CodingFamily(Family):
    """The coding envs: helper + main (MAGRPO), or one coder (the single-agent baseline)."""

    name: ClassVar[str] = "coding"
    roles: ClassVar[tuple[str, ...]] = ("helper", "main", "coder")
    default_benchmarks: ClassVar[tuple[str, ...]] = CODING_BENCHMARKS
    columns: ClassVar[tuple[Column, ...]] = (Column("test_pass_rate", "tests", "percent"),)

    def owns(self, env_id: str) -> bool:
        return any(
            env_id in (f"{prefix}-v0", f"{prefix}_single-v0") for prefix in _env_prefixes().values()
        )

    def env_for(self, team: Sequence[str], benchmark: str) -> str:
        """``helper`` + ``main`` -> ``<benchmark>-v0``; ``coder`` -> ``<benchmark>_single-v0``."""
        prefix = _env_prefixes().get(benchmark, "coop_humaneval")
        agents = sorted(team)
        if agents == ["helper", "main"]:
            return f"{prefix}-v0"
        if agents == ["coder"]:
            return f"{prefix}_single-v0"
        raise ConfigError(
            f"a coding team is helper+main (the MAGRPO pair) or a lone coder; got {list(team)}"
        )

    def check_team(self, team: Sequence[str]) -> None:
        self.env_for(team, CODING_BENCHMARKS[0])

    def benchmark(
        self, team: Sequence[str], name: str, *, split: str | None, limit: int | None
    ) -> Benchmark:
        """A named benchmark plays its env; any other name is a dataset in CoopHumanEval's
        schema (``coop_humaneval``)."""
        own = {} if name in _env_prefixes() else {"dataset": name}
        return Benchmark(name, self.env_for(team, name), env_kwargs=split_kwargs(split, **own))

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        return dict.fromkeys(team, CODE_SAMPLING)

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        rates = [
            float(info["pass_rate"])
            for r in records
            for info in list(r["infos"].values())[:1]
            if isinstance(info.get("pass_rate"), (int, float))
        ]
        return {"test_pass_rate": sum(rates) / len(rates) if rates else None}


CODING = CodingFamily()


def code_eval(
    policies: Mapping[str, Policy],
    benchmarks: Sequence[str] | str | None = None,
    *,
    env_ids: Sequence[str] | None = None,
    split: str | None = None,
    **options: Unpack[EvalOptions],
) -> dict[str, Any]:
    """Evaluate a coding team; report pass@1 and pass@k per benchmark.

    Args:
        policies: ``{"helper": ..., "main": ...}`` or ``{"coder": ...}``.
        benchmarks: benchmark names (see the module docstring; a comma-separated string is
            split). Default: CoopHumanEval, HumanEval and MBPP.
        env_ids: coding env ids to play instead (each on its own tasks), e.g.
            ``["humaneval_single-v0"]``.
        split: ``"eval"`` (the paper's held-out slice), ``"train"``, ``"all"`` or ``"a:b"``
            (default: the env's own, every problem).
        options: as in :func:`llm_marl.eval.evaluate` (:class:`~llm_marl.eval.evaluate.EvalOptions`:
            ``samples``, ``k``, ``limit``, ``batch_size``, ``seed``, ``progress``,
            ``episodes_path``, ``return_episodes``); ``sampling`` is one
            :class:`SamplingParams` for every agent or one per agent (missing agents get
            :data:`CODE_SAMPLING`); ``env_kwargs`` are the evaluation's env configuration
            (``sandbox``, ``timeout``, the number of turns...), independent of the training
            env's.

    Returns:
        The report of :func:`llm_marl.eval.evaluate`; each benchmark also has
        ``test_pass_rate``, the mean fraction of scoring tests passed.
    """
    return CODING.evaluate(policies, benchmarks, env_ids=env_ids, split=split, **options)
