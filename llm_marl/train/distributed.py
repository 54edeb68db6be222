"""``llm-marl train`` with a sharded learner: one process per rank, launched by ``torchrun``.

With ``policies.world_size N > 1``, ``torchrun --nproc-per-node N -m llm_marl.cli train ...``
starts N copies of the command; :func:`~llm_marl.train.run.run` then, on every rank:

1. joins the process group from torchrun's environment (:func:`init_learner_group`: gloo on
   CPU, NCCL on CUDA, one GPU per local rank);
2. builds the policies as a single process would, copies rank 0's trainable weights to the
   other ranks, and shards each trainable policy with
   :func:`~llm_marl.policies.sharded.shard_policy` (:func:`shard_learners`). Rank 0 also
   keeps an unsharded copy of each trainable policy as its generation engine
   (:class:`SamplerEngine`), the way a vLLM engine serves a trainable policy. With
   ``policies.backend vllm`` a vLLM engine over that copy samples instead
   (:func:`attach_vllm_samplers`, :class:`VLLMSamplerEngine`), built once the group is
   joined, with its worker in a process of its own (an in-process vLLM worker would take the
   process's default group, the learner's);
3. trains with :class:`ShardedTrainer`: rank 0 plays each step's rollouts with its samplers
   and broadcasts them (``broadcast_object_list``); every rank runs the same update (the
   update gives each rank a slice of every pass and sums the normalisers, see
   :mod:`llm_marl.algos.update`); then the samplers are refreshed from the sharded weights,
   streamed one parameter at a time (:func:`~llm_marl.policies.sharded.push_weights`) -- and
   on into rank 0's vLLM engines one decoder layer at a time.

Only rank 0 evaluates, logs and plots. A checkpoint holds what one process's holds -- the
consolidated weights (the samplers' copies, ``hf:``-loadable), KL references, algorithm and
RNG state -- plus each sharded policy's weights and optimizer state written by every rank with
``torch.distributed.checkpoint`` (see :class:`ShardedTrainer`). ``--trainer.resume`` continues
it on the same number of ranks, on another, or in one process; a sharded run also continues a
single-process run's checkpoint. Sampling on rank 0 uses the same weights and seeds as a single
process, so the run equals the single-process run of the same config up to float rounding
(with ``policies.backend vllm``: the single-process run with that backend; its engines sample
with per-request seeds wherever they run).
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
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
    from llm_marl.policies.vllm import VLLMPolicy
    from llm_marl.train.models import PoliciesConfig

__all__ = [
    "LearnerGroup",
    "SamplerEngine",
    "ShardedTrainer",
    "VLLMSamplerEngine",
    "attach_vllm_samplers",
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
        """Load the sharded policy's current weights (a LoRA policy: its adapter's) into the
        sampler (collective)."""
        push_weights(policy, self._load, adapter_only=policy.adapter is not None)

    def _load(self, stream: Iterable[tuple[str, torch.Tensor]]) -> None:
        import torch

        from llm_marl.policies.sharded import full_weights

        # full_weights of an unsharded policy yields its own parameters (detached views).
        adapter_only = self.sampler.adapter is not None
        targets = dict(full_weights(self.sampler, adapter_only=adapter_only))
        with torch.no_grad():
            for name, tensor in stream:
                targets[name].copy_(tensor)


class VLLMSamplerEngine(SamplerEngine):
    """Rank 0's generation engine for a sharded policy with ``policies.backend vllm``.

    A :class:`~llm_marl.policies.vllm.VLLMPolicy` samples; the unsharded copy
    (:attr:`sampler`) stays too, as the weights rank 0's checkpoints save. The engine's worker
    runs in a process of its own (``VLLMConfig.worker_process``), so the learner's process
    group stays this process's default group. :meth:`sync_weights`:

    - full fine-tuning: the sharded weights, gathered one parameter at a time, are copied into
      the sampler and streamed on into the engine one decoder layer at a time
      (:meth:`VLLMPolicy.stream_weights <llm_marl.policies.vllm.VLLMPolicy.stream_weights>`):
      rank 0 never holds more than the sampler copy plus one layer on its way;
    - LoRA: the adapter's weights are copied into the sampler's adapter, which the engine then
      saves and registers as a new ``LoRARequest``, as for one process.
    """

    pads_rows = False
    """vLLM returns each row as sampled."""

    def __init__(self, sampler: HFPolicy, engine: VLLMPolicy) -> None:
        super().__init__(sampler)
        self.engine = engine

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The engine's samples for the sampler (``sampling.seed`` is the policy's draw)."""
        return self.engine.generate_ids(self.sampler, prompts, sampling)

    def sync_weights(self, policy: HFPolicy) -> None:
        """Load the sharded policy's current weights into the sampler and the engine
        (collective: the other ranks take part in the gathers)."""
        if policy.adapter is not None:
            push_weights(policy, self._load, adapter_only=True)
            self.engine.sync_weights(self.sampler)
        else:
            push_weights(policy, self._stream)

    def _stream(self, stream: Iterable[tuple[str, torch.Tensor]]) -> None:
        from llm_marl.policies.sharded import full_weights

        targets = dict(full_weights(self.sampler))
        state = self.sampler.model.state_dict()
        self.engine.stream_weights(_copied_into(targets, stream, state))


