"""TrainerConfig.share_frozen: the AgentPO critic preset's one-draft-per-group rollouts."""

from __future__ import annotations

import itertools

import pytest

from llm_marl.algos import AgentPO, AgentPOConfig
from llm_marl.errors import ConfigError
from llm_marl.policies.base import SamplingParams, ScriptedPolicy
from llm_marl.policies.hf import HFPolicy
from llm_marl.rollout import group_episodes
from llm_marl.train import preset_config
from llm_marl.train.run import build_policies
from llm_marl.train.trainer import Trainer, TrainerConfig

TASKS = [
    {"task_id": "a", "problem": "What is 2 + 3?", "answer": "5"},
    {"task_id": "b", "problem": "What is 7 - 4?", "answer": "3"},
]


class SamplingActor(ScriptedPolicy):
    """A frozen actor whose every answer differs (as a sampler's would); counts its rows."""

    def __init__(self) -> None:
        counter = itertools.count()
        super().__init__(lambda conv: f"\\boxed{{{next(counter)}}}", name="actor")
        self.rows: list[int] = []

    def generate(self, conversations, sampling, contexts=None):
        self.rows.append(len(conversations))
        return super().generate(conversations, sampling, contexts)


def test_the_critic_preset_shares_the_frozen_actor_and_the_hint_preset_does_not():
    assert preset_config("agentpo", "agentpo-math-critic").trainer.share_frozen == ("actor",)
    assert preset_config("agentpo", "agentpo-math-hint").trainer.share_frozen == ()
    assert TrainerConfig().share_frozen == ()


@pytest.mark.parametrize("share", [(), ("actor",)])
def test_a_training_step_drafts_once_per_task_when_the_actor_is_shared(algo_lm_path, share):
    actor = SamplingActor()
    critic = HFPolicy(algo_lm_path, trainable=True, name="critic", seed=0)
    config = TrainerConfig(
        env="math_critic-v0",
        env_kwargs={"tasks": TASKS},
        eval_env_kwargs={"tasks": TASKS},
        group_size=4,
        tasks_per_step=2,
        sampling=SamplingParams(max_new_tokens=4, temperature=1.0),
        share_frozen=share,
        progress=False,
        console=False,
        plot=False,
    )
    seen = []
    algorithm = AgentPO(AgentPOConfig(collaborator="critic"))
    update = algorithm.update
    algorithm.update = lambda episodes: seen.extend(episodes) or update(episodes)  # type: ignore[method-assign]
    with pytest.warns(UserWarning, match="training tasks"):
        trainer = Trainer(algorithm, {"actor": actor, "critic": critic}, config)
    trainer.train_step(0)
    assert actor.rows[0] == (2 if share else 8), "draft rows: N with sharing, N * G without"
    drafts = [{e.trajectories["actor"].turns[0].text for e in g} for g in group_episodes(seen)]
    assert [len(d) for d in drafts] == ([1, 1] if share else [4, 4])
    # Evaluation never shares (it estimates the team's reward from independent episodes).
    actor.rows.clear()
    trainer.evaluate(group_size=2)
    assert actor.rows[0] == 2 * 2


def test_the_trainer_refuses_a_trainable_shared_agent_at_construction(algo_lm_path):
    critic = HFPolicy(algo_lm_path, trainable=True, name="critic", seed=0)
    with pytest.raises(ValueError, match="trainable agents \\['critic'\\]"):
        Trainer(
            AgentPO(),
            {"actor": SamplingActor(), "critic": critic},
            TrainerConfig(env="math_critic-v0", share_frozen=("critic",)),
        )


def test_a_run_refuses_sharing_a_non_frozen_agent_before_building_a_model(tmp_path):
    config = preset_config(
        "agentpo",
        "agentpo-math-critic",
        {"trainer": {"share_frozen": ["critic"], "output_dir": str(tmp_path)}},
    )
    with pytest.raises(ConfigError, match="not frozen agents of this run"):
        build_policies(config)
    assert not (tmp_path / "models").exists()
