"""referential-v0 — a speaker who sees a target must get a listener who does not to name it.

Roles
    ``speaker`` then ``listener`` (two sequential phases of one episode).
Observation
    Phase 1: only the speaker acts; it sees the target object, a digit in ``0 .. num_symbols-1``.
    Phase 2: only the listener acts; it sees the speaker's message (its first
    ``max_message_chars`` characters) and never the target (partial observability: the message
    is the only channel).
Action
    Speaker: any text (the message). Listener: any text; its answer is the first decimal digit in
    it (see :func:`~llm_marl.envs.toy.parsing.first_symbol`); none, or out of range, is invalid
    (``infos["listener"]["malformed"] = True``).
Reward (joint, every agent, at the end of phase 2)
    ``format_weight * valid + (1 - format_weight) * [answer == target]``. Components: ``format``,
    ``success``. Phase 1 gives 0.
Chance level
    A listener guessing a uniformly random valid digit: ``format_weight + (1 - format_weight) / n``
    (0.4 with the defaults ``n = 4``, ``format_weight = 0.2``). A random-init tiny LM starts lower
    (most outputs hold no valid digit). Beating chance needs a protocol: the speaker must encode
    the target and the listener decode it.
Tasks
    One per target; ids ``referential/target=<k>``.

>>> import llm_marl
>>> env = llm_marl.make("referential-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "referential/target=3"})
>>> [a for a in env.agents if infos[a]["active"]]
['speaker']
>>> obs, *_ = env.step({"speaker": "it is 3"})
>>> _, rewards, *_ = env.step({"listener": "3"})
>>> rewards["listener"]
1.0
"""

from __future__ import annotations

from typing import Any

from llm_marl.checks import check_int
from llm_marl.envs.base import Task, Transition
from llm_marl.envs.toy.game import DigitGame
from llm_marl.envs.toy.parsing import check_target, first_symbol


class ReferentialEnv(DigitGame):
    """A speaker describes a target digit; a listener must name it (see the module docstring)."""

    metadata = {"name": "referential-v0"}
    possible_agents = ["speaker", "listener"]
    turn_order = "`speaker`, then `listener` (two phases, one step each)"
    chance_note = "a listener guessing a uniformly random valid digit"
    max_steps = 2

    def __init__(
        self,
        tasks: list[Task] | None = None,
        *,
        num_symbols: int = 4,
        max_message_chars: int = 16,
        **kwargs: Any,
    ) -> None:
        """``max_message_chars``: the listener reads the first this many characters of the
        speaker's message. The other arguments are :class:`~llm_marl.envs.toy.game.DigitGame`'s."""
        self.max_message_chars = check_int(max_message_chars, "max_message_chars")
        super().__init__(tasks, num_symbols=num_symbols, **kwargs)

    def default_tasks(self) -> list[Task]:
        return [
            {"task_id": f"referential/target={k}", "target": k} for k in range(self.num_symbols)
        ]

    def chance_level(self) -> float:
        """Expected reward of a listener guessing uniformly among valid answers."""
        return self._reward(1.0, 1 / self.num_symbols)

    def setup_episode(self, task: Task) -> None:
        target = check_target(task, self.num_symbols - 1, type(self).__name__)
        self.say(
            "speaker",
            f"Object: {target}. Write a short message so that your partner, who cannot "
            "see the object, can name it.",
        )
        self.set_active(["speaker"])

    def transition(self, actions: dict[str, str]) -> Transition:
        if "speaker" in actions:
            message = actions["speaker"][: self.max_message_chars]
            self.say(
                "listener",
                f"Message: {message}\nWhich object is it? Answer with one digit from 0 to "
                f"{self.num_symbols - 1}.",
            )
            self.set_active(["listener"])
            return Transition()
        answer = first_symbol(actions["listener"], self.num_symbols)
        infos = {"listener": {"answer": answer, "malformed": answer is None}}
        return self._final(float(answer is not None), answer == int(self.task["target"]), infos)
