"""What every agent spends: tokens, generate calls, seconds and money, per episode.

:func:`~llm_marl.rollout.collect` records on every :class:`~llm_marl.rollout.types.Turn` the
completion's prompt and completion tokens (the server's ``usage`` when it reports one, else the
token ids), the wall time of the ``generate`` call that produced it (and how many completions
that call produced together), how many episodes received it (a shared frozen completion) and,
when the policy has a price table (``price_per_1k_prompt`` / ``price_per_1k_completion``, e.g.
:class:`~llm_marl.policies.openai.OpenAIPolicy`), its cost.

Accounting rules (:func:`turn_cost`): a turn counts as one call; a batched call's seconds are
split evenly among the completions it produced; a completion shared by ``n`` episodes counts
``1 / n`` of its call, tokens, seconds and cost in each. Frozen agents are counted exactly like
trainable ones: every agent that acts through ``collect`` is in the episode (agents folded into
an env with :class:`~llm_marl.rollout.frozen.FrozenAgents` are part of the env's dynamics and
are not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_marl.policies.base import Completion
from llm_marl.rollout.types import Episode, Turn

__all__ = [
    "AgentCost",
    "completion_cost",
    "cost_metrics",
    "episode_costs",
    "token_counts",
    "turn_cost",
]


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def token_counts(completion: Completion) -> tuple[int, int]:
    """``(prompt tokens, completion tokens)`` of a completion: the server's ``usage`` counts
    when it sent them, else the lengths of its token ids (0 for a text-only policy)."""
    usage = completion.metadata.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    prompt = _count(usage, "prompt_tokens")
    generated = _count(usage, "completion_tokens")
    return (
        len(completion.prompt_ids) if prompt is None else prompt,
        len(completion.token_ids) if generated is None else generated,
    )


def completion_cost(policy: Any, completion: Completion) -> float | None:
    """The completion's cost from the policy's price table (``price_per_1k_prompt`` and
    ``price_per_1k_completion``, per 1000 tokens; an unset one counts 0), or ``None`` when the
    policy has neither."""
    prompt_price = getattr(policy, "price_per_1k_prompt", None)
    completion_price = getattr(policy, "price_per_1k_completion", None)
    if prompt_price is None and completion_price is None:
        return None
    prompt, generated = token_counts(completion)
    return (prompt * float(prompt_price or 0.0) + generated * float(completion_price or 0.0)) / 1000


@dataclass
class AgentCost:
    """What one agent spent (in one episode, or per episode on average)."""

    calls: float = 0.0
    """Completions requested (a shared one counts ``1 / copies``)."""
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    seconds: float = 0.0
    """Wall time of its generate calls (its share of each batched call)."""
    cost: float | None = None
    """Money, from the price table; ``None`` when none of its turns was priced."""

    @property
    def tokens(self) -> float:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: AgentCost) -> None:
        """Add ``other`` in place (a priced part makes the sum priced)."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def scaled(self, factor: float) -> AgentCost:
        """Every quantity times ``factor`` (e.g. ``1 / episodes`` for a mean)."""
        return AgentCost(
            self.calls * factor,
            self.prompt_tokens * factor,
            self.completion_tokens * factor,
            self.seconds * factor,
            None if self.cost is None else self.cost * factor,
        )

    def as_dict(self) -> dict[str, float | None]:
        """``{"calls", "tokens", "prompt_tokens", "completion_tokens", "seconds", "cost"}``."""
        return {
            "calls": self.calls,
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": self.seconds,
            "cost": self.cost,
        }


def turn_cost(turn: Turn) -> AgentCost:
    """One turn's share of what was spent (see the module docstring's rules)."""
    share = 1.0 / max(turn.copies, 1)
    return AgentCost(
        calls=share,
        prompt_tokens=turn.prompt_tokens * share,
        completion_tokens=turn.completion_tokens * share,
        seconds=turn.generate_seconds / max(turn.generate_batch, 1) * share,
        cost=None if turn.cost is None else turn.cost * share,
    )


def episode_costs(episode: Episode) -> dict[str, AgentCost]:
    """What each agent of the episode spent, frozen agents included."""
    out: dict[str, AgentCost] = {}
    for agent, trajectory in episode.trajectories.items():
        total = AgentCost()
        for turn in trajectory.turns:
            total.add(turn_cost(turn))
        out[agent] = total
    return out


def mean_costs(per_episode: Sequence[Mapping[str, AgentCost]]) -> dict[str, AgentCost]:
    """Per agent, the mean over episodes, plus ``"team"``: the sum over agents."""
    out: dict[str, AgentCost] = {}
    if not per_episode:
        return out
    for costs in per_episode:
        for agent, cost in costs.items():
            out.setdefault(agent, AgentCost()).add(cost)
    out = {agent: total.scaled(1.0 / len(per_episode)) for agent, total in out.items()}
    team = AgentCost()
    for cost in out.values():
        team.add(cost)
    out["team"] = team
    return out


def cost_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Flat metrics per agent and for the team, means per episode:
    ``cost/<agent>/tokens``, ``.../calls`` and ``.../cost`` (only when priced), and the
    generate seconds as ``time/generate/<agent>``.

    Wall-clock figures live under ``time/`` with every other timing of a run, so that rows
    of two runs of the same seed compare equal once ``time/`` keys are set aside (resume and
    executor checks do exactly that).
    """
    out: dict[str, float] = {}
    for agent, cost in mean_costs([episode_costs(ep) for ep in episodes]).items():
        for name, value in cost.as_dict().items():
            if name in ("prompt_tokens", "completion_tokens") or value is None:
                continue
            key = f"time/generate/{agent}" if name == "seconds" else f"cost/{agent}/{name}"
            out[key] = float(value)
    return out
