"""A training run as one config: :class:`RunConfig`, how it is resolved, and :func:`run`.

A run config has three sections, each a documented dataclass — ``trainer``
(:class:`~llm_marl.train.TrainerConfig`), ``algorithm`` (the algorithm's config, e.g.
:class:`~llm_marl.algos.MAGRPOConfig`) and ``policies`` (:class:`PoliciesConfig`) — plus the
algorithm's name and the preset it started from. It is resolved in layers, later wins:

1. the config classes' defaults,
2. a preset (``--preset``; without one, the algorithm's preset for the env, see
   :func:`~llm_marl.train.presets.auto_preset`), and right above it the preset's tiny
   version when the run's ``policies.model`` is ``tiny`` (``--model tiny``) and the preset's
   is not (:attr:`~llm_marl.train.presets.Preset.tiny`), and above both the preset's LoRA
   values when the run's ``policies.lora`` is true (``--lora``;
   :attr:`~llm_marl.train.presets.Preset.lora`),
3. a YAML/JSON file (``--config``),
4. command-line flags (:class:`~llm_marl.train.config.CommandLine`).

:func:`run` saves the resolved config as ``<output_dir>/config.yaml`` before training;
``llm-marl train --config <output_dir>/config.yaml`` runs the same run again.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_marl.algos.registry import algorithm_names, get_algorithm
from llm_marl.errors import ConfigError
from llm_marl.policies.base import Policy, ScriptedPolicy
from llm_marl.tools.files import no_space
from llm_marl.train.config import (
    CommandLine,
    config_from_dict,
    config_to_dict,
    merge,
    read_config_file,
    write_config_file,
)
from llm_marl.train.models import TINY, PoliciesConfig, frozen_vllm_agents
from llm_marl.train.presets import Preset, auto_preset, get_preset, presets_for
from llm_marl.train.trainer import TrainerConfig, TrainResult

if TYPE_CHECKING:
    from llm_marl.algos.base import Algorithm
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.train.distributed import LearnerGroup

__all__ = [
    "CONFIG_FILE",
    "FrozenWeights",
    "RunConfig",
    "attach_expert",
    "attach_judge",
    "build_policies",
    "parse_run_config",
    "preset_config",
    "run",
    "run_config_class",
    "save_run_config",
]

CONFIG_FILE = "config.yaml"
"""Name of the resolved config written into each run's output directory."""


@dataclass
class RunConfig:
    """Everything a training run is: the algorithm, the loop, its hyperparameters, the models."""

    algo: str = "magrpo"
    """The algorithm (a registered name: ``llm-marl train --help`` lists them)."""
    preset: str | None = None
    """The preset the run started from (a record: its values are in the sections below)."""
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """The training loop: env, steps, rollouts, evaluation, checkpoints, logging."""
    algorithm: Any = None
    """The algorithm's hyperparameters (its registered config class)."""
    policies: PoliciesConfig = field(default_factory=PoliciesConfig)
    """Which model plays each agent, and how it is set up."""


def run_config_class(algo: str) -> type[RunConfig]:
    """The :class:`RunConfig` subclass whose ``algorithm`` section is ``algo``'s config class."""
    config_class: type = get_algorithm(algo).config
    return _run_config_class(config_class)


@functools.cache
def _run_config_class(algorithm_config: type) -> type[RunConfig]:
    cls = dataclasses.make_dataclass(
        f"{algorithm_config.__name__}Run",
        [("algorithm", algorithm_config, field(default_factory=algorithm_config))],
        bases=(RunConfig,),
    )
    cls.__module__ = __name__
    cls.__doc__ = RunConfig.__doc__
    return cls


# ---------------------------------------------------------------------------------------- resolve


_META = ("--config", "--preset", "--algo")


