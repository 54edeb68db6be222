"""The Ray executor: ``collect`` over env worker actors and generation engine actors.

:class:`RayExecutor` is what ``TrainerConfig(executor="ray")`` and
``evaluate(executor="ray")`` use; anything that calls :func:`~llm_marl.rollout.collect` can
pass one as ``collect(..., executor=...)``. It

* starts (or joins) a Ray cluster and checks that it can hold the actors, before starting any;
* places one engine pool per model (``engines`` actors, each with ``gpus_per_engine`` GPUs),
  ``env_workers`` env worker actors and, when the Trainer attached learners
  (:meth:`attach_learners`), one :class:`~llm_marl.distributed.learner.Learner` actor per
  trainable policy -- or, for a sharded policy (``policies.world_size N > 1``), N
  :class:`~llm_marl.distributed.sharded_learner.ShardedLearner` actors that form a
  ``torch.distributed`` group and shard it with FSDP2 -- (``learner_cpus`` / ``learner_gpus``
  per actor) with one placement group, one bundle per actor;
* runs the algorithm's updates on those learners (:meth:`run_updates`, one per policy, in
  parallel) and copies their states back to the driver's policies and optimizers before a
  checkpoint (:meth:`pull_learners`; a sharded learner's ranks also write their DCP shards
  into the checkpoint, :meth:`save_learner_shards`);
* splits each ``collect`` call's tasks (whole GRPO groups) into contiguous shards, one per env
  worker, with their global task indices, so the episodes are exactly those of a local call
  (per-request seeds, global group ids; see :mod:`llm_marl.rollout.collect`);
* after every update (:meth:`sync_weights`) sends the trainable policies' new weights to their
  engines, from the learner actor when there is one, else from the driver (LoRA through the
  object store; full weights over a group on :func:`~llm_marl.distributed.weights.sync_backend`'s
  backend, streamed one parameter at a time, files as fallback) and bumps their version; every episode records the versions it was sampled with and a stale
  episode is refused (an ``error`` episode);
* turns a worker or engine that dies mid-call into ``error`` episodes (Ray restarts the actor;
  a restarted engine gets the current weights before the next call), and shuts every actor
  down on :meth:`shutdown` (the Trainer calls it when training ends, Ctrl-C included).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from llm_marl.distributed.engine import Engine
from llm_marl.distributed.learner import Learner, LearnerInit, LearnerSpec, load_learner_state
from llm_marl.distributed.recipes import Plan, plan
from llm_marl.distributed.resources import RayResources, check_cluster
from llm_marl.distributed.sharded_learner import ShardedLearner
from llm_marl.distributed.weights import (
    adapter_state,
    open_store,
    send_full,
    sync_backend,
    sync_device,
    sync_group,
)
from llm_marl.distributed.worker import EnvWorker, Route
from llm_marl.errors import ConfigError, TrainingError
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.policies.hf import HFPolicy
from llm_marl.rollout.collect import check_task_indices, group_id, warn_if_many_failed
from llm_marl.rollout.types import Episode, Trajectory

PLACEMENT_TIMEOUT_S = 120.0
"""How long the actors' placement group may wait for room in the cluster."""
RESTART_TIMEOUT_S = 300.0
"""How long a step waits for an actor that Ray is restarting."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - the extra is missing
        raise ConfigError("executor='ray' needs Ray: pip install 'llm_marl[ray]'") from None
    return ray


class RayExecutor:
    """Runs ``collect`` on Ray actors (see the module docstring).

    Args:
        resources: what to start (defaults: a local cluster, 2 env workers, 1 CPU engine).
        batch_wait_s: how long an engine waits for other workers' requests to join a batch.
        init_kwargs: extra ``ray.init`` arguments when this executor starts the cluster
            (e.g. ``num_cpus`` in tests).
    """

    def __init__(
        self,
        resources: RayResources | None = None,
        *,
        batch_wait_s: float = 0.005,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.resources = resources or RayResources()
        self.batch_wait_s = batch_wait_s
        self.init_kwargs = dict(init_kwargs or {})
        self.plan: Plan | None = None
        self.engines: list[list[Any]] = []
        """Per engine pool, its actor handles."""
        self.workers: list[Any] = []
        self.versions: dict[str, int] = {}
        self._adapter_refs: dict[str, Any] = {}
        # The actors' constructor arguments in the object store: held for as long as the
        # actors live, because Ray rebuilds a restarted actor from them.
        self._pinned: list[Any] = []
        self._placement: Any = None
        self._started_ray = False
        self._sync_dir: str | None = None
        self.learner_specs: list[LearnerSpec] = []
        """What :meth:`attach_learners` asked for (learner actors start with the others)."""
        self.learners: dict[str, list[Any]] = {}
        """Per algorithm key (:attr:`LearnerSpec.key`), its learner actors by rank (one for an
        unsharded policy)."""
        self._learner_of: dict[str, str] = {}
        """Per plan key of a trained policy, its learner's algorithm key (the source of its
        weights)."""

    def attach_learners(self, specs: Sequence[LearnerSpec]) -> None:
        """Train the policies of ``specs`` in learner actors (started with the other actors,
        from the driver's weights and optimizer states of that moment: a resumed run's)."""
        if self.plan is not None:
            raise ConfigError("attach_learners before the executor starts")
        gpus = self.resources.learner_gpus
        for spec in specs:
            if not isinstance(spec.policy, HFPolicy):
                raise ConfigError(
                    f"learner actors train HFPolicy objects; {spec.key!r} is a "
                    f"{type(spec.policy).__name__} (set learner='driver')"
                )
            if spec.ranks > 1 and 0 < gpus < 1:
                raise ConfigError(
                    f"a sharded learner's ranks each need whole GPUs (NCCL runs one rank per "
                    f"GPU): learner_gpus {gpus:g} must be 0 or >= 1"
                )
        self.learner_specs = list(specs)

    # ------------------------------------------------------------------ lifecycle

    def start(self, policies: Mapping[str, Policy]) -> None:
        """Start the actors for ``{agent: policy}`` (once; later calls check it is the same)."""
        if self.plan is not None:
            same = plan(policies)
            if same.keys != self.plan.keys or any(
                same.policies[k] is not self.plan.policies[k] for k in same.policies
            ):
                raise ConfigError(
                    "this RayExecutor was started for other policies; use one executor per "
                    "set of policies"
                )
            return
        ray = _ray()
        r = self.resources
        if not ray.is_initialized():
            if r.address is not None:
                ray.init(address=r.address, **self.init_kwargs)
            else:
                ray.init(**{"include_dashboard": False, **self.init_kwargs})
            self._started_ray = True
        p = plan(policies)
        specs = self.learner_specs
        ranks = sum(spec.ranks for spec in specs)
        check_cluster(r, len(p.recipes), ray.cluster_resources(), learners=ranks)
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundles: list[dict[str, float]] = []
        for _ in p.recipes:
            for _ in range(r.engines):
                bundles.append({"CPU": r.cpus_per_engine, "GPU": r.gpus_per_engine})
        bundles += [{"CPU": r.learner_cpus, "GPU": r.learner_gpus} for _ in range(ranks)]
        bundles += [{"CPU": r.cpus_per_env_worker} for _ in range(r.env_workers)]
        bundles = [{k: v for k, v in b.items() if v > 0} or {"CPU": 0.001} for b in bundles]
        pg = placement_group(bundles, strategy="PACK")
        ready, _ = ray.wait([pg.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            ray.util.remove_placement_group(pg)
            raise ConfigError(
                f"the Ray cluster could not place {len(bundles)} actor(s) within "
                f"{PLACEMENT_TIMEOUT_S:.0f}s: lower env_workers / engines or free the cluster"
            )
        self._placement = pg

        def at(i: int) -> Any:
            return PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)

        engine_cls = ray.remote(Engine)
        worker_cls = ray.remote(EnvWorker)
        device = "cuda" if r.gpus_per_engine > 0 else "cpu"
        bundle = 0
        self.engines = []
        for recipe in p.recipes:
            ref = ray.put(recipe)  # one copy in the object store for all engines and restarts
            self._pinned.append(ref)
            pool = []
            for _ in range(r.engines):
                pool.append(
                    engine_cls.options(
                        num_cpus=r.cpus_per_engine,
                        num_gpus=r.gpus_per_engine,
                        max_restarts=-1,
                        max_task_retries=0,
                        max_concurrency=64,
                        scheduling_strategy=at(bundle),
                    ).remote(ref, device, r.engine_backend, self.batch_wait_s)
                )
                bundle += 1
            self.engines.append(pool)
        learner_device = self._learner_device()
        self.learners = {}
        for spec in specs:
            init = ray.put(LearnerInit.of(spec))  # one copy for every rank
            cls = ray.remote(Learner if spec.ranks == 1 else ShardedLearner)
            group = []
            for rank in range(spec.ranks):
                args = (init, learner_device) if spec.ranks == 1 else (init, learner_device, rank)
                group.append(
                    cls.options(
                        num_cpus=r.learner_cpus,
                        num_gpus=r.learner_gpus,
                        max_restarts=0,  # its state lives only there: --resume instead
                        scheduling_strategy=at(bundle),
                    ).remote(*args)
                )
                bundle += 1
            self.learners[spec.key] = group
        self._learner_of = {
            key: spec.key
            for spec in specs
            for key, policy in p.policies.items()
            if policy is spec.policy
        }
        local = ray.put(p.local)
        self._pinned.append(local)
        self.workers = [
            worker_cls.options(
                num_cpus=r.cpus_per_env_worker,
                max_restarts=-1,
                max_task_retries=0,
                scheduling_strategy=at(bundle + i),
            ).remote(local)
            for i in range(r.env_workers)
        ]
        self.plan = p
        self.versions = dict.fromkeys(p.pool_of, 0)
        # Every actor up (and its policies built) before the first call: errors show here.
        ray.get([a.ping.remote() for pool in self.engines for a in pool])
        ray.get([w.ping.remote() for w in self.workers])
        ray.get([a.ping.remote() for group in self.learners.values() for a in group])
        # Sharded learners form their torch.distributed groups (rank 0 hosts each rendezvous)
        # and shard their policies, all groups at once.
        joins = []
        for key, group in self.learners.items():
            if len(group) > 1:
                host, port = ray.get(group[0].rendezvous.remote())
                joins.append((key, [a.join.remote(host, port) for a in group]))
        for key, refs in joins:
            self._learner_results(key, refs)

    def shutdown(self) -> None:
        """Kill every actor and free the placement group; stop the cluster if this started it."""
        if self.plan is None and not self._started_ray:
            return
        ray = _ray()
        if ray.is_initialized():
            actors = [a for pool in self.engines for a in pool] + self.workers
            learners = [a for group in self.learners.values() for a in group]
            for actor in actors + learners:
                with contextlib.suppress(Exception):  # already gone
                    ray.kill(actor, no_restart=True)
            if self._placement is not None:
                with contextlib.suppress(Exception):
                    ray.util.remove_placement_group(self._placement)
            if self._started_ray:
                ray.shutdown()
        self.plan, self.engines, self.workers, self._placement = None, [], [], None
        self._pinned, self._adapter_refs = [], {}
        self.learners, self._learner_of = {}, {}
        self._started_ray = False
        if self._sync_dir is not None:
            shutil.rmtree(self._sync_dir, ignore_errors=True)
            self._sync_dir = None

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ collect

    def collect(
        self,
        env: Any,
        policies: Mapping[str, Policy],
        tasks: Sequence[dict[str, Any]] | int | None = None,
        group_size: int = 1,
        sampling: SamplingParams | Mapping[str, SamplingParams] | None = None,
        seed: int | None = 0,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        progress: bool = True,
        max_workers: int | None = None,
        on_generate: Any = None,
        raise_if_env_always_fails: bool = False,
        share_frozen: Collection[str] = (),
        task_indices: Sequence[int] | None = None,
    ) -> list[Episode]:
        """:func:`~llm_marl.rollout.collect` on the actors: same arguments, same episodes.

        ``on_generate`` is not supported (the calls happen in other processes) and ``progress``
        is ignored. Tasks given as a number (or ``None``) are drawn here, as ``collect`` does.
        """
        if on_generate is not None:
            raise ConfigError("collect(on_generate=...) is not supported with executor='ray'")
        if seed is None:
            raise ConfigError(
                "executor='ray' needs a seed: unseeded sampling would depend on how requests "
                "meet in the engines' batches"
            )
        self.start(policies)
        ray = _ray()
        assert self.plan is not None
        task_list = _task_list(env, tasks, seed, env_kwargs)
        indices = check_task_indices(task_indices, len(task_list))
        self._wait_until_up()
        self._resync_restarted_engines()
        options = {
            "group_size": group_size,
            "sampling": sampling,
            "seed": seed,
            "env_kwargs": env_kwargs,
            "max_workers": max_workers,
            "share_frozen": tuple(share_frozen),
        }
        shards = _shards(len(task_list), len(self.workers))
        calls = []
        for w, (lo, hi) in enumerate(shards):
            if lo == hi:
                continue
            routes = self._routes(w)
            ref = self.workers[w].collect.remote(
                env, self.plan.keys, routes, task_list[lo:hi], indices[lo:hi], options
            )
            calls.append((lo, hi, ref))
        episodes: list[Episode] = []
        for lo, hi, ref in calls:
            try:
                episodes += ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker died or its call failed
                message = f"env worker failed: {_last_line(exc)}"
                for ti, task in zip(indices[lo:hi], task_list[lo:hi]):
                    episodes += [
                        self._error_episode(ti, task, g, group_size, message)
                        for g in range(group_size)
                    ]
        self._refuse_stale(episodes)
        failed = [e for e in episodes if e.error is not None]
        if (
            raise_if_env_always_fails
            and len(failed) == len(episodes)
            and all(e.error and e.error.startswith("env raised") for e in failed)
        ):
            raise RuntimeError(f"every episode's env raised; first: {failed[0].error}")
        warn_if_many_failed(episodes)
        return episodes

    def _wait_until_up(self) -> None:
        """Wait for every actor to answer: one that Ray is restarting refuses calls until it
        is up again, and a step must not lose episodes to an actor that died in an earlier
        one."""
        ray = _ray()
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        for actor in [a for pool in self.engines for a in pool] + self.workers:
            while True:
                try:
                    ray.get(actor.ping.remote(), timeout=RESTART_TIMEOUT_S)
                    break
                except ray.exceptions.RayActorError as exc:
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"a Ray actor did not come back within {RESTART_TIMEOUT_S:.0f}s: "
                            f"{_last_line(exc)}"
                        ) from None
                    time.sleep(0.5)

    def _routes(self, worker: int) -> dict[str, Route]:
        assert self.plan is not None
        out = {}
        for key, pool in self.plan.pool_of.items():
            engines = self.engines[pool]
            policy = self.plan.policies[key]
            out[key] = Route(
                key,
                policy.name,
                policy.trainable,
                engines[worker % len(engines)],
                self.versions[key],
            )
        return out

    def _error_episode(
        self, ti: int, task: Mapping[str, Any], g: int, group_size: int, message: str
    ) -> Episode:
        assert self.plan is not None
        trajectories = {
            a: Trajectory(
                a,
                self.plan.policies[k].name,
                self.plan.policies[k].trainable,
            )
            for a, k in self.plan.keys.items()
        }
        return Episode(
            task_id=str(task["task_id"]),
            task_index=ti,
            group_index=g,
            group_id=group_id(ti, task["task_id"]),
            trajectories=trajectories,
            truncated=True,
            error=message,
        )

    def _refuse_stale(self, episodes: list[Episode]) -> None:
        """An episode sampled with other weights than the learner's current ones is an error."""
        assert self.plan is not None
        for ep in episodes:
            if ep.error is not None:
                continue
            for agent, version in ep.policy_versions.items():
                current = self.versions[self.plan.keys[agent]]
                if version != current:
                    ep.error = (
                        f"stale episode: agent {agent!r} sampled with weights version "
                        f"{version}, the learner is at {current}"
                    )
                    ep.truncated = True
                    break

    # ------------------------------------------------------------------ learners

    def run_updates(
        self, batches: Mapping[str, Sequence[list[Any]]], update_index: int
    ) -> dict[str, list[dict[str, float]]]:
        """Each key's updates on its learner actor, every learner at once (the algorithm's
        :meth:`~llm_marl.algos.base.PolicyGradientAlgorithm.run_updates` hands them here)."""
        ray = _ray()
        if not self.learners:
            raise RuntimeError("run_updates before the learner actors started")
        unknown = set(batches) - set(self.learners)
        if unknown:
            raise KeyError(f"no learner for {sorted(unknown)}; learners: {sorted(self.learners)}")
        # The samples go through the object store (one put per policy, read by every rank of
        # its learner), never via the actors' constructor or another copy.
        calls = {}
        for key, lists in batches.items():
            ref = ray.put(list(lists))
            calls[key] = [a.update.remote(ref, update_index) for a in self.learners[key]]
        return {key: self._learner_results(key, refs) for key, refs in calls.items()}

    def _learner_results(self, key: str, refs: list[Any]) -> Any:
        """Rank 0's result of a call made on every rank of ``key``'s learner.

        A rank that dies is a one-line :class:`TrainingError` (use ``--resume``); a rank that
        fails kills the other ranks of its group first (they would wait in a collective)."""
        ray = _ray()
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                ray.get(done[0])
        except ray.exceptions.RayError as exc:
            if len(refs) > 1:
                for actor in self.learners.get(key, []):
                    with contextlib.suppress(Exception):
                        ray.kill(actor, no_restart=True)
            if isinstance(exc, ray.exceptions.RayActorError) or len(refs) > 1:
                raise TrainingError(
                    f"the learner of {key!r} died ({_last_line(exc)}); resume the run from its "
                    "last checkpoint with --resume"
                ) from None
            raise
        return ray.get(refs[0])

    def _learner_device(self) -> str:
        return "cuda" if self.resources.learner_gpus > 0 else "cpu"

    def sharded_learner_keys(self) -> list[str]:
        """The keys of the policies trained by sharded learners (several ranks)."""
        return [s.key for s in self.learner_specs if s.ranks > 1]

    def save_learner_shards(self, paths: Mapping[str, str]) -> None:
        """Every rank of each sharded learner writes its DCP shards of the weights and
        optimizer state to ``paths[key]`` (a folder every learner node can write: the
        checkpoint being built)."""
        for key, path in paths.items():
            self._learner_results(key, [a.save_shards.remote(path) for a in self.learners[key]])

    def pull_learners(self) -> None:
        """Copy every learner's weights, optimizer and scheduler states into the driver's
        policy and optimizer objects (before a checkpoint, which saves those)."""
        if not self.learners:
            return
        for spec in self.learner_specs:
            refs = [a.state.remote() for a in self.learners[spec.key]]
            load_learner_state(spec, self._learner_results(spec.key, refs))

    # ------------------------------------------------------------------ weights

    def sync_weights(self) -> None:
        """Send every trainable engine-served policy's current weights to its engines and
        bump its version (the Trainer calls this after each update and after a resume)."""
        if self.plan is None:
            return
        for key, pool in self.plan.pool_of.items():
            policy = self.plan.policies[key]
            if not policy.trainable:
                continue
            if not isinstance(policy, HFPolicy):
                raise ConfigError(
                    f"policy {policy.name!r} is trainable but not an HFPolicy: "
                    "the Ray executor can sync only HFPolicy weights"
                )
            version = self.versions[key] + 1
            self._push(key, policy, version, self.engines[pool])
            self.versions[key] = version

    def _resync_restarted_engines(self) -> None:
        """Give an engine that Ray restarted (version 0 again) the current weights."""
        ray = _ray()
        assert self.plan is not None
        for key, pool in self.plan.pool_of.items():
            current = self.versions[key]
            if current == 0:
                continue
            held = ray.get([e.get_versions.remote() for e in self.engines[pool]])
            behind = [e for e, v in zip(self.engines[pool], held) if v[key] != current]
            if behind:
                policy = self.plan.policies[key]
                assert isinstance(policy, HFPolicy)
                self._push(key, policy, current, behind)

    def _push(self, key: str, policy: HFPolicy, version: int, engines: list[Any]) -> None:
        ray = _ray()
        # The live weights: on the learner when it has one (every rank of a sharded one takes
        # part in the gathers; rank 0 sends).
        learner = self._learner_of.get(key)
        if policy.adapter is not None:
            if learner is None:
                ref = ray.put(adapter_state(policy))
            else:
                refs = [a.weights.remote() for a in self.learners[learner]]
                self._learner_results(learner, refs)
                ref = refs[0]
            self._adapter_refs[key] = ref
            ray.get([e.load_adapter.remote(key, version, ref) for e in engines])
            return
        mode = self.resources.full_sync
        if mode in ("auto", "gloo"):
            try:
                self._push_gloo(key, policy, version, engines, learner)
                return
            except Exception as exc:
                if mode == "gloo":
                    raise
                warnings.warn(
                    f"full-weight sync over gloo failed ({_last_line(exc)}); using files",
                    RuntimeWarning,
                    stacklevel=3,
                )
        path = os.path.join(self._files_root(), f"{key}-v{version}")
        if learner is not None:
            self._learner_results(learner, [a.save.remote(path) for a in self.learners[learner]])
        else:
            policy.save(path)
        ray.get([e.load_files.remote(key, version, path) for e in engines])

    def _push_gloo(
        self, key: str, policy: HFPolicy, version: int, engines: list[Any], learner: str | None
    ) -> None:
        ray = _ray()
        tag = f"{key}-v{version}-{os.getpid()}"
        world = len(engines) + 1
        engine_device = "cuda" if self.resources.gpus_per_engine > 0 else "cpu"
        if learner is not None:  # the learner (its rank 0) is rank 0 and runs the rendezvous
            ranks = self.learners[learner]
            backend = sync_backend(self._learner_device(), [engine_device])
            host, port = ray.get(ranks[0].open_sync.remote())
            receives = [
                e.receive_full.remote(key, version, host, port, i + 1, world, tag, backend)
                for i, e in enumerate(engines)
            ]
            sends = [a.send_full.remote(tag, world, backend) for a in ranks]
            self._learner_results(learner, sends)
            ray.get(receives)
            return
        backend = sync_backend(policy.device.type, [engine_device])
        host = ray.util.get_node_ip_address()
        store = open_store(host)
        refs = [
            e.receive_full.remote(key, version, host, store.port, i + 1, world, tag, backend)
            for i, e in enumerate(engines)
        ]
        group = sync_group(host, store.port, 0, world, tag, host, backend)
        send_full(policy, group, sync_device(backend))
        ray.get(refs)
        del group, store

    def _files_root(self) -> str:
        if self.resources.sync_dir is not None:
            os.makedirs(self.resources.sync_dir, exist_ok=True)
            return self.resources.sync_dir
        if self._sync_dir is None:
            self._sync_dir = tempfile.mkdtemp(prefix="llm_marl-sync-")
        return self._sync_dir


def _shards(n: int, workers: int) -> list[tuple[int, int]]:
    """``n`` tasks in ``workers`` contiguous shards, sizes differing by at most one."""
    base, extra = divmod(n, workers)
    out, lo = [], 0
    for w in range(workers):
        hi = lo + base + (1 if w < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def _task_list(
    env: Any, tasks: Sequence[dict[str, Any]] | int | None, seed: int, env_kwargs: Any
) -> list[dict[str, Any]]:
    from llm_marl.rollout.collect import _make_one, _resolve_tasks

    if tasks is not None and not isinstance(tasks, int):
        return _resolve_tasks(None, tasks, seed)
    probe = _make_one(env, env_kwargs)
    try:
        return _resolve_tasks(probe, tasks, seed)
    finally:
        probe.close()


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[-1] if text else type(exc).__name__)[:300]
