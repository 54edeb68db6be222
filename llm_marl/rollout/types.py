"""Rollout data: :class:`Turn` -> :class:`Trajectory` (one agent) -> :class:`Episode` (one env run).

These are the only types algorithms consume. Token-level data is exactly what the policy fed and
sampled (token-in, token-out): ``Turn.prompt_ids`` is the full prompt of that turn and
``Turn.completion_ids`` the generated ids, never re-tokenised text. When a turn's prompt extends
the agent's previous stream (previous prompt + completion) the trajectory is one contiguous token
stream in which env-produced text (feedback, tool results) sits between completions with mask 0.
"""

from __future__ import annotations

import math
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
    """``(agent, turn index)`` of the turn that spawned this one's conversation (a MATPO worker
    given a subtask by ``("planner", k)``: ``k`` indexes the planner's ``Trajectory.turns``).
    ``collect`` copies it from ``infos[agent]["parent"]`` (DESIGN "Sub-conversations")."""
    shared: bool = False
    """True when the completion was sampled once and given to several episodes of one group
    (``collect(share_frozen=...)``: a frozen agent's identical requests). Every copy is marked,
    the first included: none of them is an independent sample. Token ids and log-probs are the
    shared sample's, exactly as generated."""
    prompt_tokens: int = 0
    """Prompt tokens the completion cost: the server's count (``usage``) when it reports one,
    else ``len(prompt_ids)``; 0 for a policy that reports neither."""
    completion_tokens: int = 0
    """Generated tokens: the server's count when it reports one, else the generated ids."""
    generate_seconds: float = 0.0
    """Wall time of the ``generate`` call that produced the completion (the whole batched call,
    which produced :attr:`generate_batch` completions together)."""
    generate_batch: int = 1
    """How many completions that call produced: this turn's share of its time is
    ``generate_seconds / generate_batch``."""
    copies: int = 1
    """How many episodes received this completion (more than 1 only for a :attr:`shared` one):
    its tokens, time and cost were spent once for all of them."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The server's ``usage`` object (OpenAI-compatible policies), as it sent it."""
    cost: float | None = None
    """What the completion cost, from the policy's price table
    (``price_per_1k_prompt`` / ``price_per_1k_completion``); ``None``: no price table."""

    def __repr__(self) -> str:
        return (
            f"Turn({self.agent!r}, step={self.step}, text={_clip(self.text)}, "
            f"prompt={len(self.prompt_ids)} tokens, completion={len(self.completion_ids)} tokens)"
        )


@dataclass
class Segment:
    """One contiguous token stream of one agent (see :meth:`Trajectory.segments`).

    ``prompt_ids + completion_ids`` is the stream exactly as the policy fed and sampled it. The
    prompt is everything before the first generated token; the completion holds the generated
    tokens (mask 1) and the env-produced tokens between turns (mask 0), so one forward pass
    scores every turn of the stream.
    """

    prompt_ids: list[int]
    """Tokens before the first generated token (never trained on)."""
    completion_ids: list[int]
    """Generated tokens and the env-produced tokens between them."""
    mask: list[int]
    """Per completion token: 1 where the agent generated it, 0 for env-produced tokens."""
    logprobs: list[float] | None
    """Sampling log-probs aligned with ``completion_ids`` (0.0 where the mask is 0); ``None``
    when a turn of the segment came without them (the trainer then recomputes them)."""
    turn_spans: list[tuple[int, int, int]]
    """``(turn index, start, end)``: turn ``Trajectory.turns[turn index]`` generated
    ``completion_ids[start:end]``. One entry per turn of the segment, in order."""

    @property
    def token_ids(self) -> list[int]:
        """The whole stream: ``prompt_ids + completion_ids``."""
        return self.prompt_ids + self.completion_ids

    @property
    def num_generated(self) -> int:
        """How many tokens of the segment the agent generated."""
        return sum(self.mask)


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

    def __repr__(self) -> str:
        role = "trainable" if self.trainable else "frozen"
        return f"Trajectory({self.agent!r}, policy={self.policy!r}, {role}, {len(self)} turns)"

    def segments(self) -> list[Segment]:
        """The trajectory as contiguous token streams, one :class:`Segment` per stream.

        A turn joins the current stream when it says so (``continues_stream``) and its prompt
        really starts with the stream so far; the prompt tokens past the stream (env feedback,
        tool results) go in with mask 0. Any other turn starts a new segment. Turns without
        token ids (text-only policies) are left out.

        Raises ``ValueError`` for a turn that is not a consistent token record (completion ids
        without prompt ids, a log-prob count that differs from the generated token count, or a
        log-prob that is NaN or infinite).
        """
        out: list[Segment] = []
        ids: list[int] = []  # the current stream: prompt, completions, env tokens
        mask: list[int] = []
        lps: list[float] = []
        spans: list[tuple[int, int, int]] = []
        has_lps = True
        for k, turn in enumerate(self.turns):
            if not turn.prompt_ids and not turn.completion_ids:
                continue
            if not turn.prompt_ids:
                raise ValueError(
                    f"agent {self.agent!r}: turn {k} has completion ids but no prompt ids"
                )
            n = len(turn.completion_ids)
            if turn.logprobs is not None and len(turn.logprobs) != n:
                raise ValueError(
                    f"agent {self.agent!r}: turn {k} has {len(turn.logprobs)} log-probs for "
                    f"{n} generated tokens"
                )
            if turn.logprobs is not None and not all(map(math.isfinite, turn.logprobs)):
                # A NaN old log-prob is clamped out of the ratio (that token silently stops
                # learning) and turns the logged loss into NaN.
                raise ValueError(
                    f"agent {self.agent!r}: turn {k} has a non-finite sampling log-prob"
                )
            extends = turn.continues_stream and turn.prompt_ids[: len(ids)] == ids
            if ids and not extends:
                out.append(_segment(ids, mask, lps if has_lps else None, spans))
                ids, mask, lps, spans, has_lps = [], [], [], [], True
            bridge = turn.prompt_ids[len(ids) :]
            ids += bridge
            mask += [0] * len(bridge)
            lps += [0.0] * len(bridge)
            spans.append((k, len(ids), len(ids) + n))
            ids += turn.completion_ids
            mask += [1] * n
            lps += turn.logprobs if turn.logprobs is not None else [0.0] * n
            has_lps = has_lps and (turn.logprobs is not None or n == 0)
        if ids:
            out.append(_segment(ids, mask, lps if has_lps else None, spans))
        return out


