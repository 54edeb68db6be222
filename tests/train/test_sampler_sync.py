"""The Trainer pushes new weights to every trainable policy's sampler: ``after_update()`` after
each update, and before the first rollout of a run (fresh or resumed), so that a separate
sampler (a vLLM engine) never samples from stale weights. The vLLM side is in
tests/vllm/test_trainer_vllm.py."""

from __future__ import annotations

import importlib.util

import pytest

from llm_marl.algos import get_algorithm
from llm_marl.cli import main
from llm_marl.train import Trainer, build_policies, preset_config


def _trainer(tmp_path, events, **trainer):
    config = preset_config(
        "magrpo",
        "toy-coordination",
        {
            "trainer": {
                "output_dir": str(tmp_path),
                "group_size": 2,
                "tasks_per_step": 2,
                "eval_tasks": 2,
                "progress": False,
                "console": False,
                "plot": False,
                **trainer,
            },
            "policies": {"format_warmup_steps": 0},
        },
    )
    policies = build_policies(config)
    for agent, policy in policies.items():
        generate = policy.generate

        def recorded(*args, _agent=agent, _generate=generate, **kwargs):
            events.append(("generate", _agent))
            return _generate(*args, **kwargs)

        policy.generate = recorded
        policy.after_update = lambda _agent=agent: events.append(("sync", _agent))
    algorithm = get_algorithm("magrpo").build(config.algorithm)
    update = algorithm.update

    def recorded_update(episodes):
        events.append(("update", None))
        return update(episodes)

    algorithm.update = recorded_update
    return Trainer(algorithm, policies, config.trainer)


def _synced_before_each_rollout(events):
    """Every ``update`` and the run's start are followed by a sync of each agent before the
    next generate call."""
    pending = {"left", "right"}  # the start: nothing synced yet
    for kind, agent in events:
        if kind == "update":
            pending = {"left", "right"}
        elif kind == "sync":
            pending.discard(agent)
        elif pending:
            return False
    return True


def test_every_update_is_followed_by_a_sync_before_the_next_rollout(tmp_path):
    events: list = []
    _trainer(tmp_path, events, steps=3).train()
    assert [k for k, _ in events].count("update") == 3
    assert _synced_before_each_rollout(events), events


def test_a_resumed_run_syncs_the_loaded_weights_before_its_first_rollout(tmp_path):
    _trainer(tmp_path, [], steps=2, save_every=1).train()
    events: list = []
    _trainer(tmp_path, events, steps=3, resume=True).train()
    assert [k for k, _ in events].count("update") == 1
    assert events[:2] == [("sync", "left"), ("sync", "right")], events
    assert _synced_before_each_rollout(events), events


def test_the_vllm_backend_without_vllm_is_one_line(tmp_path, capsys):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: tests/vllm/test_trainer_vllm.py trains with it")
    argv = ["train", "--output-dir", str(tmp_path), "--policies.backend", "vllm"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "policies.backend 'vllm' needs vLLM" in err and err.count("\n") == 1
