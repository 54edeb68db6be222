"""PolicyGradientAlgorithm: the optimizer / scheduler / state scaffolding MAGRPO, AgentPO and
MATPO share, exercised through MAGRPO and through a minimal subclass."""

from __future__ import annotations

import copy

import pytest
import torch

from llm_marl.algos import (
    MAGRPO,
    AgentPO,
    MAGRPOConfig,
    PGConfig,
    PolicyGradientAlgorithm,
    Sample,
    trajectory_samples,
)
from llm_marl.rollout.types import Episode, Trajectory

from .conftest import BigramPolicy
from .helpers import episode, turn


def _episodes(task_index: int, agents=("a", "b"), seed: int = 0) -> list[Episode]:
    """One group of 4 single-step episodes with distinct completions and mixed rewards."""
    g = torch.Generator().manual_seed(seed * 100 + task_index)
    out = []
    for k in range(4):
        completion = torch.randint(0, 8, (3,), generator=g).tolist()
        trajs = {
            a: Trajectory(a, "p", True, [turn(a, 0, [task_index % 8, 1], completion)])
            for a in agents
        }
        out.append(episode(task_index, k, [float(k % 2) + 0.1 * k], trajs))
    return out


def _frozen(seed: int) -> BigramPolicy:
    policy = BigramPolicy(seed=seed, name="frozen")
    policy.trainable = False
    return policy


def test_frozen_agents_get_no_optimizer_and_stay_bit_identical():
    learner, frozen = BigramPolicy(seed=1, name="learner"), _frozen(2)
    before_learner = learner.table.detach().clone()
    before_frozen = frozen.table.detach().clone()
    algo = MAGRPO(MAGRPOConfig(lr=0.05, minibatch_size=3, epochs=2))
    algo.setup({"a": learner, "b": frozen}, {})
    assert list(algo.optimizers) == ["a"] and list(algo.groups) == ["a"]
    for step in range(3):
        algo.update(_episodes(step) + _episodes(step + 10))
    assert not torch.equal(learner.table.detach(), before_learner), "the learner must move"
    assert torch.equal(frozen.table.detach(), before_frozen)
    assert frozen.table.grad is None, "no gradient ever reached the frozen policy"
    assert frozen.calls == 0, "the frozen policy was never even scored"


def test_state_round_trip_resumes_exactly_like_an_uninterrupted_run():
    cfg = MAGRPOConfig(lr=0.05, minibatch_size=3, epochs=2, warmup_steps=3)

    def team():
        return {"a": BigramPolicy(seed=1), "b": BigramPolicy(seed=2)}

    # Uninterrupted: three updates.
    policies = team()
    algo = MAGRPO(cfg)
    algo.setup(policies, {})
    for step in range(3):
        algo.update(_episodes(step) + _episodes(step + 10))
    # Interrupted after one update: weights and algorithm state saved, restored into new objects.
    first = team()
    algo1 = MAGRPO(cfg)
    algo1.setup(first, {})
    algo1.update(_episodes(0) + _episodes(10))
    state = copy.deepcopy(algo1.state_dict())
    assert state["updates"] == 1 and sorted(state["optimizers"]) == ["a", "b"]
    resumed, fresh = team(), team()
    for name in ("a", "b"):
        for p in (resumed, fresh):
            p[name].table.data.copy_(first[name].table.detach())
    algo2, algo3 = MAGRPO(cfg), MAGRPO(cfg)
    algo2.setup(resumed, {})
    algo2.load_state_dict(state)
    algo3.setup(fresh, {})  # the same weights, but optimizer moments and warmup start over
    for step in (1, 2):
        algo2.update(_episodes(step) + _episodes(step + 10))
        algo3.update(_episodes(step) + _episodes(step + 10))
    assert algo2.updates == algo.updates == 3
    for name in ("a", "b"):
        assert torch.equal(resumed[name].table, policies[name].table), name
        assert not torch.equal(fresh[name].table, policies[name].table), name
    assert algo2.schedulers["a"].get_last_lr() == algo.schedulers["a"].get_last_lr()


