"""What a Ray run asks of the cluster: one :class:`RayResources`, checked before any actor starts.

Plain data with no Ray import, so that configs (``TrainerConfig``) can hold and validate it on a
core install. :func:`check_cluster` compares it with what a running cluster offers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from llm_marl.checks import check_int, check_number
from llm_marl.errors import ConfigError

FullSync = Literal["auto", "gloo", "files"]
EngineBackend = Literal["hf", "vllm"]
LearnerPlace = Literal["actor", "driver"]


@dataclass(frozen=True)
class RayResources:
    """Actors and what each one reserves (see ``docs/guides/scaling.md``)."""

    address: str | None = None
    """``None``: start a local cluster in this process; ``"auto"``: join the cluster that
    ``ray start`` runs on this machine; ``"HOST:PORT"``: a head node's address."""
    env_workers: int = 2
    """Env worker actors; each plays a contiguous shard of every ``collect`` call's groups."""
    engines: int = 1
    """Generation engine actors per model (a base model with its LoRA adapters counts once)."""
    gpus_per_engine: float = 0.0
    """GPUs each engine reserves (``0``: CPU; a fraction lets engines share a GPU)."""
    cpus_per_engine: float = 1.0
    """CPUs each engine reserves."""
    cpus_per_env_worker: float = 1.0
    """CPUs each env worker reserves (its sandboxes and graders run in its process tree)."""
    learner: LearnerPlace = "actor"
    """Where trainable policies update: ``"actor"`` (one learner actor per trainable policy,
    reserving ``learner_cpus`` / ``learner_gpus``; policy-gradient algorithms) or ``"driver"``
    (the process that runs the Trainer, as with ``executor="local"``)."""
    learner_cpus: float = 1.0
    """CPUs each learner actor reserves (one learner per trainable policy)."""
    learner_gpus: float = 0.0
    """GPUs each learner actor reserves (``0``: the learner trains on CPU)."""
    engine_backend: EngineBackend = "hf"
    """What samples inside an engine: ``"hf"`` (transformers, the learner's sampler) or
    ``"vllm"`` (a ``VLLMPolicy`` over the engine's copy of the model; needs vLLM there)."""
    full_sync: FullSync = "auto"
    """How full (non-LoRA) weights reach the engines: ``"gloo"`` (a ``torch.distributed``
    group between learner and engines), ``"files"`` (a directory every node can read), or
    ``"auto"`` (gloo, and files when the group cannot form)."""
    sync_dir: str | None = None
    """Directory for ``"files"`` weight sync (default: a temporary directory; it must be on a
    filesystem every node shares when the cluster has several nodes)."""

    def __post_init__(self) -> None:
        check_int(self.env_workers, "env_workers", 1)
        check_int(self.engines, "engines", 1)
        check_number(self.gpus_per_engine, "gpus_per_engine", 0)
        check_number(self.cpus_per_engine, "cpus_per_engine", 0)
        check_number(self.cpus_per_env_worker, "cpus_per_env_worker", 0)
        check_number(self.learner_cpus, "learner_cpus", 0)
        check_number(self.learner_gpus, "learner_gpus", 0)
        if self.learner not in ("actor", "driver"):
            raise ConfigError(f"learner must be 'actor' or 'driver', got {self.learner!r}")
        if self.engine_backend not in ("hf", "vllm"):
            raise ConfigError(f"engine_backend must be 'hf' or 'vllm', got {self.engine_backend!r}")
        if self.full_sync not in ("auto", "gloo", "files"):
            raise ConfigError(
                f"full_sync must be 'auto', 'gloo' or 'files', got {self.full_sync!r}"
            )
        if self.engine_backend == "vllm" and self.gpus_per_engine == 0:
            raise ConfigError("engine_backend='vllm' needs gpus_per_engine > 0")
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigError(f"ray_address must be 'auto' or 'HOST:PORT', got {self.address!r}")
        if self.address not in (None, "auto") and ":" not in str(self.address):
            raise ConfigError(f"ray_address must be 'auto' or 'HOST:PORT', got {self.address!r}")


def check_cluster(
    resources: RayResources, models: int, cluster: Mapping[str, float], learners: int = 0
) -> None:
    """Raise a one-line :class:`ConfigError` when ``cluster`` (``ray.cluster_resources()``)
    cannot hold the actors of ``resources`` for ``models`` engine pools and ``learners``
    learner actors."""
    r = resources
    engines = r.engines * models
    for resource, asked, terms, change in (
        (
            "GPU",
            engines * r.gpus_per_engine + learners * r.learner_gpus,
            f"{engines} engine(s) x gpus_per_engine {r.gpus_per_engine:g} + {learners} learner(s) "
            f"x learner_gpus {r.learner_gpus:g}",
            "lower engines, gpus_per_engine or learner_gpus, or add GPU nodes",
        ),
        (
            "CPU",
            engines * r.cpus_per_engine
            + r.env_workers * r.cpus_per_env_worker
            + learners * r.learner_cpus,
            f"{engines} engine(s) x {r.cpus_per_engine:g} + {r.env_workers} env worker(s) x "
            f"{r.cpus_per_env_worker:g} + {learners} learner(s) x {r.learner_cpus:g}",
            "lower env_workers or the cpus_per_* / learner_cpus fields",
        ),
    ):
        have = float(cluster.get(resource, 0.0))
        if asked > have:
            raise ConfigError(
                f"the run asks for {asked:g} {resource}(s) ({terms}) but the Ray cluster has "
                f"{have:g}: {change}"
            )
