"""The Ray executor's parts that need no cluster: resource checks (one-line errors before any
actor), shards, the stale-episode refusal and the engines' micro-batcher."""

from __future__ import annotations

import threading

import pytest

from llm_marl.algos import Algorithm
from llm_marl.cli import main
from llm_marl.distributed.engine import MicroBatcher
from llm_marl.distributed.executor import RayExecutor, _shards
from llm_marl.distributed.learner import LearnerSharding, LearnerSpec
from llm_marl.distributed.recipes import plan
from llm_marl.distributed.resources import RayResources, check_cluster
from llm_marl.errors import ConfigError
from llm_marl.policies.base import Completion, SamplingParams, ScriptedPolicy
from llm_marl.policies.sharded import ShardingConfig
from llm_marl.rollout.types import Episode
from llm_marl.train.trainer import TrainerConfig, learner_specs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env_workers": 0}, "env_workers must be an int >= 1"),
        ({"engines": 0}, "engines must be an int >= 1"),
        ({"gpus_per_engine": -1}, "gpus_per_engine must be"),
        ({"address": "nowhere"}, "ray_address must be 'auto' or 'HOST:PORT'"),
        ({"engine_backend": "vllm"}, "needs gpus_per_engine > 0"),
        ({"full_sync": "nccl"}, "full_sync must be"),
        ({"learner": "gpu"}, "learner must be 'actor' or 'driver'"),
        ({"learner_cpus": -1}, "learner_cpus must be"),
    ],
)
def test_bad_resources_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RayResources(**kwargs)


def test_the_cluster_check_names_what_is_missing():
    with pytest.raises(ConfigError, match=r"asks for 2 GPU\(s\) \(2 engine\(s\)"):
        check_cluster(RayResources(engines=1, gpus_per_engine=1), 2, {"CPU": 8.0, "GPU": 1.0})
    with pytest.raises(ConfigError, match=r"asks for 5 CPU\(s\)"):
        check_cluster(RayResources(env_workers=4), 1, {"CPU": 4.0})
    check_cluster(RayResources(engines=2, gpus_per_engine=0.5), 1, {"CPU": 4.0, "GPU": 1.0})
    # One learner actor per trainable policy counts too.
    with pytest.raises(ConfigError, match=r"asks for 2 GPU\(s\) .* \+ 2 learner\(s\) x "):
        check_cluster(RayResources(learner_gpus=1), 1, {"CPU": 8.0, "GPU": 1.0}, learners=2)
    with pytest.raises(ConfigError, match=r"asks for 5 CPU\(s\) .* \+ 2 learner\(s\) x 1\)"):
        check_cluster(RayResources(), 1, {"CPU": 4.0}, learners=2)


def test_learner_actors_need_a_policy_gradient_algorithm():
    class Own(Algorithm):
        def update(self, episodes):
            return {}

    with pytest.raises(ConfigError, match="Own updates its own way: set learner='driver'"):
        learner_specs(Own())
    ex = RayExecutor()
    with pytest.raises(ConfigError, match="learner actors train HFPolicy objects"):
        ex.attach_learners([LearnerSpec("left", object(), None, None, None, None, None)])  # type: ignore[arg-type]


def test_train_refuses_bad_resources_in_one_line_before_ray(capsys, tmp_path):
    argv = ["train", "--executor", "ray", "--env-workers", "0", "--output-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "env_workers must be an int >= 1" in err, err
    with pytest.raises(ConfigError, match="executor must be 'local' or 'ray'"):
        TrainerConfig(executor="spark")  # type: ignore[arg-type]
    TrainerConfig(env_workers=0)  # the ray fields are not read by the local executor


def test_shards_are_contiguous_and_balanced():
    assert _shards(5, 2) == [(0, 3), (3, 5)]
    assert _shards(1, 3) == [(0, 1), (1, 1), (1, 1)]


def test_a_stale_episode_is_refused():
    team = {"a": ScriptedPolicy(lambda c: "x"), "b": ScriptedPolicy(lambda c: "y")}
    ex = RayExecutor()
    ex.plan = plan(team)
    ex.versions = {"p0": 3, "p1": 0}
    fresh = Episode("t", 0, 0, {}, policy_versions={"a": 3})
    stale = Episode("t", 0, 1, {}, policy_versions={"a": 2})
    ex._refuse_stale([fresh, stale])
    assert fresh.ok and not stale.ok
    assert "stale episode: agent 'a' sampled with weights version 2, the learner is at 3" in (
        stale.error or ""
    )


class _Recorder:
    name = "rec"
    trainable = False

    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[int, ...] | None]] = []

    def generate(self, conversations, sampling, contexts=None):
        self.calls.append((len(conversations), sampling.request_seeds))
        return [Completion(text=c[-1]["content"]) for c in conversations]


