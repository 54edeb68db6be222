"""``llm-marl train`` (``llm_marl.cli.main``) with a probe of rank 0's vLLM engines, for torchrun.

Launched by tests/vllm/test_sharded_vllm.py as ``torchrun ... tests/vllm/sharded_probe.py train
...``. After every ``sync_samplers`` of the sharded trainer (before the first rollout, after each
update), every sharded policy's engine samples a greedy completion of a fixed prompt on rank 0;
every rank then scores those tokens with the *sharded learner* (a collective forward), and rank 0
appends ``{"ids": [...], "engine": [...], "learner": [...]}`` (the tokens, their log-probs) to the JSON-lines file named by
``$PROBE_OUT``. The probe only reads: greedy decoding draws no random numbers, and scoring runs
without gradients.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROMPT = [1, 30, 31, 32]


def _probe(trainer: Any) -> None:
    import torch
    import torch.distributed as dist

    from llm_marl.policies import SamplingParams

    seen: set[int] = set()
    for agent in sorted(trainer.policies):
        policy = trainer.policies[agent]
        if id(policy) in seen or getattr(policy, "data_parallel", None) is None:
            continue
        seen.add(id(policy))
        box: list[Any] = [None]
        if dist.get_rank() == 0:
            greedy = SamplingParams(max_new_tokens=4, temperature=0.0, seed=0)
            ids, lps = policy.generation_engine.generate_ids(policy, [PROMPT], greedy)
            box[0] = (ids[0], lps[0])
        dist.broadcast_object_list(box, src=0)
        ids, engine = box[0]
        with torch.no_grad():
            learner = policy.sequence_logprobs([PROMPT], [ids])[0].float().tolist()
        if dist.get_rank() == 0:
            with open(os.environ["PROBE_OUT"], "a") as f:
                row = {"agent": agent, "ids": ids, "engine": engine, "learner": learner}
                f.write(json.dumps(row) + "\n")


def main() -> int:
    from llm_marl.cli import main as cli
    from llm_marl.train.distributed import ShardedTrainer

    sync = ShardedTrainer.sync_samplers

    def sync_and_probe(self: ShardedTrainer) -> None:
        sync(self)
        _probe(self)

    ShardedTrainer.sync_samplers = sync_and_probe  # type: ignore[method-assign]
    return cli(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
