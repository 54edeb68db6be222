"""The agents' tokenizer, handed to the envs that bound text in tokens.

An env that takes ``tokenizer=`` (the web-search envs: every tool result and worker report is
cut to ``max_tool_output_tokens`` of it) can only count the tokens a model reads when it is
given that model's tokenizer; without it the bound falls back to characters and
whitespace-separated words. The Trainer and ``llm-marl eval`` know the policies, the env does
not: :func:`with_agent_tokenizer` adds the agents' tokenizer to an env's keyword arguments,
unless the user chose one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from llm_marl.envs.registration import accepted_kwargs
from llm_marl.policies.base import Policy

__all__ = ["agent_tokenizer", "with_agent_tokenizer"]


def _tokenizer_of(policy: Policy) -> Any | None:
    """``policy.tokenizer`` when it can encode and decode text (HF and vLLM policies), else
    None (scripted, API and user policies without one)."""
    tok = getattr(policy, "tokenizer", None)
    if callable(getattr(tok, "encode", None)) and callable(getattr(tok, "decode", None)):
        return tok
    return None


def _same(a: Any, b: Any) -> bool:
    """One tokenizer, or two loaded from the same place (both a model's own tokenizer)."""
    if a is b:
        return True
    name_a, name_b = getattr(a, "name_or_path", None), getattr(b, "name_or_path", None)
    return bool(name_a) and name_a == name_b and type(a) is type(b)


def agent_tokenizer(policies: Mapping[str, Policy]) -> Any | None:
    """The tokenizer the agents read with: the first trainable agent's (in ``policies``'
    order), else the first frozen one's; None when no policy has one.

    Agents with different tokenizers cannot all be served by one bound: the chosen one is used
    and a warning names the agents whose tokenizer differs (pass ``tokenizer=`` in the env
    arguments to choose another).
    """
    found = [(agent, tok) for agent, p in policies.items() if (tok := _tokenizer_of(p))]
    if not found:
        return None
    trainable = [(a, t) for a, t in found if getattr(policies[a], "trainable", False)]
    agent, chosen = (trainable or found)[0]
    others = sorted(a for a, t in found if not _same(t, chosen))
    if others:
        warnings.warn(
            f"agents {others} read with another tokenizer than {agent!r}: the env bounds text "
            f"in {agent!r}'s tokens (set the env argument tokenizer= to choose)",
            UserWarning,
            stacklevel=3,
        )
    return chosen


def with_agent_tokenizer(
    env: str | Callable[..., Any],
    policies: Mapping[str, Policy],
    env_kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """``env_kwargs`` with ``tokenizer=`` the agents' tokenizer (:func:`agent_tokenizer`) when
    ``env`` takes that argument and the user did not set it; otherwise ``env_kwargs`` as given.

    Only a registered id or a factory whose arguments can be read is given one (a factory taking
    ``**kwargs`` is left alone: it may not accept it).
    """
    kwargs = dict(env_kwargs)
    if "tokenizer" in kwargs:
        return kwargs
    accepted = accepted_kwargs(env)
    if not accepted or "tokenizer" not in accepted:
        return kwargs
    tok = agent_tokenizer(policies)
    if tok is not None:
        kwargs["tokenizer"] = tok
    return kwargs