def _copied_into(
    targets: Mapping[str, torch.Tensor],
    stream: Iterable[tuple[str, torch.Tensor]],
    state: Mapping[str, torch.Tensor],
) -> Iterator[tuple[str, torch.Tensor]]:
    """Copy each streamed tensor into ``targets[name]`` and pass the target on (the gathered
    tensor can go at once); then the entries of the sampler's ``state`` dict the stream has
    no name for: tied weights, which the stream names once (the output layer tied to the
    embedding). vLLM's layerwise reload gives a module that gets no weights its old tensors
    back, so the tied output layer must be sent under its own name too, as a checkpoint
    holds it."""
    import torch

    for name, tensor in stream:
        target = targets[name]
        with torch.no_grad():
            target.copy_(tensor)
        yield name, target
    for name, tensor in state.items():
        if name not in targets:
            yield name, tensor


def attach_vllm_samplers(
    policies: Mapping[str, Policy], config: PoliciesConfig, group: LearnerGroup
) -> list[VLLMPolicy]:
    """Rank 0 (``policies.backend vllm``): replace each sharded policy's :class:`SamplerEngine`
    by a :class:`VLLMSamplerEngine` over its sampler copy; returns the vLLM engines (to close).

    Call it after :func:`shard_learners`, so after the process group is joined: each engine's
    worker is a spawned process with its own ``torch.distributed`` world
    (``VLLMConfig.worker_process``). One engine per copy: a fully fine-tuned policy gets its
    own, the LoRA adapters over one base share one. Other ranks: nothing to do (``[]``).
    """
    from llm_marl.policies.vllm import VLLMConfig, VLLMPolicy

    if group.rank != 0:
        return []
    by_copy: dict[int, list[tuple[HFPolicy, SamplerEngine]]] = {}
    for policy in {id(p): p for p in policies.values()}.values():
        engine = getattr(policy, "generation_engine", None)
        if isinstance(engine, SamplerEngine):
            by_copy.setdefault(id(engine.sampler.model), []).append((policy, engine))  # type: ignore[arg-type]
    settings = VLLMConfig(**{**config.vllm, "worker_process": True})
    engines: list[VLLMPolicy] = []
    for served in by_copy.values():
        vllm = VLLMPolicy.for_trainable([e.sampler for _, e in served], config=settings)
        engines.append(vllm)
        for policy, engine in served:
            policy.generation_engine = VLLMSamplerEngine(engine.sampler, vllm)
    return engines


