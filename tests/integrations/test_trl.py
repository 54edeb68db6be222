"""The TRL integration: dataset and reward from an env whose one trainable agent remains."""

from __future__ import annotations

import json
import os

import pytest
import torch

from llm_marl.envs.base import LLMParallelEnv, Transition
from llm_marl.envs.toy.parsing import first_symbol
from llm_marl.errors import InfrastructureError
from llm_marl.integrations.trl import EnvReward, env_dataset, grpo_trainer
from llm_marl.policies.base import ScriptedPolicy


def _reader(conversation) -> str:
    """A frozen listener that answers the digit written in the message (0 if none)."""
    message = conversation[-1]["content"].split("\n", 1)[0]
    digit = first_symbol(message.removeprefix("Message:"), 4)
    return str(0 if digit is None else digit)


LISTENER = {"listener": ScriptedPolicy(_reader, name="reader")}


def test_dataset_holds_the_agents_first_observation_and_the_task():
    ds = env_dataset("referential-v0", LISTENER, repeat=2)
    assert len(ds) == 8 and set(ds.column_names) == {"prompt", "task", "seed"}
    first = ds[0]
    assert first["prompt"][-1]["role"] == "user"
    assert first["prompt"][-1]["content"].startswith("Object: 0.")
    assert json.loads(first["task"]) == {"task_id": "referential/target=0", "target": 0}
    assert len(set(ds["seed"])) == 8


def test_reward_plays_the_completion_through_the_env_and_its_frozen_agents():
    reward = EnvReward("referential-v0", LISTENER)
    tasks = [json.dumps({"task_id": f"referential/target={k}", "target": k}) for k in (2, 3, 1)]
    completions = [
        [{"role": "assistant", "content": "it is 2"}],  # conversational, as TRL passes them
        "no digit here",  # listener falls back to 0: valid but wrong
        "1",
    ]
    assert reward(prompts=[None] * 3, completions=completions, task=tasks) == pytest.approx(
        [1.0, 0.2, 1.0]
    )
    success = EnvReward("referential-v0", LISTENER, component="success")
    assert success(prompts=[None], completions=["9"], task=tasks[:1]) == [0.0]
    assert success.__name__ == "llm_marl_success"


def test_an_env_with_two_agents_left_is_refused():
    with pytest.raises(ValueError, match="still has agents"):
        EnvReward("referential-v0")
    with pytest.raises(ValueError, match="no 'task' column"):
        EnvReward("referential-v0", LISTENER)(prompts=[], completions=[])


class _Solo(LLMParallelEnv):
    """One agent: "good" scores 1, "again" must act a second time, "crash" finds the grader
    down (an infrastructure failure), anything else scores 0."""

    metadata = {"name": "solo-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    possible_agents = ["solo"]

    def default_tasks(self):
        return [{"task_id": "t0"}]

    def setup_episode(self, task):
        self.say("solo", "go")
        self.set_active(["solo"])

    def transition(self, actions):
        action = actions["solo"]
        if action == "crash":
            raise InfrastructureError("grader unreachable")
        if action == "again":
            self.say("solo", "again")
            self.set_active(["solo"])
            return Transition()
        return Transition(reward=float(action == "good"), done=True)


def test_multi_turn_agents_are_refused_with_advice():
    reward = EnvReward(_Solo)
    with pytest.raises(ValueError, match="must act again"):
        reward.play({"task_id": "t0"}, "again")


def test_an_infrastructure_failure_gives_no_reward_rather_than_a_wrong_one():
    reward = EnvReward(_Solo)
    task = json.dumps({"task_id": "t0"})
    # None is TRL's "no reward for this sample"; 0.0 would punish the model for the outage.
    assert reward(prompts=[None] * 3, completions=["good", "crash", "bad"], task=[task] * 3) == [
        1.0,
        None,
        0.0,
    ]


@pytest.mark.slow  # among the 9 slowest of the fast loop (issue 22)
def test_grpo_trainer_trains_the_agent_on_the_env_reward(tmp_path, tiny_lm_path):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_lm_path, dtype=torch.float32)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=4,
        learning_rate=1e-2,
        beta=0.0,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        seed=0,
    )
    trainer = grpo_trainer("referential-v0", model, args, frozen=LISTENER, repeat=2)
    trainer.train()
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logged) == 2
    # The env's reward reached TRL: format 0.2 always (the reader answers a digit), plus 0.8 on
    # success, so every logged mean lies in [0.2, 1.0].
    assert all(0.2 - 1e-6 <= row["reward"] <= 1.0 + 1e-6 for row in logged)
    after = model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
