"""Cost accounting: every turn records tokens, generate time, copies, usage and cost; metrics,
eval records and the eval table report each agent's spend per episode, frozen agents included."""

from __future__ import annotations

import time

import pytest

from llm_marl.cli import main as cli_main
from llm_marl.policies import OpenAIPolicy, PolicyServer, SamplingParams, ScriptedPolicy
from llm_marl.policies.base import Completion
from llm_marl.rollout import collect
from llm_marl.rollout.cost import completion_cost, cost_metrics, episode_costs, token_counts
from llm_marl.rollout.types import Episode, Trajectory, Turn
from llm_marl.train.trainer import episode_metrics


class SlowTokenPolicy:
    """Answers ``0`` with made-up token ids (prompt: 3 per message), sleeping per call."""

    trainable = False

    def __init__(self, name: str, delay: float, prices: tuple[float, float] | None = None):
        self.name, self.delay, self.calls = name, delay, []
        if prices is not None:
            self.price_per_1k_prompt, self.price_per_1k_completion = prices

    def generate(self, conversations, sampling, contexts=None):
        self.calls.append(len(conversations))
        time.sleep(self.delay)
        return [
            Completion("0", token_ids=[7, 8], prompt_ids=[1, 2, 3] * len(c)) for c in conversations
        ]


def test_turns_record_tokens_the_calls_wall_time_and_the_price():
    left = SlowTokenPolicy("left", 0.05, prices=(2.0, 10.0))
    right = SlowTokenPolicy("right", 0.0)
    episodes = collect(
        "coordination-v0",
        {"left": left, "right": right},
        tasks=[{"task_id": "t0", "target": 0}, {"task_id": "t1", "target": 1}],
        group_size=3,
        sampling=SamplingParams(max_new_tokens=2),
        progress=False,
    )
    assert left.calls == [6]  # one batched call: 2 tasks x 3 copies
    for ep in episodes:
        (turn,) = ep.trajectories["left"].turns
        assert turn.prompt_tokens == len(turn.prompt_ids) > 0 and turn.completion_tokens == 2
        assert turn.generate_seconds >= 0.05 and turn.generate_batch == 6 and turn.copies == 1
        assert turn.cost == pytest.approx((turn.prompt_tokens * 2.0 + 2 * 10.0) / 1000)
        assert ep.trajectories["right"].turns[0].cost is None  # no price table
    costs = episode_costs(episodes[0])
    assert (
        costs["left"].calls == 1.0
        and costs["left"].tokens == episodes[0].trajectories["left"].turns[0].prompt_tokens + 2
    )
    assert costs["left"].seconds == pytest.approx(
        episodes[0].trajectories["left"].turns[0].generate_seconds / 6
    )
    # The training metrics: per agent and the team, per episode; the team sums the agents.
    metrics = episode_metrics(episodes)
    for key in ("cost/{}/tokens", "cost/{}/calls", "time/generate/{}"):
        assert metrics[key.format("team")] == pytest.approx(
            metrics[key.format("left")] + metrics[key.format("right")]
        )
    # Wall-clock figures share the time/ prefix with the run's other timings.
    assert not any(k.startswith("cost/") and k.endswith("seconds") for k in metrics)
    assert metrics["cost/team/cost"] == pytest.approx(metrics["cost/left/cost"])
    assert "cost/right/cost" not in metrics


def test_a_shared_frozen_completion_is_split_among_the_episodes_it_went_to():
    actor = SlowTokenPolicy("actor", 0.0, prices=(1.0, 1.0))
    hint = ScriptedPolicy(lambda conversation: "a hint", name="hint")
    episodes = collect(
        "coordination-v0",
        {"left": actor, "right": hint},
        tasks=[{"task_id": "t0", "target": 0}],
        group_size=4,
        sampling=SamplingParams(max_new_tokens=2),
        share_frozen=("left",),
        progress=False,
    )
    assert actor.calls == [1]  # four identical requests, one generated
    turns = [ep.trajectories["left"].turns[0] for ep in episodes]
    assert all(t.shared and t.copies == 4 for t in turns)
    shares = [episode_costs(ep)["left"] for ep in episodes]
    assert sum(s.calls for s in shares) == pytest.approx(1.0)
    assert sum(s.cost or 0.0 for s in shares) == pytest.approx(turns[0].cost)


