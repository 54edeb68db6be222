"""Train ONE policy as planner and worker with MATPO (Mo et al. 2025).

Offline defaults::

    python examples/train_matpo.py

plays ``delegation_toy-v0`` (web search's mechanics at a tiny LM's size): the planner is asked
for a value only the worker can look up, so it must delegate; the worker's report comes back as
a tool result and only the planner's answer is scored. One tiny LM plays both roles
(``policies.share``), first taught the answer format only (a few supervised steps), then
trained with MATPO: every planner token and every worker turn it spawned share the rollout's
group-relative advantage. A few minutes on 2 CPU cores.

The paper's setting (``--preset matpo-paper``: Qwen3-14B, 256 questions x 8 rollouts, the
official optimiser settings) on the offline HotpotQA web::

    python examples/train_matpo.py --preset matpo-paper --lora
    python examples/train_matpo.py --preset matpo-paper --model tiny --steps 1 \\
        --trainer.tasks_per_step 2 --trainer.group_size 2        # the same pipeline, offline

Presets (``llm_marl.train.presets.matpo``) hold the released hyperparameters; a ``--config``
file and options override them (``--help``). ``llm-marl train --algo matpo`` runs the same
thing from an installed package.
"""

from __future__ import annotations

from llm_marl.algos import MATPO
from llm_marl.train import Trainer, TrainResult, build_policies, parse_run_config, save_run_config


def main(argv: list[str] | None = None) -> TrainResult:
    # 1. The run: a preset (default: toy-delegation), a --config file, options.
    config = parse_run_config(argv, algo="matpo")
    save_run_config(config)  # <output_dir>/config.yaml: --config it to run this again

    # 2. The team: ONE trainable policy object for planner and worker (policies.share).
    policies = build_policies(config)

    # 3. MATPO and the training loop (collect, update, evaluate, checkpoint).
    trainer = Trainer(MATPO(config.algorithm), policies, config.trainer)

    # 4. Train.
    return trainer.train()


if __name__ == "__main__":
    main()
