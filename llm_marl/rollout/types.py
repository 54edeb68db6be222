"""Rollout data: :class:`Turn` -> :class:`Trajectory` (one agent) -> :class:`Episode` (one env run).

These are the only types algorithms consume. Token-level data is exactly what the policy fed and
sampled (token-in, token-out): ``Turn.prompt_ids`` is the full prompt of that turn and
``Turn.completion_ids`` the generated ids, never re-tokenised text. When a turn's prompt extends
the agent's previous stream (previous prompt + completion) the trajectory is one contiguous token
stream in which env-produced text (feedback, tool results) sits between completions with mask 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    """One action of one agent."""

    agent: str
    step: int
    """Index of the env step (0-based) in which the agent acted."""
    text: str
    """The completion the env received."""
    prompt_ids: list[int] = field(default_factory=list)
    """Full prompt fed to the model at this turn (empty for text-only policies)."""
    completion_ids: list[int] = field(default_factory=list)
    """Generated token ids."""
    logprobs: list[float] | None = None
    """Sampling log-probs of ``completion_ids``."""
    finish_reason: str = "stop"
    continues_stream: bool = False
    """True when ``prompt_ids`` extends the previous turn's prompt + completion of this agent."""
    observation: list[dict[str, Any]] = field(default_factory=list)
    """The conversation the agent saw (for text-only algorithms and debugging)."""
    parent: tuple[str, int] | None = None
    """``(agent, turn index)`` of the turn that spawned this one (MATPO worker calls)."""


@dataclass
class Trajectory:
    """Everything one agent did in an episode."""

    agent: str
    policy: str
    """Name of the policy that played the agent."""
    trainable: bool = False
    turns: list[Turn] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.turns)

    def segments(self) -> Iterator[tuple[list[int], list[int], list[float]]]:
        """Contiguous token streams ``(token_ids, mask, logprobs)``.

        ``mask[i] = 1`` exactly for generated tokens; ``logprobs`` is aligned with ``token_ids``
        (0.0 where the mask is 0). A new segment starts when a turn does not extend the stream.
        """
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        for turn in self.turns:
            if not turn.continues_stream and ids:
                yield ids, mask, lps
                ids, mask, lps = [], [], []
            prompt_part = turn.prompt_ids[len(ids) :] if turn.continues_stream else turn.prompt_ids
            ids += prompt_part
            mask += [0] * len(prompt_part)
            lps += [0.0] * len(prompt_part)
            ids += turn.completion_ids
            mask += [1] * len(turn.completion_ids)
            lps += turn.logprobs or [0.0] * len(turn.completion_ids)
        if ids:
            yield ids, mask, lps

    @property
    def token_ids(self) -> list[int]:
        """All segments' tokens, concatenated (one stream when every turn continues it)."""
        return [t for ids, _, _ in self.segments() for t in ids]

    @property
    def mask(self) -> list[int]:
        """1 for tokens the agent generated, 0 for prompt and env-produced tokens."""
        return [m for _, mask, _ in self.segments() for m in mask]

    @property
    def turn_boundaries(self) -> list[tuple[int, int]]:
        """``(start, end)`` of each turn's completion inside :attr:`token_ids`."""
        spans, pos = [], 0
        for ids, mask, _ in self.segments():
            i = 0
            while i < len(mask):
                if mask[i]:
                    j = i
                    while j < len(mask) and mask[j]:
                        j += 1
                    spans.append((pos + i, pos + j))
                    i = j
                else:
                    i += 1
            pos += len(ids)
        return spans


@dataclass
class Episode:
    """One env run: all agents' trajectories plus the team's rewards."""

    task_id: str
    task_index: int
    """Index of the task in the batch passed to ``collect`` (episodes of one task = one group)."""
    group_index: int
    """Which of the G copies of the task this is."""
    trajectories: dict[str, Trajectory]
    step_rewards: list[float] = field(default_factory=list)
    """Joint reward after each env step."""
    reward_components: dict[str, float] = field(default_factory=dict)
    """Components reported with the final step."""
    terminated: bool = False
    truncated: bool = False
    error: str | None = None
    """Set when infrastructure failed; such episodes must be dropped or retried, not learned from."""
    final_infos: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def total_reward(self) -> float:
        return float(sum(self.step_rewards))

    @property
    def ok(self) -> bool:
        return self.error is None

    def returns(self, agent: str, gamma: float = 1.0) -> list[float]:
        """Discounted return from each of ``agent``'s turns: ``sum_{t>=s} gamma^(t-s) r_t``.

        ``s`` is the env step of the turn, so a reward that arrives after a later agent acts
        (hint -> actor) is credited to the earlier turn too.
        """
        out = []
        for turn in self.trajectories[agent].turns:
            total, discount = 0.0, 1.0
            for r in self.step_rewards[turn.step :]:
                total += discount * r
                discount *= gamma
            out.append(total)
        return out


def group_episodes(episodes: list[Episode]) -> list[list[Episode]]:
    """Episodes grouped by ``task_index`` (the GRPO groups), in order of first appearance."""
    groups: dict[int, list[Episode]] = {}
    for ep in episodes:
        groups.setdefault(ep.task_index, []).append(ep)
    return list(groups.values())