def test_the_micro_batcher_joins_seeded_requests_only():
    policy = _Recorder()
    batcher = MicroBatcher(policy, wait_s=0.5)
    seeded = SamplingParams(request_seeds=(1,))
    out: dict[str, list[Completion]] = {}

    def ask(tag: str, sampling: SamplingParams) -> None:
        out[tag] = batcher.submit([[{"role": "user", "content": tag}]], sampling, [None])

    threads = [
        threading.Thread(target=ask, args=("a", seeded)),
        threading.Thread(target=ask, args=("b", SamplingParams(request_seeds=(2,)))),
        threading.Thread(target=ask, args=("c", SamplingParams())),  # unseeded: alone
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {tag: [c.text for c in cs] for tag, cs in out.items()} == {
        "a": ["a"],
        "b": ["b"],
        "c": ["c"],
    }
    # a and b in one call (seeds in arrival order), c alone.
    assert sorted(n for n, _ in policy.calls) == [1, 2]
    assert {seeds for _, seeds in policy.calls} in ({(1, 2), None}, {(2, 1), None})


def test_one_engine_pool_serves_a_frozen_agent_for_every_trainable_one(tiny_lm_path):
    """Engines are per model, not per agent: two trainable LoRA adapters share one base's
    pool, and one frozen policy object playing two seats is one policy on one pool."""
    from llm_marl.policies.hf import HFPolicy

    lora = HFPolicy.shared_lora(tiny_lm_path, ["a", "b"], trainable=True)
    frozen = HFPolicy(tiny_lm_path, name="judge")
    p = plan({"a": lora["a"], "b": lora["b"], "c": frozen, "d": frozen})
    assert p.keys == {"a": "p0", "b": "p1", "c": "p2", "d": "p2"}
    assert p.pool_of == {"p0": 0, "p1": 0, "p2": 1}
    assert [[e.key for e in r.entries] for r in p.recipes] == [["p0", "p1"], ["p2"]]
    assert [e.trainable for e in p.recipes[0].entries + p.recipes[1].entries] == [
        True,
        True,
        False,
    ]


@pytest.mark.parametrize(
    ("sender", "receivers", "backend"),
    [
        ("cuda", ["cuda", "cuda:1"], "nccl"),
        ("cuda:0", ["cpu"], "gloo"),
        ("cpu", ["cuda"], "gloo"),
        ("cuda", ["cuda", "cpu"], "gloo"),
        ("cpu", ["cpu"], "gloo"),
    ],
)
def test_the_sync_group_is_nccl_only_between_cuda_ends(sender, receivers, backend):
    from llm_marl.distributed.weights import sync_backend, sync_device

    assert sync_backend(sender, receivers) == backend
    assert sync_device(backend) == ("cuda" if backend == "nccl" else "cpu")


def test_a_sharded_learner_under_ray_refuses_what_it_does_not_do_in_one_line(
    capsys, tmp_path, tiny_policy
):
    base = ["train", "--executor", "ray", "--policies.world_size", "2"]
    base += ["--output-dir", str(tmp_path)]
    for extra, message in [
        (["--learner", "driver"], "set trainer.learner actor"),
        (["--policies.backend", "vllm"], "policies.backend vllm is not wired"),
    ]:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    ex = RayExecutor(RayResources(learner_gpus=0.5))
    spec = LearnerSpec("left", tiny_policy, None, None, None, None, None)
    spec.sharding = LearnerSharding(2, ShardingConfig(), checkpoint=lambda *a: None)
    with pytest.raises(ConfigError, match="ranks each need whole GPUs"):
        ex.attach_learners([spec])
