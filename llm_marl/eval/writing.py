"""`writing_eval`: MAGRPO's co-writing tasks (TL;DR, arXiv introductions), scored per split.

>>> from llm_marl.eval.writing import writing_eval
>>> from llm_marl.policies import build_policy
>>> concise = build_policy("hf:runs/magrpo/concise")                              # doctest: +SKIP
>>> detailed = build_policy("hf:runs/magrpo/detailed")                            # doctest: +SKIP
>>> report = writing_eval({"concise": concise, "detailed": detailed}, "tldr",
...                       split="eval")                                           # doctest: +SKIP

The team picks the env: ``concise`` + ``detailed`` play ``tldr-v0``, ``background`` + ``method``
``arxiv_intro-v0``, a lone ``writer`` the single-agent baseline of the benchmark. Benchmarks are
``tldr``, ``arxiv``, ``tldr_sample``, ``arxiv_sample`` or a dataset file / Hugging Face id.

Reported per benchmark, besides the mean reward and its components (one per lexical level, see
:mod:`llm_marl.envs.writing.lexical`): ``lexical`` (the paper's reward, guards aside), the share
of answers a guard stopped (``guarded``), and, where the tasks have a gold TL;DR, ROUGE-1/2/L F1
(``rouge1``, ``rouge2``, ``rougeL``; Lin 2004, the ``rouge-score`` package with stemming) of the
concise part against it. When the env computed them (a reward weight on them), the
all-MiniLM-L6-v2 similarity of each answer to its source (``relevance``) and of its two parts
(``redundancy``); ``embedding_scores`` lists them even when no episode carries them.

:class:`~llm_marl.rollout.judges.PolicyJudge` turns any frozen
:class:`~llm_marl.policies.base.Policy` into the env's ``judge``.

Command line::

    llm-marl eval --family writing --env tldr-v0 --split eval \\
        --concise hf:runs/magrpo/concise --detailed hf:runs/magrpo/detailed
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

__all__ = [
    "WRITING",
    "WritingFamily",
    "rouge_scores",
    "writing_eval",
]

WRITING_SAMPLING = SamplingParams(max_new_tokens=256, temperature=0.7, top_p=0.9)
"""Default sampling: the official MAGRPO writing configs (``configs/magrpo_tldr_config.yaml``:
temperature 0.7, top-p 0.9, 256 new tokens)."""

_TEAMS = {
    ("concise", "detailed"): "tldr-v0",
    ("background", "method"): "arxiv_intro-v0",
}
_KIND = {
    "tldr": "tldr",
    "tldr_sample": "tldr",
    "arxiv": "arxiv_intro",
    "arxiv_sample": "arxiv_intro",
}


def rouge_scores(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F1 of ``prediction`` against ``reference`` (``rouge-score``, stemmed)."""
    try:
        from rouge_score import rouge_scorer
    except ImportError as err:
        raise ConfigError(
            "ROUGE needs the rouge-score package: pip install 'llm-marl[writing]'"
        ) from err
    scorer = _scorer(rouge_scorer)
    # ROUGE-L is quadratic in the lengths: read at most 4,000 characters of a prediction.
    scores = scorer.score(reference, prediction[:4000])
    return {name: float(s.fmeasure) for name, s in scores.items()}


_SCORER: Any = None


def _scorer(module: Any) -> Any:
    global _SCORER
    if _SCORER is None:
        _SCORER = module.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    return _SCORER


