"""A policy backed by a local ``transformers`` causal LM, optionally with a peft LoRA adapter.

:class:`HFPolicy` samples with ONE batched, left-padded ``model.generate`` call per
:meth:`~HFPolicy.generate`, returns token ids and sampling log-probs (token-in / token-out), and
gives per-token log-probs with gradients for training (:meth:`~HFPolicy.sequence_logprobs`).

Several agents can share one base model with one LoRA adapter each::

    policies = HFPolicy.shared_lora("Qwen/Qwen2.5-0.5B-Instruct", ["helper", "main"])
    policies["helper"].generate(convs, SamplingParams(temperature=1.0))

Each policy activates its own adapter (``set_adapter``) before it runs the model; the reference
model for a KL penalty is the base with adapters disabled, so there is no second copy. Full
fine-tuning (no LoRA) works too; then a frozen reference copy must be passed explicitly
(``reference_model=``) if the algorithm needs one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import random
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llm_marl.errors import ConfigError
from llm_marl.policies.base import (
    ChatTokenPolicy,
    Completion,
    Conversation,
    SamplingParams,
    TokenContext,
    TrainablePolicy,
    call_seed,
)
from llm_marl.policies.chat import ChatTokenizer
from llm_marl.policies.kv_cache import cache_keyword, growing_cache
from llm_marl.policies.logprob import chunked_logprobs, full_logits_logprobs, split_lm_head
from llm_marl.policies.quiet import quiet_transformers
from llm_marl.tools.files import replace_dir

if TYPE_CHECKING:
    import torch

__all__ = ["GenerationEngine", "HFPolicy"]


@runtime_checkable
class GenerationEngine(Protocol):
    """A faster sampler an :class:`HFPolicy` hands its generation to (e.g. a vLLM engine).

    The policy keeps building prompts (token-in / token-out), cutting completions and computing
    training log-probs; the engine only samples. After each update the policy's weights change,
    so :meth:`HFPolicy.after_update` calls :meth:`sync_weights`.
    """

    def generate_ids(
        self, policy: HFPolicy, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample from ``policy``'s current weights: raw generated ids and their sampling
        log-probs (``log_softmax(logits / temperature)``), one list per prompt.
        ``sampling.seed`` is always set (the policy draws one when its caller gave none)."""
        ...

    def sync_weights(self, policy: HFPolicy) -> None:
        """Load ``policy``'s current weights (its LoRA adapter or the full model)."""
        ...


_ADAPTER_FILE = "adapter_model.safetensors"


class _SharedModelState:
    """Per-model bookkeeping shared by every policy that wraps the same model object.

    Policies that share a PeftModel switch its active adapter, which is global state: the lock
    serialises model use, and ``trainable`` remembers which adapters must keep gradients (peft's
    ``set_adapter`` turns them off on every adapter but the active one). An adapter (or a full
    model, key ``None``) keeps gradients if ANY policy over it is trainable; a frozen policy
    that views the same weights computes its log-probs under ``no_grad`` instead.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.trainable: dict[str | None, bool] = {}
        self.adapter_params: dict[str, list[Any]] = {}


_STATES: weakref.WeakKeyDictionary[Any, _SharedModelState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state_for(model: Any) -> _SharedModelState:
    with _STATES_LOCK:
        state = _STATES.get(model)
        if state is None:
            state = _SharedModelState()
            _STATES[model] = state
        return state


def _distinct_prompts(prompt_ids: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """The first row of each distinct prompt (in order of first appearance), and each row's
    index among the distinct prompts.

    The G completions of a GRPO task share their prompt: encoding it once serves all of them.
    """
    index: dict[tuple[int, ...], int] = {}
    first_rows: list[int] = []
    rows = []
    for row, prompt in enumerate(prompt_ids):
        k = index.setdefault(tuple(prompt), len(index))
        if k == len(first_rows):
            first_rows.append(row)
        rows.append(k)
    return first_rows, rows


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
HUB_PROBE_TIMEOUT = 5.0
"""Seconds the Hub gets to accept a connection before a model lookup is refused (transformers
would otherwise retry for tens of seconds before failing with a long traceback)."""


def _existing_path_or_hub_id(model: str | os.PathLike[str]) -> str:
    """``model`` as a string, checked before transformers reads it; ``ConfigError`` otherwise.

    A local path (absolute, ``./``, ``../``, ``~``, or any existing directory) must exist;
    anything else must be a well-formed Hub id, and when it is not in the local Hub cache the
    Hub must be reachable now: not with ``HF_HUB_OFFLINE`` set, and a TCP connection to the
    endpoint within :data:`HUB_PROBE_TIMEOUT` seconds.
    """
    text = os.fspath(model)
    looks_local = (
        not isinstance(model, str)
        or os.path.isabs(text)
        or text in (".", "..", "~")
        or text.startswith(("./", "../", "~/", ".\\", "..\\"))
    )
    if looks_local or os.path.isdir(text):
        if not os.path.exists(os.path.expanduser(text)):
            raise ConfigError(
                f"model path {text!r} does not exist: pass a directory written by "
                "save_pretrained (or build_tiny_lm), or a Hub id such as "
                "'Qwen/Qwen2.5-0.5B-Instruct'"
            )
        return os.path.expanduser(text)
    if not _HUB_ID.fullmatch(text) or len(text) > 96:
        raise ConfigError(
            f"model {text!r} is neither an existing directory nor a Hub id ('name' or "
            "'org/name', e.g. 'Qwen/Qwen2.5-0.5B-Instruct')"
        )
    _check_hub_reachable(text)
    return text


def _check_hub_reachable(repo: str) -> None:
    """ConfigError unless ``repo`` is in the local Hub cache or the Hub can be reached now."""
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(repo, "config.json"), str):
        return  # cached: transformers loads it without the network
    # Read now, not at import: the process may have set them since.
    flag = os.environ.get("HF_HUB_OFFLINE", os.environ.get("TRANSFORMERS_OFFLINE", ""))
    if flag.strip().lower() in ("1", "true", "yes", "on"):
        raise ConfigError(
            f"model {repo!r} is not in the local Hub cache and HF_HUB_OFFLINE is set: "
            "download it first, pass a local directory, or unset HF_HUB_OFFLINE"
        )
    import socket
    from urllib.parse import urlsplit

    url = os.environ.get("HF_ENDPOINT", constants.ENDPOINT)
    endpoint = urlsplit(url)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(
            f"model {repo!r} is not in the local Hub cache and the Hub ({url}) "
            f"cannot be reached ({exc}): check the network, or pass a local directory"
        ) from None


def check_device(device: str | None) -> None:
    """ConfigError unless ``device`` (a torch device string; None: the default) is usable here."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ConfigError(
            f"device {device!r} is not a torch device: use 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if parsed.type == "cpu":
        return
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(
                f"device {device!r}: CUDA is not available here (torch {torch.__version__}, "
                "no usable GPU); use --device cpu"
            )
        if parsed.index is not None and parsed.index >= count:
            raise ConfigError(f"device {device!r}: there are only {count} CUDA device(s)")
        return
    backend = getattr(torch.backends, parsed.type, None)
    available = getattr(backend, "is_available", None)
    if not (callable(available) and available()):
        raise ConfigError(f"device {device!r} is not available here; use --device cpu")


