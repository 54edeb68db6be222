"""Training orchestration: the :class:`Trainer` loop, its config, checkpoints and logging.

* :class:`Trainer` / :class:`TrainerConfig` / :class:`TrainResult` — collect, update, log,
  evaluate, checkpoint, resume, for any :class:`~llm_marl.algos.Algorithm`.
* :mod:`~llm_marl.train.checkpoint` — atomic checkpoints (weights, optimizer, RNG, step).
* :mod:`~llm_marl.train.logging` — console table, JSONL metrics, TensorBoard / W&B, reward plot.
"""

from llm_marl.train.trainer import (
    Trainer,
    TrainerConfig,
    TrainResult,
    episode_metrics,
    reward_table,
)

__all__ = ["TrainResult", "Trainer", "TrainerConfig", "episode_metrics", "reward_table"]
