"""The zoo's algorithms are selectable by name and compose with the existing losses; RAE's
baselines are checkpointed."""

from __future__ import annotations

import pytest

from llm_marl.algos import RAE, DrMASConfig, GiGPO, GiGPOConfig, RAEConfig
from llm_marl.algos.base import PolicyGradientAlgorithm
from llm_marl.algos.registry import algorithm_names, get_algorithm
from llm_marl.errors import ConfigError
from llm_marl.train.run import parse_run_config

from .helpers import single_turn_episode


def test_every_algorithm_is_registered_by_name():
    names = algorithm_names()
    for name in ("magrpo", "agentpo", "matpo", "at-grpo", "drmas", "rae", "gigpo"):
        assert name in names
    assert get_algorithm("drmas").config is DrMASConfig
    with pytest.raises(ConfigError, match="at-grpo"):
        get_algorithm("atgrpo")


def test_without_a_config_an_algorithm_takes_its_registered_configs_defaults():
    for name in algorithm_names():
        spec = get_algorithm(name)
        assert spec.algorithm().config == spec.config(), name
    # RAE's own __init__ (its baseline) still reads the config it was given.
    assert RAE(RAEConfig(decay=0.5)).baseline.decay == 0.5


def test_an_algorithm_without_a_config_type_argument_needs_a_config():
    class Unparameterised(PolicyGradientAlgorithm):
        def build_samples(self, episodes):
            return {}

    with pytest.raises(TypeError, match="Unparameterised has no default config"):
        Unparameterised()
    config = RAEConfig()
    assert Unparameterised(config).config is config


def test_a_zoo_algorithm_from_the_command_line_with_another_loss():
    config = parse_run_config(
        [
            "--algo",
            "gigpo",
            "--preset",
            "toy-rounds-linear",
            "--algorithm.step_weight",
            "0.5",
            "--algorithm.loss",
            "policy-gradient",
            "--algorithm.aggregation",
            "sequence-sum",
            "--algorithm.kl_coef",
            "0",
        ]
    )
    assert isinstance(config.algorithm, GiGPOConfig)
    assert (config.algorithm.step_weight, config.algorithm.loss) == (0.5, "policy-gradient")
    assert config.trainer.group_size == 10 and config.trainer.env_kwargs["num_rounds"] == 2
    assert isinstance(get_algorithm("gigpo").build(config.algorithm), GiGPO)
    # Every zoo algorithm has MAGRPO's toy preset, chosen automatically for its env.
    for name in ("at-grpo", "drmas", "rae", "gigpo"):
        assert parse_run_config(["--algo", name]).preset == "toy-coordination"
    with pytest.raises(ConfigError, match="decay"):
        parse_run_config(["--algo", "rae", "--algorithm.decay", "1.0"])


def test_rae_keeps_one_baseline_per_env_and_agent_across_a_checkpoint(bigram):
    algo = RAE(RAEConfig(decay=0.5))
    algo.setup({"a": bigram, "b": bigram}, {})
    algo.env_id = "coordination-v0"
    batch = [single_turn_episode(0, g, r) for g, r in enumerate([1.0, 0.0])]
    samples = algo.build_samples(batch)
    # b = 0.5 * 0 + 0.5 * mean(1, 0) = 0.25, for each agent: advantages 0.75 and -0.25.
    assert [s.advantages for s in samples["a+b"]] == [[0.75], [-0.25], [0.75], [-0.25]]
    resumed = RAE(RAEConfig(decay=0.5))
    resumed.setup({"a": bigram, "b": bigram}, {})
    resumed.load_state_dict(algo.state_dict())
    assert resumed.baseline.values == {
        ("coordination-v0", "a"): 0.25,
        ("coordination-v0", "b"): 0.25,
    }


def test_rae_keys_its_baseline_by_the_env_the_trainer_collects_from(tmp_path):
    from llm_marl.policies.base import SamplingParams
    from llm_marl.train import Trainer, TrainerConfig

    from .table_policy import TablePolicy

    algo = RAE(RAEConfig(lr=0.5, kl_coef=0.0, epochs=1))
    config = TrainerConfig(
        env="coordination-v0",
        steps=1,
        tasks_per_step=2,
        group_size=2,
        sampling=SamplingParams(max_new_tokens=1, temperature=1.0),
        output_dir=str(tmp_path),
        progress=False,
        console=False,
    )
    policies = {"left": TablePolicy("left"), "right": TablePolicy("right")}
    Trainer(algo, policies, config).train_step(0)
    assert set(algo.baseline.values) == {("coordination-v0", "left"), ("coordination-v0", "right")}