def _segment(
    ids: list[int], mask: list[int], lps: list[float] | None, spans: list[tuple[int, int, int]]
) -> Segment:
    """Cut a whole stream into prompt (before the first generated token) and completion."""
    cut = mask.index(1) if 1 in mask else len(ids)
    return Segment(
        prompt_ids=ids[:cut],
        completion_ids=ids[cut:],
        mask=mask[cut:],
        logprobs=None if lps is None else lps[cut:],
        # A turn that generated nothing before the cut has an empty span: pin it at 0.
        turn_spans=[(k, max(start - cut, 0), max(end - cut, 0)) for k, start, end in spans],
    )


@dataclass
class Episode:
    """One env run: all agents' trajectories plus the team's rewards."""

    task_id: str
    task_index: int
    """Global index of the task in the batch (``collect``'s ``task_indices``; by default its
    place in the ``tasks`` passed to ``collect``)."""
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
    group_id: str = ""
    """The GRPO group the episode belongs to: ``"<global task index>/<task_id>"``, set by
    ``collect`` (episodes of one task = one group). Unique within a training step however the
    batch was sharded; empty only for an episode built by hand (then ``task_index`` groups)."""
    policy_versions: dict[str, int] = field(default_factory=dict)
    """Per agent, the version of the weights its turns were sampled with (set by a
    distributed executor; empty when collected in process, where it is always current)."""

    def __repr__(self) -> str:
        turns = ", ".join(f"{a}: {len(t)}" for a, t in self.trajectories.items())
        status = (
            f"error={_clip(self.error)}"
            if self.error is not None
            else ("terminated" if self.terminated else "truncated" if self.truncated else "running")
        )
        return (
            f"Episode(task_id={self.task_id!r}, group_index={self.group_index}, "
            f"reward={self.total_reward:.4g}, steps={len(self.step_rewards)}, turns={{{turns}}}, "
            f"{status})"
        )

    @property
    def total_reward(self) -> float:
        return float(sum(self.step_rewards))

    @property
    def ok(self) -> bool:
        return self.error is None


def group_episodes(episodes: list[Episode]) -> list[list[Episode]]:
    """Episodes grouped by :attr:`Episode.group_id` (the GRPO groups), in order of first
    appearance; an episode without one (built by hand) is grouped by ``task_index``."""
    groups: dict[str, list[Episode]] = {}
    for ep in episodes:
        groups.setdefault(ep.group_id or f"{ep.task_index}/", []).append(ep)
    return list(groups.values())


def _clip(text: str, limit: int = 40) -> str:
    """``repr`` of the start of ``text`` (a repr stays one short line whatever the completion)."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
