"""Rollouts: the only place where environments and policies meet.

* :func:`collect` — play many envs with many policies, batched; returns :class:`Episode` s.
* :class:`FrozenAgents` — fold frozen policies into an env's dynamics.
* :class:`Turn` / :class:`Trajectory` / :class:`Episode` — what algorithms consume.
"""

from llm_marl.rollout.collect import collect
from llm_marl.rollout.frozen import FrozenAgents
from llm_marl.rollout.types import Episode, Trajectory, Turn, group_episodes

__all__ = ["Episode", "FrozenAgents", "Trajectory", "Turn", "collect", "group_episodes"]
