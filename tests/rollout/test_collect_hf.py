"""collect() with two real HFPolicy tiny models: token-in/token-out, masks, batching."""

from __future__ import annotations

import pytest

from llm_marl.algos.advantages import turn_returns
from llm_marl.policies.base import SamplingParams
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.tiny import build_tiny_lm
from llm_marl.rollout import collect


@pytest.fixture(scope="module")
def two_policies(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    a = HFPolicy(build_tiny_lm(root / "a", seed=1), name="speaker-lm", trainable=True)
    b = HFPolicy(build_tiny_lm(root / "b", seed=2), name="listener-lm", trainable=True)
    return a, b


class CountingPolicy:
    """Wraps a policy and counts its generate calls (the wrapped object stays the same)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.trainable = inner.trainable
        self.calls: list[int] = []

    def generate(self, conversations, sampling, contexts=None):
        self.calls.append(len(conversations))
        return self.inner.generate(conversations, sampling, contexts)


@pytest.mark.parametrize("env_id", ["referential-v0", "coordination-v0"])
def test_token_in_token_out_with_tiny_models(two_policies, env_id):
    a, b = two_policies
    agents = {"referential-v0": ("speaker", "listener"), "coordination-v0": ("left", "right")}
    first, second = agents[env_id]
    pa, pb = CountingPolicy(a), CountingPolicy(b)
    sampling = SamplingParams(max_new_tokens=12, temperature=1.0)
    eps = collect(
        env_id,
        {first: pa, second: pb},
        tasks=4
        if env_id == "referential-v0"
        else [{"task_id": f"t{t}", "target": t} for t in range(4)],
        group_size=4,
        sampling=sampling,
        seed=0,
        progress=False,
    )
    assert len(eps) == 16
    # One batched generate call per policy per step with active agents.
    if env_id == "referential-v0":
        assert pa.calls == [16] and pb.calls == [16]  # speaker at step 0, listener at step 1
    else:
        assert pa.calls == [16] and pb.calls == [16]  # both act at step 0, one call each
    tok = {first: a.tokenizer, second: b.tokenizer}
    for ep in eps:
        for agent, traj in ep.trajectories.items():
            assert len(traj.turns) == 1
            turn = traj.turns[0]
            # The env received exactly the decoded generated tokens.
            decoded = tok[agent].decode(turn.completion_ids, skip_special_tokens=True)
            assert decoded == turn.text
            assert 1 <= len(turn.completion_ids) <= sampling.max_new_tokens
            assert len(turn.logprobs) == len(turn.completion_ids)
            assert all(lp <= 0.0 for lp in turn.logprobs)
            # The observation of the next step holds the same text as the agent's reply.
            (segment,) = traj.segments()
            assert segment.token_ids == turn.prompt_ids + turn.completion_ids
            assert segment.prompt_ids == turn.prompt_ids
            assert segment.completion_ids == turn.completion_ids
            assert segment.mask == [1] * len(turn.completion_ids)
            assert segment.logprobs == turn.logprobs
            assert segment.turn_spans == [(0, 0, len(turn.completion_ids))]
            # The prompt is the chat template applied to what the agent observed.
            assert turn.prompt_ids == tok[agent].apply_chat_template(
                turn.observation, add_generation_prompt=True, tokenize=True, return_dict=False
            )


def test_same_seed_same_rollout(two_policies):
    a, b = two_policies
    sampling = SamplingParams(max_new_tokens=8)

    def run():
        eps = collect(
            "referential-v0",
            {"speaker": a, "listener": b},
            group_size=2,
            sampling=sampling,
            seed=11,
            progress=False,
        )
        return [
            (t.agent, t.completion_ids)
            for e in eps
            for tr in e.trajectories.values()
            for t in tr.turns
        ]

    assert run() == run()


def test_multi_turn_stream_continues_with_env_tokens_masked(two_policies, tmp_path):
    """An agent acting twice: its second prompt extends its first stream (mask 0 in between)."""
    from llm_marl.envs.base import LLMParallelEnv, Transition

    class TwoRounds(LLMParallelEnv):
        """A single agent answers, gets feedback, answers again."""

        metadata = {"name": "two_rounds-v0", "render_modes": ["ansi"], "is_parallelizable": True}
        possible_agents = ["solo"]

        def default_tasks(self):
            return [{"task_id": "x"}]

        def setup_episode(self, task):
            self.say("solo", "first question")
            self.set_active(["solo"])

        def transition(self, actions):
            if self.step_count == 1:
                self.say("solo", "feedback: try again")
                self.set_active(["solo"])
                return Transition(reward=0.0)
            return Transition(reward=1.0, done=True)

    a, _ = two_policies
    eps = collect(
        TwoRounds,
        {"solo": a},
        group_size=3,
        sampling=SamplingParams(max_new_tokens=6),
        progress=False,
    )
    for ep in eps:
        traj = ep.trajectories["solo"]
        t0, t1 = traj.turns
        assert t1.continues_stream
        assert t1.prompt_ids[: len(t0.prompt_ids) + len(t0.completion_ids)] == (
            t0.prompt_ids + t0.completion_ids
        )
        (segment,) = traj.segments()
        ids, mask = segment.token_ids, [0] * len(segment.prompt_ids) + segment.mask
        assert ids == t1.prompt_ids + t1.completion_ids
        assert [t for t, m in zip(ids, mask) if m] == t0.completion_ids + t1.completion_ids
        (_, _, end0), (_, start1, _) = segment.turn_spans
        bridge = a.tokenizer.decode(segment.completion_ids[end0:start1])
        assert "feedback: try again" in bridge
        assert ep.step_rewards == [0.0, 1.0]
        assert turn_returns(ep, "solo") == [1.0, 1.0]
