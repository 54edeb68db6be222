"""Presets of the algorithm zoo (:mod:`llm_marl.algos.zoo`): MAGRPO's toy and generic presets,
the same env, models, sampling, steps and optimizer for every algorithm, so that a comparison
differs only in credit assignment (``llm-marl bench algos``).

For each of ``at-grpo``, ``drmas``, ``rae`` and ``gigpo``: ``toy-coordination``,
``toy-referential``, ``generic`` (MAGRPO's values, see :mod:`llm_marl.train.presets.magrpo`)
and ``toy-rounds-linear`` (MAGRPO's ``toy-rounds`` played as linear rollouts: ``group_size``
10, the joint actions per task of its 4-way tree, 4 + 16).
The algorithm fields MAGRPO's preset sets and the algorithm shares (``lr``, ``kl_coef``,
``epochs``, ``gamma``, ``aggregation``) are taken as they are, so GiGPO's ``gamma`` is the toy's
1.0 rather than the release's 0.95; fields it does not have (MAGRPO's ``rollout``) are dropped;
its own fields keep their defaults (its config cites the source). MAGRPO's LoRA values
(:attr:`~llm_marl.train.presets.Preset.lora`, used with ``--lora``) come along the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from llm_marl.algos.zoo import ATGRPOConfig, DrMASConfig, GiGPOConfig, RAEConfig
from llm_marl.train.presets import Preset, preset
from llm_marl.train.presets.magrpo import (
    GENERIC,
    TOY_COORDINATION,
    TOY_REFERENTIAL,
    TOY_ROUNDS_LINEAR,
)

ZOO: dict[str, type] = {
    "at-grpo": ATGRPOConfig,
    "drmas": DrMASConfig,
    "rae": RAEConfig,
    "gigpo": GiGPOConfig,
}
"""The zoo's registry names and their config classes."""


def _for(algo: str, source: Preset, changes: Mapping[str, Mapping[str, Any]]) -> Preset:
    fields = {f.name for f in dataclasses.fields(ZOO[algo])}
    values = {section: dict(v) for section, v in source.values.items()}
    for section, v in changes.items():
        values[section] = {**values.get(section, {}), **v}
    values["algorithm"] = {k: v for k, v in values.get("algorithm", {}).items() if k in fields}
    values.setdefault("trainer", {})["output_dir"] = f"runs/{algo}"
    summary = source.summary.replace("the zoo comparison's MAGRPO", f"the zoo comparison's {algo}")
    # MAGRPO's LoRA values too (--lora), with the same algorithm fields kept.
    lora = {section: dict(v) for section, v in source.lora.items()}
    if "algorithm" in lora:
        lora["algorithm"] = {k: v for k, v in lora["algorithm"].items() if k in fields}
    return preset(algo, source.name, summary, values, auto=source.auto, lora=lora)


for _algo in ZOO:
    _for(_algo, TOY_COORDINATION, {})
    _for(_algo, TOY_REFERENTIAL, {})
    _for(_algo, GENERIC, {})
    _for(_algo, TOY_ROUNDS_LINEAR, {})
