"""The Ray executor against a real local cluster (one for the whole module, started and stopped
here): the same episodes as the local executor, a toy run with the same metrics, faults, weight
sync, shutdown."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray
import torch

from llm_marl.algos import MAGRPO
from llm_marl.cli import main
from llm_marl.distributed import RayExecutor, RayResources
from llm_marl.distributed.learner import LearnerSharding, LearnerSpec
from llm_marl.envs.registration import make
from llm_marl.errors import ConfigError, TrainingError
from llm_marl.policies.base import Completion, SamplingParams, ScriptedPolicy
from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.sharded import ShardingConfig
from llm_marl.rollout import collect
from llm_marl.rollout.types import Episode
from llm_marl.train.trainer import Trainer, TrainerConfig

SAMPLING = SamplingParams(max_new_tokens=6, temperature=1.0)
TASKS = [{"task_id": f"t{t}", "target": t % 3} for t in range(4)]
# Two env workers and one or two engines on two logical CPUs.
HALF = {"cpus_per_env_worker": 0.5, "cpus_per_engine": 0.5}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    # Actors unpickle this module's helpers by value (tests/ is not importable from them).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=200 * 1024**2,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    yield
    ray.shutdown()


def _fingerprint(ep: Episode) -> tuple:
    """Ids, text, tokens and rewards of an episode (log-probs: see :func:`_assert_same`)."""
    turns = tuple(
        (t.agent, t.step, t.text, tuple(t.prompt_ids), tuple(t.completion_ids))
        for traj in ep.trajectories.values()
        for t in traj.turns
    )
    return (ep.task_id, ep.task_index, ep.group_index, ep.group_id, turns, tuple(ep.step_rewards))


def _logprobs(episodes: list[Episode]) -> list[float]:
    return [
        x
        for e in episodes
        for tr in e.trajectories.values()
        for t in tr.turns
        for x in t.logprobs or ()
    ]


def _assert_same(got: list[Episode], want: list[Episode]) -> None:
    """Token for token and reward for reward; log-probs up to float rounding, because an
    engine's batch may hold other rows than the local call's and CPU matmul kernels round
    differently for another batch shape (each row's sample, drawn from its own seed, stays)."""
    assert [_fingerprint(e) for e in got] == [_fingerprint(e) for e in want]
    assert _logprobs(got) == pytest.approx(_logprobs(want), rel=1e-5, abs=1e-6)


def _collect(policies, executor=None, env: Any = "coordination-v0", seed: int = 3) -> list[Episode]:
    return collect(
        env,
        policies,
        TASKS,
        group_size=2,
        sampling=SAMPLING,
        seed=seed,
        progress=False,
        executor=executor,
    )


# ---------------------------------------------------------------------------------- (a) + (d)


def _perturb(policy: HFPolicy, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            if p.ndim == 2:
                p.add_(torch.randn(p.shape, generator=gen) * 0.5)


@pytest.mark.slow  # Ray actors; 254 (as two tests) s in the fast loop at load 17 (#22)
def test_ray_collect_equals_local_and_weight_syncs_reach_the_engines(tiny_lm_path, tmp_path):
    # One executor for both proofs (actor starts dominate this module's time).
    lora = HFPolicy.shared_lora(tiny_lm_path, ["left"], trainable=True)["left"]
    full = HFPolicy(tiny_lm_path, name="full", trainable=True)
    team = {"left": lora, "right": full}
    res = RayResources(env_workers=2, engines=1, full_sync="gloo", **HALF)
    with RayExecutor(res) as ex:
        # (a) 2 env workers and one engine per model give the local episodes.
        before = _collect(team, ex)
        sizes = [ray.get(pool[0].batch_sizes.remote()) for pool in ex.engines]
        _assert_same(before, _collect(team))
        assert all(e.ok for e in before) and {e.task_index for e in before} == {0, 1, 2, 3}
        # Both workers' shards went through each model's one engine: 8 episodes each.
        assert [sum(n for calls in s.values() for n in calls) for s in sizes] == [8, 8]
        # (d) LoRA through the object store, full weights over gloo.
        _perturb(lora, 1)
        _perturb(full, 2)
        ex.sync_weights()
        after = _collect(team, ex)
        want = _collect(team)
        _assert_same(after, want)
        assert [_fingerprint(e) for e in want] != [_fingerprint(e) for e in before]
        assert {tuple(sorted(e.policy_versions.items())) for e in after} == {
            (("left", 1), ("right", 1))
        }
        # The filesystem fallback.
        ex.resources = dataclasses.replace(res, full_sync="files", sync_dir=str(tmp_path))
        _perturb(full, 3)
        ex.sync_weights()
        _assert_same(_collect(team, ex), _collect(team))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["p1-v2"]


# ---------------------------------------------------------------------------------- (c)


class SlowEngine:
    """An engine-served policy that, while ``slow`` exists, says it started and then waits."""

    name = "slow"
    trainable = False
    ray_engine = True

    def __init__(self, flags: str) -> None:
        self.flags = flags

    def generate(self, conversations, sampling, contexts=None) -> list[Completion]:
        if os.path.exists(os.path.join(self.flags, "slow")):
            Path(self.flags, f"generating-{os.getpid()}").touch()
            time.sleep(20)
        return [Completion(text="1") for _ in conversations]


def _slow_env(flags: str) -> Any:
    env = make("coordination-v0")
    step = env.step

    def slow_step(actions):
        Path(flags, f"stepping-{os.getpid()}").touch()
        time.sleep(20)
        return step(actions)

    env.step = slow_step
    return env


def _kill_when(flags: Path, name: str, pid: int) -> threading.Thread:
    """SIGKILL ``pid`` once it says it started ``name`` (later calls are no longer slow)."""

    def run() -> None:
        deadline = time.monotonic() + 120
        while not (flags / f"{name}-{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (flags / "slow").unlink(missing_ok=True)
        os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # Ray actors; 281 s in the fast loop at load 17 (#22)
def test_a_worker_or_engine_killed_mid_step_costs_its_episodes_only(tmp_path):
    team = {"left": SlowEngine(str(tmp_path)), "right": ScriptedPolicy(lambda c: "1")}
    with RayExecutor(RayResources(env_workers=2, engines=1, **HALF)) as ex:
        assert all(e.ok for e in _collect(team, ex))
        worker_pid = ray.get(ex.workers[0].ping.remote())
        engine_pid = ray.get(ex.engines[0][0].ping.remote())

        killer = _kill_when(tmp_path, "stepping", worker_pid)
        with pytest.warns(RuntimeWarning, match="4 of 8 episode"):
            episodes = _collect(team, ex, env=functools.partial(_slow_env, str(tmp_path)))
        killer.join()
        assert len(episodes) == 8
        lost = [e for e in episodes if not e.ok]
        assert [e.task_index for e in lost] == [0, 0, 1, 1]  # worker 0's shard
        assert all("env worker failed" in (e.error or "") for e in lost)

        (tmp_path / "slow").touch()
        killer = _kill_when(tmp_path, "generating", engine_pid)
        with pytest.warns(RuntimeWarning, match="of 8 episode"):
            episodes = _collect(team, ex)
        killer.join()
        assert len(episodes) == 8
        # The requests in flight when the engine died fail (one worker's shard, or both when
        # their requests had joined one batch); a request sent after it is served again.
        lost = [e for e in episodes if not e.ok]
        assert len(lost) in (4, 8)
        assert all("engine of 'slow' failed" in (e.error or "") for e in lost)

        # Both actors came back (new processes) and the next step is whole.
        assert all(e.ok for e in _collect(team, ex))
        assert ray.get(ex.workers[0].ping.remote()) != worker_pid
        assert ray.get(ex.engines[0][0].ping.remote()) != engine_pid


# ---------------------------------------------------------------------------------- (b)


def _metrics(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    # Wall-clock figures (time/*, cost/*/seconds) are the only ones that may differ.
    return [
        {k: v for k, v in r.items() if not k.startswith("time/") and not k.endswith("seconds")}
        for r in rows
    ]


def _checkpoint(path: Path, step: int = 2) -> dict[str, torch.Tensor]:
    """The weights and optimizer moments of a run's checkpoint of ``step``, flat."""
    from safetensors.torch import load_file

    ckpt = path / "checkpoints" / f"step-{step:06d}"
    out = {
        f"{p.parent.name}/{k}": v
        for p in sorted((ckpt / "policies").glob("*/model.safetensors"))
        for k, v in load_file(p).items()
    }
    algo = torch.load(ckpt / "algorithm.pt", weights_only=False)
    for key, opt in algo["optimizers"].items():
        for i, state in opt["state"].items():
            out |= {f"{key}/opt/{i}/{k}": torch.as_tensor(v) for k, v in state.items()}
    return out


# One policy plays both agents (one engine, one learner). The warm-up and groups of 4 give
# every step rewards that differ within a group: a step whose advantages are all zero has a zero
# gradient in one process but a rounding-sized one on sharded ranks (each rank scores its
# slice of the batch with other padding than the KL reference's pass over the whole batch), and
# AdamW turns that into lr-sized steps.
TOY = ["train", "--algo", "magrpo", "--preset", "toy-coordination", "--policies.share", "true"]
TOY += ["--group-size", "4", "--tasks-per-step", "2", "--eval-group-size", "1", "--eval-tasks", "2"]
TOY += ["--format-warmup-steps", "20", "--no-plot", "--no-progress", "--steps", "2"]
TOY += ["--save-every", "1"]  # a checkpoint after step 1 too: the resumes start there
# One env worker (the collect test covers two), one engine; learners at a quarter CPU each.
RAY = ["--executor", "ray", "--env-workers", "1", "--cpus-per-env-worker", "0.25"]
RAY += ["--cpus-per-engine", "0.25", "--learner-cpus", "0.25"]


@pytest.fixture(scope="module")
def toy_local(tmp_path_factory) -> Path:
    """The local single-process run of TOY: the reference of the learner-actor tests."""
    out = tmp_path_factory.mktemp("toy") / "local"
    assert main([*TOY, "--output-dir", str(out)]) == 0
    return out


def _resumable_copy(run: Path, to: Path) -> Path:
    """A copy of ``run`` as if it had been killed after step 1."""
    shutil.copytree(run, to)
    shutil.rmtree(to / "checkpoints" / "step-000002")
    (to / "checkpoints" / "latest").write_text("step-000001")
    return to


def _assert_rows_match(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """The same samples and rewards (exact); the numbers computed from log-probs (loss,
    ratio, kl, grad_norm) equal up to float rounding: see _assert_same."""
    assert len(got) == 3 and any("loss" in k for k in got[2])
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want):
        exact = {k for k in w if k.startswith(("reward", "eval/", "episodes", "step"))}
        assert {k: g[k] for k in exact} == {k: w[k] for k in exact}
        assert g == pytest.approx(w, rel=1e-4, abs=1e-6)


@pytest.mark.slow
def test_the_toy_preset_resumes_and_trains_on_learner_actors_with_the_local_numbers(
    toy_local, tmp_path, capsys
):
    """`llm-marl train --executor ray`: each trainable policy updates in its own learner actor;
    resumed from a checkpoint (weights and optimizer states travel to the learners) it logs
    the local rows and checkpoints the local weights and optimizer states (pulled back from
    the learners)."""
    # The Ray run resumes from the local run's step-1 checkpoint: it must log and checkpoint
    # what the uninterrupted local run did at step 2.
    remote = _resumable_copy(toy_local, tmp_path / "ray")
    assert main([*TOY, *RAY, "--resume", "--output-dir", str(remote)]) == 0
    _assert_rows_match(_metrics(remote), _metrics(toy_local))
    assert "resuming from step 1" in capsys.readouterr().out
    theirs, ours = _checkpoint(remote), _checkpoint(toy_local)
    assert sorted(theirs) == sorted(ours) and any("/opt/" in k for k in ours)
    for k, v in ours.items():
        torch.testing.assert_close(theirs[k], v, rtol=1e-4, atol=1e-6, msg=k)
    # The second step trained (else equal weights would prove nothing).
    step1 = _checkpoint(remote, 1)
    assert any(not torch.equal(step1[k], v) for k, v in theirs.items() if "/opt/" not in k)


def _weights(path: Path, step: int = 2) -> dict[str, torch.Tensor]:
    """The consolidated weights of a run's checkpoint of ``step``."""
    from safetensors.torch import load_file

    policies = path / "checkpoints" / f"step-{step:06d}" / "policies"
    return {
        f"{p.parent.name}/{k}": v
        for p in sorted(policies.glob("*/model.safetensors"))
        for k, v in load_file(p).items()
    }


@pytest.mark.slow
def test_a_sharded_learner_on_ray_trains_syncs_and_resumes_like_one_process(toy_local, tmp_path):
    """`llm-marl train --executor ray --policies.world_size 2`: the policy's learner is two
    actors that shard it with FSDP2 (gloo). Its rows and final weights are the local run's
    (the step-2 rollouts and the final evaluation sample on the engine: they match only if the
    sharded learner's step-1 weights reached it); its checkpoint holds both ranks' DCP shards;
    resumed under Ray from its step-1 checkpoint it ends with the same weights."""
    sharded = [*TOY, *RAY, "--policies.world_size", "2"]
    run = tmp_path / "ray"
    assert main([*sharded, "--output-dir", str(run)]) == 0
    _assert_rows_match(_metrics(run), _metrics(toy_local))
    ours, theirs = _weights(toy_local), _weights(run)
    assert sorted(theirs) == sorted(ours)
    # Float tolerance: each rank scores its slice of a pass (other padding, other matmul
    # shapes) and FSDP sums the ranks' gradients (another order of float additions than one
    # process's backward); AdamW's division by sqrt(v) magnifies that for elements whose
    # gradient is near zero. Measured: 8.3e-6 at most, while step 2 moved weights by up to
    # 6e-3 (lr 3e-3), so 5e-5 still fails any real difference (the torchrun test: ~1e-6).
    for k, v in ours.items():
        torch.testing.assert_close(theirs[k], v, rtol=1e-4, atol=5e-5, msg=k)
    assert any(not torch.equal(_weights(run, 1)[k], v) for k, v in theirs.items())
    # The checkpoint is a torchrun run's: both ranks' DCP shards, named in algorithm.pt.
    for step in (1, 2):
        ckpt = run / "checkpoints" / f"step-{step:06d}"
        shards = sorted(p.name for p in (ckpt / "sharded" / "left+right").iterdir())
        assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]
        algo = torch.load(ckpt / "algorithm.pt", weights_only=False)
        assert algo["optimizers"] == {"left+right": {"dcp": "sharded/left+right"}}
        assert json.loads((ckpt / "trainer.json").read_text())["sharded_learner"] == 2
    # Resumed under Ray (2 ranks again) from its step-1 checkpoint: the same continuation.
    resumed = _resumable_copy(run, tmp_path / "resumed")
    assert main([*sharded, "--resume", "--output-dir", str(resumed)]) == 0
    again = _weights(resumed)
    for k, v in theirs.items():
        torch.testing.assert_close(again[k], v, rtol=1e-5, atol=1e-6, msg=k)
    assert _metrics(resumed)[:2] == _metrics(run)[:2]
    _assert_rows_match(_metrics(resumed), _metrics(toy_local))
    # ... and in one process, with the local executor.
    single = _resumable_copy(run, tmp_path / "single")
    assert main([*TOY, "--resume", "--output-dir", str(single)]) == 0
    for k, v in ours.items():
        torch.testing.assert_close(_weights(single)[k], v, rtol=1e-4, atol=5e-5, msg=k)


class _Rank:
    """A stand-in rank of a sharded learner: it dies, or waits as in a collective."""

    def ping(self) -> int:
        return os.getpid()

    def work(self, die: bool) -> None:
        if die:
            os._exit(1)
        time.sleep(600)


@pytest.mark.slow  # two bare actors on the module's cluster: a few seconds
def test_a_dead_rank_stops_the_step_in_one_line_and_takes_its_group_down():
    ranks = [ray.remote(_Rank).options(num_cpus=0.01).remote() for _ in range(2)]
    ray.get([r.ping.remote() for r in ranks])
    ex = RayExecutor()
    ex.learners = {"left": ranks}
    refs = [ranks[0].work.remote(False), ranks[1].work.remote(True)]
    with pytest.raises(TrainingError, match=r"learner of 'left' died .*--resume") as err:
        ex._learner_results("left", refs)
    assert "\n" not in str(err.value)
    # The rank that waited (it would wait in its collective until the group times out) is gone.
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(ranks[0].ping.remote(), timeout=60)


# ---------------------------------------------------------------------------------- Ctrl-C


@pytest.mark.slow  # Ray actors; 125 s in the fast loop at load 17 (#22)
def test_ctrl_c_in_training_shuts_the_actors_down(tiny_lm_path, tmp_path, monkeypatch):
    shared = HFPolicy(tiny_lm_path, name="shared", trainable=True)  # one engine, one learner
    team = {"left": shared, "right": shared}
    cfg = TrainerConfig(
        env="coordination-v0",
        steps=2,
        tasks_per_step=1,
        group_size=2,
        eval_tasks=1,
        sampling=SAMPLING,
        output_dir=str(tmp_path),
        plot=False,
        console=False,
        progress=False,
        executor="ray",
        env_workers=1,
        learner_cpus=0.25,
        **HALF,
    )
    trainer = Trainer(MAGRPO(), team, cfg)
    ex = trainer.executor
    started: list[Any] = []

    def interrupted(step: int) -> dict[str, float]:
        # Up since the first evaluation: the worker, the engine and the learner.
        started.extend([*ex.workers, *ex.engines[0], *ex.learners["left+right"]])
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert len(started) == 3 and ex.plan is None and ex.workers == [] and ex.learners == {}
    assert trainer.algorithm.learners is None  # a later local use updates in this process
    for actor in started:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.ping.remote(), timeout=60)


# ---------------------------------------------------------------------------------- errors


@pytest.mark.slow  # the module's Ray cluster starts for it: 17 s at load 8 (#22)
def test_bad_resources_are_one_line_errors_before_any_actor(tiny_policy):
    with pytest.raises(ConfigError, match="env_workers must be an int >= 1"):
        RayResources(env_workers=0)
    ex = RayExecutor(RayResources(gpus_per_engine=1, **HALF))
    with pytest.raises(ConfigError, match=r"asks for 1 GPU\(s\) .* the Ray cluster has 0"):
        ex.start({"left": tiny_policy, "right": tiny_policy})
    assert ex.workers == [] and ex.engines == []
    with pytest.raises(ConfigError, match="asks for 6 CPU") as err:
        RayExecutor(RayResources(env_workers=5)).start({"left": tiny_policy, "right": tiny_policy})
    assert "\n" not in str(err.value)
    # A sharded learner reserves one bundle per rank: 4 ranks x 1 CPU do not fit 2 CPUs.
    ex = RayExecutor(RayResources(learner_cpus=1, **HALF))
    spec = LearnerSpec("left", tiny_policy, None, None, None, None, None)
    spec.sharding = LearnerSharding(4, ShardingConfig(), checkpoint=lambda *a: None)
    ex.attach_learners([spec])
    with pytest.raises(ConfigError, match=r"asks for 5\.5 CPU\(s\) .* \+ 4 learner\(s\) x 1\)"):
        ex.start({"left": tiny_policy, "right": tiny_policy})
    assert ex.learners == {} and ex.engines == []
