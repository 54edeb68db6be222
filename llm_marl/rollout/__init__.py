"""Rollouts: the only place where environments and policies meet.

* :func:`collect` — play many envs with many policies, batched; returns :class:`Episode` s.
* :class:`FrozenAgents` — fold frozen policies into an env's dynamics.
* :class:`Turn` / :class:`Trajectory` / :class:`Episode` — what algorithms consume;
  :meth:`Trajectory.segments` cuts a trajectory into contiguous token streams (:class:`Segment`).
"""

from llm_marl.rollout.collect import collect
from llm_marl.rollout.frozen import FrozenAgents
from llm_marl.rollout.types import Episode, Segment, Trajectory, Turn, group_episodes

__all__ = [
    "Episode",
    "FrozenAgents",
    "Segment",
    "Trajectory",
    "Turn",
    "collect",
    "group_episodes",
]
