"""The policy contract: chat conversations in, completions (text + tokens + log-probs) out.

Policies know nothing of environments. A policy receives a batch of conversations (OpenAI
message format) and returns one :class:`Completion` per conversation. Rollout code
(:mod:`llm_marl.rollout`) is the only place that joins policies and environments.

Token-in / token-out
--------------------
For multi-turn episodes the rollout hands the policy a :class:`TokenContext` per conversation:
the exact token ids of that agent's previous turn (its prompt followed by what it generated).
A policy that works on tokens (``HFPolicy``) must then build the next prompt as
``context.token_ids + tokens(new messages)`` so that generated tokens are never re-tokenised
(:class:`ChatTokenPolicy` does, for ``HFPolicy`` and ``VLLMPolicy``).
``Completion.prompt_ids`` is the full prompt actually fed to the model. A policy that cannot
honour a context (a re-rendered chat template that does not extend the previous text) may
ignore it; the rollout detects that ``prompt_ids`` does not extend the context and records the
turn as a new segment.
"""

from __future__ import annotations

import dataclasses
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llm_marl.checks import check_int, check_number
from llm_marl.errors import ConfigError
from llm_marl.errors import PolicyError as PolicyError  # re-exported: policies raise it
from llm_marl.tools.text import scrub_surrogates

if TYPE_CHECKING:
    import torch

    from llm_marl.policies.chat import ChatTokenizer

Message = dict[str, Any]
"""One chat message: ``{"role": "system" | "user" | "assistant" | "tool", "content": str}``."""

Conversation = list[Message]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions. Shared by every policy backend."""

    max_new_tokens: int = 128
    """Upper bound on generated tokens per completion."""
    temperature: float = 1.0
    """Softmax temperature; ``0`` means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass; ``1.0`` disables it."""
    top_k: int = 0
    """Keep only the ``top_k`` most likely tokens; ``0`` disables it."""
    stop: tuple[str, ...] = ()
    """Strings that end a completion (the stop string is kept out of ``text``)."""
    seed: int | None = None
    """Seed for this call; ``None`` draws from the backend's own generator."""
    request_seeds: tuple[int, ...] | None = None
    """One seed per conversation of the call (set by :func:`~llm_marl.rollout.collect`): each
    conversation then samples from a generator of its own, so that its completion does not
    depend on which other conversations share the batch. Backends that sample themselves
    (``HFPolicy``, ``VLLMPolicy``, ``OpenAIPolicy``'s per-request ``seed``) honour it; when set
    it takes precedence over :attr:`seed`."""

    def __post_init__(self) -> None:
        check_int(self.max_new_tokens, "max_new_tokens")
        if self.request_seeds is not None:
            if not isinstance(self.request_seeds, tuple):
                raise TypeError("request_seeds must be a tuple of ints (one per conversation)")
            for s in self.request_seeds:
                check_int(s, "request_seeds[i]", 0)
        check_number(self.temperature, "temperature", 0)
        if math.isinf(self.temperature):  # a softmax at infinite temperature is no distribution
            raise ConfigError(f"temperature must be a finite number >= 0, got {self.temperature}")
        check_number(self.top_p, "top_p", 0, 1, open_low=True)
        check_int(self.top_k, "top_k", 0)


def call_seed(sampling: SamplingParams, rng: random.Random) -> int:
    """The seed of one sampling call: ``sampling.seed`` when the caller set one, else a fresh
    draw from the backend's own generator ``rng`` (so that unseeded calls differ from each other,
    while a policy built with a seed replays the same stream of calls)."""
    return sampling.seed if sampling.seed is not None else rng.randrange(2**63)


def per_agent_sampling(
    sampling: SamplingParams | Mapping[str, SamplingParams] | None,
    agents: Sequence[str],
    *,
    default: SamplingParams | Mapping[str, SamplingParams] | None = None,
    what: str = "sampling",
) -> dict[str, SamplingParams]:
    """The one normaliser of "sampling for every agent, or per agent" arguments.

    ``sampling`` is one :class:`SamplingParams` for every agent, a dict of them per agent, or
    ``None``. Agents the dict leaves out (or every agent, for ``None``) take ``default`` (one
    value or a per-agent dict); with no default a missing agent is an error, so that a typo in a
    config never silently samples an agent with the wrong settings. A key that names no agent is
    always an error.
    """
    agents = list(agents)

    def fallback(agent: str) -> SamplingParams:
        if isinstance(default, SamplingParams):
            return default
        if isinstance(default, Mapping) and agent in default:
            return default[agent]
        raise ValueError(f"{what} has no entry for agent {agent!r} (agents: {agents})")

    if sampling is None:
        if default is None:
            return dict.fromkeys(agents, SamplingParams())
        return {a: fallback(a) for a in agents}
    if isinstance(sampling, SamplingParams):
        return dict.fromkeys(agents, sampling)
    if isinstance(sampling, Mapping):
        unknown = [a for a in sampling if a not in agents]
        if unknown:
            raise ValueError(f"{what} given for unknown agents {unknown}; agents are {agents}")
        bad = [a for a, s in sampling.items() if not isinstance(s, SamplingParams)]
        if bad:
            raise TypeError(f"{what} for agents {bad} must be SamplingParams")
        return {a: sampling[a] if a in sampling else fallback(a) for a in agents}
    raise TypeError(
        f"{what} must be SamplingParams or a dict of them per agent, got {type(sampling).__name__}"
    )


