"""Rollouts: the only place where environments and policies meet.

* :func:`collect` — play many envs with many policies, batched; returns :class:`Episode` s.
* :func:`collect_tree` — CoMLRL's tree rollouts: every joint action branches into ``G``
  children (:class:`RolloutTree` of :class:`TreeNode` s), generation still batched per level.
* :class:`FrozenAgents` — fold frozen policies into an env's dynamics; :mod:`~llm_marl.rollout.judges`
  (:class:`PolicyJudge`, :class:`AnswerJudge`, :class:`CodeExpert`) — frozen policies as the
  envs' judges and the coding expert.
* :class:`Turn` / :class:`Trajectory` / :class:`Episode` — what algorithms consume;
  :meth:`Trajectory.segments` cuts a trajectory into contiguous token streams (:class:`Segment`).
"""

from llm_marl.rollout.collect import collect
from llm_marl.rollout.frozen import FrozenAgents
from llm_marl.rollout.judges import AnswerJudge, CodeExpert, FrozenJudge, PolicyJudge
from llm_marl.rollout.tree import RolloutTree, TreeNode, collect_tree
from llm_marl.rollout.types import Episode, Segment, Trajectory, Turn, group_episodes

__all__ = [
    "AnswerJudge",
    "CodeExpert",
    "Episode",
    "FrozenAgents",
    "FrozenJudge",
    "PolicyJudge",
    "RolloutTree",
    "Segment",
    "Trajectory",
    "TreeNode",
    "Turn",
    "collect",
    "collect_tree",
    "group_episodes",
]