def parse_run_config(argv: Sequence[str] | None = None, *, algo: str = "magrpo") -> RunConfig:
    """The run config of a command line (see the module docstring for the layers).

    ``algo`` is the algorithm when neither ``--algo`` nor the ``--config`` file names one.
    ``--help`` prints every option (with this run's values) and exits. Raises
    :class:`~llm_marl.errors.ConfigError` for anything it cannot use.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_help = any(a in ("-h", "--help") for a in argv)
    argv = [a for a in argv if a not in ("-h", "--help")]
    meta, rest = _split_meta(argv)
    file_data = read_config_file(meta["--config"]) if "--config" in meta else {}
    algo = meta.get("--algo") or _str(file_data.get("algo"), "algo") or algo
    try:
        cls = run_config_class(algo)
    except ConfigError:
        if wants_help:
            print(_usage(None))
        raise
    command_line = CommandLine(cls)
    overrides = command_line.parse(rest)
    env = next((o.value for o in overrides if ("trainer", "env") in o.paths), None)
    trainer = file_data.get("trainer")
    env = env or (trainer.get("env") if isinstance(trainer, Mapping) else None)
    preset_name = meta.get("--preset") or _str(file_data.get("preset"), "preset")
    if wants_help:
        preset = _preset_or_none(algo, preset_name, env)
        data = command_line.apply(_layers(cls, preset, file_data, meta.get("--config")), overrides)
        data.update(algo=algo, preset=preset.name if preset else None)
        print(_usage(algo, preset))
        print()
        print(command_line.help(data))
        raise SystemExit(0)
    if preset_name is not None:
        preset = get_preset(algo, preset_name)
    elif "--config" in meta:
        preset = None  # a file alone describes the run
    else:
        preset = _auto(algo, env)
    data = command_line.apply(_layers(cls, preset, file_data, meta.get("--config")), overrides)
    tiny, lora = _wants_tiny(preset, data), _wants_lora(preset, data)
    if tiny or lora:
        layers = _layers(cls, preset, file_data, meta.get("--config"), tiny=tiny, lora=lora)
        data = command_line.apply(layers, overrides)
    data["algo"] = algo
    data["preset"] = preset.name if preset is not None else data.get("preset")
    config: RunConfig = config_from_dict(data, cls)
    return config


def preset_config(
    algo: str, preset: str | None = None, overrides: Mapping[str, Any] | None = None
) -> RunConfig:
    """The run config of a preset (default: the algorithm's) with ``overrides`` layered on top.

    ``overrides`` is plain data shaped like a config file:
    ``{"trainer": {"steps": 5}, "policies": {"format_warmup_steps": 0}}``.
    """
    cls = run_config_class(algo)
    chosen = get_preset(algo, preset) if preset is not None else _auto(algo, None)
    data = _layers(cls, chosen, dict(overrides or {}), "overrides")
    tiny, lora = _wants_tiny(chosen, data), _wants_lora(chosen, data)
    if tiny or lora:
        data = _layers(cls, chosen, dict(overrides or {}), "overrides", tiny=tiny, lora=lora)
    data["algo"], data["preset"] = algo, chosen.name
    config: RunConfig = config_from_dict(data, cls)
    return config


def _wants_tiny(preset: Preset | None, data: Mapping[str, Any]) -> bool:
    """Whether the run asks for the preset's tiny version: ``policies.model`` resolved to
    ``tiny`` while the preset names another model (see :mod:`llm_marl.train.presets`)."""
    if preset is None or not preset.tiny:
        return False
    own = preset.values.get("policies", {}).get("model")
    return bool(data.get("policies", {}).get("model") == TINY and own != TINY)


def _wants_lora(preset: Preset | None, data: Mapping[str, Any]) -> bool:
    """Whether the run takes the preset's LoRA values: ``policies.lora`` resolved to true and
    the preset has some (:attr:`~llm_marl.train.presets.Preset.lora`)."""
    return bool(preset is not None and preset.lora and data.get("policies", {}).get("lora"))


def _layers(
    cls: type,
    preset: Preset | None,
    file_data: Mapping[str, Any],
    file_name: str | None,
    *,
    tiny: bool = False,
    lora: bool = False,
) -> dict[str, Any]:
    data = config_to_dict(cls())
    if preset is not None:
        try:
            data = merge(data, dict(preset.values), cls)
            if tiny:
                data = merge(data, dict(preset.tiny), cls)
            if lora:
                data = merge(data, dict(preset.lora), cls)
        except ConfigError as exc:
            raise ConfigError(f"preset {preset.name!r}: {exc}") from exc
    try:
        merged: dict[str, Any] = merge(data, file_data, cls)
    except ConfigError as exc:
        raise ConfigError(f"{file_name}: {exc}") from exc
    return merged


def _split_meta(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """``--config`` / ``--preset`` / ``--algo`` (they pick the layers) and the other flags."""
    meta: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name in _META:
            if not eq:
                if i + 1 >= len(argv):
                    raise ConfigError(f"{name} needs a value")
                i += 1
                value = argv[i]
            meta[name] = value
        else:
            rest.append(argv[i])
        i += 1
    return meta, rest


def _str(value: Any, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{key}: expected a string, got {value!r}")


def _auto(algo: str, env: str | None) -> Preset:
    preset = auto_preset(algo, env)
    if preset is not None:
        return preset
    names = [p.name for p in presets_for(algo)]
    if not names:
        raise ConfigError(
            f"{algo} has no presets yet, so there is nothing to start from: pass --config FILE "
            f"with a full run config (llm-marl train --algo {algo} --help lists its fields)"
        )
    raise ConfigError(
        f"no {algo} preset is chosen automatically for env {env!r}; name one with --preset "
        f"({', '.join(names)}) and override what differs"
    )


def _preset_or_none(algo: str, name: str | None, env: str | None) -> Preset | None:
    try:
        return get_preset(algo, name) if name is not None else _auto(algo, env)
    except ConfigError:
        return None


def _listed(mark: str, name: str, summary: str, width: int = 24) -> str:
    """One ``name  summary`` row; a name too long for its column puts the summary below it."""
    if len(name) < width - 1:
        return f"{mark}{name:<{width}}{summary}"
    return f"{mark}{name}\n{' ' * (len(mark) + width)}{summary}"


def _usage(algo: str | None, preset: Preset | None = None) -> str:
    lines = [
        "usage: llm-marl train [--algo NAME] [--preset NAME] [--config FILE] [--OPTION VALUE ...]",
        "",
        "Train a team of LLM agents. A run is a preset (published or toy hyperparameters), "
        "overridden by a",
        "YAML/JSON file (--config), overridden by options; the resolved config is saved as",
        f"<output_dir>/{CONFIG_FILE}, and --config <that file> runs it again. Values in "
        "[brackets] are this run's.",
        "",
        "algorithms (--algo):",
    ]
    for name in algorithm_names():
        lines.append(_listed("  ", name, get_algorithm(name).summary))
    if algo is not None:
        lines += ["", f"presets of {algo} (--preset; * this run's):"]
        presets = presets_for(algo)
        for p in presets:
            mark = "*" if preset is not None and p.name == preset.name else " "
            lines.append(_listed(f"{mark} ", p.name, p.summary))
        if not presets:
            lines.append("  none yet: pass --config FILE")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- build


def save_run_config(config: RunConfig, path: str | Path | None = None) -> Path:
    """Write the resolved config (default: ``<output_dir>/config.yaml``); returns the path."""
    file = Path(path) if path is not None else Path(config.trainer.output_dir) / CONFIG_FILE
    header = (
        f"llm-marl training run: algo {config.algo}, preset {config.preset}.\n"
        f"Run it again: llm-marl train --config {file}"
    )
    return write_config_file(config, file, header)


def _save_config(config: RunConfig) -> None:
    """:func:`save_run_config`, a full disk reported like any write of the run."""
    from llm_marl.train.checkpoint import disk_full

    try:
        save_run_config(config)
    except OSError as exc:
        if no_space(exc):
            file = exc.filename or Path(config.trainer.output_dir) / "config.yaml"
            raise disk_full(file, config.trainer.output_dir) from exc
        raise


def build_policies(
    config: RunConfig, *, engines: bool = True, algorithm: Algorithm | None = None
) -> dict[str, Policy]:
    """The policies of a run: frozen agents from their specs, the rest trainable.

    Models go under ``<output_dir>/models``. Frozen ``tiny`` agents are built (and taught the
    toy format) first, then the trainable ones, which get the format warm-up last. Frozen agents
    with the same spec (other than ``tiny``) share one policy object: one model in memory, one
    batched generate call. Sets torch's thread count if ``policies.threads`` is set. With
    ``policies.backend vllm`` the trainable policies get their vLLM engines, unless
    ``engines`` is false: a sharded learner attaches rank 0's engines after sharding, and its
    frozen ``vllm:`` agents are stand-ins until then (:func:`_attach_frozen_vllm`). An
    ``algorithm`` checks the team (:meth:`~llm_marl.algos.Algorithm.check_team`) before any
    model is built.
    """
    from llm_marl.policies.quiet import quiet_transformers
    from llm_marl.train.logging import check_logging_backends

    # Options that can fail without a model fail before any is built.
    check_logging_backends(tensorboard=config.trainer.tensorboard, wandb=config.trainer.wandb)
    with quiet_transformers():  # no "Loading weights" bars per model
        return _build_policies(config, engines, algorithm)


def _build_policies(
    config: RunConfig, engines: bool, algorithm: Algorithm | None
) -> dict[str, Policy]:
    from llm_marl.envs.registration import make
    from llm_marl.train.models import (
        TINY,
        check_agents,
        check_vllm_installed,
        frozen_policy,
        prompt_mode_of,
        trainable_policies,
        vllm_samplers,
    )
    from llm_marl.train.warmup import num_symbols, toy_format_warmup

    pc, tc = config.policies, config.trainer
    if pc.threads:
        import torch

        torch.set_num_threads(pc.threads)
    env = make(tc.env, **tc.env_kwargs)
    agents = list(env.possible_agents)
    trainable = check_agents(pc, agents, tc.env)
    if algorithm is not None:
        algorithm.check_team(agents, trainable)
    check_vllm_installed(pc)
    not_frozen = [a for a in tc.share_frozen if a not in pc.frozen]
    if not_frozen:  # before any model is built (the Trainer checks the policies again)
        raise ConfigError(
            f"trainer.share_frozen names {not_frozen}, which are not frozen agents of this run "
            f"(policies.frozen: {sorted(pc.frozen)}); only frozen agents' requests can be shared"
        )
    if pc.format_warmup_steps:
        num_symbols(env, tc.env)  # refuse a non-toy env before building any model
    out = Path(tc.output_dir) / "models"

    def warmup(policies: Mapping[str, HFPolicy]) -> dict[str, float]:
        return toy_format_warmup(
            policies, tc.env, tc.env_kwargs, steps=pc.format_warmup_steps, seed=tc.seed
        )

    policies: dict[str, Policy] = {}
    by_spec: dict[str, Policy] = {}  # one policy per frozen spec (a team of solvers: one model)
    frozen_vllm = frozen_vllm_agents(pc)
    for spec in set(pc.frozen.values()) - {TINY}:  # one policy per spec: one prompt mode
        prompt_mode_of(pc, [a for a in agents if pc.frozen.get(a) == spec])
    for j, agent in enumerate(a for a in agents if a in pc.frozen):
        spec = pc.frozen[agent]
        if spec in by_spec:
            policies[agent] = by_spec[spec]
            continue
        if not engines and agent in frozen_vllm:
            policies[agent] = ScriptedPolicy(_rank_zero_samples, name=agent)
            continue
        policies[agent] = frozen_policy(
            spec,
            agent,
            pc,
            out / "frozen" / agent,
            seed=tc.seed,
            model_seed=tc.seed + 100 + j,
            warmup=warmup if pc.format_warmup_steps else None,
        )
        if spec != TINY:  # each frozen tiny agent is a model of its own (its own seed)
            by_spec[spec] = policies[agent]
    kl = getattr(config.algorithm, "kl_coef", 0.0) > 0
    # LoRA: the warm-up teaches the base on full weights, before the adapters exist.
    base_warmup = warmup if pc.format_warmup_steps and pc.lora else None
    learners = trainable_policies(
        pc, trainable, out, seed=tc.seed, reference=kl, base_warmup=base_warmup
    )
    if pc.format_warmup_steps and not pc.lora:
        # Also when resuming: the checkpoint then replaces the weights, and the KL reference
        # keeps the warmed-up start, as in the uninterrupted run.
        losses = warmup(learners)
        print("format warm-up done, loss per agent:", {a: round(v, 3) for a, v in losses.items()})
    if pc.backend == "vllm" and engines:  # after the warm-up: engines start warmed up
        vllm_samplers(learners, pc)
    policies.update(learners)
    _limit_prompts(pc, policies, stand_ins=not engines)
    return {a: policies[a] for a in agents}


def _rank_zero_samples(conversation: Any) -> str:
    raise RuntimeError("only rank 0 samples in a sharded learner")


def _attach_frozen_vllm(
    policies: dict[str, Policy], config: PoliciesConfig, group: LearnerGroup
) -> list[Policy]:
    """Rank 0 of a sharded learner: build the frozen ``vllm:`` agents' engines in place of
    their stand-ins (in-process vLLM would take the learner's process group: each engine's
    worker runs in a process of its own, started after the group is joined, as for
    ``policies.backend vllm``). The other ranks never sample and keep the stand-ins. Returns
    the engines (to close)."""
    from llm_marl.train.models import frozen_policy

    if group.rank != 0:
        return []
    by_spec: dict[str, Policy] = {}
    for agent in frozen_vllm_agents(config):
        spec = config.frozen[agent]
        if spec not in by_spec:
            by_spec[spec] = frozen_policy(
                spec, agent, config, ".", vllm_settings={"worker_process": True}
            )
        policies[agent] = by_spec[spec]
    _limit_prompts(config, policies)
    return list(by_spec.values())


def _limit_prompts(
    config: PoliciesConfig, policies: Mapping[str, Policy], *, stand_ins: bool = False
) -> None:
    """Apply ``policies.max_prompt_tokens`` to the local models that play those agents
    (``stand_ins``: not yet to the frozen ``vllm:`` agents, whose engines a sharded learner
    builds later)."""
    unknown = sorted(set(config.max_prompt_tokens) - set(policies))
    if unknown:
        raise ConfigError(f"policies.max_prompt_tokens names {unknown}, which are not agents")
    later = frozen_vllm_agents(config) if stand_ins else []
    for agent, limit in config.max_prompt_tokens.items():
        if agent in later:
            continue
        chat = getattr(policies[agent], "chat", None)
        if chat is None:
            raise ConfigError(
                f"policies.max_prompt_tokens.{agent}: its policy builds no prompt ids (a server "
                "or a Python function); only local models (tiny, hf:, vllm:) can be truncated"
            )
        others = [a for a, p in policies.items() if p is policies[agent] and a != agent]
        if any(config.max_prompt_tokens.get(a) != limit for a in others):
            raise ConfigError(
                f"agents {[agent, *others]} share one policy: give them one max_prompt_tokens"
            )
        chat.max_prompt_tokens = limit


class FrozenWeights:
    """Fingerprints the frozen local models' weights; :meth:`verify` proves them unchanged.

    A SHA-256 digest per tensor, not a copy: a frozen 3B actor costs no extra GPU memory.
    Only frozen policies whose ``model`` is a local torch model (a ``state_dict``) are
    fingerprinted; an OpenAI-compatible server (whose ``model`` is a name), a vLLM engine or a
    Python function has no weights here to change, and is left out.
    """

    def __init__(self, policies: Mapping[str, Policy]) -> None:
        self.policies = {
            agent: policy
            for agent, policy in policies.items()
            if not policy.trainable
            and callable(getattr(getattr(policy, "model", None), "state_dict", None))
        }
        self.digests = _digests(self.policies)

    def verify(self, *, report: bool = True) -> None:
        """Raise if a frozen model changed; with ``report``, print one line per frozen agent."""
        now = _digests(self.policies)
        for agent, before in self.digests.items():
            same = now[agent] == before
            if report:
                print(f"frozen {agent} weights bit-identical after training: {same}")
            if not same:
                raise RuntimeError(f"the frozen {agent} changed during training")


def _digests(policies: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Each agent's model digest; a model that plays several agents is hashed once."""
    by_model: dict[int, dict[str, str]] = {}
    for policy in policies.values():
        if id(policy.model) not in by_model:
            by_model[id(policy.model)] = _digest(policy.model)
    return {agent: by_model[id(p.model)] for agent, p in policies.items()}


def _digest(model: Any) -> dict[str, str]:
    import hashlib

    import torch

    out = {}
    for name, tensor in model.state_dict().items():
        raw = tensor.detach().contiguous().view(-1).view(torch.uint8).cpu().numpy()
        out[name] = f"{tensor.dtype}:{tuple(tensor.shape)}:{hashlib.sha256(raw).hexdigest()}"
    return out


def attach_expert(config: RunConfig) -> RunConfig:
    """``config`` with its coding expert built: ``policies.expert`` made into a
    :class:`~llm_marl.rollout.judges.CodeExpert` and passed to the envs as ``env_kwargs["expert"]``.

    The expert object lives only in the returned config (the saved ``config.yaml`` keeps the
    spec). Raises :class:`~llm_marl.errors.ConfigError` when ``policies.expert`` and
    ``trainer.env_kwargs.feedback`` disagree (one is set without the other).
    """
    spec, kwargs = config.policies.expert, config.trainer.env_kwargs
    wants = kwargs.get("feedback") == "expert"
    if spec is None:
        if wants and "expert" not in kwargs:
            raise ConfigError(
                "trainer.env_kwargs.feedback is 'expert' but no expert is set: pass "
                "--policies.expert SPEC (hf:PATH, openai:MODEL@URL, vllm:PATH or "
                "scripted:MODULE:FUNCTION)"
            )
        return config
    if not wants:
        raise ConfigError(
            f"policies.expert is set ({spec!r}) but trainer.env_kwargs.feedback is not "
            "'expert', so nobody would ask it: add --trainer.env_kwargs.feedback expert "
            "(coding envs with num_rounds > 1)"
        )
    from llm_marl.rollout.judges import CodeExpert

    return _with_env_policy(config, "expert", spec, CodeExpert)


def attach_judge(config: RunConfig) -> RunConfig:
    """``config`` with its LLM judge built: ``policies.judge`` made into the env's judge
    (:func:`~llm_marl.rollout.judges.judge_for`: a writing or a web-search judge) and passed
    to the envs as ``env_kwargs["judge"]``; the saved ``config.yaml`` keeps the spec.

    Raises :class:`~llm_marl.errors.ConfigError` for an env that takes no judge.
    """
    spec = config.policies.judge
    if spec is None:
        return config
    from llm_marl.rollout.judges import judge_for

    env_id = config.trainer.env
    return _with_env_policy(config, "judge", spec, lambda policy: judge_for(env_id, policy))


def _with_env_policy(
    config: RunConfig, key: str, spec: str, wrap: Callable[[Policy], object]
) -> RunConfig:
    """``config`` whose ``env_kwargs[key]`` is ``wrap`` of the frozen policy built from ``spec``."""
    kwargs = config.trainer.env_kwargs
    if key in kwargs:
        raise ConfigError(f"set the {key} once: policies.{key} or trainer.env_kwargs.{key}")
    from llm_marl.policies.factory import build_policy

    policy = build_policy(
        spec, name=key, device=config.policies.device, dtype=config.policies.dtype
    )
    trainer = dataclasses.replace(config.trainer, env_kwargs={**kwargs, key: wrap(policy)})
    return dataclasses.replace(config, trainer=trainer)


def run(config: RunConfig) -> TrainResult:
    """Train: save the config, build the policies and the algorithm, train, check the frozen.

    With ``policies.world_size > 1`` this is one rank of a sharded learner started by
    ``torchrun`` (see :mod:`llm_marl.train.distributed`); every rank calls it. Under
    ``trainer.executor ray`` it runs once instead, and the Ray executor starts the ranks as
    learner actors (:mod:`llm_marl.distributed.sharded_learner`).
    """
    pc = config.policies
    if pc.world_size > 1 and config.trainer.executor != "ray":
        return _run_sharded(config)
    if pc.world_size > 1:
        _check_ray_sharded(config)
    from llm_marl.policies.sharded import ShardingConfig
    from llm_marl.train.trainer import Trainer

    given = config
    config = attach_judge(attach_expert(config))
    algorithm = get_algorithm(config.algo).build(config.algorithm)
    policies = build_policies(config, algorithm=algorithm)
    try:
        trainer = Trainer(
            algorithm,
            policies,
            config.trainer,
            learner_world_size=pc.world_size,
            sharding=ShardingConfig(mixed_precision=pc.mixed_precision),
        )
        # Saved once training starts: a resume that is refused changes no file of the run.
        trainer.on_start = lambda: _save_config(given)
        frozen = FrozenWeights(policies)
        result = trainer.train()
        frozen.verify()
    finally:
        # vLLM engines (policies.backend vllm) hold memory and threads until closed.
        engines = {id(e): e for p in policies.values() if (e := _engine(p)) is not None}
        for engine in engines.values():
            engine.close()
    return result


def _check_ray_sharded(config: RunConfig) -> None:
    """One-line ConfigErrors for what a sharded learner under Ray does not do (yet)."""
    import os

    pc, tc = config.policies, config.trainer
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        raise ConfigError(
            f"policies.world_size={pc.world_size} with trainer.executor ray: start llm-marl "
            "train once, not under torchrun (Ray starts the learner ranks as actors)"
        )
    if tc.learner != "actor":
        raise ConfigError(
            f"policies.world_size={pc.world_size} with trainer.executor ray shards each "
            "trainable policy over learner actors: set trainer.learner actor"
        )
    if pc.backend != "transformers":
        raise ConfigError(
            f"policies.world_size={pc.world_size} with trainer.executor ray: policies.backend "
            f"{pc.backend} is not wired to a sharded learner under Ray yet (engines sample with "
            "trainer.engine_backend)"
        )


def _engine(policy: Policy) -> Any:
    """The generation engine attached to a policy (``policies.backend vllm``), or None."""
    return getattr(policy, "generation_engine", None)


def _run_sharded(config: RunConfig) -> TrainResult:
    """One rank of :func:`run` with a sharded learner (:mod:`llm_marl.train.distributed`)."""
    import shutil

    import torch.distributed as dist

    from llm_marl.train.distributed import (
        ShardedTrainer,
        attach_vllm_samplers,
        check_launch,
        init_learner_group,
        join_learner_group,
        rank_output_dir,
        shard_learners,
    )
    from llm_marl.train.models import check_vllm_installed

    pc, tc = config.policies, config.trainer
    check_launch(pc.world_size)  # before anything else: how to launch it, in one line
    check_vllm_installed(pc)
    group = init_learner_group(pc)
    samplers: list[Any] = []
    scratch = rank_output_dir(group.rank)
    try:
        given = config
        if group.device != pc.device:
            config = dataclasses.replace(
                config, policies=dataclasses.replace(pc, device=group.device)
            )
        if scratch is not None:  # only rank 0 writes the run's outputs
            quiet = dataclasses.replace(
                tc,
                output_dir=scratch,
                console=False,
                progress=False,
                plot=False,
                tensorboard=False,
                wandb=False,
            )
            config = dataclasses.replace(config, trainer=quiet)
        config = attach_judge(attach_expert(config))
        # Rank 0's vLLM engines (policies.backend vllm, frozen vllm: agents) start after the
        # group is joined, with their workers in processes of their own.
        algorithm = get_algorithm(config.algo).build(config.algorithm)
        policies = build_policies(config, engines=False, algorithm=algorithm)
        join_learner_group(group)
        policies = shard_learners(policies, config.policies, group)
        samplers += _attach_frozen_vllm(policies, config.policies, group)
        if pc.backend == "vllm":
            samplers += attach_vllm_samplers(policies, config.policies, group)
        trainer = ShardedTrainer(algorithm, policies, config.trainer, group=group)
        if group.rank == 0:
            trainer.on_start = lambda: _save_config(given)
        frozen = FrozenWeights(policies)
        result = trainer.train()
        frozen.verify(report=group.rank == 0)
        return result
    finally:
        for engine in samplers:
            engine.close()
        if dist.is_initialized():
            dist.destroy_process_group()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
