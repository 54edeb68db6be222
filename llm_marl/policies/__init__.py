"""Policies: anything that turns a batch of chat conversations into completions.

- :class:`Policy` / :class:`TrainablePolicy`: the protocol (see :mod:`llm_marl.policies.base`).
- :class:`ScriptedPolicy`: a plain Python function; always frozen.
- :class:`HFPolicy`: a local ``transformers`` model, optionally LoRA adapters sharing one base.
- :class:`OpenAIPolicy`: any OpenAI-compatible chat-completions server; always frozen.
- :class:`VLLMPolicy`: a ``vllm.LLM`` engine in process, for frozen agents and as the sampler of
  trainable :class:`HFPolicy` objects (weights synced after each update); needs vLLM.
- :func:`build_tiny_lm`: an offline tiny LM + tokenizer for tests and CPU demos.
- :func:`build_policy`: any of them from a spec string (``hf:PATH``, ``openai:MODEL@URL``,
  ``scripted:module:fn``; see :mod:`llm_marl.policies.factory`).

The heavy backends (torch, transformers, requests, vllm) are imported on first use, so
``import llm_marl.policies`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llm_marl.policies.base import (
    BatchPolicyError,
    Completion,
    Conversation,
    Message,
    Policy,
    PolicyError,
    SamplingParams,
    ScriptedPolicy,
    TokenContext,
    TokenContexts,
    TrainablePolicy,
    per_agent_sampling,
)
from llm_marl.policies.factory import build_policy, parse_policy_spec

if TYPE_CHECKING:
    from llm_marl.policies.hf import HFPolicy
    from llm_marl.policies.openai import OpenAIPolicy
    from llm_marl.policies.serve import PolicyServer
    from llm_marl.policies.tiny import build_tiny_lm
    from llm_marl.policies.vllm import VLLMConfig, VLLMPolicy

_LAZY = {
    "HFPolicy": "llm_marl.policies.hf",
    "OpenAIPolicy": "llm_marl.policies.openai",
    "PolicyServer": "llm_marl.policies.serve",
    "build_tiny_lm": "llm_marl.policies.tiny",
    "VLLMConfig": "llm_marl.policies.vllm",
    "VLLMPolicy": "llm_marl.policies.vllm",
}

__all__ = [
    "BatchPolicyError",
    "Completion",
    "Conversation",
    "HFPolicy",
    "Message",
    "OpenAIPolicy",
    "Policy",
    "PolicyError",
    "PolicyServer",
    "SamplingParams",
    "ScriptedPolicy",
    "TokenContext",
    "TokenContexts",
    "TrainablePolicy",
    "VLLMConfig",
    "VLLMPolicy",
    "build_policy",
    "build_tiny_lm",
    "parse_policy_spec",
    "per_agent_sampling",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_marl.policies' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