def test_token_counts_prefer_the_server_usage_and_prices_count_per_1000():
    c = Completion("x", token_ids=[1], prompt_ids=[1, 2], metadata={"usage": {"prompt_tokens": 9}})
    assert token_counts(c) == (9, 1)
    policy = SlowTokenPolicy("p", 0.0, prices=(0.5, 4.0))
    assert completion_cost(policy, c) == pytest.approx((9 * 0.5 + 1 * 4.0) / 1000)
    assert completion_cost(SlowTokenPolicy("q", 0.0), c) is None


def test_cost_metrics_hand_computed():
    def ep(prompt, completion, seconds, batch, cost):
        turn = Turn("a", 0, "x", prompt_tokens=prompt, completion_tokens=completion,
                    generate_seconds=seconds, generate_batch=batch, cost=cost)  # fmt: skip
        frozen = Turn("f", 0, "y", prompt_tokens=10, completion_tokens=5)
        return Episode("t", 0, 0, {"a": Trajectory("a", "p", True, [turn]),
                                   "f": Trajectory("f", "q", False, [frozen])})  # fmt: skip

    metrics = cost_metrics([ep(100, 20, 1.0, 2, 0.5), ep(300, 40, 3.0, 1, 1.5)])
    assert metrics["cost/a/tokens"] == pytest.approx((120 + 340) / 2)
    assert metrics["time/generate/a"] == pytest.approx((0.5 + 3.0) / 2)
    assert metrics["cost/a/cost"] == pytest.approx(1.0)
    assert metrics["cost/f/tokens"] == 15 and metrics["cost/f/calls"] == 1.0  # frozen counted
    assert metrics["cost/team/tokens"] == pytest.approx(230 + 15)
    assert metrics["cost/team/calls"] == 2.0


def test_a_served_openai_partner_records_usage_and_cost(tiny_policy):
    with PolicyServer(tiny_policy, model_name="tiny") as server:
        speaker = OpenAIPolicy(
            "tiny",
            base_url=server.url,
            timeout=30,
            price_per_1k_prompt=0.15,
            price_per_1k_completion=0.6,
        )
        episodes = collect(
            "referential-v0",
            {"speaker": speaker, "listener": ScriptedPolicy(lambda c: "0")},
            group_size=1,
            sampling=SamplingParams(max_new_tokens=4),
            progress=False,
        )
    for ep in episodes:
        (turn,) = ep.trajectories["speaker"].turns
        assert turn.usage["prompt_tokens"] == turn.prompt_tokens > 0
        assert turn.usage["completion_tokens"] == turn.completion_tokens > 0
        expected = (turn.prompt_tokens * 0.15 + turn.completion_tokens * 0.6) / 1000
        assert turn.cost == pytest.approx(expected)
        assert turn.generate_seconds > 0
    with pytest.raises(ValueError, match="price_per_1k_prompt"):
        OpenAIPolicy("m", base_url="http://127.0.0.1:1/v1", price_per_1k_prompt=-1.0)


def test_llm_marl_eval_prints_a_cost_column_per_agent(capsys):
    code = cli_main(
        [
            "eval",
            "--env",
            "coordination-v0",
            "--agent",
            "left=scripted:tests.rollout.test_cost:say_zero",
            "--agent",
            "right=scripted:tests.rollout.test_cost:say_zero",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("cost per episode"))
    assert lines[at].split() == ["cost", "per", "episode", "left", "right", "team"]
    row = lines[at + 1]
    assert row.startswith("coordination-v0 ")
    assert row.count("calls") == 3  # left, right, team
    assert "2 calls" in row  # the team: one call per agent per episode


def say_zero(conversation):
    return "0"
