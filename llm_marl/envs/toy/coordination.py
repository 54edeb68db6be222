"""coordination-v0 — two agents must pick digits that add up to a target, at the same time.

Roles
    ``left`` and ``right``. Both act in the single step of the episode (simultaneous actions).
Observation
    Each agent sees the same prompt: the target sum ``t`` and the allowed digits
    ``0 .. num_symbols-1``. Neither sees the other's answer (Dec-POMDP: the agents must settle on a
    convention, e.g. "left always says 0").
Action
    Any text. The answer is the first decimal digit in it (see
    :func:`~llm_marl.envs.toy.parsing.first_symbol`); no digit, or a digit outside the range, is an
    invalid answer (``infos[agent]["malformed"] = True``).
Reward (joint, every agent)
    ``format_weight * (valid_left + valid_right) / 2 + (1 - format_weight) * [a + b == t]``, where
    the success term needs both answers valid. Components: ``format``, ``success``.
Chance level
    Uniformly random *valid* digits: ``format_weight + (1 - format_weight) * p`` with ``p`` the
    mean over targets of ``P(a + b = t)`` (``p = 1/(2n-1)``, 0.2 for the default ``n = 3``), so
    0.36 with the defaults. A random-init tiny LM starts far lower, because most of its outputs
    hold no valid digit: the format term is the first thing it learns.
Tasks
    One per target ``t`` in ``0 .. 2(n-1)``; ids ``coordination/t=<t>``.

>>> import llm_marl
>>> env = llm_marl.make("coordination-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "coordination/t=2"})
>>> _, rewards, *_ = env.step({"left": "1", "right": "1"})
>>> rewards["left"]
1.0
"""

from __future__ import annotations

from typing import Any

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.toy.game import DigitGame
from llm_marl.envs.toy.parsing import check_target, first_symbol


class CoordinationEnv(DigitGame):
    """Two agents pick digits that must add up to the target (see the module docstring)."""

    metadata = {"name": "coordination-v0"}
    possible_agents = ["left", "right"]
    max_steps = 1

    def __init__(
        self, tasks: list[Task] | None = None, *, num_symbols: int = 3, **kwargs: Any
    ) -> None:
        """The arguments are :class:`~llm_marl.envs.toy.game.DigitGame`'s."""
        super().__init__(tasks, num_symbols=num_symbols, **kwargs)

    def default_tasks(self) -> list[Task]:
        return [
            {"task_id": f"coordination/t={t}", "target": t}
            for t in range(2 * (self.num_symbols - 1) + 1)
        ]

    def chance_level(self) -> float:
        """Expected reward of uniformly random valid answers (see the module docstring)."""
        n = self.num_symbols
        targets = [int(t["target"]) for t in self.tasks]
        p = sum(sum(1 for a in range(n) if 0 <= t - a < n) / n**2 for t in targets) / len(targets)
        return self._reward(1.0, p)

    def setup_episode(self, task: Task) -> None:
        target = check_target(task, 2 * (self.num_symbols - 1), type(self).__name__)
        prompt = (
            f"Target: {target}. Answer with one digit from 0 to {self.num_symbols - 1}; "
            "your partner answers too, and you win if the two digits add up to the target."
        )
        for agent in self.possible_agents:
            self.say(agent, prompt)
        self.set_active(self.possible_agents)

    def transition(self, actions: dict[str, str]) -> Transition:
        answers = {a: first_symbol(text, self.num_symbols) for a, text in actions.items()}
        digits = [v for v in answers.values() if v is not None]
        fmt = len(digits) / len(answers)
        success = len(digits) == len(answers) and sum(digits) == int(self.task["target"])
        infos = {a: {"answer": v, "malformed": v is None} for a, v in answers.items()}
        return self._final(fmt, success, infos)
