"""`DigitGame`: what the toy games share (digit answers, the format-weighted reward).

The concrete games are :mod:`~llm_marl.envs.toy.coordination` (``coordination-v0``) and
:mod:`~llm_marl.envs.toy.referential` (``referential-v0``); their module docstrings are their
documentation.
"""

from __future__ import annotations

from llm_marl.envs.base import InfoDict, LLMParallelEnv, Task, Transition


class DigitGame(LLMParallelEnv, abstract=True):
    """Base of the toy games: answers are digits ``0 .. num_symbols-1`` and the joint reward is
    ``format_weight * format + (1 - format_weight) * success``.

    Args:
        tasks: the task dicts (default: one per target, see :meth:`default_tasks`).
        num_symbols: how many digits the game uses (2 to 10).
        format_weight: the weight of the format term (answers holding a valid digit), in [0, 1).
        render_mode: see :class:`~llm_marl.envs.base.LLMParallelEnv`.
    """

    reward_range = (0.0, 1.0)  # the weighted mean of two 0/1 terms

    def __init__(
        self,
        tasks: list[Task] | None = None,
        *,
        num_symbols: int,
        format_weight: float = 0.2,
        render_mode: str | None = None,
    ) -> None:
        if not 2 <= num_symbols <= 10:
            raise ValueError(f"num_symbols must be in 2..10 (digits), got {num_symbols}")
        if not 0.0 <= format_weight < 1.0:
            raise ValueError(f"format_weight must be in [0, 1), got {format_weight}")
        self.num_symbols = num_symbols
        self.format_weight = format_weight
        super().__init__(tasks, render_mode=render_mode)

    def _reward(self, fmt: float, success: float) -> float:
        """The joint reward of a format score and a success rate (each in [0, 1])."""
        return self.format_weight * fmt + (1 - self.format_weight) * success

    def _final(self, fmt: float, success: bool, infos: InfoDict) -> Transition:
        """The last step of an episode: :meth:`_reward` with its components."""
        return Transition(
            reward=self._reward(fmt, float(success)),
            components={"format": fmt, "success": float(success)},
            done=True,
            infos=infos,
            success=success,
        )
