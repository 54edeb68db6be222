"""Serve any :class:`~llm_marl.policies.base.Policy` over an OpenAI-compatible chat API.

A small stdlib HTTP server (``ThreadingHTTPServer``) for local testing: point
:class:`~llm_marl.policies.openai.OpenAIPolicy` (or any OpenAI client) at it to use a local
model through the black-box code path. Endpoints: ``POST /v1/chat/completions``,
``GET /v1/models``, ``GET /health``. Requests are answered one at a time (the policy is called
under a lock); it is not a production server.

>>> with PolicyServer(HFPolicy(build_tiny_lm("/tmp/tiny")), model_name="tiny") as server:  # doctest: +SKIP
...     client = OpenAIPolicy("tiny", base_url=server.url)

From a shell: ``python -m llm_marl.policies.serve PATH_OR_HUB_ID --port 8000``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llm_marl.policies.base import Policy, SamplingParams

__all__ = ["PolicyServer", "main"]

Intercept = Callable[[int, dict[str, Any]], "tuple[int, dict[str, str], Any] | None"]
"""``intercept(request_number, body)`` may answer a request itself: return ``(status, headers,
json_body)``, or ``None`` to let the policy answer. Used to inject faults in tests."""


class _BadRequest(ValueError):
    pass


def _sampling_from_body(body: dict[str, Any]) -> SamplingParams:
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or 128
    try:
        return SamplingParams(
            max_new_tokens=int(max_tokens),
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            top_k=int(body.get("top_k") or 0),
            stop=tuple(str(s) for s in stop),
            seed=None if body.get("seed") is None else int(body["seed"]),
        )
    except (TypeError, ValueError) as exc:
        raise _BadRequest(f"bad sampling parameters: {exc}") from None


class PolicyServer:
    """Serve ``policy`` at ``http://{host}:{port}/v1`` (``port=0`` picks a free port).

    Counters for tests and monitoring: ``requests`` (POSTs received), ``in_flight`` and
    ``max_in_flight`` (concurrent POSTs being handled, the peak since start).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
        intercept: Intercept | None = None,
        verbose: bool = False,
    ) -> None:
        self.policy = policy
        self.model_name = model_name or getattr(policy, "name", "policy")
        self.intercept = intercept
        self.verbose = verbose
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._counter_lock = threading.Lock()
        self._policy_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()
        """Set by :meth:`stop`; a slow ``intercept`` can wait on it to end promptly."""

        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        bound_host, self.port = self._httpd.server_address[:2]  # port=0 picks a free one
        # typeshed allows bytes for the host (AF_UNIX); an AF_INET server reports a str.
        self.host = bound_host if isinstance(bound_host, str) else bound_host.decode()

    @property
    def url(self) -> str:
        """The ``base_url`` for OpenAI clients (ends in ``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> PolicyServer:
        """Serve in a background thread; returns ``self``."""
        if self._thread is None:
            # A short poll interval makes stop() return promptly.
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="policy-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket (handler threads are daemons: not awaited)."""
        self.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ request logic

    def _enter(self) -> int:
        with self._counter_lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.requests

    def _leave(self) -> None:
        with self._counter_lock:
            self.in_flight -= 1

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat-completions request body (raises ``_BadRequest`` on bad input)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("'messages' must be a non-empty list of {role, content} objects")
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise _BadRequest("every message needs a 'role' (and usually 'content')")
        n = int(body.get("n") or 1)
        if not 1 <= n <= 128:
            raise _BadRequest(f"n must be in [1, 128], got {n}")
        sampling = _sampling_from_body(body)
        with self._policy_lock:
            completions = self.policy.generate([messages] * n, sampling)
        prompt_tokens = len(completions[0].prompt_ids) if completions else 0
        completion_tokens = sum(len(c.token_ids) for c in completions)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": c.text},
                    "finish_reason": c.finish_reason,
                }
                for i, c in enumerate(completions)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body the server reads (a chat request is text; 64 MiB is far above any)."""


def _content_length(value: str | None) -> int | str:
    """The body length from a ``Content-Length`` header, or a message saying why it is bad."""
    if value is None or not value.strip():
        return 0
    text = value.strip()
    # int() would accept "+5", "1_000" and surrounding spaces; HTTP allows digits only.
    if not text.isascii() or not text.isdigit():
        return f"Content-Length must be a non-negative integer, got {value[:40]!r}"
    if len(text) > 12 or int(text) > MAX_BODY_BYTES:
        return f"request body too large: at most {MAX_BODY_BYTES} bytes are accepted"
    return int(text)


class _Handler(BaseHTTPRequestHandler):
    owner: PolicyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.owner.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. it timed out); nothing to tell it

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": self.owner.model_name, "object": "model", "owned_by": "llm_marl"}
            self._send(200, {"object": "list", "data": [model]})
        elif self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        number = self.owner._enter()
        try:
            length = _content_length(self.headers.get("Content-Length"))
            if isinstance(length, str):
                # The body's end is unknown, so the connection cannot be reused: answer, close.
                self.close_connection = True
                status = 413 if length.startswith("request body too large") else 400
                self._error(status, length, "invalid_request_error")
                return
            raw = self.rfile.read(length) if length else b""
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}", "not_found")
                return
            try:
                body = json.loads(raw or b"null")
            except RecursionError:  # json recurses once per nesting level
                self._error(400, "request body is nested too deeply", "invalid_request_error")
                return
            except ValueError:
                self._error(400, "request body is not valid JSON", "invalid_request_error")
                return
            if not isinstance(body, dict):
                self._error(400, "request body must be a JSON object", "invalid_request_error")
                return
            if self.owner.intercept is not None:
                answer = self.owner.intercept(number, body)
                if answer is not None:
                    status, headers, payload = answer
                    self._send(status, payload, headers)
                    return
            try:
                self._send(200, self.owner.complete(body))
            except _BadRequest as exc:
                self._error(400, str(exc), "invalid_request_error")
            except Exception as exc:  # the policy failed: report it like an API server would
                self._error(500, f"{type(exc).__name__}: {exc}", "server_error")
        finally:
            self.owner._leave()


def main(argv: list[str] | None = None) -> None:
    """``python -m llm_marl.policies.serve MODEL`` -- serve a local model (or the tiny LM)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", help="model directory or Hub id; 'tiny' builds the tiny LM")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--name", default=None, help="model name reported to clients")
    parser.add_argument("--device", default=None)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)

    from llm_marl.policies.hf import HFPolicy

    model = args.model
    if model == "tiny":
        import tempfile
        from pathlib import Path

        from llm_marl.policies.tiny import build_tiny_lm

        model = build_tiny_lm(Path(tempfile.gettempdir()) / "llm_marl-tiny-lm")
    policy = HFPolicy(model, device=args.device)
    server = PolicyServer(
        policy,
        host=args.host,
        port=args.port,
        model_name=args.name or args.model,
        verbose=args.verbose,
    )
    print(f"serving {args.model} at {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the way to stop it
        server.serve_forever()


if __name__ == "__main__":
    main()
