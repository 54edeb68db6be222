"""coordination-v0 — two agents must pick digits that add up to a target, at the same time.

Roles
    ``left`` and ``right``. Both act in every step of the episode (simultaneous actions); an
    episode is one step, or ``num_rounds`` steps (see Rounds).
Observation
    Each agent sees the same prompt: the target sum ``t`` and the allowed digits
    ``0 .. num_symbols-1``. Neither sees the other's answer (Dec-POMDP: the agents must settle on a
    convention, e.g. "left always says 0").
Action
    Any text. The answer is the first decimal digit in it (see
    :func:`~llm_marl.envs.toy.parsing.first_symbol`); no digit, or a digit outside the range, is an
    invalid answer (``infos[agent]["malformed"] = True``).
Reward (joint, every agent, every step)
    ``format_weight * (valid_left + valid_right) / 2 + (1 - format_weight) * [a + b == t]``, where
    the success term needs both answers valid. Components: ``format``, ``success``.
Rounds (``num_rounds``, default 1)
    With ``num_rounds > 1`` the game is played ``num_rounds`` times in one episode, one step per
    round: after every round but the last, each agent is told what its partner answered (the
    digit the env read, or that it held none) and both answer again. Every round earns the reward
    above (the episode's return is their sum, at most ``num_rounds``); ``success`` is reported on
    the last round. A later round can fix an earlier one: one agent repeats its answer and the
    other answers the target minus the partner's last digit (or the team keeps a convention from
    the first round). This is the multi-turn toy of MAGRPO's tree rollouts
    (``MAGRPOConfig(rollout="tree")``, the ``toy-rounds`` preset): the rounds after the first
    share a history, which is what the tree's sibling baselines compare.
Chance level
    Uniformly random *valid* digits: ``format_weight + (1 - format_weight) * p`` per round, with
    ``p`` the mean over targets of ``P(a + b = t)`` (``p = 1/(2n-1)``, 0.2 for the default
    ``n = 3``), so 0.36 per round with the defaults, and ``num_rounds`` times that for an
    episode. A random-init tiny LM starts far lower, because most of its outputs hold no valid
    digit: the format term is the first thing it learns.
Tasks
    One per target ``t`` in ``0 .. 2(n-1)``; ids ``coordination/t=<t>``.

>>> import llm_marl
>>> env = llm_marl.make("coordination-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "coordination/t=2"})
>>> _, rewards, *_ = env.step({"left": "1", "right": "1"})
>>> rewards["left"]
1.0
>>> env = llm_marl.make("coordination-v0", num_rounds=2)
>>> obs, infos = env.reset(seed=0, options={"task_id": "coordination/t=2"})
>>> obs, rewards, *_ = env.step({"left": "0", "right": "1"})
>>> rewards["left"], obs["right"][-1]["content"]
(0.2, 'Round 2 of 2: your partner answered 0. Target: 2. Answer with one digit from 0 to 2.')
>>> _, rewards, terminations, *_ = env.step({"left": "0", "right": "2"})
>>> rewards["left"], terminations["left"]
(1.0, True)

Version history: v0 (this release); ``num_rounds`` added (default 1: the original game).
"""

from __future__ import annotations

from typing import Any

from llm_marl.checks import check_int
from llm_marl.envs.base import Task, Transition
from llm_marl.envs.toy.game import DigitGame
from llm_marl.envs.toy.parsing import check_target, first_symbol


class CoordinationEnv(DigitGame):
    """Two agents pick digits that must add up to the target (see the module docstring)."""

    metadata = {"name": "coordination-v0"}
    possible_agents = ["left", "right"]
    turn_order = "`left` and `right` together, once per round (`num_rounds`, default 1)"
    chance_note = "uniformly random valid digits"
    max_steps = 1

    def __init__(
        self,
        tasks: list[Task] | None = None,
        *,
        num_symbols: int = 3,
        num_rounds: int = 1,
        **kwargs: Any,
    ) -> None:
        """``num_rounds``: rounds per episode, one step each, with the partner's answer shown
        between them (see the module docstring). The other arguments are
        :class:`~llm_marl.envs.toy.game.DigitGame`'s."""
        self.num_rounds = check_int(num_rounds, "num_rounds")
        super().__init__(tasks, num_symbols=num_symbols, **kwargs)
        self.max_steps = num_rounds  # the natural length of an episode: one step per round

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
        return self.num_rounds * self._reward(1.0, p)

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
        result = self._final(fmt, success, infos)
        if self.step_count < self.num_rounds:  # another round: show each agent its partner's
            left, right = self.possible_agents
            target, top = int(self.task["target"]), self.num_symbols - 1
            for agent, partner in ((left, right), (right, left)):
                shown = "no valid digit" if answers[partner] is None else answers[partner]
                self.say(
                    agent,
                    f"Round {self.step_count + 1} of {self.num_rounds}: your partner answered "
                    f"{shown}. Target: {target}. Answer with one digit from 0 to {top}.",
                )
            self.set_active(self.possible_agents)
            result.done, result.success = False, None
        return result