@dataclass(frozen=True)
class TokenContext:
    """The token stream an agent has produced so far (see the module docstring)."""

    token_ids: tuple[int, ...]
    """Prompt + generated ids of the agent's previous turn, exactly as fed and sampled."""
    num_messages: int
    """How many messages of the conversation those ids cover, the agent's own reply included."""


TokenContexts = Sequence[TokenContext | None] | None
"""The ``contexts`` of a :meth:`Policy.generate` batch: one :class:`TokenContext` per conversation
(``None`` for a conversation with no previous turn), or ``None`` when no conversation has one."""


@dataclass
class Completion:
    """One sampled completion. Its text is UTF-8-safe: lone surrogates are replaced by U+FFFD
    when it is made (:func:`~llm_marl.tools.text.scrub_surrogates`)."""

    text: str
    """The completion as the environment receives it (special tokens and stop string removed)."""
    token_ids: list[int] = field(default_factory=list)
    """Generated token ids (may end with the end-of-turn token). Empty for text-only backends."""
    prompt_ids: list[int] = field(default_factory=list)
    """The full prompt fed to the model. Empty for text-only backends."""
    logprobs: list[float] | None = None
    """Sampling log-probability of each generated token (``None`` if the backend has none)."""
    finish_reason: str = "stop"
    """``"stop"`` (end of turn or stop string) or ``"length"`` (hit ``max_new_tokens``)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Backend-specific extras (latency, usage, raw response...)."""

    def __post_init__(self) -> None:
        # Every backend's text enters the rollout here: an API reply decoded from a "\ud800"
        # escape (or a scripted function's output) would make the next agent's tokenizer, a
        # reward model or a JSONL writer raise far from where it came in.
        if isinstance(self.text, str):
            self.text = scrub_surrogates(self.text)


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a batch of conversations into completions."""

    name: str
    trainable: bool

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: TokenContexts = None,
    ) -> list[Completion]:
        """Return one completion per conversation, in order. One call = one batch."""
        ...


@runtime_checkable
class TrainablePolicy(Policy, Protocol):
    """A policy whose parameters an algorithm can update."""

    logprob_temperature: float
    """Temperature :meth:`sequence_logprobs` divides the logits by. It must equal the sampling
    temperature of the rollout, or the importance ratio ``pi / pi_old`` is off at step one; the
    :class:`~llm_marl.train.Trainer` sets it from the run's sampling settings (greedy -> 1.0)."""

    def parameters(self) -> Any:
        """The trainable parameters (an iterator of ``torch.nn.Parameter``)."""
        ...

    def sequence_logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        *,
        reference: bool = False,
    ) -> list[torch.Tensor]:
        """Per-token log-probs of ``completion_ids`` given ``prompt_ids``, one batched forward.

        Returns one 1-D tensor per sequence (length ``len(completion_ids[i])``) that carries
        gradients unless ``reference`` is true (then the reference model is used, under
        ``torch.no_grad``: the base model with adapters disabled for LoRA policies).
        Log-probs use the same temperature as sampling so importance ratios are consistent.
        """
        ...

    def save(self, path: str) -> None:
        """Write the trainable weights (adapter or full model) under ``path``."""
        ...

    def load(self, path: str) -> None:
        """Read weights written by :meth:`save`."""
        ...


