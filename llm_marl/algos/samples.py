"""Samples: what the policy-gradient update trains on.

A :class:`Sample` is one contiguous token stream of one agent — a prompt, then generated tokens
(mask 1) and env-produced tokens between turns (mask 0) — with an advantage per token.
:func:`trajectory_samples` turns a :class:`~llm_marl.rollout.Trajectory` into samples, one per
:meth:`~llm_marl.rollout.Trajectory.segments` stream, so a multi-turn trajectory costs one
forward pass, not one per turn; its turns still count as separate completions wherever the loss
averages over completions (:attr:`Sample.turn_spans`). How the advantages are computed is each algorithm's business
(:mod:`llm_marl.algos.advantages`); this module only places them on the tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llm_marl.rollout.types import Trajectory


@dataclass
class Sample:
    """One contiguous token stream of one agent, ready for
    :func:`~llm_marl.algos.update.policy_gradient_update`."""

    prompt_ids: list[int]
    """Tokens before the first generated token (never trained on)."""
    completion_ids: list[int]
    """Everything after the prompt: generated tokens and env-produced tokens between turns."""
    mask: list[int]
    """1 for tokens the agent generated (trained on), 0 for env-produced tokens."""
    advantages: list[float]
    """Per completion token (the advantage of the turn that generated it; 0 where mask is 0)."""
    old_logprobs: list[float] | None = None
    """Sampling log-probs from the rollout (``None``: computed before the update)."""
    weight: float = 1.0
    """Multiplies this sample's per-token loss (MATPO uses it to balance roles)."""
    agent: str = ""
    """The agent whose stream this is."""
    ref_logprobs: list[float] | None = field(default=None, repr=False)
    """Filled by the update when ``kl_coef > 0``."""
    turn_spans: list[tuple[int, int]] | None = None
    """``(start, end)`` in ``completion_ids`` of each turn the agent generated, when the stream
    holds several. The sequence-level aggregations count each turn as one completion (CoMLRL
    updates each turn's completions separately), so a long turn does not outweigh a short one.
    ``None``: the whole stream is one completion."""

    def turn_lengths(self) -> list[int]:
        """Per completion token, how many generated tokens its turn has (0 outside any turn).

        A stream without ``turn_spans`` is one turn: every token gets :attr:`num_generated`.
        """
        if not self.turn_spans:
            return [self.num_generated] * len(self.completion_ids)
        lengths = [0] * len(self.completion_ids)
        for start, end in self.turn_spans:
            generated = int(sum(self.mask[start:end]))
            lengths[start:end] = [generated] * (end - start)
        return lengths

    @property
    def num_turns(self) -> int:
        """How many completions the sequence-level aggregations count this stream as."""
        if not self.turn_spans:
            return 1
        return sum(1 for start, end in self.turn_spans if any(self.mask[start:end]))

    @property
    def num_generated(self) -> int:
        """How many tokens of the sample the agent generated (the ones trained on)."""
        return int(sum(self.mask))


def trajectory_samples(
    trajectory: Trajectory, turn_advantages: Sequence[float], weight: float = 1.0
) -> list[Sample]:
    """One :class:`Sample` per token stream of ``trajectory``, with per-token advantages.

    ``turn_advantages[k]`` is credited to every token turn ``k`` generated; env-produced tokens
    between turns get 0 (their mask is 0 anyway). Streams in which the agent generated nothing
    are left out.
    """
    if len(turn_advantages) != len(trajectory.turns):
        raise ValueError(
            f"{len(turn_advantages)} advantages for {len(trajectory.turns)} turns of agent "
            f"{trajectory.agent!r}"
        )
    for turn in trajectory.turns:
        if turn.text and not turn.completion_ids:
            raise ValueError(
                f"agent {trajectory.agent!r} (policy {trajectory.policy!r}) returned text "
                "without token ids: a trainable policy must report the ids it generated "
                "(token-in/token-out). Mark text-only policies trainable=False."
            )
    samples: list[Sample] = []
    for segment in trajectory.segments():
        if not segment.num_generated:
            continue  # nothing generated, nothing to learn
        advantages = [0.0] * len(segment.completion_ids)
        for k, start, end in segment.turn_spans:
            advantages[start:end] = [float(turn_advantages[k])] * (end - start)
        spans = [(start, end) for _, start, end in segment.turn_spans]
        samples.append(
            Sample(
                prompt_ids=segment.prompt_ids,
                completion_ids=segment.completion_ids,
                mask=segment.mask,
                advantages=advantages,
                old_logprobs=segment.logprobs,
                weight=weight,
                agent=trajectory.agent,
                turn_spans=spans if len(spans) > 1 else None,
            )
        )
    return samples
