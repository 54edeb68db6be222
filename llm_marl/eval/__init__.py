"""Evaluation: play any env with any team of policies and report scores per benchmark.

* :func:`evaluate` — the one evaluator: any registered env id or factory (or
  :class:`Benchmark` rows), any team; pass@1 and unbiased pass@k (Chen et al. 2021) where the
  env reports success, mean reward and its components everywhere, infrastructure errors
  counted and excluded, episodes to JSONL.
* :func:`math_eval` — math benchmarks for an actor alone, with a hint or with a critic
  (AgentPO's table), and :mod:`llm_marl.eval.math_team` for the team topologies (debate,
  roles: the team's majority answer); :func:`code_eval` — CoopHumanEval / HumanEval / MBPP
  (MAGRPO's table); :func:`writing_eval` — TL;DR and arXiv co-writing (MAGRPO's lexical
  levels, ROUGE).
* :func:`format_report` — the table; :func:`read_episodes` + :func:`score_records` rescore an
  episodes file; :func:`pass_at_k` — the estimator.
* ``llm-marl eval`` — the command line (:mod:`llm_marl.eval.cli`).
"""

from llm_marl.eval.coding import code_eval
from llm_marl.eval.evaluate import Benchmark, Column, evaluate
from llm_marl.eval.family import EnvFamily, Family
from llm_marl.eval.math import math_eval
from llm_marl.eval.metrics import pass_at_k, score_records
from llm_marl.eval.records import read_episodes
from llm_marl.eval.report import format_report
from llm_marl.eval.writing import writing_eval

__all__ = [
    "Benchmark",
    "Column",
    "EnvFamily",
    "Family",
    "code_eval",
    "evaluate",
    "format_report",
    "math_eval",
    "pass_at_k",
    "read_episodes",
    "score_records",
    "writing_eval",
]
