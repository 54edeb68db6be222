"""OpenAIPolicy against a real local HTTP server (PolicyServer serving the tiny LM):
completions, retries on 5xx / 429 (Retry-After), timeouts, client errors, API keys,
bounded concurrency."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from llm_marl.policies import OpenAIPolicy, PolicyError, PolicyServer, SamplingParams

CONV = [{"role": "user", "content": "What is 3 + 4?"}]


class Faults:
    """A programmable ``intercept`` hook: per-request answers chosen by the test."""

    def __init__(self) -> None:
        self.rule = None  # callable(number, body) -> answer or None
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, number, body):
        with self.lock:
            self.bodies.append(body)
        return self.rule(number, body) if self.rule else None


@pytest.fixture
def served(tiny_policy):
    faults = Faults()
    with PolicyServer(tiny_policy, model_name="tiny", intercept=faults) as server:
        yield server, faults


def _client(server, **kwargs) -> OpenAIPolicy:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 10)
    return OpenAIPolicy("tiny", base_url=server.url, **kwargs)


def test_completions_match_the_served_policy(served, tiny_policy):
    server, faults = served
    client = _client(server)
    assert client.trainable is False
    convs = [CONV, [{"role": "user", "content": "Name a colour."}], CONV]
    sampling = SamplingParams(max_new_tokens=8, temperature=0.9, top_p=0.95, seed=7)
    out = client.generate(convs, sampling)
    assert len(out) == 3 and server.requests == 3
    for i, (conv, c) in enumerate(zip(convs, out)):
        # Conversation i is sent seed + i: identical prompts still get different samples.
        direct = tiny_policy.generate(
            [conv], SamplingParams(max_new_tokens=8, temperature=0.9, top_p=0.95, seed=7 + i)
        )[0]
        assert c.text == direct.text
        assert c.finish_reason == direct.finish_reason
        assert c.token_ids == [] and c.prompt_ids == [] and c.logprobs is None
        usage = c.metadata["usage"]
        assert usage["completion_tokens"] == len(direct.token_ids)
        assert usage["prompt_tokens"] == len(direct.prompt_ids)
        assert c.metadata["attempts"] == 1
    sent = sorted(faults.bodies, key=lambda b: b["seed"])
    assert [b["seed"] for b in sent] == [7, 8, 9]
    assert sent[0]["model"] == "tiny" and sent[0]["max_tokens"] == 8
    assert sent[0]["temperature"] == 0.9 and sent[0]["top_p"] == 0.95
    assert "top_k" not in sent[0]  # not an OpenAI field: only sent when set


def test_stop_and_extra_body_are_sent(served):
    server, faults = served
    client = _client(server, extra_body={"top_k": 5, "user": "tests"})
    c = client.generate([CONV], SamplingParams(max_new_tokens=30, stop=("e",), seed=1))[0]
    assert "e" not in c.text
    body = faults.bodies[0]
    assert body["stop"] == ["e"] and body["top_k"] == 5 and body["user"] == "tests"


def test_retries_after_server_error(served):
    server, faults = served
    faults.rule = lambda n, body: (500, {}, {"error": {"message": "boom"}}) if n == 1 else None
    out = _client(server).generate([CONV], SamplingParams(max_new_tokens=4, seed=0))
    assert server.requests == 2
    assert out[0].metadata["attempts"] == 2 and out[0].text is not None


def test_honours_retry_after_on_429(served):
    server, faults = served
    times: list[float] = []

    def rule(n, body):
        times.append(time.monotonic())
        if n == 1:
            return 429, {"Retry-After": "1"}, {"error": {"message": "slow down"}}
        return None

    faults.rule = rule
    out = _client(server, backoff=0.01).generate([CONV], SamplingParams(max_new_tokens=4))
    assert server.requests == 2 and out[0].metadata["attempts"] == 2
    assert times[1] - times[0] >= 0.95  # waited for Retry-After, not the 10 ms backoff


def test_gives_up_after_max_retries(served):
    server, faults = served
    faults.rule = lambda n, body: (503, {}, {"error": {"message": "overloaded"}})
    with pytest.raises(PolicyError, match=r"failed after 3 attempt\(s\).*503.*overloaded"):
        _client(server, max_retries=2).generate([CONV], SamplingParams(max_new_tokens=4))
    assert server.requests == 3


def test_timeout_raises_policy_error_quickly(served):
    server, faults = served

    def hang(n, body):
        # Far longer than the client waits; released when the test tears the server down.
        server.stopping.wait(30)
        return 503, {}, {"error": {"message": "shutting down"}}

    faults.rule = hang
    client = _client(server, timeout=0.5, max_retries=1)
    start = time.monotonic()
    with pytest.raises(PolicyError) as info:
        client.generate([CONV], SamplingParams(max_new_tokens=4))
    elapsed = time.monotonic() - start
    assert elapsed < 3.0
    message = str(info.value)
    assert server.url in message and "timeout=0.5s" in message and "2 attempt(s)" in message
    assert server.requests == 2


def test_client_error_fails_immediately_with_server_message(served):
    server, faults = served
    faults.rule = lambda n, body: (400, {}, {"error": {"message": "messages: bad role"}})
    with pytest.raises(PolicyError, match=r"HTTP 400: messages: bad role"):
        _client(server).generate([CONV], SamplingParams())
    assert server.requests == 1  # no retry on 4xx
    faults.rule = lambda n, body: (401, {}, {"error": {"message": "invalid key"}})
    with pytest.raises(PolicyError, match=r"invalid key.*OPENAI_API_KEY"):
        _client(server).generate([CONV], SamplingParams())


def test_server_rejects_bad_requests(served):
    server, _ = served
    r = requests.post(f"{server.url}/chat/completions", data=b"{not json", timeout=5)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = requests.post(f"{server.url}/chat/completions", json={"model": "tiny"}, timeout=5)
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = requests.get(f"{server.url}/models", timeout=5)
    assert r.json()["data"][0]["id"] == "tiny"
    r = requests.post(
        f"{server.url}/chat/completions",
        json={"messages": CONV, "n": 3, "max_tokens": 3},
        timeout=5,
    )
    assert [c["index"] for c in r.json()["choices"]] == [0, 1, 2]


def test_missing_api_key_for_remote_url(monkeypatch):
    monkeypatch.delenv("MY_TEST_KEY", raising=False)
    with pytest.raises(PolicyError, match=r"MY_TEST_KEY is not set.*export MY_TEST_KEY"):
        OpenAIPolicy(
            "gpt-4o-mini", base_url="https://api.example.com/v1", api_key_env="MY_TEST_KEY"
        )
    monkeypatch.setenv("MY_TEST_KEY", "sk-test")
    policy = OpenAIPolicy(
        "gpt-4o-mini", base_url="https://api.example.com/v1", api_key_env="MY_TEST_KEY"
    )
    assert policy._headers["Authorization"] == "Bearer sk-test"
    assert "sk-test" not in repr(policy)
    # A local server needs no key.
    monkeypatch.delenv("MY_TEST_KEY")
    OpenAIPolicy("tiny", base_url="http://127.0.0.1:1/v1", api_key_env="MY_TEST_KEY")


def test_unreachable_server(monkeypatch):
    # Port 9 on localhost (discard) is closed on test machines: connection refused at once.
    client = OpenAIPolicy("tiny", base_url="http://127.0.0.1:9/v1", max_retries=2, backoff=0.01)
    with pytest.raises(PolicyError, match=r"127\.0\.0\.1:9.*3 attempt\(s\).*connection error"):
        client.generate([CONV], SamplingParams())


def test_concurrency_is_bounded(served):
    server, faults = served

    def slow(n, body):
        time.sleep(0.15)  # keep requests in flight long enough to overlap
        return (
            200,
            {},
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": f"r{body['seed']}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {},
            },
        )

    faults.rule = slow
    client = _client(server, max_concurrency=3)
    start = time.monotonic()
    out = client.generate([CONV] * 12, SamplingParams(seed=100))
    elapsed = time.monotonic() - start
    assert [c.text for c in out] == [f"r{100 + i}" for i in range(12)]  # order preserved
    assert server.max_in_flight == 3  # reached the bound, never above it
    assert elapsed < 12 * 0.15  # and really concurrent
    client.close()


def test_invalid_arguments():
    with pytest.raises(ValueError, match="base_url"):
        OpenAIPolicy("m", base_url="localhost:8000")
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAIPolicy("m", base_url="http://localhost:1/v1", max_concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        OpenAIPolicy("m", base_url="http://localhost:1/v1", timeout=0)
