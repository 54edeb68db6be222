"""A multi-round toy env and a scripted sibling-aware policy for the tree-rollout tests."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.policies.base import Completion


class RoundsCoordination(CoordinationEnv):
    """coordination-v0 with ``num_rounds=rounds``: after each step both agents are told what
    their partner answered and play again. Each step earns coordination-v0's reward (0.2 per
    valid digit share, 0.8 when the digits add up to the target)."""

    metadata = {"name": "rounds_coordination-test"}

    def __init__(self, tasks: list[Task] | None = None, *, rounds: int = 2, **kwargs) -> None:
        super().__init__(tasks, num_rounds=rounds, **kwargs)


def level(conversation: list[dict]) -> int:
    """How many times the agent has answered before (the env step it acts in)."""
    return sum(1 for m in conversation if m["role"] == "assistant")


def partner_answer(conversation: list[dict]) -> str:
    """The partner's previous answer, read off the last feedback message."""
    found = re.search(r"partner answered (\d|no valid digit)\.", conversation[-1]["content"])
    assert found, conversation[-1]["content"]
    return found.group(1)


class SiblingPolicy:
    """A frozen scripted policy that knows which sibling it plays: ``fn(conversation, k)``
    where ``k`` counts the earlier copies of the same conversation in the batch (the ``k``-th
    of ``G`` siblings, or of ``G`` linear copies). Records every batch size."""

    trainable = False

    def __init__(self, fn: Callable[[list[dict], int], str], name: str = "sibling") -> None:
        self.fn = fn
        self.name = name
        self.batches: list[int] = []

    def generate(self, conversations, sampling, contexts=None):
        self.batches.append(len(conversations))
        seen: Counter[str] = Counter()
        out = []
        for conv in conversations:
            key = json.dumps(conv, sort_keys=True)
            out.append(Completion(text=self.fn(conv, seen[key])))
            seen[key] += 1
        return out


def scripted_team() -> dict[str, SiblingPolicy]:
    """The hand-computed team (target 2, G = 2):

    * step 0: sibling 0 plays (1, 1) -> reward 1.0; sibling 1 plays (0, "x") -> 0.1.
    * later steps: left says 1; right repeats left's previous digit (sibling 0) or says 1
      (sibling 1). After (1, 1): children (1, 1) 1.0 and (1, 1) 1.0; after (0, x): (1, 0) 0.2
      and (1, 1) 1.0.
    """

    def left(conv, k):
        if level(conv) == 0:
            return "1" if k == 0 else "0"
        return "1"

    def right(conv, k):
        if level(conv) == 0:
            return "1" if k == 0 else "x"
        return partner_answer(conv) if k == 0 else "1"

    return {"left": SiblingPolicy(left, "L"), "right": SiblingPolicy(right, "R")}


TARGET_2 = {"task_id": "coordination/t=2", "target": 2}
TARGET_1 = {"task_id": "coordination/t=1", "target": 1}


class LengthRounds(RoundsCoordination):
    """RoundsCoordination whose reward is the characters the two replies hold, over 10: a signal
    that random-init tiny LMs vary on (they rarely write a digit)."""

    metadata = {"name": "length_rounds-test"}

    def transition(self, actions: dict[str, str]) -> Transition:
        result = super().transition(actions)
        result.reward = sum(len(text) for text in actions.values()) / 10
        return result
