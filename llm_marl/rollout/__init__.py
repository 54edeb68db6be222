"""Rollouts: the only place where environments and policies meet."""

from llm_marl.rollout.collect import collect
from llm_marl.rollout.types import Episode, Trajectory, Turn, group_episodes

__all__ = ["Episode", "Trajectory", "Turn", "collect", "group_episodes"]