class _GatherOnly:
    """A rank other than 0's stand-in engine: it only takes part in the weight gathers."""

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        raise RuntimeError("only rank 0 samples in a sharded learner")

    def sync_weights(self, policy: HFPolicy) -> None:
        push_weights(policy, None, adapter_only=policy.adapter is not None)


def shard_learners(
    policies: Mapping[str, Policy], config: PoliciesConfig, group: LearnerGroup
) -> dict[str, Policy]:
    """Shard every distinct trainable policy over the default group, in place.

    Rank 0's weights (after the format warm-up) are broadcast first, so every rank shards the
    same model; rank 0 keeps an unsharded copy as the policy's :class:`SamplerEngine`. LoRA
    policies over one base share it: the base with all its adapters is broadcast, copied and
    sharded once, and each adapter's sampler is that adapter on the copy. Returns
    ``policies``.
    """
    import torch.distributed as dist

    from llm_marl.policies.hf import HFPolicy

    seen: set[int] = set()
    models: set[int] = set()
    copies: dict[int, Any] = {}  # rank 0: id(trained model) -> its unsharded copy
    for agent, policy in policies.items():
        if not policy.trainable or id(policy) in seen:
            continue
        seen.add(id(policy))
        if not isinstance(policy, HFPolicy):
            raise ConfigError(f"agent {agent!r}: only HF policies can be sharded")
        for model in (policy.model, policy.reference_model):
            if model is not None and id(model) not in models:
                models.add(id(model))
                for tensor in [*model.parameters(), *model.buffers()]:
                    dist.broadcast(tensor.data, src=0)
        engine: Any = _GatherOnly()
        if group.rank == 0:
            engine = SamplerEngine(_sampler(policy, copies))
        shard_policy(policy, ShardingConfig(mixed_precision=config.mixed_precision))
        # The Trainer's sync_samplers() loads the sharded weights into it before the first
        # rollout and after every update (a collective: every rank calls it).
        policy.generation_engine = engine
    return dict(policies)


def _sampler(policy: HFPolicy, copies: dict[int, Any]) -> HFPolicy:
    """An unsharded copy of ``policy`` to sample with (a LoRA policy: its adapter on one copy
    of the shared base, made once per base)."""
    from llm_marl.policies.hf import HFPolicy

    if policy.adapter is None:
        model, adapter = copy.deepcopy(policy._base), None
    else:
        if id(policy.model) not in copies:
            copies[id(policy.model)] = copy.deepcopy(policy.model)
        model, adapter = copies[id(policy.model)], policy.adapter
    sampler = HFPolicy(
        model,
        policy.tokenizer,
        name=policy.name,
        adapter=adapter,
        chat_template_kwargs=policy.chat_template_kwargs,
        prompt_mode=policy.prompt_mode,
    )
    sampler.share_prompts = policy.share_prompts
    return sampler


class _Consolidated:
    """What rank 0's checkpoint saves of a sharded policy: its sampler's full weights (equal
    to the sharded ones after every sync) and the policy's KL reference."""

    trainable = True

    def __init__(self, sampler: HFPolicy, reference_model: Any) -> None:
        self.sampler = sampler
        self.reference_model = reference_model

    def save(self, path: str | os.PathLike[str]) -> None:
        self.sampler.save(path)

    def load(self, path: str | os.PathLike[str]) -> None:
        # Checks the consolidated weights fit; the sharded policy itself is loaded from the
        # checkpoint's DCP folder, and the sampler is synced from it before the next rollout.
        self.sampler.load(path)


