"""Observation and action spaces for language agents.

* :class:`Text` — any Python ``str`` up to ``max_length`` characters (actions are completions).
* :class:`Chat` — a conversation: a list of ``{"role", "content"}`` messages (observations).

Both are :class:`gymnasium.spaces.Space` subclasses so PettingZoo tooling (``parallel_api_test``,
seeding through ``space.seed``) works unchanged.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

ROLES = ("system", "user", "assistant", "tool")

# Printable ASCII plus a few non-ASCII characters so samplers exercise unicode handling.
_SAMPLE_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n" + "éß中🙂"


class Text(Space[str]):
    """Any ``str`` of at most ``max_length`` characters.

    Unlike :class:`gymnasium.spaces.Text`, there is no character set: a completion may contain
    any unicode text, and an environment must accept all of it (malformed output is scored, never
    rejected).
    """

    def __init__(self, max_length: int = 1 << 20, *, seed: int | np.random.Generator | None = None):
        if max_length < 0:
            raise ValueError(f"max_length must be >= 0, got {max_length}")
        self.max_length = int(max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string (length 0..min(64, max_length)) drawn with the space's seeded RNG."""
        length = int(self.np_random.integers(0, min(64, self.max_length) + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"Text(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Text) and other.max_length == self.max_length


class Chat(Space[list]):
    """A conversation: a list of messages ``{"role": str, "content": str, ...}``.

    Extra keys (``name``, ``tool_calls``, ``tool_call_id``) are allowed, as in the OpenAI format.
    """

    def __init__(
        self,
        max_messages: int = 1 << 16,
        *,
        max_length: int = 1 << 20,
        seed: int | np.random.Generator | None = None,
    ):
        self.max_messages = int(max_messages)
        self.max_length = int(max_length)
        self._text = Text(max_length=max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> int:
        """Seed the space; the inner text sampler gets a seed drawn from it. Returns the seed."""
        used: int = super().seed(seed)
        self._text.seed(int(self.np_random.integers(0, 2**31)))
        return used

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        n = int(self.np_random.integers(1, min(4, self.max_messages) + 1))
        roles = ("system", "user", "assistant")
        return [
            {"role": roles[int(self.np_random.integers(0, 3))], "content": self._text.sample()}
            for _ in range(n)
        ]

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        for m in x:
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                return False
            content = m.get("content")
            if not isinstance(content, str) or len(content) > self.max_length:
                return False
        return True

    def __repr__(self) -> str:
        return f"Chat(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Chat)
            and other.max_messages == self.max_messages
            and other.max_length == self.max_length
        )
