"""delegation_toy-v0 — websearch-v0's mechanics at the size of a tiny LM (MATPO on a CPU).

Roles
    ``planner`` and ``worker``, as in ``websearch-v0``: the planner's turn may spawn a worker
    sub-conversation (``infos["worker"]["parent"] == ("planner", 0)``) whose report comes back
    to the planner as a tool message, and only the planner's final answer is scored.
The task
    The planner is asked for the value of key ``k`` (a digit below ``num_keys``). The values
    live in a tiny local index that only the worker can query, and the index differs from task
    to task (``value = (key + shift) mod num_keys``, the shift hidden from the planner), so the
    planner cannot know the value: it must delegate.
Actions
    Planner, first turn: a completion holding the letter ``d`` (before any digit) delegates;
    otherwise its first digit is its final answer (a guess). Worker: the first digit of its
    completion is the key it looks up; the index's answer is its report. Planner, after the
    report: its first digit is the answer. Digits are read with
    :func:`~llm_marl.envs.toy.parsing.first_symbol`.
Reward (joint, at the end)
    1 if the answer is the value of key ``k``, else 0 (components ``success``, ``delegated``).
Chance level
    A team of uniformly random valid actions (delegate half the time, random digits otherwise):
    ``1 / num_keys`` (0.25 with the default 4 keys). Perfect play (delegate, the worker looks up
    ``k``, the planner copies the report) is 1.0.
Tasks
    ``num_keys ** 2`` tasks, one per (key, shift): ids ``delegation/key=<k>/shift=<s>``.

>>> import llm_marl
>>> env = llm_marl.make("delegation_toy-v0")
>>> _, infos = env.reset(options={"task_id": "delegation/key=2/shift=1"})
>>> _, _, _, _, infos = env.step({"planner": "d"})
>>> infos["worker"]["parent"]
('planner', 0)
>>> obs, *_ = env.step({"worker": "2"})
>>> obs["planner"][-1]["content"]
'Report: value 3.'
>>> _, rewards, *_ = env.step({"planner": "3"})
>>> rewards["planner"]
1.0
"""

from __future__ import annotations

from typing import Any

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.search.base import SpawningEnv
from llm_marl.envs.toy.parsing import first_symbol
from llm_marl.errors import DataError

__all__ = ["DelegationEnv"]


class DelegationEnv(SpawningEnv):
    """The planner must delegate a look-up to the worker (see the module docstring)."""

    metadata = {"name": "delegation_toy-v0"}
    possible_agents = ["planner", "worker"]
    turn_order = "`planner`; a delegation gives the `worker` one turn, then the `planner` answers"
    reward_range = (0.0, 1.0)
    chance_note = "uniformly random valid actions"
    max_steps = 3

    def __init__(
        self, tasks: list[Task] | None = None, *, num_keys: int = 4, render_mode: str | None = None
    ) -> None:
        if not 2 <= num_keys <= 10:
            raise ValueError(f"num_keys must be in 2..10 (digits), got {num_keys}")
        self.num_keys = num_keys
        super().__init__(tasks, render_mode=render_mode)

    def default_tasks(self) -> list[Task]:
        n = self.num_keys
        return [
            {"task_id": f"delegation/key={k}/shift={s}", "key": k, "shift": s}
            for k in range(n)
            for s in range(n)
        ]

    def chance_level(self) -> float:
        """Expected reward of uniformly random valid actions."""
        return 1.0 / self.num_keys

    @property
    def num_symbols(self) -> int:
        """Valid digits (the answer format of the toy warm-up, ``policies.format_warmup_steps``)."""
        return self.num_keys

    def warmup_action(self, agent: str, conversation: list[dict], rng: Any) -> str:
        """A format-following action (to collect the warm-up's observations): the planner
        delegates, then reads the report; the worker looks up a random key."""
        if agent == "worker":
            return str(rng.randrange(self.num_keys))
        last = conversation[-1]
        return str(first_symbol(last["content"], 10)) if last["role"] == "tool" else "d"

    def format_demos(self, agent: str, observation: list[dict]) -> list[str]:
        """What a model that knows the format but no strategy might answer, equally often:
        the planner delegates half the time and otherwise guesses a digit; it reads the digit
        of a report (as an instruction-following model would); the worker names any key."""
        digits = [str(j) for j in range(self.num_keys)]
        if agent == "worker":
            return digits
        last = observation[-1]
        if last["role"] == "tool":
            value = first_symbol(last["content"], 10)
            return digits if value is None else [str(value)]
        return ["d"] * self.num_keys + digits

    def lookup(self, key: int) -> int:
        """The tiny local index of this episode's task (only the worker reaches it)."""
        return (key + int(self.task["shift"])) % self.num_keys

    def setup_episode(self, task: Task) -> None:
        for name in ("key", "shift"):
            value = task.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError(f"task {task.get('task_id')!r}: {name!r} must be an int")
            if not 0 <= value < self.num_keys:
                raise DataError(f"task {task.get('task_id')!r}: {name} {value} out of range")
        self.delegated = False
        self.say("planner", f"Key {task['key']}. Value? d: ask the worker.")
        self.set_active(["planner"])

    def _answer(self, text: str) -> Transition:
        answer = first_symbol(text, self.num_keys)
        success = float(answer == self.lookup(int(self.task["key"])))
        return Transition(
            reward=success,
            components={"success": success, "delegated": float(self.delegated)},
            done=True,
            success=bool(success),
        )

    def advance(self, actions: dict[str, str]) -> Transition:
        if "worker" in actions:
            key = first_symbol(actions["worker"], self.num_keys)
            report = "no such key" if key is None else f"value {self.lookup(key)}"
            self.say("planner", f"Report: {report}.", role="tool", name="delegate")
            self.set_active(["planner"])
            return Transition()
        text = actions["planner"]
        d = text.find("d")
        digit = next((i for i, c in enumerate(text) if "0" <= c <= "9"), len(text))
        if not self.delegated and d != -1 and d < digit:
            self.delegated = True
            self.spawn("worker", parent="planner")
            self.say("worker", f"Look up key {self.task['key']}.")
            self.set_active(["worker"])
            return Transition()
        return self._answer(text)
