"""The tokenizer side of a local policy: chat prompts as token ids, completions cut and decoded.

:class:`ChatTokenizer` is shared by every backend that samples token ids itself
(:class:`~llm_marl.policies.hf.HFPolicy` and :class:`~llm_marl.policies.vllm.VLLMPolicy`), so
that both build exactly the same prompt ids for a conversation (honouring a
:class:`~llm_marl.policies.base.TokenContext`: generated tokens are never re-tokenised) and cut
a raw generation at the same end token / stop string. Their one ``generate`` is
:class:`~llm_marl.policies.base.ChatTokenPolicy`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_marl.policies.base import (
    Completion,
    Conversation,
    SamplingParams,
    TokenContext,
    TokenContexts,
)

__all__ = ["END_OF_TURN_TOKENS", "PROMPT_MODES", "ChatTokenizer", "render_raw"]

PROMPT_MODES = ("chat", "raw")
"""How a policy turns a conversation into prompt text: ``chat`` applies the tokenizer's chat
template; ``raw`` tokenises the messages' plain text (:func:`render_raw`), as CoMLRL does with
its formatters' strings (no template: ``tokenizer(prompt)`` in
``comlrl/trainers/reinforce/magrpo.py``, ``MAGRPOTrainer._generate_completions``, 1.4.3)."""

RAW_SEPARATOR = "\n\n"
"""What :func:`render_raw` puts between two messages."""


def render_raw(messages: Sequence[Any]) -> str:
    """The raw prompt of a conversation: the messages' contents, in order, joined by a blank
    line, with no role markers and nothing after the last one. A conversation of one user
    message (a formatter's string) is that string exactly."""
    return RAW_SEPARATOR.join(str(m.get("content") or "") for m in messages)


END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>")
"""Chat-format end-of-turn markers of common model families. Any of them that the tokenizer
knows as an added token also ends a completion (generation configs often list only one)."""


def _as_ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


class ChatTokenizer:
    """Chat template rendering, token-in/token-out prompts, and completion finishing.

    Args:
        tokenizer: A ``transformers`` tokenizer with a chat template.
        chat_template_kwargs: Extra variables for the chat template (e.g.
            ``{"enable_thinking": False}``).
        generation_eos: The model's ``generation_config.eos_token_id`` (an id, a list of ids or
            ``None``): these end a completion too.
        prompt_mode: ``"chat"`` (the chat template) or ``"raw"`` (:func:`render_raw`, tokenised
            with the tokenizer's own special tokens, e.g. a BOS; no template needed). Raw
            prompts are re-tokenised whole each turn (a token context is not extended).

    Attributes:
        pad_id: The id used to pad batches (the tokenizer's pad token, else an end token).
        end_ids: Every id that ends a completion: the generation config's eos ids, the
            tokenizer's eos, and the end-of-turn markers of :data:`END_OF_TURN_TOKENS` that the
            tokenizer knows.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        generation_eos: Any = None,
        prompt_mode: str = "chat",
    ) -> None:
        if prompt_mode not in PROMPT_MODES:
            raise ValueError(f"prompt_mode must be one of {PROMPT_MODES}, got {prompt_mode!r}")
        self.prompt_mode = prompt_mode
        self.max_prompt_tokens: int | None = None
        """Keep only the last this many prompt ids (verl's ``truncation: left``); ``None``:
        no limit. Set by a run config's ``policies.max_prompt_tokens``."""
        if prompt_mode == "chat" and getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                "the tokenizer has no chat template; set tokenizer.chat_template (a Jinja "
                "template), use an instruct/chat model, or prompt_mode='raw'"
            )
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        eos = _as_ids(generation_eos)
        self.pad_id = self._find_pad_id(eos)
        self.end_ids = self._find_end_ids(eos)

    def _find_pad_id(self, generation_eos: list[int]) -> int:
        for cand in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if cand is not None:
                return int(cand)
        if generation_eos:
            return generation_eos[0]
        raise ValueError(
            "the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token"
        )

    def _find_end_ids(self, generation_eos: list[int]) -> tuple[int, ...]:
        ids = list(generation_eos)
        if self.tokenizer.eos_token_id is not None:
            ids.append(int(self.tokenizer.eos_token_id))
        added = self.tokenizer.get_added_vocab()
        ids.extend(added[t] for t in END_OF_TURN_TOKENS if t in added)
        if not ids:
            raise ValueError("no end-of-sequence token found (tokenizer.eos_token is unset)")
        return tuple(dict.fromkeys(ids))

    # ------------------------------------------------------------------ prompts

    def render(self, messages: Sequence[Any], add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages`` (raw mode: :func:`render_raw`)."""
        if self.prompt_mode == "raw":
            return render_raw(messages)
        return self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.chat_template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added: the template wrote them)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(
        self, conversation: Conversation, context: TokenContext | None = None
    ) -> tuple[list[int], bool]:
        """Token ids of the prompt for ``conversation``; second item: whether it extends ``context``.

        With a context, the prompt is ``context.token_ids`` followed by the tokens of what the
        chat template adds after the first ``context.num_messages`` messages (the closing of the
        previous assistant turn, the new messages, the generation prompt). If the template does
        not render the conversation as an extension of that prefix, the whole conversation is
        re-rendered and the context is ignored. With :attr:`max_prompt_tokens` set, a longer
        prompt keeps only its last ``max_prompt_tokens`` ids (left truncation).
        """
        ids, extended = self._prompt_ids(conversation, context)
        limit = self.max_prompt_tokens
        if limit is not None and len(ids) > limit:
            return ids[-limit:], False
        return ids, extended

    def _prompt_ids(
        self, conversation: Conversation, context: TokenContext | None
    ) -> tuple[list[int], bool]:
        if self.prompt_mode == "raw":
            text = render_raw(conversation)
            return list(self.tokenizer(text, add_special_tokens=True)["input_ids"]), False
        full = self.render(conversation, add_generation_prompt=True)
        if context is not None and 0 < context.num_messages <= len(conversation):
            bridge = self._bridge(conversation, context, full)
            if bridge is not None:
                return list(context.token_ids) + self.encode(bridge), True
        return self.encode(full), False

    def batch_prompt_ids(
        self,
        conversations: Sequence[Conversation],
        contexts: TokenContexts = None,
    ) -> tuple[list[list[int]], list[bool]]:
        """Check a ``generate`` batch and build its prompts: ids, and whether each extends
        its context (see :meth:`prompt_ids`)."""
        if isinstance(conversations, dict) or (
            conversations and isinstance(conversations[0], dict)
        ):
            raise TypeError("generate takes a list of conversations (a list of message lists)")
        if contexts is not None and len(contexts) != len(conversations):
            raise ValueError(f"got {len(contexts)} contexts for {len(conversations)} conversations")
        prompts: list[list[int]] = []
        extended: list[bool] = []
        for i, conv in enumerate(conversations):
            ids, ext = self.prompt_ids(conv, contexts[i] if contexts is not None else None)
            prompts.append(ids)
            extended.append(ext)
        return prompts, extended

    def batch_completions(
        self,
        prompts: list[list[int]],
        extended: list[bool],
        contexts: TokenContexts,
        generated: tuple[list[list[int]], list[list[float]]],
        sampling: SamplingParams,
        *,
        trim_padding: bool = False,
    ) -> list[Completion]:
        """The completions of a batch from its raw ``(ids, logprobs)`` (see :meth:`finish`)."""
        out = []
        for i, (ids, lps) in enumerate(zip(*generated)):
            completion = self.finish(ids, lps, sampling, trim_padding=trim_padding)
            completion.prompt_ids = prompts[i]
            if contexts is not None and contexts[i] is not None:
                completion.metadata["context_extended"] = extended[i]
            out.append(completion)
        return out

    def _bridge(self, conversation: Conversation, context: TokenContext, full: str) -> str | None:
        prev = self.render(conversation[: context.num_messages], add_generation_prompt=False)
        if not full.startswith(prev):
            return None
        ids = list(context.token_ids)
        ctx_text = self.decode_raw(ids)
        if prev.startswith(ctx_text):
            return full[len(ctx_text) :]
        # The turn may have ended on an end token the template does not render (e.g.
        # <|endoftext|> where ChatML closes with <|im_end|>): keep the generated token and
        # close the turn the way the template does.
        if ids and ids[-1] in self.end_ids:
            head = self.decode_raw(ids[:-1])
            if prev.startswith(head):
                return full[len(head) :]
        return None

    def decode_raw(self, ids: Sequence[int]) -> str:
        """Exact text of ``ids``, special tokens included and no space clean-up (to compare
        with what the chat template renders)."""
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    # ------------------------------------------------------------------ completions

    def finish(
        self,
        ids: list[int],
        logprobs: list[float],
        sampling: SamplingParams,
        *,
        trim_padding: bool = False,
    ) -> Completion:
        """Cut raw generated ids at the first end token or stop string and decode them.

        ``trim_padding``: the ids come from a padded batch (``transformers.generate`` pads rows
        that a stop string finished early), so trailing pad ids are padding, not samples.
        The returned completion satisfies ``decode(token_ids) == text``; ``finish_reason`` is
        ``"stop"`` when an end token or a stop string ended it, else ``"length"``.
        """
        finish = "length"
        for j, tok in enumerate(ids):
            if tok in self.end_ids:
                ids, logprobs, finish = ids[: j + 1], logprobs[: j + 1], "stop"
                break
        if trim_padding and finish == "length" and self.pad_id not in self.end_ids:
            k = len(ids)
            while k > 0 and ids[k - 1] == self.pad_id:
                k -= 1
            if k < len(ids):
                ids, logprobs, finish = ids[:k], logprobs[:k], "stop"
        metadata: dict[str, Any] = {}
        if sampling.stop:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            hits = [(text.find(s), s) for s in sampling.stop if s and s in text]
            if hits:
                pos, stop = min(hits)
                keep = text[:pos]
                # Keep the longest token prefix whose text lies within the part before the stop
                # string, so decode(token_ids) == text holds exactly. Characters of a token that
                # straddles the stop string are dropped with it.
                k = len(ids)
                while k > 0:
                    prefix = self.tokenizer.decode(ids[:k], skip_special_tokens=True)
                    if len(prefix) <= pos and keep.startswith(prefix):
                        break
                    k -= 1
                ids, logprobs, finish = ids[:k], logprobs[:k], "stop"
                metadata["stop"] = stop
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(
            text=text, token_ids=ids, logprobs=logprobs, finish_reason=finish, metadata=metadata
        )