def enable_checkpointing(model: Any, name: str, turn_off: str) -> None:
    """Turn on ``model``'s non-reentrant activation (gradient) checkpointing.

    ConfigError ``"<Model> does not support <name>: set <turn_off>"`` for a model without it.
    """
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(f"{type(model).__name__} does not support {name}: set {turn_off}")
    # Non-reentrant: it needs no input that requires grad (LoRA's embeddings are frozen).
    kwargs = {"use_reentrant": False}
    # transformers 5 renamed it (the old name warns); older versions have only the old one.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def torch_dtype(name: str) -> Any:
    """The torch floating-point dtype called ``name`` (``"bfloat16"``, ``"float32"``...);
    ``ValueError`` for any other name (``getattr(torch, name)`` alone would hand back
    ``torch.Tensor`` for ``"Tensor"``)."""
    import torch

    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"unknown dtype {name!r}; use e.g. 'float32' or 'bfloat16'")
    return dtype


def resolve_dtype(dtype: Any, device: str) -> Any:
    """The ``dtype=`` to load a model with: float32 on CPU and the checkpoint's own (``"auto"``)
    elsewhere when ``dtype`` is None; a name through :func:`torch_dtype`."""
    import torch

    if dtype is None:
        # float32 on CPU (bf16 matmuls are slow there and log-prob checks want precision);
        # elsewhere keep the checkpoint's own dtype.
        return torch.float32 if device == "cpu" else "auto"
    if isinstance(dtype, str) and dtype != "auto":
        return torch_dtype(dtype)
    return dtype


def _adapter_param_names(model: Any, adapter: str) -> list[str]:
    """Names of the parameters that belong to ``adapter`` in a peft model."""
    names = []
    for name, _ in model.named_parameters():
        parts = name.split(".")
        for i in range(1, len(parts)):
            if parts[i] == adapter and (
                parts[i - 1].startswith("lora_") or parts[i - 1] == "modules_to_save"
            ):
                names.append(name)
                break
    return names


def _prefill_distinct_prompts(
    base: Any, cache: Any, input_ids: torch.Tensor, attention: torch.Tensor
) -> None:
    """Fill ``cache`` with the prompts' keys and values, each distinct prompt encoded once.

    A GRPO group samples its G completions from one prompt: ``generate`` would encode it G
    times. Here the distinct (left-padded) prompts run through the backbone once, up to their
    last column, and the cache rows are then gathered for the batch; ``generate`` finds the
    cache filled and encodes only the last column of each row. Nothing is done when every row
    has its own prompt, or the prompt is one token long.
    """
    import torch

    batch, width = int(input_ids.shape[0]), int(input_ids.shape[1])
    first_rows, rows = _distinct_prompts(input_ids.tolist())
    get_decoder = getattr(base, "get_decoder", None)
    if len(first_rows) == batch or width < 2 or not callable(get_decoder):
        return
    ids, mask = input_ids[first_rows, : width - 1], attention[first_rows, : width - 1]
    decoder = get_decoder()
    # Positions as generate numbers a left-padded prompt: real tokens only.
    decoder(
        input_ids=ids,
        attention_mask=mask,
        position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
        use_cache=True,
        **{cache_keyword(decoder): cache},
    )
    cache.batch_select_indices(torch.tensor(rows, device=input_ids.device))


