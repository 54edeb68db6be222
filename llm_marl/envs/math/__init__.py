"""Math collaboration envs (AgentPO): a collaborator helps a frozen actor solve math problems.

* ``math_hint-v0`` — the ``hint`` agent writes a hint, then the ``actor`` solves.
* ``math_critic-v0`` — the ``actor`` drafts, the ``critic`` critiques, the ``actor`` revises.
* ``math_single-v0`` — the ``actor`` alone (the baseline).
* ``math_debate-v0`` — the ``coordinator`` writes a debate guide, frozen debaters debate, and
  their majority vote is the answer (AgentPO's multi-agent-debate topology).
* ``math_roles-v0`` — the ``assigner`` gives each frozen solver a role, the solvers answer, and
  their majority vote is the answer (a role-assignment topology).

Joint binary reward: 1 if the actor's (or the team's) final ``\\boxed{}`` answer is equivalent
to the reference.
Datasets by name (``dataset="aime24"``; see :mod:`llm_marl.envs.math.datasets`), default: a
bundled offline sample. :func:`llm_marl.eval.math_eval` reports pass@1 per benchmark for any
team of policies.

This module only registers the ids: entry points are strings, so nothing heavy is imported
until ``make``.
"""

from __future__ import annotations

from llm_marl.envs.registration import register

register(
    "math_hint-v0",
    "llm_marl.envs.math.hint:MathHintEnv",
    description="math (AgentPO): a hint agent writes a hint, then the actor solves the problem",
)
register(
    "math_critic-v0",
    "llm_marl.envs.math.critic:MathCriticEnv",
    description="math (AgentPO): the actor drafts, a critic critiques, the actor revises",
)
register(
    "math_single-v0",
    "llm_marl.envs.math.single:MathSingleEnv",
    description="math: the actor solves the problem alone (the AgentPO baseline)",
)
register(
    "math_debate-v0",
    "llm_marl.envs.math.debate:MathDebateEnv",
    description="math (AgentPO): a coordinator guides a debate of frozen debaters; majority vote",
)
register(
    "math_roles-v0",
    "llm_marl.envs.math.roles:MathRolesEnv",
    description="math (AgentPO): an assigner gives frozen solvers their roles; majority vote",
)
