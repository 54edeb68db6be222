"""``llm-marl train`` with a sharded learner: one process per rank, launched by ``torchrun``.

With ``policies.world_size N > 1``, ``torchrun --nproc-per-node N -m llm_marl.cli train ...``
starts N copies of the command; :func:`~llm_marl.train.run.run` then, on every rank:

1. joins the process group from torchrun's environment (:func:`init_learner_group`: gloo on
   CPU, NCCL on CUDA, one GPU per local rank);
2. builds the policies as a single process would, copies rank 0's trainable weights to the
   other ranks, and shards each trainable policy with
   :func:`~llm_marl.policies.sharded.shard_policy` (:func:`shard_learners`). Rank 0 also
   keeps an unsharded copy of each trainable policy as its generation engine
   (:class:`SamplerEngine`), the way a vLLM engine serves a trainable policy;
3. trains with :class:`ShardedTrainer`: rank 0 plays each step's rollouts with its samplers
   and broadcasts them (``broadcast_object_list``); every rank runs the same update (the
   update gives each rank a slice of every pass and sums the normalisers, see
   :mod:`llm_marl.algos.update`); then the samplers are refreshed from the sharded weights,
   streamed one parameter at a time (:func:`~llm_marl.policies.sharded.push_weights`).

Only rank 0 evaluates, logs, plots and checkpoints; its checkpoints hold the consolidated
weights (the samplers' copies) and no optimizer state, so ``--trainer.resume`` is refused for
a sharded run. Sampling on rank 0 uses the same weights and seeds as a single process, so
the run equals the single-process run of the same config up to float rounding.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.errors import ConfigError
from llm_marl.policies.sharded import ShardingConfig, push_weights, shard_policy
from llm_marl.train.trainer import Trainer, _env_name

if TYPE_CHECKING:
    import torch

    from llm_marl.policies.base import Policy, SamplingParams
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.train.models import PoliciesConfig

__all__ = [
    "LearnerGroup",
    "SamplerEngine",
    "ShardedTrainer",
    "check_launch",
    "init_learner_group",
    "join_learner_group",
    "rank_output_dir",
    "shard_learners",
]


@dataclass(frozen=True)
class LearnerGroup:
    """This process's place in the sharded learner."""

    rank: int
    world_size: int
    local_rank: int
    device: str | None
    """The device this rank trains on (``cuda:LOCAL_RANK`` on GPUs; else the configured one)."""


def check_launch(world_size: int) -> tuple[int, int, int]:
    """``(rank, world size, local rank)`` from torchrun's environment, checked against the
    config's ``world_size``; a one-line :class:`ConfigError` when it was not launched so."""
    env = os.environ
    how = (
        f"launch it with `torchrun --nproc-per-node {world_size} -m llm_marl.cli train ...` "
        "(see docs/guides/scaling.md)"
    )
    if "RANK" not in env or "WORLD_SIZE" not in env:
        raise ConfigError(
            f"policies.world_size={world_size} trains one process per rank, but this process "
            f"was not started by torchrun (no RANK / WORLD_SIZE in the environment): {how}"
        )
    launched = int(env["WORLD_SIZE"])
    if launched != world_size:
        raise ConfigError(
            f"policies.world_size={world_size} but torchrun started {launched} processes: {how}"
        )
    return int(env["RANK"]), launched, int(env.get("LOCAL_RANK", env["RANK"]))


def init_learner_group(config: PoliciesConfig) -> LearnerGroup:
    """This rank's :class:`LearnerGroup` from torchrun's environment (on CUDA: selects GPU
    ``LOCAL_RANK``). The process group is joined later, by :func:`join_learner_group`."""
    import torch

    rank, world_size, local_rank = check_launch(config.world_size)
    device = config.device
    if device.startswith("cuda") if device else torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    return LearnerGroup(rank, world_size, local_rank, device)


def join_learner_group(group: LearnerGroup) -> None:
    """Join the default process group torchrun describes (NCCL on CUDA, else gloo).

    Called after the models are built: ``transformers``' ``save_pretrained`` writes nothing
    on a rank other than 0 once a process group exists, and every rank builds its models.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        cuda = group.device is not None and group.device.startswith("cuda")
        dist.init_process_group("nccl" if cuda else "gloo")


def rank_output_dir(rank: int) -> str | None:
    """Where a rank other than 0 writes what the loop writes (a throwaway directory): only
    rank 0 writes the run's outputs. ``None`` for rank 0."""
    return None if rank == 0 else tempfile.mkdtemp(prefix=f"llm-marl-rank{rank}-")


