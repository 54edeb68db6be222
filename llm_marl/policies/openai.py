"""A frozen policy served by any OpenAI-compatible ``/chat/completions`` endpoint.

Works with the OpenAI API and with local servers that speak the same protocol (vLLM, SGLang,
llama.cpp, Ollama, :mod:`llm_marl.policies.serve`). One HTTP request per conversation, sent
concurrently from a bounded thread pool; 429 / 5xx / connection errors / deadlines / torn
bodies are retried with exponential backoff and jitter (``Retry-After`` is honoured); other 4xx
answers fail at once. ``timeout`` is a deadline for the whole request (a server that trickles
its answer byte by byte cannot stretch it) and the body is read up to ``max_response_bytes``.
Every failure, of the transport (truncated body, bad chunked encoding, bad gzip) or of the
reply's shape (deeply nested JSON, a message that is not an object, content that is neither
text nor a list of text parts, no message at all), surfaces as a
:class:`~llm_marl.policies.base.PolicyError` naming the URL, so a rollout can tell an
infrastructure problem from a bad answer.

Native tool calls: a reply whose message carries ``tool_calls`` (its ``content`` often null)
becomes text that ends with one Hermes ``<tool_call>`` block per call, which the envs' tool-call
parser reads; the raw list stays in ``Completion.metadata["tool_calls"]``.

>>> policy = OpenAIPolicy("gpt-4o-mini")                          # doctest: +SKIP
>>> policy = OpenAIPolicy("tiny", base_url="http://127.0.0.1:8000/v1")  # no key needed locally
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

from llm_marl.policies.base import (
    BatchPolicyError,
    Completion,
    Conversation,
    PolicyError,
    SamplingParams,
    TokenContexts,
    batch_completions,
)
from llm_marl.tools.http import HttpError, http_request, retry_after_seconds

__all__ = ["BatchPolicyError", "OpenAIPolicy"]

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class _Retryable(Exception):
    """A failed attempt worth retrying (429, 5xx, connection error, deadline, torn body)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _decode_json(body: bytes) -> Any:
    """JSON from bytes; ValueError on anything that is not JSON (deep nesting included)."""
    try:
        return json.loads(body)
    except RecursionError:  # json recurses once per nesting level
        raise ValueError("JSON nested too deeply") from None
    # json.loads raises ValueError (and UnicodeDecodeError, a ValueError) on the rest.


def _server_message(body: bytes) -> str:
    """The error message of an OpenAI-style error body, else the start of the raw body."""
    try:
        parsed = _decode_json(body)
    except ValueError:
        return body[:500].decode("utf-8", "replace").strip()
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    return str(parsed)[:500]


