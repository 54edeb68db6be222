"""A new algorithm in ~40 lines: REINFORCE with a group baseline, through the plug-in contract.

The whole contract is ``Algorithm.setup(policies, sampling)`` (build optimizers) and
``Algorithm.update(episodes) -> metrics``; the :class:`~llm_marl.train.Trainer` does the rest
(batched rollouts, logging, evaluation, checkpoints, ``--resume``). Nothing in the library is
touched: registering the algorithm and a preset (plain data) gives it the same command line as
the built-in ones, with its config's documented fields as options.

    python examples/custom_algorithm.py                   # two tiny agents, offline, minutes
    python examples/custom_algorithm.py --seed 1 --steps 200  # options override the preset
    python examples/custom_algorithm.py --help            # every option
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from llm_marl.algos import Algorithm
from llm_marl.rollout import group_episodes
from llm_marl.train import (
    Trainer,
    TrainResult,
    build_policies,
    parse_run_config,
    preset,
    register_algorithm,
)


# ------------------------------------------------------------------------ the algorithm (~40 lines)
@dataclass
class ReinforceConfig:
    """GroupReinforce's hyperparameters (each field is a command-line option)."""

    lr: float = 1e-3
    """Adam learning rate."""


class GroupReinforce(Algorithm):
    """REINFORCE on the joint reward, baseline = mean reward of the task's group."""

    name = "reinforce"
    min_group_size = 2

    def __init__(self, config: ReinforceConfig | None = None) -> None:
        self.config = config or ReinforceConfig()

    def setup(self, policies, sampling) -> None:
        super().setup(policies, sampling)  # sets self.trainable: agent -> trainable policy
        self.optimizers = {
            a: torch.optim.Adam(p.parameters(), lr=self.config.lr)
            for a, p in self.trainable.items()
        }

    def update(self, episodes) -> dict[str, float]:
        metrics = {}
        for agent, policy in self.trainable.items():
            prompts, completions, advantages = [], [], []
            for group in group_episodes(episodes):
                baseline = sum(ep.total_reward for ep in group) / len(group)
                for ep in group:
                    for turn in ep.trajectories[agent].turns:
                        prompts.append(turn.prompt_ids)
                        completions.append(turn.completion_ids)
                        advantages.append(ep.total_reward - baseline)
            logprobs = policy.sequence_logprobs(prompts, completions)  # one batched forward
            loss = -torch.stack([a * lp.sum() for a, lp in zip(advantages, logprobs)]).mean()
            self.optimizers[agent].zero_grad()
            loss.backward()
            self.optimizers[agent].step()
            metrics[f"{agent}/loss"] = loss.item()
        return metrics

    def state_dict(self):  # what --resume needs besides the weights
        return {a: o.state_dict() for a, o in self.optimizers.items()}

    def load_state_dict(self, state) -> None:
        for agent, opt_state in state.items():
            self.optimizers[agent].load_state_dict(opt_state)


# ------------------------------------------------------------------------ registering it
register_algorithm("reinforce", GroupReinforce, ReinforceConfig, "REINFORCE, group baseline")
# The team starts at chance: a short supervised warm-up teaches the tiny LMs the answer format
# (one digit), so every gain after it is the algorithm's; the sampling and evaluation are those
# of magrpo's toy-coordination preset (the evaluation before step 1 is the chance reference).
# Measured on CPU, eval reward at step 0 -> 150 for seeds 0, 1, 2: 0.36 -> 0.68, 0.42 -> 0.52,
# 0.36 -> 0.66 (most of the gain after step 75). Plain REINFORCE has no KL anchor: at lr 1e-3,
# two of three runs stayed at chance (one collapsed onto a fixed answer); 3e-4 learns steadily.
preset(
    "reinforce",
    "toy",
    "two offline tiny LMs learn a coordination convention, from chance, on CPU",
    {
        "trainer": {
            "env": "coordination-v0",
            "steps": 150,
            "tasks_per_step": 5,
            "group_size": 8,
            "sampling": {"max_new_tokens": 2, "temperature": 1.0, "top_p": 1.0},
            "eval_every": 25,
            "eval_group_size": 8,
            "eval_sampling": {"max_new_tokens": 2, "temperature": 1.0, "top_p": 1.0},
            "output_dir": "runs/custom_algorithm",
        },
        "algorithm": {"lr": 3e-4},
        "policies": {"model": "tiny", "format_warmup_steps": 60},
    },
    auto=True,
)


# ------------------------------------------------------------------------ running it
def main(argv: list[str] | None = None) -> TrainResult:
    config = parse_run_config(argv, algo="reinforce")  # the preset, a --config file, options
    policies = build_policies(config)  # one offline tiny LM per agent (or --model)
    trainer = Trainer(GroupReinforce(config.algorithm), policies, config.trainer)
    return trainer.train()


if __name__ == "__main__":
    main()
