"""Training orchestration: the :class:`Trainer` loop, run configs, presets, checkpoints, logging.

* :class:`Trainer` / :class:`TrainerConfig` / :class:`TrainResult` — collect, update, log,
  evaluate, checkpoint, resume, for any :class:`~llm_marl.algos.Algorithm`.
* :class:`RunConfig` — a whole run (algorithm, trainer, algorithm hyperparameters, policies),
  resolved from a preset, a YAML/JSON file and command-line flags by :func:`parse_run_config`
  (or :func:`preset_config` from Python), saved next to the run by :func:`save_run_config`, and
  trained by :func:`run` (what ``llm-marl train`` does).
* :class:`PoliciesConfig` / :func:`build_policies` — which model plays each agent;
  :func:`attach_expert` / :func:`attach_judge` — the coding envs' expert and the writing and
  search envs' judge from ``policies.expert`` / ``policies.judge``.
* :mod:`~llm_marl.train.presets` — toy and paper hyperparameters as data;
  :func:`register_algorithm` — the ``--algo`` registry (:mod:`~llm_marl.algos.registry`).
* :mod:`~llm_marl.train.config` — the generic dataclass <-> command line / file parser.
* :mod:`~llm_marl.train.checkpoint` — atomic checkpoints (weights, optimizer, RNG, step).
* :mod:`~llm_marl.train.logging` — console table, JSONL metrics, TensorBoard / W&B, reward plot.
"""

from llm_marl.algos.registry import register_algorithm
from llm_marl.train.models import PoliciesConfig
from llm_marl.train.presets import Preset, preset, register_preset
from llm_marl.train.run import (
    FrozenWeights,
    RunConfig,
    attach_expert,
    attach_judge,
    build_policies,
    parse_run_config,
    preset_config,
    run,
    save_run_config,
)
from llm_marl.train.trainer import (
    Trainer,
    TrainerConfig,
    TrainResult,
    episode_metrics,
    reward_table,
)

__all__ = [
    "FrozenWeights",
    "PoliciesConfig",
    "Preset",
    "RunConfig",
    "TrainResult",
    "Trainer",
    "TrainerConfig",
    "attach_expert",
    "attach_judge",
    "build_policies",
    "episode_metrics",
    "parse_run_config",
    "preset",
    "preset_config",
    "register_algorithm",
    "register_preset",
    "reward_table",
    "run",
    "save_run_config",
]