class WritingFamily(Family):
    """The writing envs: a MAGRPO pair per task, or one writer (the single-agent baseline)."""

    name: ClassVar[str] = "writing"
    roles: ClassVar[tuple[str, ...]] = ("concise", "detailed", "background", "method", "writer")
    default_benchmarks: ClassVar[tuple[str, ...]] = ("tldr",)
    columns: ClassVar[tuple[Column, ...]] = (
        Column("lexical", "lexical", "number"),
        Column("guarded", "guarded", "percent"),
        Column("rouge1", "R-1", "number"),
        Column("rougeL", "R-L", "number"),
    )

    def __init__(self, embedding_scores: bool = False) -> None:
        self.embedding_scores = embedding_scores

    def owns(self, env_id: str) -> bool:
        return env_id in {f"{k}{s}-v0" for k in ("tldr", "arxiv_intro") for s in ("", "_single")}

    def env_for(self, team: Sequence[str], benchmark: str) -> str:
        kind = _KIND.get(benchmark, "tldr")
        if sorted(team) == ["writer"]:
            return f"{kind}_single-v0"
        env = _TEAMS.get(tuple(sorted(team)))  # type: ignore[arg-type]
        if env is None or not env.startswith(kind):
            pairs = [" + ".join(k) for k, v in _TEAMS.items() if v.startswith(kind)]
            raise ConfigError(f"a {kind} team is {pairs[0]} or a lone writer; got {list(team)}")
        return env

    def check_team(self, team: Sequence[str]) -> None:
        if sorted(team) != ["writer"] and tuple(sorted(team)) not in _TEAMS:
            raise ConfigError(
                "a writing team is concise + detailed (tldr), background + method (arxiv) or a "
                f"lone writer; got {list(team)}"
            )

    def benchmarks_for(self, team: Sequence[str]) -> Sequence[str]:
        """The team's task: ``arxiv`` for background + method, else ``tldr``."""
        return ["arxiv"] if tuple(sorted(team)) == ("background", "method") else ["tldr"]

    def benchmark(
        self, team: Sequence[str], name: str, *, split: str | None, limit: int | None
    ) -> Benchmark:
        """Dataset ``name`` (a benchmark name, file or Hugging Face id) in the team's env."""
        return Benchmark(
            name, self.env_for(team, name), env_kwargs=split_kwargs(split, dataset=name)
        )

    def default_sampling(self, team: Sequence[str]) -> dict[str, SamplingParams]:
        return dict.fromkeys(team, WRITING_SAMPLING)

    def record_fields(self, episode: Any) -> dict[str, Any]:
        info: dict[str, Any] = next(iter(episode.final_infos.values()), {})
        return {"parts": list(info.get("parts", ())), "reference": info.get("reference")}

    def metrics(self, records: list[Record]) -> dict[str, Any]:
        return writing_metrics(records, embedding_scores=self.embedding_scores)


def writing_metrics(records: list[Record], *, embedding_scores: bool = False) -> dict[str, Any]:
    """The writing metrics of scored episode records (see the module docstring)."""
    infos: list[dict[str, Any]] = [next(iter(r["infos"].values()), {}) for r in records]
    lexical = [float(i["lexical_reward"]) for i in infos if "lexical_reward" in i]
    stopped = [bool(i.get("guards")) for i in infos if "guards" in i]
    out: dict[str, Any] = {
        "lexical": sum(lexical) / len(lexical) if lexical else None,
        "guarded": sum(stopped) / len(stopped) if stopped else None,
        "rouge1": None,
        "rouge2": None,
        "rougeL": None,
    }
    pairs = [
        (str(r.get("parts", [""])[0]), str(r["reference"]))
        for r in records
        if r.get("reference") and r.get("parts")
    ]
    if pairs:
        sums = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
        for pred, ref in pairs:
            for k, v in rouge_scores(pred, ref).items():
                sums[k] += v
        out.update({k: v / len(pairs) for k, v in sums.items()})
    # The embedding similarities exist when the env computed them (a reward weight on them):
    # reported whenever the episodes carry them, by writing_eval and the CLI alike.
    for name in ("relevance", "redundancy"):
        values = [float(i[name]) for i in infos if name in i]
        if values or embedding_scores:
            out[name] = sum(values) / len(values) if values else None
    return out


WRITING = WritingFamily()


def writing_eval(
    policies: Mapping[str, Policy],
    benchmarks: Sequence[str] | str | None = None,
    *,
    env_ids: Sequence[str] | None = None,
    split: str | None = None,
    **options: Unpack[EvalOptions],
) -> dict[str, Any]:
    """Evaluate a writing team; report the lexical levels, guards and ROUGE per benchmark.

    Args:
        policies: ``{"concise", "detailed"}``, ``{"background", "method"}`` or ``{"writer"}``.
        benchmarks: ``tldr``, ``arxiv``, ``tldr_sample``, ``arxiv_sample`` (comma-separated
            string or list; default: the team's task).
        env_ids: writing env ids to play instead, each on its own tasks.
        split: ``"eval"`` (held out), ``"train"``, ``"all"`` or ``"a:b"``.
        options: as in :func:`llm_marl.eval.evaluate` (``samples``, ``limit``, ``seed``,
            ``progress``, ``episodes_path``, ``return_episodes``...). ``sampling`` is one
            :class:`SamplingParams` for every agent or one per agent (default
            :data:`WRITING_SAMPLING`); ``env_kwargs`` are the evaluation env's settings
            (``guards``, ``reward`` weights...): with ``reward={"relevance_weight": ...}`` the
            embedding similarities are reported too.
    """
    return WRITING.evaluate(policies, benchmarks, env_ids=env_ids, split=split, **options)
