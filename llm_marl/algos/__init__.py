"""Algorithms that train LLM teams from rollouts.

* :class:`Algorithm` — the plug-in contract (``update(episodes) -> metrics``); the loop that
  drives it is :class:`llm_marl.train.Trainer`.
* :class:`MAGRPO` — every trainable agent, joint reward, centralised group baseline.
* :class:`AgentPO` — GRPO on one trainable collaborator beside frozen agents.
* :class:`MATPO` — one policy playing planner and workers (design; lands with web search).
* :mod:`~llm_marl.algos.advantages`, :mod:`~llm_marl.algos.losses` — the building blocks.
"""

from llm_marl.algos.advantages import (
    component_reward,
    discounted_returns,
    group_advantages,
    turn_advantages,
)
from llm_marl.algos.agentpo import AgentPO, AgentPOConfig
from llm_marl.algos.base import Algorithm, trainable_policies
from llm_marl.algos.losses import (
    PGConfig,
    Sample,
    aggregate,
    clipped_pg_loss,
    k3_kl,
    make_optimizer,
    policy_gradient_update,
    trajectory_samples,
)
from llm_marl.algos.magrpo import MAGRPO, MAGRPOConfig
from llm_marl.algos.matpo import MATPO, MATPOConfig

__all__ = [
    "MAGRPO",
    "MATPO",
    "AgentPO",
    "AgentPOConfig",
    "Algorithm",
    "MAGRPOConfig",
    "MATPOConfig",
    "PGConfig",
    "Sample",
    "aggregate",
    "clipped_pg_loss",
    "component_reward",
    "discounted_returns",
    "group_advantages",
    "k3_kl",
    "make_optimizer",
    "policy_gradient_update",
    "trainable_policies",
    "trajectory_samples",
    "turn_advantages",
]
