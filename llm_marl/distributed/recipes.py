"""What travels to the actors: which policies run on generation engines, and how to rebuild them.

An :class:`EngineRecipe` is one model (a base with its LoRA adapters, or one fully fine-tuned
model) and the policies over it; engines rebuild :class:`~llm_marl.policies.hf.HFPolicy`
copies from it (the model object is pickled once per pool and kept by Ray in the object store
for actor restarts). Every other policy (``ScriptedPolicy``, ``OpenAIPolicy``, your own) is
pickled whole into each env worker and called there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_marl.policies.base import ChatTokenPolicy, Policy
from llm_marl.policies.hf import HFPolicy


def served_by_engine(policy: Policy) -> bool:
    """Whether ``policy`` runs on a generation engine actor: an ``HFPolicy``, or any policy
    that sets ``ray_engine = True`` (then it is pickled whole into the engine)."""
    return bool(getattr(policy, "ray_engine", isinstance(policy, ChatTokenPolicy)))


@dataclass
class PolicyEntry:
    """One policy of an engine's model: its key, the learner's name and flag, its adapter."""

    key: str
    name: str
    trainable: bool
    adapter: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class EngineRecipe:
    """One engine pool: the model (or a whole policy object) and the policies served over it."""

    model: Any
    """The model object (``HFPolicy.model``: a ``PreTrainedModel`` or ``PeftModel``), or for a
    ``ray_engine`` policy that is not an ``HFPolicy``, the policy object itself."""
    tokenizer: Any
    entries: list[PolicyEntry]
    whole_policy: bool = False
    """True when :attr:`model` is a policy object served as it is."""


@dataclass
class Plan:
    """How the policies of a run split between engines and env workers."""

    keys: dict[str, str]
    """agent -> policy key (agents sharing a policy object share a key)."""
    recipes: list[EngineRecipe]
    """One per engine pool."""
    pool_of: dict[str, int]
    """policy key -> index of its pool in :attr:`recipes`."""
    local: dict[str, Policy]
    """policy key -> policy pickled into the env workers."""
    policies: dict[str, Policy]
    """policy key -> the learner's policy object."""


def plan(policies: Mapping[str, Policy]) -> Plan:
    """Split ``{agent: policy}`` into engine pools (one per distinct model) and local policies."""
    keys: dict[str, str] = {}
    by_id: dict[int, str] = {}
    objects: dict[str, Policy] = {}
    for agent, policy in policies.items():
        key = by_id.setdefault(id(policy), f"p{len(by_id)}")
        keys[agent] = key
        objects[key] = policy
    recipes: list[EngineRecipe] = []
    pool_of: dict[str, int] = {}
    model_pool: dict[int, int] = {}
    local: dict[str, Policy] = {}
    for key, policy in objects.items():
        if not served_by_engine(policy):
            local[key] = policy
            continue
        if not isinstance(policy, HFPolicy):
            pool_of[key] = len(recipes)
            entry = PolicyEntry(key, policy.name, policy.trainable)
            recipes.append(EngineRecipe(policy, None, [entry], whole_policy=True))
            continue
        pool = model_pool.setdefault(id(policy.model), len(recipes))
        if pool == len(recipes):
            recipes.append(EngineRecipe(policy.model, policy.tokenizer, []))
        pool_of[key] = pool
        recipes[pool].entries.append(
            PolicyEntry(
                key,
                policy.name,
                policy.trainable,
                policy.adapter,
                dict(policy.chat_template_kwargs or {}),
            )
        )
    return Plan(keys, recipes, pool_of, local, objects)


def build_engine_policies(recipe: EngineRecipe, device: str | None) -> dict[str, Policy]:
    """The policies of an engine, rebuilt from ``recipe`` in the engine's process."""
    if recipe.whole_policy:
        return {recipe.entries[0].key: recipe.model}
    out: dict[str, Policy] = {}
    for e in recipe.entries:
        out[e.key] = HFPolicy(
            recipe.model,
            recipe.tokenizer,
            name=e.name,
            adapter=e.adapter,
            # Trainable copies keep the learner's adapter layout (a vLLM engine serves only
            # trainable HFPolicy objects); nothing here ever builds an optimizer.
            trainable=e.trainable,
            device=device,
            chat_template_kwargs=e.chat_template_kwargs or None,
        )
    return out