def test_a_checkpoint_of_another_team_is_refused():
    algo = MAGRPO()
    algo.setup({"a": BigramPolicy(), "b": _frozen(0)}, {})
    other = MAGRPO()
    other.setup({"a": BigramPolicy(), "b": BigramPolicy()}, {})
    with pytest.raises(ValueError, match="resume with the same trainable agents"):
        algo.load_state_dict(other.state_dict())


def test_shared_policy_objects_share_one_optimizer_and_metrics_are_per_policy():
    shared = BigramPolicy(seed=3)
    algo = MAGRPO(MAGRPOConfig(lr=0.05))
    algo.setup({"a": shared, "b": shared, "c": BigramPolicy(seed=4)}, {})
    assert sorted(algo.optimizers) == ["a+b", "c"]
    metrics = algo.update(_episodes(0, agents=("a", "b", "c")))
    assert metrics["a+b/num_samples"] == 8 and metrics["c/num_samples"] == 4
    assert metrics["loss"] == pytest.approx((metrics["a+b/loss"] + metrics["c/loss"]) / 2)
    assert metrics["grad_norm"] > 0


def test_team_errors_are_raised_at_setup():
    with pytest.raises(ValueError, match="at least one trainable agent"):
        MAGRPO().setup({"a": _frozen(0), "b": _frozen(1)}, {})
    with pytest.raises(ValueError, match="exactly one collaborator"):
        AgentPO().setup({"a": BigramPolicy(), "b": BigramPolicy()}, {})

    class NoScoring:
        name, trainable = "api", True

        def generate(self, conversations, sampling, contexts=None):
            return []

    with pytest.raises(TypeError, match="does not implement llm_marl.policies.TrainablePolicy"):
        MAGRPO().setup({"a": NoScoring(), "b": _frozen(0)}, {})


def test_log_probs_must_be_scored_at_the_sampling_temperature():
    from llm_marl.policies.base import SamplingParams

    policy = BigramPolicy()  # logprob_temperature 1.0
    team = {"a": policy, "b": _frozen(0)}
    frozen_sampling = SamplingParams(temperature=0.2)
    MAGRPO().setup(team, {"a": SamplingParams(temperature=1.0), "b": frozen_sampling})
    MAGRPO().setup(team, {"a": SamplingParams(temperature=0.0), "b": frozen_sampling})  # greedy
    with pytest.raises(ValueError, match="set policy.logprob_temperature = 0.7"):
        MAGRPO().setup(team, {"a": SamplingParams(temperature=0.7), "b": frozen_sampling})
    policy.logprob_temperature = 0.7
    MAGRPO().setup(team, {"a": SamplingParams(temperature=0.7), "b": frozen_sampling})


class _Reinforce(PolicyGradientAlgorithm[PGConfig]):
    """A whole new algorithm: REINFORCE on the raw episode reward, no baseline."""

    name = "reinforce"

    def build_samples(self, episodes: list[Episode]) -> dict[str, list[Sample]]:
        out: dict[str, list[Sample]] = {key: [] for key in self.groups}
        for key, (_, agents) in self.groups.items():
            for ep in episodes:
                for agent in agents:
                    traj = ep.trajectories[agent]
                    out[key] += trajectory_samples(traj, [ep.total_reward] * len(traj.turns))
        return out


def test_a_subclass_only_builds_samples():
    policy = BigramPolicy(seed=5)
    algo = _Reinforce(PGConfig(lr=0.1, max_grad_norm=None))
    algo.setup({"a": policy, "b": _frozen(6)}, {})
    rewarded = _episodes(0)[1]  # reward 1.1 for its completion
    completion = rewarded.trajectories["a"].turns[0].completion_ids
    with torch.no_grad():
        before = policy.sequence_logprobs([[0, 1]], [completion])[0].sum().item()
    metrics = algo.update([rewarded])
    with torch.no_grad():
        after = policy.sequence_logprobs([[0, 1]], [completion])[0].sum().item()
    assert after > before, "a positive return makes its completion more likely"
    assert metrics["a/optimizer_steps"] == 1 and algo.updates == 1
    with pytest.raises(KeyError, match="this run trains"):
        algo.learn({"b": []})