class _SampledTokenLogprobs:
    """A logits processor that keeps each sampled token's log-prob as ``generate`` runs.

    ``generate(output_logits=True)`` would keep a ``(batch, vocab)`` logits tensor per step until
    the call returns: tens of GiB for a 150k vocabulary, long completions and big batches. This
    keeps only the current step's ``log_softmax(logits / temperature)`` and, at the next step,
    gathers the token that was sampled from it (the last column of ``input_ids``). transformers
    calls processors given to ``generate`` on the model's logits, before its own temperature,
    top-k and top-p warpers, so these are the log-probs of the untruncated tempered
    distribution, as :meth:`HFPolicy.sequence_logprobs` computes them.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self._last: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        self._take(input_ids[:, -1])
        self._last = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        """Record the log-probs of ``tokens``, sampled from the last step's distribution."""
        if self._last is not None:
            self._steps.append(self._last.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
            self._last = None

    def logprobs(self, generated: torch.Tensor) -> torch.Tensor:
        """``(batch, steps)`` log-probs of ``generated``, the ids the call produced."""
        import torch

        if generated.shape[1]:
            self._take(generated[:, -1])
        if len(self._steps) != generated.shape[1]:
            raise RuntimeError(
                f"generate produced {generated.shape[1]} tokens per row but scored "
                f"{len(self._steps)} steps: this transformers version calls logits processors "
                "differently than llm_marl expects"
            )
        if not self._steps:
            return generated.new_zeros((generated.shape[0], 0)).float()
        return torch.stack(self._steps, dim=1)


class _RowSampler:
    """A logits processor that samples every row from a generator of its own.

    With per-request seeds (:attr:`SamplingParams.request_seeds`), a row's completion must not
    depend on the other rows of the batch; transformers draws one ``multinomial`` over the whole
    batch from one generator. This processor (run after :class:`_SampledTokenLogprobs`, with
    ``generate`` in greedy mode) applies the temperature and transformers' own top-k / top-p
    warpers, draws each row's token from that row's ``torch.Generator``, and returns scores in
    which only the drawn token is finite, so that greedy decoding picks exactly it. Each row
    draws once per step, so its stream of draws is its own whatever the batch holds.
    """

    def __init__(self, seeds: Sequence[int], sampling: SamplingParams, device: Any) -> None:
        import torch
        from transformers import TopKLogitsWarper, TopPLogitsWarper

        self.temperature = sampling.temperature
        self.warpers: list[Any] = []
        if sampling.top_k:
            self.warpers.append(TopKLogitsWarper(sampling.top_k))
        if sampling.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(sampling.top_p))
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        warped = scores.float() / self.temperature
        for warper in self.warpers:
            warped = warper(input_ids, warped)
        probs = torch.softmax(warped, dim=-1)
        picked = torch.cat(
            [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)]
        )
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(-1, picked.unsqueeze(-1), 0.0)
        return out


