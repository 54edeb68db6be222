"""Sub-conversations: a turn of one agent starts a fresh conversation for another.

:class:`SpawningEnv` is the base of envs in which a planner's turn spawns a worker conversation
(DESIGN "Sub-conversations"). :meth:`SpawningEnv.spawn` gives the child a fresh conversation and
links it to the parent's turn; while the child is active, ``infos[child]["parent"]`` is
``(parent agent, parent turn index)`` -- the index of the parent's turn in its own sequence of
turns (``Trajectory.turns`` of the rollout), which :func:`~llm_marl.rollout.collect` records as
``Turn.parent`` and MATPO's credit assignment follows.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from llm_marl.envs.base import LLMParallelEnv, ResetResult, Transition

__all__ = ["SpawningEnv"]


class SpawningEnv(LLMParallelEnv, abstract=True):
    """An env whose agents' turns may spawn sub-conversations of other agents.

    Subclasses implement :meth:`setup_episode` and :meth:`advance` (their :meth:`transition`:
    turn counting and parent links are done around it). Links and counts are cleared by
    :meth:`reset`.
    """

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> ResetResult:
        self._turns: dict[str, int] = dict.fromkeys(self.possible_agents, 0)
        self._parents: dict[str, tuple[str, int]] = {}
        return super().reset(seed=seed, options=options)

    def turns_taken(self, agent: str) -> int:
        """How many turns ``agent`` has taken in this episode (its actions so far)."""
        return self._turns[agent]

    def spawn(self, agent: str, parent: str) -> None:
        """Start a fresh conversation for ``agent``, spawned by ``parent``'s latest turn."""
        if self._turns[parent] < 1:
            raise RuntimeError(f"{parent!r} has taken no turn yet: it cannot spawn {agent!r}")
        self.restart_conversation(agent)
        self._parents[agent] = (parent, self._turns[parent] - 1)

    def transition(self, actions: dict[str, str]) -> Transition:
        for agent in actions:
            self._turns[agent] += 1
        result = self.advance(actions)
        for agent in self.active_agents:
            link = self._parents.get(agent)
            if link is not None:
                result.infos.setdefault(agent, {})["parent"] = link
        return result

    @abstractmethod
    def advance(self, actions: dict[str, str]) -> Transition:
        """:meth:`transition` of the subclass (turn counting and parent links are done here)."""