class SamplerEngine:
    """Rank 0's generation engine for a sharded policy: an unsharded copy of its model.

    It samples as the policy would on one process (same weights, same seed per call), and
    :meth:`sync_weights` copies the sharded policy's weights in, gathered one parameter at a
    time.
    """

    pads_rows = True
    """It returns ``transformers.generate``'s rows, padding included (see ``_pads_rows``)."""

    def __init__(self, sampler: HFPolicy) -> None:
        self.sampler = sampler

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The sampler's ``generate`` (``sampling.seed`` is the policy's draw)."""
        return self.sampler._generate_ids(prompts, sampling)

    def sync_weights(self, policy: HFPolicy) -> None:
        """Load the sharded policy's current weights into the sampler (collective)."""
        push_weights(policy, self._load)

    def _load(self, stream: Iterable[tuple[str, torch.Tensor]]) -> None:
        import torch

        from llm_marl.policies.sharded import full_weights

        # full_weights of an unsharded policy yields its own parameters (detached views).
        targets = dict(full_weights(self.sampler))
        with torch.no_grad():
            for name, tensor in stream:
                targets[name].copy_(tensor)


class _GatherOnly:
    """A rank other than 0's stand-in engine: it only takes part in the weight gathers."""

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        raise RuntimeError("only rank 0 samples in a sharded learner")

    def sync_weights(self, policy: HFPolicy) -> None:
        push_weights(policy, None)


def shard_learners(
    policies: Mapping[str, Policy], config: PoliciesConfig, group: LearnerGroup
) -> dict[str, Policy]:
    """Shard every distinct trainable policy over the default group, in place.

    Rank 0's weights (after the format warm-up) are broadcast first, so every rank shards the
    same model; rank 0 keeps an unsharded copy as the policy's :class:`SamplerEngine`.
    Returns ``policies``.
    """
    import torch.distributed as dist

    from llm_marl.policies.hf import HFPolicy

    seen: set[int] = set()
    for agent, policy in policies.items():
        if not policy.trainable or id(policy) in seen:
            continue
        seen.add(id(policy))
        if not isinstance(policy, HFPolicy):
            raise ConfigError(f"agent {agent!r}: only HF policies can be sharded")
        for model in (policy.model, policy.reference_model):
            if model is not None:
                for tensor in [*model.parameters(), *model.buffers()]:
                    dist.broadcast(tensor.data, src=0)
        engine: Any = _GatherOnly()
        if group.rank == 0:
            sampler = HFPolicy(
                copy.deepcopy(policy._base),
                policy.tokenizer,
                name=policy.name,
                chat_template_kwargs=policy.chat_template_kwargs,
                prompt_mode=policy.prompt_mode,
            )
            sampler.share_prompts = policy.share_prompts
            engine = SamplerEngine(sampler)
        shard_policy(policy, ShardingConfig(mixed_precision=config.mixed_precision))
        # The Trainer's sync_samplers() loads the sharded weights into it before the first
        # rollout and after every update (a collective: every rank calls it).
        policy.generation_engine = engine
    return dict(policies)


class _Consolidated:
    """What rank 0's checkpoint saves of a sharded policy: its sampler's full weights (equal
    to the sharded ones after every sync) and the policy's KL reference."""

    trainable = True

    def __init__(self, sampler: HFPolicy, reference_model: Any) -> None:
        self.sampler = sampler
        self.reference_model = reference_model

    def save(self, path: str | os.PathLike[str]) -> None:
        self.sampler.save(path)


class ShardedTrainer(Trainer):
    """The :class:`Trainer` of a sharded learner: rank 0 plays, every rank updates.

    Every rank runs the same loop. Rank 0 collects each step's rollouts and broadcasts them;
    the update is collective; only rank 0 evaluates and checkpoints (the other ranks' loop
    writes into a throwaway ``output_dir``, see :func:`rank_output_dir`).
    """

    def __init__(self, *args: Any, group: LearnerGroup, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group = group

    def play_step(self, step: int) -> list[Any]:
        """Rank 0's rollouts of step ``step``, on every rank."""
        import torch.distributed as dist

        box = [super().play_step(step) if self.group.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return list(box[0] or [])

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """Rank 0's evaluation (its samplers play); other ranks get ``{}``."""
        return super().evaluate(*args, **kwargs) if self.group.rank == 0 else {}

    def save_checkpoint(self) -> Path:
        """Rank 0 writes the consolidated weights (its samplers' copies, synced after every
        update) and no optimizer state; other ranks write nothing."""
        from llm_marl.policies.quiet import quiet_transformers
        from llm_marl.train.checkpoint import save_checkpoint

        if self.group.rank != 0:
            return self.output_dir
        views: dict[int, Any] = {}  # one per policy object: agents sharing it share a key
        for policy in self.policies.values():
            engine = getattr(policy, "generation_engine", None)
            if isinstance(engine, SamplerEngine) and id(policy) not in views:
                reference = getattr(policy, "reference_model", None)
                views[id(policy)] = _Consolidated(engine.sampler, reference)
        policies = {a: views.get(id(p), p) for a, p in self.policies.items()}
        extra = {
            "algorithm": self.algorithm.name,
            "env": _env_name(self.env),
            "sharded_learner": self.group.world_size,
        }
        with quiet_transformers():
            return save_checkpoint(
                self.output_dir, self.step, policies, {}, extra, keep=self.config.keep_checkpoints
            )