class HFPolicy(ChatTokenPolicy):
    """A ``transformers`` causal LM (optionally a LoRA adapter on it) as a :class:`Policy`.

    Args:
        model: A path or Hub id (loaded with ``AutoModelForCausalLM.from_pretrained``), a loaded
            ``PreTrainedModel``, or a ``PeftModel`` (possibly holding several adapters).
        tokenizer: A tokenizer or a path / id; default: loaded from ``model``'s path.
        name: Policy name (default: the adapter name or the model path).
        trainable: Whether an algorithm may update this policy. Frozen policies get
            ``requires_grad=False`` and refuse :meth:`parameters`.
        adapter: For a ``PeftModel``: which adapter this policy uses (default: the active one).
            With ``lora_config``: the name of the adapter to create. A directory holding a
            saved adapter (``adapter_config.json``) is loaded as adapter ``name or "default"``.
        lora_config: A ``peft.LoraConfig``: wrap ``model`` (or add to a ``PeftModel``) a new
            adapter with this config.
        device: Where to put the model. Default: ``"cpu"`` for a model loaded from a path; a
            loaded model stays where it is.
        dtype: Weights dtype for a model loaded from a path (``torch.dtype`` or name; default
            float32 on CPU, the checkpoint's dtype elsewhere).
        chat_template_kwargs: Extra variables for the chat template (e.g.
            ``{"enable_thinking": False}``).
        prompt_mode: ``"chat"`` (the chat template, default) or ``"raw"`` (the messages' plain
            text, as CoMLRL prompts; see :data:`~llm_marl.policies.chat.PROMPT_MODES`).
        reference_model: For full fine-tuning: a frozen copy used by
            ``sequence_logprobs(..., reference=True)``. LoRA policies use the base model.
        seed: Seeds the policy's own generator, used when ``SamplingParams.seed`` is ``None``.

    ``logprob_temperature`` (default 1.0) is the temperature :meth:`sequence_logprobs` scales
    logits by; trainers set it to the sampling temperature so importance ratios are consistent.

    Sampling log-probs are ``log_softmax(logits / temperature)`` of the raw logits that
    ``generate`` returns (temperature 1 for greedy decoding): top-k / top-p truncation is not
    reflected in them, exactly as in :meth:`sequence_logprobs`. Sampling keeps one
    ``(batch, vocab)`` block of log-probs at a time, never one per generated step.

    ``generation_engine`` (default ``None``: sample with ``transformers``) may hold a
    :class:`GenerationEngine`, e.g. the vLLM engine that
    :meth:`VLLMPolicy.for_trainable <llm_marl.policies.vllm.VLLMPolicy.for_trainable>` attaches:
    :meth:`generate` then samples there (same prompt ids, same completion cutting), training
    stays here, and :meth:`after_update` pushes the updated weights to the engine.

    ``share_prompts`` (default ``True``): when rows of a :meth:`generate` or
    :meth:`sequence_logprobs` call share a prompt (the G completions of a GRPO group do; the
    update passes whole groups), each distinct prompt is encoded once and its key/value cache
    serves its rows; ``False`` encodes each row whole.

    ``chunked_lm_head`` (default ``True``): score completions through the LM head block by
    block when that is exact (see :meth:`sequence_logprobs`); ``False`` always takes the
    model's own logits (a sharded model must run its own forward:
    :func:`~llm_marl.policies.sharded.shard_policy` sets it). ``data_parallel`` is the group
    that :func:`~llm_marl.policies.sharded.shard_policy` sharded the policy over (``None``:
    one process).
    """

    logprob_temperature: float = 1.0
    share_prompts: bool = True
    chunked_lm_head: bool = True
    data_parallel: Any = None

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        name: str | None = None,
        trainable: bool = False,
        adapter: str | None = None,
        lora_config: Any = None,
        device: str | None = None,
        dtype: Any = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reference_model: Any = None,
        seed: int | None = None,
        prompt_mode: str = "chat",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model_path: str | None = None
        check_device(device)
        if isinstance(model, (str, os.PathLike)):
            model_path = _existing_path_or_hub_id(model)
            device = device or "cpu"
            try:
                with quiet_transformers():  # no "Loading weights" bar from a library call
                    model = AutoModelForCausalLM.from_pretrained(
                        model_path, dtype=resolve_dtype(dtype, device)
                    )
            except OSError as exc:
                raise ConfigError(
                    f"could not load a causal LM from {model_path!r}: {exc}. Pass a local "
                    "directory written by save_pretrained (or build_tiny_lm), or a Hub id "
                    "when online."
                ) from exc
            model.to(device)
        elif not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"model must be a path, a Hub id or a loaded transformers/peft model, got "
                f"{type(model).__name__}"
            )
        elif device is not None:
            model.to(device)
        if tokenizer is None:
            tokenizer = model_path or getattr(model, "name_or_path", None)
            if not tokenizer:
                raise ValueError(
                    "cannot find a tokenizer for this model object: pass tokenizer=..."
                )
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.chat = ChatTokenizer(
            tokenizer,
            chat_template_kwargs=chat_template_kwargs,
            generation_eos=getattr(getattr(model, "generation_config", None), "eos_token_id", None),
            prompt_mode=prompt_mode,
        )
        self.tokenizer = tokenizer
        self.chat_template_kwargs = self.chat.chat_template_kwargs
        self.prompt_mode = prompt_mode
        self.pad_id = self.chat.pad_id
        self.end_ids = self.chat.end_ids
        # Set by e.g. VLLMPolicy.for_trainable: sampling goes there, training stays here.
        self.generation_engine: GenerationEngine | None = None

        self.adapter: str | None = None
        model = self._setup_adapter(model, adapter, lora_config, name, trainable)
        self.model = model
        self.name = name or self.adapter or model_path or type(self._base).__name__
        self.trainable = bool(trainable)
        self._rng = random.Random(seed)
        self._state = _state_for(model)

        if self.adapter is not None:
            state = self._state
            state.trainable[self.adapter] = (
                state.trainable.get(self.adapter, False) or self.trainable
            )
            params = dict(model.named_parameters())
            self._state.adapter_params[self.adapter] = [
                params[n] for n in _adapter_param_names(model, self.adapter)
            ]
            if not self._state.adapter_params[self.adapter]:
                raise ValueError(f"adapter {self.adapter!r} has no parameters in this model")
            self._apply_requires_grad()
        else:
            self._state.trainable[None] = self._state.trainable.get(None, False) or self.trainable
            model.requires_grad_(self._state.trainable[None])
        if reference_model is not None:
            if self.adapter is not None:
                raise ValueError(
                    "reference_model is for full fine-tuning; a LoRA policy's reference is its "
                    "base model with adapters disabled"
                )
            reference_model.requires_grad_(False)
            reference_model.eval()
        self.reference_model = reference_model
        model.eval()

        forward = inspect.signature(self._base.forward).parameters
        self._has_logits_to_keep = "logits_to_keep" in forward

    # ------------------------------------------------------------------ construction helpers

    def _setup_adapter(
        self, model: Any, adapter: str | None, lora_config: Any, name: str | None, trainable: bool
    ) -> Any:
        """Attach / select the LoRA adapter this policy uses; return the (maybe wrapped) model."""
        try:
            from peft import PeftModel, get_peft_model
        except ImportError:  # peft is a dependency, but keep plain models usable without it
            if adapter is not None or lora_config is not None:
                raise
            return model

        is_peft = isinstance(model, PeftModel)
        if adapter is not None and Path(adapter, "adapter_config.json").is_file():
            adapter_name = name or "default"
            if is_peft:
                model.load_adapter(adapter, adapter_name=adapter_name, is_trainable=trainable)
            else:
                model = PeftModel.from_pretrained(
                    model, adapter, adapter_name=adapter_name, is_trainable=trainable
                )
            self.adapter = adapter_name
        elif lora_config is not None:
            adapter_name = adapter or "default"
            if is_peft:
                if adapter_name in model.peft_config:
                    raise ValueError(
                        f"the model already has an adapter named {adapter_name!r}; pass "
                        "adapter=NAME without lora_config to use it"
                    )
                model.add_adapter(adapter_name, lora_config)
            else:
                model = get_peft_model(model, lora_config, adapter_name=adapter_name)
            self.adapter = adapter_name
        elif is_peft:
            adapter_name = adapter or model.active_adapter
            if adapter_name not in model.peft_config:
                raise ValueError(
                    f"adapter {adapter_name!r} not found; the model has {sorted(model.peft_config)}"
                )
            self.adapter = adapter_name
        elif adapter is not None:
            raise ValueError(
                f"adapter={adapter!r} but the model has no adapters: pass lora_config to create "
                "it, or a directory holding a saved adapter"
            )
        return model

    @property
    def _base(self) -> Any:
        """The underlying ``PreTrainedModel`` (inside the peft wrapper, if any)."""
        return self.model.get_base_model() if self.adapter is not None else self.model

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def context_length(self) -> int | None:
        """The model config's ``max_position_embeddings`` (``None`` where it has none)."""
        positions = getattr(getattr(self._base, "config", None), "max_position_embeddings", None)
        return positions if isinstance(positions, int) and positions > 0 else None

    # ------------------------------------------------------------------ adapters and modes

    def rebind_parameters(self) -> None:
        """Re-read this policy's adapter parameters from the model.

        For a caller that replaced the model's parameter objects in place (FSDP2's
        ``fully_shard`` does): :meth:`parameters` then returns the new ones.
        """
        with self._state.lock:
            params = dict(self.model.named_parameters())
            # Every adapter of a shared base: the other policies over this model see them too.
            for adapter in self._state.adapter_params:
                self._state.adapter_params[adapter] = [
                    params[n] for n in _adapter_param_names(self.model, adapter)
                ]
            self._apply_requires_grad()

    def _apply_requires_grad(self) -> None:
        for adapter, params in self._state.adapter_params.items():
            flag = self._state.trainable.get(adapter, False)
            for p in params:
                p.requires_grad_(flag)

    def _activate(self) -> None:
        """Make this policy's adapter the active one (caller holds the lock)."""
        if self.adapter is None or self.model.active_adapter == self.adapter:
            return
        self.model.set_adapter(self.adapter)
        # set_adapter freezes every other adapter; restore each policy's own setting.
        self._apply_requires_grad()

    @contextlib.contextmanager
    def _adapters_disabled(self) -> Iterator[None]:
        """The base model (every adapter off) for the reference pass (caller holds the lock).

        Leaving peft's ``disable_adapter`` re-enables the active adapter through
        ``set_adapter``, which makes that adapter trainable and freezes every other one: after a
        reference pass while a frozen partner's adapter was active, the trainable adapter had
        ``requires_grad=False`` (and an optimizer built then found nothing to train). Each
        policy's own setting is restored on the way out, interrupted or not."""
        try:
            with self.model.disable_adapter():
                yield
        finally:
            self._apply_requires_grad()

    def train(self) -> HFPolicy:
        """Put the model in training mode (dropout on). Returns ``self``."""
        self.model.train()
        return self

    def eval(self) -> HFPolicy:
        """Put the model in evaluation mode (the default). Returns ``self``."""
        self.model.eval()
        return self

    def parameters(self) -> list[Any]:
        """The trainable parameters: this adapter's LoRA weights, or the whole model's."""
        if not self.trainable:
            raise RuntimeError(
                f"policy {self.name!r} is frozen (trainable=False): it has no parameters to "
                "optimise. Build it with trainable=True to train it."
            )
        if self.adapter is not None:
            return list(self._state.adapter_params[self.adapter])
        return [p for p in self.model.parameters() if p.requires_grad]

    # ------------------------------------------------------------------ prompts

    def prompt_ids(
        self, conversation: Conversation, context: TokenContext | None = None
    ) -> tuple[list[int], bool]:
        """Token ids of the prompt for ``conversation``; second item: whether it extends ``context``.

        See :meth:`ChatTokenizer.prompt_ids <llm_marl.policies.chat.ChatTokenizer.prompt_ids>`.
        """
        return self.chat.prompt_ids(conversation, context)

    # ------------------------------------------------------------------ generation

    def _sample_ids(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One batched ``generate`` call, or the generation engine's when one is attached."""
        if self.generation_engine is not None:
            # The engine gets the seed this policy's generator decides, as _generate_ids does.
            sampling = dataclasses.replace(sampling, seed=call_seed(sampling, self._rng))
            return self.generation_engine.generate_ids(self, prompts, sampling)
        return self._generate_ids(prompts, sampling)

    def _pads_rows(self) -> bool:
        # transformers pads rows that finished early; an engine returns each row as sampled,
        # unless it says it samples with transformers too (a sharded learner's sampler).
        engine = self.generation_engine
        return engine is None or bool(getattr(engine, "pads_rows", False))

    def _generate_ids(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """One left-padded ``generate`` call; raw generated ids (incl. padding) and log-probs."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        device = self.device
        batch, width = len(prompts), max(len(p) for p in prompts)
        if width == 0:
            raise ValueError("empty prompt: the chat template rendered no tokens")
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                input_ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
                attention[i, width - len(p) :] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)

        greedy = sampling.temperature == 0
        seeds = sampling.request_seeds
        if seeds is not None and len(seeds) != batch:
            raise ValueError(f"got {len(seeds)} request seeds for {batch} prompts")
        # Per-request seeds: _RowSampler draws each row's token and greedy decoding keeps it.
        per_row = seeds is not None and not greedy
        plain = greedy or per_row  # transformers' own sampler stays off
        config = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not plain,
            temperature=1.0 if plain else sampling.temperature,
            # Greedy decoding ignores them, and transformers warns when they are set.
            top_p=None if plain else sampling.top_p,
            top_k=None if plain else sampling.top_k,
            num_beams=1,
            repetition_penalty=1.0,
            eos_token_id=list(self.end_ids),
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
        )
        temp = 1.0 if greedy else sampling.temperature
        recorder = _SampledTokenLogprobs(temp)
        processors: list[Any] = [recorder]
        if per_row:
            assert seeds is not None
            processors.append(_RowSampler(seeds, sampling, device))
        kwargs: dict[str, Any] = {"logits_processor": LogitsProcessorList(processors)}
        if sampling.stop:
            config.stop_strings = list(sampling.stop)
            kwargs["tokenizer"] = self.tokenizer  # StopStringCriteria needs it
        seed = call_seed(sampling, self._rng)
        devices = [device.index or 0] if device.type == "cuda" else []
        base = self._base
        with self._state.lock:
            self._activate()
            was_training = self.model.training
            # generate() fills unset fields from the model's own generation_config (a Hub
            # checkpoint may set repetition_penalty, top_k, min_p...). Those would make the
            # sampling distribution differ from the log-probs we report, so hide it.
            saved_config = base.generation_config
            base.generation_config = GenerationConfig(
                eos_token_id=list(self.end_ids), pad_token_id=self.pad_id
            )
            try:
                self.model.eval()
                # Each step's keys and values go into buffers allocated once for the call
                # (transformers' default cache copies the whole cache at every step).
                cache = growing_cache(base, width + sampling.max_new_tokens)
                if cache is not None:
                    kwargs[cache_keyword(base)] = cache
                # inference_mode, not no_grad: no autograd bookkeeping at all on each small
                # op (nothing generated here is ever differentiated: it leaves as lists).
                with torch.random.fork_rng(devices=devices), torch.inference_mode():
                    if cache is not None and self.share_prompts:
                        _prefill_distinct_prompts(base, cache, input_ids, attention)
                    torch.manual_seed(seed)
                    out = self.model.generate(
                        input_ids=input_ids,
                        attention_mask=attention,
                        generation_config=config,
                        **kwargs,
                    )
            finally:
                base.generation_config = saved_config
                if was_training:
                    self.model.train()
        sequences = out.sequences[:, width:]
        lps = recorder.logprobs(sequences)
        return sequences.tolist(), lps.tolist()

    def _finish(self, ids: list[int], lps: list[float], sampling: SamplingParams) -> Completion:
        """Cut raw ``generate`` ids (incl. batch padding) at the end token / stop string."""
        return self.chat.finish(ids, lps, sampling, trim_padding=True)

    def after_update(self) -> None:
        """Push the updated weights to the generation engine, if any.

        Trainers call it after every update (and after loading a checkpoint) on each distinct
        policy that defines it; without an engine it does nothing.
        """
        if self.generation_engine is not None:
            self.generation_engine.sync_weights(self)

    # ------------------------------------------------------------------ training

    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        reference: bool = False,
    ) -> list[torch.Tensor]:
        """Per-token log-probs of each completion given its prompt, in one batched forward pass.

        Prompts are left-padded and completions right-padded so that every completion starts at
        the same column. The backbone runs once (rows that share a prompt encode it once, and its
        cache serves them: ``share_prompts``); then only the real completion tokens go through
        the LM head, one block of logits at a time, recomputed in backward
        (:func:`~llm_marl.policies.logprob.chunked_logprobs`), so no ``(batch, completion_len,
        vocab)`` logits tensor is ever built. Models for which that would not be exact (logit
        soft-capping or scaling, a LoRA adapter on the LM head, ...: see
        :func:`~llm_marl.policies.logprob.split_lm_head`) get the same numbers from full logits.
        Logits are divided by ``logprob_temperature`` (a value <= 0 means greedy sampling and
        is treated as 1). With ``reference=True`` the reference model is used under
        ``torch.no_grad``: the base model with adapters disabled for LoRA policies, else the
        ``reference_model`` given at construction.
        """
        import torch

        if len(prompt_ids) != len(completion_ids):
            raise ValueError(f"got {len(prompt_ids)} prompts for {len(completion_ids)} completions")
        if not prompt_ids:
            return []
        if any(len(p) == 0 for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")
        if reference and self.adapter is None and self.reference_model is None:
            raise ValueError(
                f"policy {self.name!r} is fully fine-tuned and has no reference model: pass "
                "reference_model=<a frozen copy> to HFPolicy, or train a LoRA adapter (its "
                "reference is the base model with adapters disabled)"
            )
        batch = len(prompt_ids)
        p_width = max(len(p) for p in prompt_ids)
        c_width = max(len(c) for c in completion_ids)
        device = self.device
        if c_width == 0:
            return [torch.zeros(0, device=device) for _ in range(batch)]
        ids = torch.full((batch, p_width + c_width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
            ids[i, p_width - len(p) : p_width] = torch.tensor(list(p), dtype=torch.long)
            mask[i, p_width - len(p) : p_width] = 1
            if len(c):
                ids[i, p_width : p_width + len(c)] = torch.tensor(list(c), dtype=torch.long)
                mask[i, p_width : p_width + len(c)] = 1
        vocab = self.model.get_input_embeddings().num_embeddings
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab:
            # Else a bare "IndexError: index out of range in self" from the embedding, mid-update.
            raise ValueError(
                f"policy {self.name!r}: token id {low if low < 0 else high} is outside its "
                f"vocabulary [0, {vocab})"
            )
        ids, mask = ids.to(device), mask.to(device)
        # Positions count real tokens only, exactly as generate() numbers a left-padded prompt.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {"attention_mask": mask, "position_ids": positions}
        if self._has_logits_to_keep:
            kwargs["logits_to_keep"] = c_width + 1
        kwargs["use_cache"] = False
        temp = self.logprob_temperature if self.logprob_temperature > 0 else 1.0
        # Column p_width - 1 + t predicts completion token t; only real tokens are scored.
        targets = ids[:, p_width:]
        scored = mask[:, p_width:].bool()

        with self._state.lock:
            ctx: Any
            if reference:
                if self.adapter is not None:
                    model, ctx = self.model, self._adapters_disabled()
                else:
                    model, ctx = self.reference_model, contextlib.nullcontext()
                grad: Any = torch.no_grad()
            else:
                self._activate()
                model, ctx = self.model, contextlib.nullcontext()
                # Respect the caller's grad mode; a frozen policy never builds a graph.
                grad = contextlib.nullcontext() if self.trainable else torch.no_grad()
            with ctx, grad:
                split = split_lm_head(model, kwargs) if self.chunked_lm_head else None
                if split is not None:
                    # Backbone once (each distinct prompt once), then the LM head chunk by
                    # chunk on the scored positions only: no (batch, completion_len, vocab)
                    # logits ever exist.
                    hidden = None
                    first_rows, row_prompt = _distinct_prompts(prompt_ids)
                    if self.share_prompts and len(first_rows) < batch:
                        hidden = split.shared_prompts_hidden(
                            ids[first_rows, :p_width],
                            mask[first_rows, :p_width],
                            torch.tensor(row_prompt, device=device),
                            targets,
                            mask[:, p_width:],
                        )
                    if hidden is None:
                        hidden = split.hidden_states(
                            input_ids=ids,
                            attention_mask=mask,
                            position_ids=positions,
                            use_cache=False,
                        )[:, p_width - 1 : p_width - 1 + c_width]
                    flat = chunked_logprobs(hidden[scored], split.head, targets[scored], temp)
                    return list(flat.split([len(c) for c in completion_ids]))
                logits = model(input_ids=ids, **kwargs).logits
        # Fallback (a model that post-processes its logits, a LoRA head, ...): full logits.
        logits = (
            logits[:, -(c_width + 1) : -1]
            if self._has_logits_to_keep
            else logits[:, p_width - 1 : p_width - 1 + c_width]
        )
        token_lp = full_logits_logprobs(logits, targets, temp)
        return [token_lp[i, : len(c)] for i, c in enumerate(completion_ids)]

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the adapter (peft format) or the full model + tokenizer under ``path``, atomically."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            with self._state.lock:
                if self.adapter is not None:
                    from peft import get_peft_model_state_dict
                    from safetensors.torch import save_file

                    self.model.peft_config[self.adapter].save_pretrained(str(tmp))
                    state = get_peft_model_state_dict(self.model, adapter_name=self.adapter)
                    tensors: dict[str, Any] = {}
                    seen: set[int] = set()
                    for key, value in state.items():
                        tensor = value.detach().cpu().contiguous()
                        # A tied copy (an adapter's embedding that is its output layer too)
                        # is one tensor under two keys: safetensors refuses shared memory and
                        # peft's loader wants both keys, so it is written twice.
                        if tensor.data_ptr() in seen:
                            tensor = tensor.clone()
                        seen.add(tensor.data_ptr())
                        tensors[key] = tensor
                    save_file(tensors, str(tmp / _ADAPTER_FILE))
                else:
                    with quiet_transformers():  # no "Writing model shards" bar
                        self.model.save_pretrained(str(tmp))
                        self.tokenizer.save_pretrained(str(tmp))
            replace_dir(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Load weights written by :meth:`save` into this policy's adapter or model."""
        from safetensors.torch import load_file

        src = Path(path)
        if not src.is_dir():
            raise FileNotFoundError(f"no checkpoint directory at {src}")
        with self._state.lock:
            if self.adapter is not None:
                from peft import set_peft_model_state_dict

                file = src / _ADAPTER_FILE
                if not file.is_file():
                    raise FileNotFoundError(
                        f"{file} not found: this policy is a LoRA adapter and expects a "
                        "directory written by HFPolicy.save (or peft's save_pretrained)"
                    )
                # peft annotates the return as ``namedtuple`` (the factory function); it is
                # torch's ``_IncompatibleKeys`` from ``load_state_dict``.
                loaded: Any = set_peft_model_state_dict(
                    self.model, load_file(str(file)), adapter_name=self.adapter
                )
                unexpected = [k for k in loaded.unexpected_keys if f".{self.adapter}." in k]
                if unexpected:
                    raise ValueError(f"{file} has weights this adapter lacks: {unexpected[:5]}")
                self._apply_requires_grad()
                return
            files = sorted(src.glob("*.safetensors"))
            if not files:
                raise FileNotFoundError(f"no *.safetensors weights in {src}")
            state: dict[str, Any] = {}
            for f in files:
                state.update(load_file(str(f)))
            result = self.model.load_state_dict(state, strict=False)
            # Tied weights (lm_head = embeddings) are saved once; a missing key is fine iff it
            # shares storage with a loaded one.
            own = self.model.state_dict()
            loaded_ptrs = {own[k].data_ptr() for k in state if k in own}
            missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded_ptrs]
            if missing or result.unexpected_keys:
                raise ValueError(
                    f"checkpoint {src} does not match this model: missing {missing[:5]}, "
                    f"unexpected {list(result.unexpected_keys)[:5]}"
                )

    # ------------------------------------------------------------------ shared base

    @classmethod
    def shared_lora(
        cls,
        base_model: Any,
        adapters: Sequence[str],
        lora_config: Any = None,
        *,
        tokenizer: Any = None,
        trainable: bool | Mapping[str, bool] = True,
        device: str | None = None,
        dtype: Any = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        seed: int | None = None,
        prompt_mode: str | Mapping[str, str] = "chat",
    ) -> dict[str, HFPolicy]:
        """One policy per adapter name, all over ONE base model (a single ``PeftModel``).

        ``lora_config`` is a ``peft.LoraConfig`` (or a mapping adapter -> config); default:
        rank 8, alpha 16, all linear layers. ``trainable`` may be a mapping adapter -> bool,
        and ``prompt_mode`` a mapping adapter -> mode (default ``"chat"``).
        """
        if not adapters or len(set(adapters)) != len(adapters):
            raise ValueError(f"adapters must be distinct names, got {list(adapters)}")
        if lora_config is None:
            from peft import LoraConfig

            lora_config = LoraConfig(
                r=8,
                lora_alpha=16,
                lora_dropout=0.0,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            )
        policies: dict[str, HFPolicy] = {}
        model, tok = base_model, tokenizer
        for i, adapter in enumerate(adapters):
            cfg = lora_config[adapter] if isinstance(lora_config, Mapping) else lora_config
            flag = trainable.get(adapter, True) if isinstance(trainable, Mapping) else trainable
            policy = cls(
                model,
                tok,
                name=adapter,
                trainable=bool(flag),
                adapter=adapter,
                lora_config=cfg,
                device=device,
                dtype=dtype,
                chat_template_kwargs=chat_template_kwargs,
                seed=None if seed is None else seed + i,
                prompt_mode=(
                    prompt_mode.get(adapter, "chat")
                    if isinstance(prompt_mode, Mapping)
                    else prompt_mode
                ),
            )
            model, tok = policy.model, policy.tokenizer
            policies[adapter] = policy
        return policies

    def __repr__(self) -> str:
        kind = f"adapter={self.adapter!r}" if self.adapter else "full"
        return f"HFPolicy({self.name!r}, {kind}, trainable={self.trainable})"


if TYPE_CHECKING:

    def _implements_the_protocol(policy: HFPolicy) -> TrainablePolicy:
        return policy  # mypy checks HFPolicy against TrainablePolicy here
