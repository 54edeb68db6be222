"""collect() with an OpenAI-compatible frozen partner served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import time

from llm_marl.policies import OpenAIPolicy, PolicyServer, SamplingParams, ScriptedPolicy
from llm_marl.rollout import collect


def listener_reads(conversation):
    return conversation[-1]["content"].split("Message:")[1].strip()[:1]


def test_hanging_server_marks_episodes_without_crashing(tiny_policy):
    with PolicyServer(tiny_policy, model_name="tiny") as server:
        # Hang until the server stops, then answer 503 (wait() returns True once stopping).
        server.intercept = lambda n, body: (server.stopping.wait(30), (503, {}, {}))[1]
        speaker = OpenAIPolicy("tiny", base_url=server.url, timeout=0.5, max_retries=0)
        start = time.monotonic()
        eps = collect(
            "referential-v0",
            {"speaker": speaker, "listener": ScriptedPolicy(listener_reads)},
            group_size=2,
            sampling=SamplingParams(max_new_tokens=4),
            progress=False,
        )
        assert time.monotonic() - start < 10
    assert len(eps) == 8
    assert all(not e.ok and "timeout" in e.error for e in eps), eps[0].error
    assert all(e.total_reward == 0.0 and e.truncated for e in eps)


def test_served_partner_plays_normally(tiny_policy):
    with PolicyServer(tiny_policy, model_name="tiny") as server:
        speaker = OpenAIPolicy("tiny", base_url=server.url, timeout=30)
        eps = collect(
            "referential-v0",
            {"speaker": speaker, "listener": ScriptedPolicy(listener_reads)},
            group_size=2,
            sampling=SamplingParams(max_new_tokens=4),
            progress=False,
        )
        assert server.requests == 8
    assert all(e.ok and e.terminated for e in eps)
    assert all(len(e.trajectories["speaker"].turns) == 1 for e in eps)
