"""A new algorithm in ~40 lines: REINFORCE with a group baseline, through the plug-in contract.

The whole contract is ``Algorithm.setup(policies, sampling)`` (build optimizers) and
``Algorithm.update(episodes) -> metrics``; the :class:`~llm_marl.algos.Trainer` does the rest
(batched rollouts, logging, evaluation, checkpoints, ``--resume``). Nothing in the library is
touched.

    python examples/custom_algorithm.py                   # two tiny agents, offline, ~1 minute
    python examples/custom_algorithm.py --env referential-v0 --steps 50 --out runs/reinforce
"""

from __future__ import annotations

import argparse

import torch

from llm_marl.algos import Algorithm
from llm_marl.policies.base import SamplingParams
from llm_marl.rollout import group_episodes
from llm_marl.train import Trainer, TrainerConfig


# ------------------------------------------------------------------------ the algorithm (~40 lines)
class GroupReinforce(Algorithm):
    """REINFORCE on the joint reward, baseline = mean reward of the task's group."""

    name = "reinforce"
    min_group_size = 2

    def __init__(self, lr: float = 1e-3) -> None:
        self.lr = lr

    def setup(self, policies, sampling) -> None:
        super().setup(policies, sampling)  # sets self.trainable: agent -> trainable policy
        self.optimizers = {
            a: torch.optim.Adam(p.parameters(), lr=self.lr) for a, p in self.trainable.items()
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


# ------------------------------------------------------------------------ running it
def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="coordination-v0", help="any registered env id")
    parser.add_argument(
        "--model", default=None, help="HF id or path (default: the offline tiny LM)"
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--out", default="runs/custom_algorithm")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import llm_marl
    from llm_marl.policies import HFPolicy, build_tiny_lm

    model = args.model or build_tiny_lm(f"{args.out}/tiny-lm", seed=args.seed, num_layers=1)
    agents = llm_marl.make(args.env).possible_agents
    policies = {
        a: HFPolicy(model, trainable=True, name=a, seed=args.seed + i) for i, a in enumerate(agents)
    }
    config = TrainerConfig(
        env=args.env,
        steps=args.steps,
        group_size=args.group_size,
        sampling=SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0),
        output_dir=args.out,
        resume=args.resume,
        seed=args.seed,
    )
    return Trainer(GroupReinforce(args.lr), policies, config).train()


if __name__ == "__main__":
    main()
