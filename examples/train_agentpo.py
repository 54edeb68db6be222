"""Train one collaborator beside a frozen actor with AgentPO-GRPO (Sun et al., ICLR 2026).

Offline defaults::

    python examples/train_agentpo.py

plays ``referential-v0``: the trainable ``speaker`` (the collaborator, like AgentPO's hint
agent) writes a message; the frozen ``listener`` (the actor: a tiny local model taught to read
the digit in a message, then frozen) answers. The reward is binary (the ``success`` component),
the collaborator is trained with GRPO (token-mean, clip-higher 0.2 / 0.28, no KL), and the frozen
listener's weights are checked bit-identical at the end. A couple of minutes on 2 CPU cores.

The paper's setting (``--preset agentpo-math-hint`` / ``agentpo-math-critic``)::

    python examples/train_agentpo.py --preset agentpo-math-hint --lora
    python examples/train_agentpo.py --preset agentpo-math-critic \\
        --policies.frozen.actor openai:meta-llama/Llama-3.2-3B-Instruct@http://localhost:8000/v1
    python examples/train_agentpo.py --preset agentpo-math-hint --model tiny \\
        --policies.frozen.actor tiny --steps 2 --trainer.sampling.hint.max_new_tokens 8 \\
        --trainer.sampling.actor.max_new_tokens 8 --eval-sampling none \\
        --trainer.eval_env_kwargs.limit 1                     # the same topology, offline

The paper presets train on 500 MATH level 3-5 problems (``math_level3to5``, from
``$LLM_MARL_DATA_DIR``) and evaluate on MATH-500, AIME24, AMC23, Minerva Math and OlympiadBench
(``trainer.eval_env_kwargs``); the collaborator samples at temperature 1.0 with 768 tokens, the
frozen actor greedily with 2,048 (``trainer.sampling`` per agent), as the release does.

A frozen agent is ``policies.frozen.AGENT SPEC``: ``tiny``, ``hf:PATH`` (a local or Hub model),
``openai:MODEL@URL`` (any OpenAI-compatible server, key from ``$OPENAI_API_KEY``) or
``scripted:module:function``; every other agent is trained, here exactly one (the
``algorithm.collaborator``). Presets (``llm_marl.train.presets.agentpo``) hold the paper's
released hyperparameters; a ``--config`` file and options override them (``--help``).
"""

from __future__ import annotations

from llm_marl.algos import AgentPO
from llm_marl.train import (
    FrozenWeights,
    Trainer,
    TrainResult,
    build_policies,
    parse_run_config,
    save_run_config,
)


def main(argv: list[str] | None = None) -> TrainResult:
    # 1. The run: a preset (default: toy-referential), a --config file, options.
    config = parse_run_config(argv, algo="agentpo")
    save_run_config(config)  # <output_dir>/config.yaml: --config it to run this again

    # 2. The team: the frozen actor from its spec, the trainable collaborator.
    policies = build_policies(config)
    frozen = FrozenWeights(policies)  # a snapshot of the frozen actor's weights

    # 3. AgentPO-GRPO and the training loop.
    trainer = Trainer(AgentPO(config.algorithm), policies, config.trainer)

    # 4. Train, then prove the actor never changed.
    result = trainer.train()
    frozen.verify()
    return result


if __name__ == "__main__":
    main()
