"""Algorithms that train LLM teams from rollouts.

* :class:`Algorithm` — the plug-in contract (``update(episodes) -> metrics``); the loop that
  drives it is :class:`llm_marl.train.Trainer`.
* :class:`PolicyGradientAlgorithm` — the shared base of the three below: one optimizer per
  trainable policy, checkpointable state; a subclass only builds samples and advantages.
* :class:`MAGRPO` — every trainable agent, joint reward, centralised group baseline.
* :class:`AgentPO` — GRPO on one trainable collaborator beside frozen agents.
* :class:`MATPO` — one policy playing planner and workers (design; lands with web search).
* The zoo (:mod:`~llm_marl.algos.zoo`): :class:`ATGRPO`, :class:`DrMAS`, :class:`RAE`,
  :class:`GiGPO` — other papers' credit assignment with the same rollouts and losses.

The building blocks, each in its own module: :mod:`~llm_marl.algos.advantages` (group
baselines, discounted returns, returns and sibling baselines on rollout trees), :mod:`~llm_marl.algos.samples` (token streams with per-token
advantages), :mod:`~llm_marl.algos.losses` (the clipped surrogate, k3 KL, aggregation: tensor
maths only) and :mod:`~llm_marl.algos.update` (the epochs x minibatches x micro-batches loop).
:mod:`~llm_marl.algos.registry` is the ``--algo`` registry (:func:`register_algorithm`).
"""

from llm_marl.algos import zoo
from llm_marl.algos.advantages import (
    component_reward,
    discounted_returns,
    group_advantages,
    tree_advantages,
    tree_returns,
    turn_advantages,
    turn_returns,
)
from llm_marl.algos.agentpo import AgentPO, AgentPOConfig
from llm_marl.algos.base import Algorithm, PolicyGradientAlgorithm, trainable_policies
from llm_marl.algos.losses import aggregate, clipped_pg_loss, k3_kl
from llm_marl.algos.magrpo import MAGRPO, MAGRPOConfig
from llm_marl.algos.matpo import MATPO, MATPOConfig
from llm_marl.algos.registry import (
    AlgorithmSpec,
    algorithm_names,
    get_algorithm,
    register_algorithm,
)
from llm_marl.algos.samples import Sample, trajectory_samples
from llm_marl.algos.update import PGConfig, make_optimizer, nll_update, policy_gradient_update

# The zoo's names, listed once (zoo.__all__), are all re-exported.
from llm_marl.algos.zoo import *  # noqa: F403

__all__ = [
    *zoo.__all__,
    "MAGRPO",
    "MATPO",
    "AgentPO",
    "AgentPOConfig",
    "Algorithm",
    "AlgorithmSpec",
    "MAGRPOConfig",
    "MATPOConfig",
    "PGConfig",
    "PolicyGradientAlgorithm",
    "Sample",
    "aggregate",
    "algorithm_names",
    "clipped_pg_loss",
    "component_reward",
    "discounted_returns",
    "get_algorithm",
    "group_advantages",
    "k3_kl",
    "make_optimizer",
    "nll_update",
    "policy_gradient_update",
    "register_algorithm",
    "trainable_policies",
    "trajectory_samples",
    "tree_advantages",
    "tree_returns",
    "turn_advantages",
    "turn_returns",
]
