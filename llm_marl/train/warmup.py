"""The supervised answer-format warm-up of the toy envs (``policies.format_warmup_steps``).

A random-init LM rarely writes a digit at all, so RL on a toy env would start from a team that
never earns a reward. A few supervised steps on (observation, valid digit) pairs, every valid
digit equally often, give a model that follows the format but knows no convention: the team
plays at the env's chance level and the algorithm must discover the coordination.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llm_marl.algos.update import nll_update
from llm_marl.errors import ConfigError

if TYPE_CHECKING:
    from llm_marl.policies.hf import HFPolicy

__all__ = ["TOY_ENVS", "num_symbols", "toy_format_warmup"]

TOY_ENVS = ("coordination-v0", "referential-v0", "delegation_toy-v0")
"""The envs whose answer format the warm-up knows (one digit below ``env.num_symbols``, or what
the env's own ``format_demos`` / ``warmup_action`` say)."""


def toy_format_warmup(
    policies: Mapping[str, HFPolicy],
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    steps: int = 30,
    lr: float = 3e-3,
    seed: int = 0,
) -> dict[str, float]:
    """Teach each toy-env agent the answer format with ``steps`` supervised steps.

    ``policies`` maps agents to trainable policies. The referential listener also learns to
    read the digit in the message (as an instruction-following model would); the speaker
    learns nothing about which digit to send. A policy's KL reference (full fine-tuning) is
    reset to the warmed-up weights: RL's reference is where RL starts. Returns each agent's
    final loss.
    """
    import torch

    from llm_marl.envs.registration import make
    from llm_marl.policies import ScriptedPolicy
    from llm_marl.rollout import collect

    env = make(env_id, **dict(env_kwargs or {}))
    n = num_symbols(env, env_id)
    rng = random.Random(seed)
    # An env may state its own format (delegation_toy-v0: delegate or answer, read a report);
    # otherwise an answer is one digit below n.
    own_action = getattr(env, "warmup_action", None)
    own_demos = getattr(env, "format_demos", None)
    scripted: dict[str, Any] = {
        a: ScriptedPolicy(
            (lambda conv, a=a: own_action(a, conv, rng))
            if own_action
            else (lambda conv: str(rng.randrange(n)))
        )
        for a in env.possible_agents
    }
    episodes = collect(
        env_id,
        scripted,
        None,
        group_size=4,
        env_kwargs=dict(env_kwargs or {}),
        seed=seed,
        progress=False,
    )
    losses = {}
    # One policy object playing several agents (MATPO's shared planner/worker) learns all their
    # demonstrations together: one run per agent would overwrite what the first one taught.
    roles: dict[int, list[str]] = {}
    for agent, policy in policies.items():
        roles.setdefault(id(policy), []).append(agent)
    for agents in roles.values():
        policy = policies[agents[0]]
        prompts, completions = [], []
        end = policy.end_ids[0]
        for agent in agents:
            for ep in episodes:
                for turn in ep.trajectories[agent].turns:
                    ids, _ = policy.prompt_ids(turn.observation)
                    texts = (
                        own_demos(agent, turn.observation)
                        if own_demos
                        else [str(d) for d in _demo_answers(env_id, agent, turn.observation, n)]
                    )
                    for text in texts:
                        prompts.append(ids)
                        completions.append(
                            policy.tokenizer.encode(text, add_special_tokens=False) + [end]
                        )
        optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
        for _ in range(steps):
            loss = nll_update(policy, optimizer, prompts, completions)
        for agent in agents:
            losses[agent] = loss
        if policy.reference_model is not None:  # the KL reference starts where RL starts
            policy.reference_model.load_state_dict(policy.model.state_dict())
    return losses


def num_symbols(env: Any, env_id: str) -> int:
    """The number of valid answers of a toy env; :class:`ConfigError` for any other env."""
    n = getattr(env, "num_symbols", None)
    if not isinstance(n, int):
        raise ConfigError(
            f"the answer-format warm-up is for the toy envs {TOY_ENVS}, not {env_id}; "
            "set --format-warmup-steps 0"
        )
    return n


def _demo_answers(env_id: str, agent: str, observation: list[dict], n: int) -> list[int]:
    """The answers a format-following model might give: every valid digit, or (the referential
    listener) the digit written in the partner's message, as an instruction-following model
    would read it."""
    if env_id == "referential-v0" and agent == "listener":
        from llm_marl.envs.toy.parsing import first_symbol

        message = observation[-1]["content"].split("\n", 1)[0].removeprefix("Message:")
        digit = first_symbol(message, n)
        if digit is not None:
            return [digit]
    return list(range(n))