class ChatTokenPolicy(ABC):
    """Base of the policies that sample token ids themselves (``HFPolicy``, ``VLLMPolicy``):
    their one :meth:`generate`, token-in / token-out (see the module docstring).

    :meth:`generate` builds every prompt's ids with :attr:`chat` (extending each conversation's
    :class:`TokenContext`), samples the batch in one call of :meth:`_sample_ids`, and cuts and
    decodes the raw ids into completions with :attr:`chat` again. A subclass sets ``name``,
    ``trainable`` and :attr:`chat`, implements :meth:`_sample_ids` and, if its rows come back
    padded, :meth:`_pads_rows`.
    """

    name: str
    trainable: bool
    chat: ChatTokenizer
    """The prompt builder and completion cutter (:class:`~llm_marl.policies.chat.ChatTokenizer`)."""

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: TokenContexts = None,
    ) -> list[Completion]:
        """Sample one completion per conversation with a single batched sampling call.

        A prompt that leaves no room in the model's context (:meth:`context_length`) is not
        sampled: a conversation grown from untrusted replies must cost an error, not a forward
        pass over an unbounded sequence. The other rows are sampled as usual, and the call
        raises :class:`BatchPolicyError` so that only those conversations' episodes fail.
        """
        prompts, extended = self.chat.batch_prompt_ids(conversations, contexts)
        if not prompts:
            return []
        limit = self.context_length()
        too_long = {i for i, p in enumerate(prompts) if limit is not None and len(p) >= limit}
        if not too_long:
            return self._complete(prompts, extended, contexts, sampling)
        keep = [i for i in range(len(prompts)) if i not in too_long]
        done: list[Completion] = []
        if keep:
            seeds = sampling.request_seeds
            done = self._complete(
                [prompts[i] for i in keep],
                [extended[i] for i in keep],
                None if contexts is None else [contexts[i] for i in keep],
                sampling
                if seeds is None
                else dataclasses.replace(sampling, request_seeds=tuple(seeds[i] for i in keep)),
            )
        results: list[Completion | str] = []
        kept = iter(done)
        for i, p in enumerate(prompts):
            if i in too_long:
                results.append(
                    f"prompt {i} has {len(p)} tokens; {self.name}'s context holds {limit}"
                )
            else:
                results.append(next(kept))
        return batch_completions(results)  # raises: the rows left out failed

    def _complete(
        self,
        prompts: list[list[int]],
        extended: list[bool],
        contexts: TokenContexts,
        sampling: SamplingParams,
    ) -> list[Completion]:
        """Sample ``prompts`` in one :meth:`_sample_ids` call and cut them into completions."""
        generated = self._sample_ids(prompts, sampling)
        return self.chat.batch_completions(
            prompts, extended, contexts, generated, sampling, trim_padding=self._pads_rows()
        )

    def context_length(self) -> int | None:
        """The most tokens a prompt and its completion may hold together, or ``None`` where
        the backend does not say (no prompt is then refused for its length)."""
        return None

    @abstractmethod
    def _sample_ids(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample the whole batch once: each prompt's raw generated ids and their sampling
        log-probs (not yet cut at an end token or a stop string)."""

    def _pads_rows(self) -> bool:
        """Whether :meth:`_sample_ids` pads the rows that finished early, so that trailing pad
        ids are padding, not samples (default: no, each row comes back as sampled)."""
        return False


class BatchPolicyError(PolicyError):
    """Some conversations of one ``generate`` call failed for good, others not.

    ``results[i]`` is the :class:`Completion` of conversation ``i``, or the message of its
    failure: :func:`~llm_marl.rollout.collect` uses it to drop only the episodes whose request
    failed. Caught as a plain :class:`PolicyError`, the whole batch counts as failed. Raised by
    :class:`ScriptedPolicy` and :class:`~llm_marl.policies.openai.OpenAIPolicy`.
    """

    def __init__(self, message: str, results: list[Completion | str]) -> None:
        super().__init__(message)
        self.results = results


def batch_completions(results: list[Completion | str]) -> list[Completion]:
    """The completions of a batch whose requests each came back as a :class:`Completion` or
    as the message of their failure; when any failed, a :class:`BatchPolicyError` that says
    how many did and carries every result."""
    failed = [r for r in results if isinstance(r, str)]
    if not failed:
        return [r for r in results if isinstance(r, Completion)]
    if len(results) == 1:
        raise BatchPolicyError(failed[0], results)
    summary = f"{len(failed)} of {len(results)} request(s) failed; first: {failed[0]}"
    raise BatchPolicyError(summary, results)


class ScriptedPolicy:
    """A policy backed by a plain Python function: ``fn(conversation) -> str``.

    Useful for frozen partners with known behaviour, tests and baselines. Always frozen.

    Examples:
        >>> echo = ScriptedPolicy(lambda conv: conv[-1]["content"].upper())
        >>> echo.generate([[{"role": "user", "content": "hi"}]], SamplingParams())[0].text
        'HI'
    """

    trainable = False

    def __init__(self, fn: Any, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"ScriptedPolicy needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "scripted"))

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: TokenContexts = None,
    ) -> list[Completion]:
        """One call of the function per conversation.

        A call that raises fails its conversation only: the others' completions come back in a
        :class:`BatchPolicyError` (as an API's failed requests do), so a rollout loses only the
        episodes whose request failed. A function that returns something other than a string
        is a bug and raises :class:`TypeError` for the whole call.
        """
        out: list[Completion | str] = []
        for conv in conversations:
            try:
                text = self.fn(conv)
            except PolicyError as err:
                out.append(str(err))
                continue
            except Exception as err:  # noqa: BLE001 - the function's fault on this request only
                out.append(f"{type(err).__name__}: {err}")
                continue
            if not isinstance(text, str):
                raise TypeError(
                    f"ScriptedPolicy {self.name!r}: function returned {type(text).__name__}, "
                    "expected str"
                )
            out.append(Completion(text=text))
        return batch_completions(out)

    def __repr__(self) -> str:
        return f"ScriptedPolicy({self.name!r})"
