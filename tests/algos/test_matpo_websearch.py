"""collect on websearch-v0 with ONE tiny HFPolicy for planner and worker, then MATPO on it.

The tiny LM is first behaviour-cloned on two short demonstrations (the planner's ``delegate``
call, the worker's report) so that its greedy rollouts delegate; from then on everything is the
real pipeline: the env parses the call, spawns the worker's conversation, posts its report back,
``collect`` records the parent links, and MATPO updates the shared policy on both roles.
"""

from __future__ import annotations

import json

import pytest
import torch

from llm_marl.algos import MATPO, MATPOConfig
from llm_marl.algos.update import nll_update
from llm_marl.policies import HFPolicy
from llm_marl.policies.base import SamplingParams
from llm_marl.rollout import collect
from llm_marl.train.models import tiny_models

pytestmark = pytest.mark.slow

DELEGATE = (
    "<tool_call>"
    + json.dumps({"name": "delegate", "arguments": {"subtask": "find it"}})
    + "</tool_call>"
)
REPORT = "Lorvik"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    path = tiny_models(tmp_path_factory.mktemp("models"), ["shared"], seed=0)["shared"]
    policy = HFPolicy(path, trainable=True, device="cpu", name="shared")
    import llm_marl

    env = llm_marl.make("websearch-v0", max_delegations=1, max_planner_turns=2)
    obs, _ = env.reset(seed=0, options={"task_id": "sample/2"})
    planner_prompt = policy.prompt_ids(obs["planner"])[0]
    obs, *_ = env.step({"planner": DELEGATE})
    worker_prompt = policy.prompt_ids(obs["worker"])[0]
    env.close()
    end = policy.end_ids[0]
    encode = policy.tokenizer.encode
    demos = [
        (planner_prompt, encode(DELEGATE, add_special_tokens=False) + [end]),
        (worker_prompt, encode(REPORT, add_special_tokens=False) + [end]),
    ]
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for _ in range(60):
        nll_update(policy, optimizer, [p for p, _ in demos], [c for _, c in demos])
    return policy


def test_collect_records_parents_and_matpo_trains_on_them(shared):
    sampling = SamplingParams(max_new_tokens=64, temperature=0.0)
    import llm_marl

    task = llm_marl.make("websearch-v0").tasks[2]  # the question the clone was taught on
    episodes = collect(
        "websearch-v0",
        {"planner": shared, "worker": shared},
        tasks=[task],
        group_size=4,
        sampling=sampling,
        env_kwargs={"max_delegations": 1, "max_planner_turns": 2},
        progress=False,
    )
    assert all(e.ok for e in episodes)
    spawned = [t for e in episodes for t in e.trajectories["worker"].turns]
    texts = [t.text for e in episodes for t in e.trajectories["planner"].turns]
    assert spawned, f"the cloned planner delegates, so workers must have acted: {texts}"
    assert all(t.parent == ("planner", 0) for t in spawned)
    assert all(t.completion_ids and t.logprobs is not None for t in spawned)
    # vary the rewards inside each group so that the advantages are not all zero
    for e in episodes:
        e.step_rewards[-1] = float(e.group_index)
    algo = MATPO(MATPOConfig(lr=1e-3))
    algo.setup({"planner": shared, "worker": shared}, {"planner": sampling, "worker": sampling})
    before = [p.detach().clone() for p in shared.parameters()]
    metrics = algo.update(episodes)
    assert metrics["worker/tokens"] > 0 and metrics["planner/tokens"] > 0
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, shared.parameters()))
