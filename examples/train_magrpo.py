"""Train a team of LLM agents with MAGRPO (Liu et al. 2025) on any registered env.

Offline defaults (the README's main command)::

    python examples/train_magrpo.py

builds two tiny random-init language models (no download), teaches them the toy env's answer
format with a few supervised steps (each then answers a uniformly random valid digit: the
env's chance level), and trains them with MAGRPO on ``coordination-v0`` until they share a
convention. On 2 CPU cores it takes a couple of minutes; it prints the metrics table and the
reward table (evaluations before, during and after training: 8 sampled episodes per task,
so that the starting point is the team's true chance-level reward) and writes
``<out>/reward.png``, ``<out>/metrics.jsonl``, ``<out>/config.yaml`` and checkpoints
(``--resume`` continues a killed run).

Other envs, presets and models::

    python examples/train_magrpo.py --env referential-v0 --steps 300
    python examples/train_magrpo.py --preset magrpo-coop-humaneval            # the paper's setup
    python examples/train_magrpo.py --preset generic --env coop_humaneval-v0 \\
        --model Qwen/Qwen2.5-Coder-3B --lora
    python examples/train_magrpo.py --config runs/magrpo/config.yaml        # a run, again

A preset (``llm_marl.train.presets.magrpo``) holds published or toy hyperparameters; a
``--config`` YAML/JSON file and then options override it (``--help`` lists them all, with this
run's values). ``--lora`` puts one LoRA adapter per agent on ONE shared base model (the KL
reference is the base with adapters disabled); without it every agent gets its own full copy.
``llm-marl train`` runs the same thing from an installed package.
"""

from __future__ import annotations

from llm_marl.algos import MAGRPO
from llm_marl.train import Trainer, TrainResult, build_policies, parse_run_config, save_run_config


def main(argv: list[str] | None = None) -> TrainResult:
    # 1. The run: a preset (default: the toy preset of the env), a --config file, options.
    config = parse_run_config(argv, algo="magrpo")
    save_run_config(config)  # <output_dir>/config.yaml: --config it to run this again

    # 2. The team: a trainable policy per agent (offline tiny LMs unless --model), taught the
    #    toy env's answer format when the preset says so.
    policies = build_policies(config)

    # 3. MAGRPO and the training loop (collect, update, evaluate, checkpoint).
    trainer = Trainer(MAGRPO(config.algorithm), policies, config.trainer)

    # 4. Train.
    return trainer.train()


if __name__ == "__main__":
    main()
