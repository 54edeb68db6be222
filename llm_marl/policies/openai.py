"""A frozen policy served by any OpenAI-compatible ``/chat/completions`` endpoint.

Works with the OpenAI API and with local servers that speak the same protocol (vLLM, SGLang,
llama.cpp, Ollama, :mod:`llm_marl.policies.serve`). One HTTP request per conversation, sent
concurrently from a bounded thread pool; 429 / 5xx / connection errors / timeouts are retried
with exponential backoff and jitter (``Retry-After`` is honoured); other 4xx answers fail at
once. Every failure surfaces as a :class:`~llm_marl.policies.base.PolicyError` naming the URL,
so a rollout can tell an infrastructure problem from a bad answer.

>>> policy = OpenAIPolicy("gpt-4o-mini")                          # doctest: +SKIP
>>> policy = OpenAIPolicy("tiny", base_url="http://127.0.0.1:8000/v1")  # no key needed locally
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

from llm_marl.policies.base import (
    Completion,
    Conversation,
    PolicyError,
    SamplingParams,
    TokenContext,
)

__all__ = ["OpenAIPolicy"]

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class _Retryable(Exception):
    """A failed attempt worth retrying (429, 5xx, connection error, timeout)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(response: Any) -> str:
    """The error message of an OpenAI-style error body, else the start of the raw body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500].strip() or response.reason or ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    return str(body)[:500]


class OpenAIPolicy:
    """A black-box chat model behind an OpenAI-compatible API. Always frozen.

    Args:
        model: The ``model`` field of each request (e.g. ``"gpt-4o-mini"``).
        base_url: API root; requests go to ``{base_url}/chat/completions``.
        api_key_env: Environment variable that holds the API key. Required unless ``base_url``
            points at localhost / 127.0.0.1 (then a key is sent only if the variable is set).
        timeout: Seconds to wait for the connection and for the server's answer, per attempt.
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
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty model name")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
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
        self.extra_body = dict(extra_body or {})
        self.max_tokens_key = max_tokens_key
        self.api_key_env = api_key_env

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
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._jitter = random.Random()

    # ------------------------------------------------------------------ plumbing

    def _session(self) -> Any:
        """One ``requests.Session`` per worker thread (sessions are not thread-safe)."""
        session = getattr(self._local, "session", None)
        if session is None:
            import requests
            from requests.adapters import HTTPAdapter

            session = requests.Session()
            # Our own retry loop handles failures; urllib3 must not retry behind our back.
            adapter = HTTPAdapter(pool_connections=1, pool_maxsize=1, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

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

    def _payload(self, conversation: Conversation, sampling: SamplingParams, seed: int | None):
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
        import requests

        start = time.monotonic()
        try:
            response = self._session().post(
                self.url, json=payload, headers=self._headers, timeout=self.timeout
            )
        except requests.Timeout:
            raise _Retryable(f"no answer within timeout={self.timeout:g}s") from None
        except requests.ConnectionError as exc:
            raise _Retryable(f"connection error: {exc}") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(
                f"HTTP {status}: {_server_message(response)}",
                _parse_retry_after(response.headers.get("Retry-After")),
            )
        if status != 200:
            hint = ""
            if status in (401, 403):
                hint = f" (check the API key in ${self.api_key_env})"
            raise PolicyError(
                f"{self.url} rejected the request with HTTP {status}: "
                f"{_server_message(response)}{hint}"
            )
        try:
            body = response.json()
            choice = body["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise PolicyError(
                f"{self.url} returned a body that is not a chat completion: {response.text[:300]!r}"
            ) from None
        raw_finish = choice.get("finish_reason")
        metadata: dict[str, Any] = {
            "usage": body.get("usage") or {},
            "model": body.get("model"),
            "id": body.get("id"),
            "finish_reason_raw": raw_finish,
            "latency_s": time.monotonic() - start,
        }
        if message.get("tool_calls"):
            metadata["tool_calls"] = message["tool_calls"]
        return Completion(
            text=message.get("content") or "",
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
            completion.metadata["attempts"] = attempt + 1
            return completion
        raise AssertionError("unreachable")  # pragma: no cover

    def generate(
        self,
        conversations: Sequence[Conversation],
        sampling: SamplingParams,
        contexts: Sequence[TokenContext | None] | None = None,
    ) -> list[Completion]:
        """One request per conversation, at most ``max_concurrency`` in flight.

        ``contexts`` are ignored (a text API re-renders every prompt). With a seed, conversation
        ``i`` is sent ``seed + i`` so that identical prompts in a batch (a GRPO group) still get
        different samples. Raises :class:`PolicyError` if any request fails for good.
        """
        if conversations and isinstance(conversations[0], dict):
            raise TypeError("generate takes a list of conversations (a list of message lists)")
        pool = self._executor()
        futures: list[Future[Completion]] = []
        for i, conv in enumerate(conversations):
            seed = None if sampling.seed is None else sampling.seed + i
            futures.append(pool.submit(self._complete, self._payload(conv, sampling, seed)))
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

    def __repr__(self) -> str:
        return f"OpenAIPolicy({self.model!r}, base_url={self.base_url!r})"