class ShardedTrainer(Trainer):
    """The :class:`Trainer` of a sharded learner: rank 0 plays, every rank updates.

    Every rank runs the same loop. Rank 0 collects each step's rollouts and broadcasts them;
    the update is collective; only rank 0 evaluates and writes the run's files (the other
    ranks' loop writes into a throwaway ``output_dir``, see :func:`rank_output_dir`).

    Checkpoints: rank 0 writes the consolidated weights (``policies/<key>``, loadable as
    ``hf:PATH``), the KL references, the algorithm state and its RNG state, as one process
    does; every rank writes its shards of each sharded policy's trainable weights and
    optimizer state into the same checkpoint's ``sharded/<key>`` folder with
    ``torch.distributed.checkpoint``. ``--trainer.resume`` reads them back on any number of
    ranks, or in one process (:meth:`Trainer.load_algorithm_state`); a single-process run's
    checkpoint resumes here too (:meth:`load_algorithm_state`).
    """

    def __init__(self, *args: Any, group: LearnerGroup, **kwargs: Any) -> None:
        from llm_marl.train.sharded_checkpoint import sharded_learners

        super().__init__(*args, **kwargs)
        self.group = group
        learners = {id(policy) for policy, _ in sharded_learners(self.algorithm).values()}
        missing = sorted(
            agent
            for agent, policy in self.policies.items()
            if getattr(policy, "data_parallel", None) is not None and id(policy) not in learners
        )
        if missing:
            raise ConfigError(
                f"algorithm {self.algorithm.name!r} keeps no optimizer per policy for agents "
                f"{missing}: it cannot train a sharded learner"
            )

    def play_step(self, step: int) -> list[Any]:
        """Rank 0's rollouts of step ``step``, on every rank."""
        import torch.distributed as dist

        box = [super().play_step(step) if self.group.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return list(box[0] or [])

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """Rank 0's evaluation (its samplers play); other ranks get ``{}``."""
        return super().evaluate(*args, **kwargs) if self.group.rank == 0 else {}

    def _views(self) -> dict[str, Any]:
        """agent -> what rank 0's checkpoint saves and loads for it (see
        :class:`_Consolidated`); agents sharing a policy share a view."""
        views: dict[int, Any] = {}
        for policy in self.policies.values():
            engine = getattr(policy, "generation_engine", None)
            if isinstance(engine, SamplerEngine) and id(policy) not in views:
                reference = getattr(policy, "reference_model", None)
                views[id(policy)] = _Consolidated(engine.sampler, reference)
        return {a: views.get(id(p), p) for a, p in self.policies.items()}

    def _write_shards(self, folder: Path) -> None:
        """Every rank: each sharded policy's weights and optimizer state to
        ``folder/sharded/<key>`` (DCP; collective)."""
        from llm_marl.train.checkpoint import SHARDED
        from llm_marl.train.sharded_checkpoint import LearnerState, sharded_learners

        for key, (policy, optimizer) in sorted(sharded_learners(self.algorithm).items()):
            LearnerState(policy, optimizer).save(folder / SHARDED / key)

    def save_checkpoint(self) -> Path:
        """Collective: rank 0 writes the checkpoint and every rank its DCP shards into it
        (rank 0 broadcasts the folder being built); other ranks return their ``output_dir``."""
        import torch.distributed as dist

        from llm_marl.policies.quiet import quiet_transformers
        from llm_marl.train.checkpoint import DCP_MARKER, SHARDED, save_checkpoint
        from llm_marl.train.sharded_checkpoint import sharded_learners

        if self.group.rank != 0:
            box: list[Any] = [None]
            dist.broadcast_object_list(box, src=0)
            self._write_shards(Path(box[0]))
            return self.output_dir

        def write_shards(folder: Path) -> None:
            dist.broadcast_object_list([str(folder)], src=0)
            self._write_shards(folder)

        state = self.algorithm.state_dict()
        # The optimizers' sharded states go to DCP; algorithm.pt names their folders.
        optimizers = dict(state.get("optimizers", {}))
        for key in sharded_learners(self.algorithm):
            optimizers[key] = {DCP_MARKER: f"{SHARDED}/{key}"}
        state["optimizers"] = optimizers
        extra = {
            "algorithm": self.algorithm.name,
            "env": _env_name(self.env),
            "sharded_learner": self.group.world_size,
        }
        with quiet_transformers():
            return save_checkpoint(
                self.output_dir,
                self.step,
                self._views(),
                state,
                extra,
                keep=self.config.keep_checkpoints,
                write_extra=write_shards,
            )

    def resume(self) -> tuple[Path, int, dict[str, Any], dict[str, Any]] | None:
        """Collective: rank 0 finds and checks the newest checkpoint (falling back past a
        corrupt one, as one process does) and loads its consolidated weights, KL references and
        RNG state; it broadcasts the outcome; then every rank takes rank 0's KL references and
        reads the sharded weights and optimizer states from the checkpoint's DCP folders."""
        import torch.distributed as dist

        from llm_marl.policies.quiet import quiet_transformers
        from llm_marl.train.checkpoint import resume_latest

        box: list[Any] = [None]
        resumed: tuple[Path, int, dict[str, Any], dict[str, Any]] | None = None
        if self.group.rank == 0:
            try:
                with quiet_transformers():
                    # The algorithm state is applied below, on every rank together.
                    resumed = resume_latest(self.output_dir, self._views(), lambda state: None)
            except BaseException as exc:
                dist.broadcast_object_list([exc], src=0)  # the other ranks raise it too
                raise
            box[0] = self._for_other_ranks(resumed)
        dist.broadcast_object_list(box, src=0)
        if isinstance(box[0], BaseException):
            raise box[0]
        if self.group.rank != 0:
            resumed = box[0]
        if resumed is None:
            return None
        seen: set[int] = set()
        for policy in self.policies.values():
            reference = getattr(policy, "reference_model", None)
            if reference is not None and id(policy) not in seen:
                seen.add(id(policy))
                for tensor in [*reference.parameters(), *reference.buffers()]:
                    dist.broadcast(tensor.data, src=0)
        self.load_algorithm_state(resumed[2])
        return resumed

    def _for_other_ranks(
        self, resumed: tuple[Path, int, dict[str, Any], dict[str, Any]] | None
    ) -> tuple[Path, int, dict[str, Any], dict[str, Any]] | None:
        """What rank 0 sends of a resumed checkpoint: a single-process run's optimizer states
        of the sharded policies are left out (rank 0 sends them tensor by tensor, see
        :func:`~llm_marl.train.sharded_checkpoint.load_full`)."""
        from llm_marl.train.checkpoint import dcp_path
        from llm_marl.train.sharded_checkpoint import sharded_learners

        if resumed is None or not isinstance(resumed[2].get("optimizers"), dict):
            return resumed
        ckpt, start, state, meta = resumed
        sharded = sharded_learners(self.algorithm)
        optimizers = {
            key: {} if key in sharded and dcp_path(entry) is None else entry
            for key, entry in state["optimizers"].items()
        }
        return ckpt, start, {**state, "optimizers": optimizers}, meta

    def load_algorithm_state(self, state: dict[str, Any]) -> None:
        """Collective: as one process does, and a single-process run's checkpoint loads into
        the sharded policies from rank 0 (its consolidated weights, which rank 0's samplers
        hold after the resume, and its optimizer states)."""
        from llm_marl.train.sharded_checkpoint import restore_optimizers

        restore_optimizers(self.algorithm, state, self._consolidated_weights)
        self.algorithm.load_state_dict(state)

    def _consolidated_weights(self, policy: HFPolicy) -> dict[str, torch.Tensor] | None:
        """Rank 0: ``policy``'s trainable weights as its sampler holds them (the checkpoint's
        consolidated weights, after a resume), by the model's parameter names; else ``None``."""
        if self.group.rank != 0:
            return None
        engine = getattr(policy, "generation_engine", None)
        if not isinstance(engine, SamplerEngine):
            raise ConfigError(f"policy {policy.name!r} has no sampler on rank 0 to load from")
        # The sampler is a copy of the model made before sharding: the same parameter names.
        held = dict(engine.sampler.model.named_parameters())
        trained = {id(param) for param in policy.parameters()}
        return {
            name: held[name].detach()
            for name, param in policy.model.named_parameters()
            if id(param) in trained
        }