def _message_text(content: Any) -> str:
    """The text of a message's ``content``: a string, null, or a list of content parts.

    The API defines a list of parts (``{"type": "text", "text": ...}``, ``{"type": "refusal",
    "refusal": ...}``) as the concatenation of their texts. Anything else is a malformed reply.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict):
                raise ValueError(f"a content part is a {type(part).__name__}, not an object")
            kind = part.get("type", "text")
            text = part.get(kind) if kind in ("text", "refusal") else None
            if not isinstance(text, str):
                raise ValueError(f"content part of type {kind!r} carries no text")
            texts.append(text)
        return "".join(texts)
    raise ValueError(f"message content is a {type(content).__name__}, not a string or a list")


def _with_tool_calls(text: str, tool_calls: Any) -> str:
    """``text`` followed by the message's native ``tool_calls``, each written as a Hermes
    ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` block.

    The env receives text, and its tool-call parser reads these blocks
    (:mod:`llm_marl.tools.calls`), so the calls are run (or, when malformed, scored as the
    model's format error) instead of the reply being read as empty. Every call is written, a
    malformed one (not an object, no ``function``) as the JSON it came as.
    """
    calls = tool_calls if isinstance(tool_calls, list) else [tool_calls]
    blocks = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            call = {"name": function.get("name"), "arguments": function.get("arguments")}
        blocks.append(f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>")
    return "\n".join([text, *blocks]) if text else "\n".join(blocks)


def _parse_completion(body: bytes) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``(body, choice, text)`` of a chat completion; ValueError naming what is malformed."""
    parsed = _decode_json(body)
    if not isinstance(parsed, dict):
        raise ValueError(f"the body is a JSON {type(parsed).__name__}, not an object")
    choices = parsed.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ValueError("no 'choices' list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ValueError(f"choices[0] is a {type(choice).__name__}, not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        # A missing message is not an empty answer: scoring it as one would blame the model.
        raise ValueError(f"choices[0].message is {type(message).__name__}, not an object")
    if "content" not in message and not message.get("tool_calls"):
        raise ValueError("choices[0].message has neither 'content' nor 'tool_calls'")
    text = _message_text(message.get("content"))
    if message.get("content") is None and isinstance(message.get("refusal"), str):
        text = message["refusal"]  # the model's answer, given in the refusal field
    if message.get("tool_calls"):
        text = _with_tool_calls(text, message["tool_calls"])
    if not isinstance(choice.get("finish_reason"), (str, type(None))):
        raise ValueError("choices[0].finish_reason is not a string")
    return parsed, choice, text


class OpenAIPolicy:
    """A black-box chat model behind an OpenAI-compatible API. Always frozen.

    Args:
        model: The ``model`` field of each request (e.g. ``"gpt-4o-mini"``).
        base_url: API root; requests go to ``{base_url}/chat/completions``.
        api_key_env: Environment variable that holds the API key. Required unless ``base_url``
            points at localhost / 127.0.0.1 (then a key is sent only if the variable is set).
        timeout: Deadline in seconds for one attempt as a whole: connect, headers and the whole
            body (a server that trickles its answer cannot stretch it).
        max_retries: Extra attempts after a retryable failure (429, 5xx, connection, timeout).
        backoff: Base delay in seconds; attempt ``k`` waits ``backoff * 2**k`` (capped at
            ``max_backoff``) with +-50% jitter, or the server's ``Retry-After`` if longer
            (capped at ``max_retry_after``).
        max_concurrency: At most this many requests in flight at once (a thread pool shared
            by all :meth:`generate` calls of this policy).
        name: Policy name (default: ``model``).
        extra_body: Extra JSON fields merged into every request (e.g. ``{"top_k": 20}`` for
            vLLM, ``{"reasoning_effort": "low"}``).
        max_tokens_key: Field that carries ``max_new_tokens`` (``"max_completion_tokens"`` for
            OpenAI reasoning models).
        headers: Extra HTTP headers.
        max_response_bytes: Largest (decoded) response body accepted; a larger one fails the
            request with a :class:`PolicyError` (it is never parsed).
        price_per_1k_prompt, price_per_1k_completion: The price table: what 1000 prompt /
            completion tokens cost (your currency, e.g. USD). When either is set, every turn
            this policy plays records its cost, from the server's ``usage`` token counts
            (:mod:`llm_marl.rollout.cost`); ``None`` (both): turns record no cost.
    """

    trainable = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_retry_after: float = 120.0,
        max_concurrency: int = 8,
        name: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_tokens_key: str = "max_tokens",
        headers: Mapping[str, str] | None = None,
        max_response_bytes: int = 64 * 1024 * 1024,
        price_per_1k_prompt: float | None = None,
        price_per_1k_completion: float | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty model name")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be >= 1, got {max_response_bytes}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        for label, price in (
            ("price_per_1k_prompt", price_per_1k_prompt),
            ("price_per_1k_completion", price_per_1k_completion),
        ):
            if price is not None and not (isinstance(price, (int, float)) and 0 <= price < 1e9):
                raise ValueError(f"{label} must be a number >= 0, got {price!r}")
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.model = model
        self.name = name or model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_retry_after = float(max_retry_after)
        self.max_concurrency = int(max_concurrency)
        self.max_response_bytes = int(max_response_bytes)
        self.extra_body = dict(extra_body or {})
        self.max_tokens_key = max_tokens_key
        self.api_key_env = api_key_env
        self.price_per_1k_prompt = (
            None if price_per_1k_prompt is None else float(price_per_1k_prompt)
        )
        self.price_per_1k_completion = (
            None if price_per_1k_completion is None else float(price_per_1k_completion)
        )

        key = os.environ.get(api_key_env) if api_key_env else None
        if not key and parsed.hostname not in _LOCAL_HOSTS:
            raise PolicyError(
                f"OpenAIPolicy({model!r}): environment variable {api_key_env} is not set, and "
                f"{self.base_url} is not a local server. Export your API key "
                f"(export {api_key_env}=...) or pass api_key_env= naming the variable that "
                "holds it."
            )
        self._headers = {"Content-Type": "application/json", **dict(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._jitter = random.Random()

    # ------------------------------------------------------------------ plumbing

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix=f"openai-{self.name}"
                )
            return self._pool

    def close(self) -> None:
        """Stop the worker threads (in-flight requests finish first)."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests

    def _payload(
        self, conversation: Conversation, sampling: SamplingParams, seed: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(conversation),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            self.max_tokens_key: sampling.max_new_tokens,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if seed is not None:
            body["seed"] = seed
        if sampling.top_k:
            # Not an OpenAI field; vLLM / SGLang / llama.cpp accept it.
            body["top_k"] = sampling.top_k
        body.update(self.extra_body)
        return body

    def _attempt(self, payload: dict[str, Any]) -> Completion:
        try:
            response = http_request(
                "POST",
                self.url,
                timeout=self.timeout,
                max_bytes=self.max_response_bytes,
                headers=self._headers,
                json_body=payload,
            )
        except HttpError as exc:
            if exc.kind == "deadline":
                raise _Retryable(
                    f"no complete answer within timeout={self.timeout:g}s "
                    "(a deadline for the whole request)"
                ) from None
            if exc.kind == "invalid_url":
                raise PolicyError(f"{self.url}: {exc}") from None
            # Refused connections, resets, torn or undecodable bodies (bad chunking, bad gzip,
            # a body shorter than its Content-Length): the server's fault, maybe transient.
            what = "connection" if exc.kind == "connect" else "protocol"
            raise _Retryable(f"{what} error: {exc}") from None
        status = response.status
        if not response.complete:
            raise PolicyError(
                f"{self.url} sent a body larger than max_response_bytes="
                f"{self.max_response_bytes} (HTTP {status}); raise the cap if this is expected"
            )
        if status == 429 or status >= 500:
            raise _Retryable(
                f"HTTP {status}: {_server_message(response.body)}",
                retry_after_seconds(response.headers.get("retry-after")),
            )
        if status != 200:
            hint = ""
            if status in (401, 403):
                hint = f" (check the API key in ${self.api_key_env})"
            raise PolicyError(
                f"{self.url} rejected the request with HTTP {status}: "
                f"{_server_message(response.body)}{hint}"
            )
        try:
            body, choice, text = _parse_completion(response.body)
        except ValueError as exc:
            raise PolicyError(
                f"{self.url} returned a body that is not a chat completion ({exc}): "
                f"{response.body[:300]!r}"
            ) from None
        raw_finish = choice.get("finish_reason")
        usage = body.get("usage")
        metadata: dict[str, Any] = {
            "usage": usage if isinstance(usage, dict) else {},
            "model": body.get("model"),
            "id": body.get("id"),
            "finish_reason_raw": raw_finish,
            "latency_s": response.elapsed,
        }
        message = choice["message"]
        if message.get("tool_calls"):
            metadata["tool_calls"] = message["tool_calls"]
        return Completion(
            text=text,
            finish_reason="length" if raw_finish == "length" else "stop",
            metadata=metadata,
        )

    def _complete(self, payload: dict[str, Any]) -> Completion:
        """One conversation: attempt, back off, retry; raise PolicyError when out of retries."""
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                completion = self._attempt(payload)
            except _Retryable as exc:
                if attempt + 1 == attempts:
                    raise PolicyError(
                        f"request to {self.url} failed after {attempts} attempt(s): {exc}"
                    ) from None
                delay = min(self.max_backoff, self.backoff * 2**attempt)
                delay *= 0.5 + self._jitter.random()
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, self.max_retry_after))
                time.sleep(delay)
                continue
            except PolicyError:
                raise
            except Exception as exc:
                # No fault of the server's reply may escape as a raw library error: whatever
                # requests/urllib3/json raise that the branches above do not name is still
                # the backend failing, never the model's answer.
                raise PolicyError(
                    f"request to {self.url} failed: {type(exc).__name__}: {exc}"
                ) from exc
            completion.metadata["attempts"] = attempt + 1
            return completion
        raise AssertionError("unreachable")  # pragma: no cover

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: TokenContexts = None,
    ) -> list[Completion]:
        """One request per conversation, at most ``max_concurrency`` in flight.

        ``contexts`` are ignored (a text API re-renders every prompt). With a seed, conversation
        ``i`` is sent ``seed + i`` so that identical prompts in a batch (a GRPO group) still get
        different samples; with ``sampling.request_seeds``, conversation ``i`` is sent
        ``request_seeds[i]``. Raises :class:`PolicyError` if any request fails for good.
        """
        if conversations and isinstance(conversations[0], dict):
            raise TypeError("generate takes a list of conversations (a list of message lists)")
        pool = self._executor()
        futures: list[Future[Completion]] = []
        for i, conv in enumerate(conversations):
            if sampling.request_seeds is not None:
                seed: int | None = sampling.request_seeds[i]
            else:
                seed = None if sampling.seed is None else sampling.seed + i
            futures.append(pool.submit(self._complete, self._payload(conv, sampling, seed)))
        results: list[Completion | str] = []
        try:
            for f in futures:
                try:
                    results.append(f.result())
                except PolicyError as exc:
                    results.append(str(exc))
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return batch_completions(results)

    def __repr__(self) -> str:
        return f"OpenAIPolicy({self.model!r}, base_url={self.base_url!r})"
