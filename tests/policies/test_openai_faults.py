"""OpenAIPolicy against a server that breaks HTTP and the chat-completion schema.

Every transport fault (torn body, bad chunking, bad gzip, garbage status line, trickle, reset)
and every schema fault (deep nesting, a message or content of the wrong type, no message) must
surface as a PolicyError, never as a raw requests / AttributeError / RecursionError / TypeError,
and never as an empty answer. Servers are raw sockets on 127.0.0.1 (see tests/conftest.py).
"""

from __future__ import annotations

import gzip
import json
import time

import pytest

from llm_marl.policies import OpenAIPolicy, PolicyError, SamplingParams
from llm_marl.policies.openai import BatchPolicyError

CONV = [{"role": "user", "content": "hi"}]
SAMPLING = SamplingParams(max_new_tokens=4)


def completion(message, **extra) -> bytes:
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    return json.dumps({"id": "x", "choices": [choice], **extra}).encode()


def client(server, **kwargs) -> OpenAIPolicy:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 5)
    kwargs.setdefault("max_retries", 1)
    return OpenAIPolicy("m", base_url=server.url, **kwargs)


def ask(server, **kwargs):
    return client(server, **kwargs).generate([CONV], SAMPLING)[0]


# ---------------------------------------------------------------- transport faults


def _truncated(reply):
    return reply(b'{"choices": [{"message": {"content": "hel', headers={"Content-Length": "500"})


def _bad_chunk_size(reply):
    head = reply(b"", headers={"Transfer-Encoding": "chunked"}).replace(
        b"Content-Length: 0\r\n", b""
    )
    return head + b"zz\r\nhello\r\n0\r\n\r\n"


def _chunk_cut_short(reply):
    head = reply(b"", headers={"Transfer-Encoding": "chunked"}).replace(
        b"Content-Length: 0\r\n", b""
    )
    return head + b"400\r\n" + b'{"choices": []' + b"\r\n"  # promises 1024 bytes, sends 14


def _bad_gzip(reply):
    return reply(b"\x1f\x8b\x08\x00garbage-not-deflate" * 3, headers={"Content-Encoding": "gzip"})


def _gzip_cut_short(reply):
    packed = gzip.compress(completion({"role": "assistant", "content": "x" * 5000}))
    return reply(packed[: len(packed) // 2], headers={"Content-Encoding": "gzip"})


def _garbage_status_line(reply):
    return b"HTTP/9 banana\r\n\r\n{}"


def _no_status_line(reply):
    return b"\x00\x01\x02 not http at all"


TRANSPORT_FAULTS = [
    _truncated,
    _bad_chunk_size,
    _chunk_cut_short,
    _bad_gzip,
    _garbage_status_line,
    _no_status_line,
]


@pytest.mark.parametrize("fault", TRANSPORT_FAULTS, ids=lambda f: f.__name__.strip("_"))
def test_transport_faults_become_policy_errors(raw_http_server, http_reply_bytes, fault):
    server = raw_http_server(lambda n, body: fault(http_reply_bytes))
    with pytest.raises(PolicyError, match=r"127\.0\.0\.1.*2 attempt\(s\)"):
        ask(server)
    assert server.requests == 2  # torn replies are retried: they may be transient


def test_gzip_cut_short_is_a_policy_error(raw_http_server, http_reply_bytes):
    # urllib3 cannot tell a gzip stream cut at a valid Content-Length from a whole one; the JSON
    # inside is then torn, which is caught as a malformed reply.
    server = raw_http_server(lambda n, body: _gzip_cut_short(http_reply_bytes))
    with pytest.raises(PolicyError, match=r"127\.0\.0\.1"):
        ask(server)


def test_a_transport_fault_then_a_good_reply_succeeds(raw_http_server, http_reply_bytes):
    good = completion({"role": "assistant", "content": "fine"})
    server = raw_http_server(
        lambda n, body: _bad_gzip(http_reply_bytes) if n == 1 else http_reply_bytes(good)
    )
    out = ask(server)
    assert out.text == "fine" and out.metadata["attempts"] == 2


def test_valid_gzip_is_decoded(raw_http_server, http_reply_bytes):
    packed = gzip.compress(completion({"role": "assistant", "content": "zipped"}))
    server = raw_http_server(
        lambda n, body: http_reply_bytes(packed, headers={"Content-Encoding": "gzip"})
    )
    assert ask(server).text == "zipped"


def test_connection_reset_mid_body(raw_http_server, http_reply_bytes):
    def reset(conn, stopping):
        import socket
        import struct

        conn.sendall(http_reply_bytes(b"{}" * 50)[:-60])
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # RST

    server = raw_http_server(lambda n, body: reset)
    with pytest.raises(PolicyError, match="2 attempt"):
        ask(server)


# ---------------------------------------------------------------- the timeout is a deadline


def _trickle_body(http_reply_bytes):
    def send(conn, stopping):
        body = completion({"role": "assistant", "content": "slow " * 40})
        conn.sendall(http_reply_bytes(body)[: -len(body)])
        for byte in body:  # one byte every 50 ms: each read is quick, the whole is not
            if stopping.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    return send


def _trickle_headers(http_reply_bytes):
    def send(conn, stopping):
        for byte in http_reply_bytes(completion({"role": "assistant", "content": "x"})):
            if stopping.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    return send


def _hang(http_reply_bytes):
    return lambda conn, stopping: stopping.wait(30)


@pytest.mark.parametrize("make", [_trickle_body, _trickle_headers, _hang])
def test_timeout_is_a_deadline_for_the_whole_request(raw_http_server, http_reply_bytes, make):
    server = raw_http_server(lambda n, body: make(http_reply_bytes))
    start = time.monotonic()
    with pytest.raises(PolicyError, match=r"timeout=0\.5s"):
        ask(server, timeout=0.5, max_retries=0)
    # The trickle would take > 10 s; a per-read timeout never fires on it.
    assert time.monotonic() - start < 5


def test_oversized_body_is_refused_unparsed(raw_http_server, http_reply_bytes):
    big = completion({"role": "assistant", "content": "y" * 100_000})
    server = raw_http_server(lambda n, body: http_reply_bytes(big))
    with pytest.raises(PolicyError, match="max_response_bytes=1000"):
        ask(server, max_response_bytes=1000)
    assert server.requests == 1  # not retried: the same reply would come back


# ---------------------------------------------------------------- schema faults


def _deep(n: int, open_: str = "[", close: str = "]") -> bytes:
    return (open_ * n + close * n).encode()


SCHEMA_FAULTS = {
    "deep-list": _deep(200_000),
    "deep-object": b'{"a":' * 200_000 + b"1" + b"}" * 200_000,
    "deep-in-content": b'{"choices": [{"message": {"content": ' + _deep(200_000) + b"}}]}",
    "deep-unclosed": b"[" * 500_000,
    "message-is-a-string": completion("hello"),
    "message-is-null": completion(None),
    "no-message": json.dumps({"choices": [{"finish_reason": "stop"}]}).encode(),
    "content-is-an-int": completion({"role": "assistant", "content": 42}),
    "content-is-an-object": completion({"role": "assistant", "content": {"text": "hi"}}),
    "content-part-is-a-string": completion({"role": "assistant", "content": ["hi"]}),
    "content-part-text-is-an-int": completion(
        {"role": "assistant", "content": [{"type": "text", "text": 3}]}
    ),
    "content-part-image": completion(
        {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    ),
    "no-content-no-tool-calls": completion({"role": "assistant"}),
    "choices-empty": json.dumps({"choices": []}).encode(),
    "choices-is-an-object": json.dumps({"choices": {"0": {}}}).encode(),
    "choice-is-a-list": json.dumps({"choices": [[1, 2]]}).encode(),
    "body-is-a-list": b"[1, 2, 3]",
    "body-is-a-string": b'"hello"',
    "not-json": b"<html>oops</html>",
    "not-utf8": b'{"choices": [{"message": {"content": "\xff\xfe"}}]}',
    "finish-reason-is-a-list": json.dumps(
        {"choices": [{"message": {"content": "x"}, "finish_reason": ["stop"]}]}
    ).encode(),
    "huge-int": b'{"choices": [{"message": {"content": "x"}}], "n": ' + b"9" * 50_000 + b"}",
}


@pytest.mark.parametrize("name", sorted(SCHEMA_FAULTS))
def test_schema_faults_become_policy_errors(raw_http_server, http_reply_bytes, name):
    server = raw_http_server(lambda n, body: http_reply_bytes(SCHEMA_FAULTS[name]))
    with pytest.raises(PolicyError, match="not a chat completion"):
        ask(server)
    assert server.requests == 1  # a malformed 200 is not retried


@pytest.mark.parametrize("status", ["500 Internal Server Error", "400 Bad Request"])
def test_deeply_nested_error_bodies(raw_http_server, http_reply_bytes, status):
    server = raw_http_server(lambda n, body: http_reply_bytes(_deep(300_000), status=status))
    with pytest.raises(PolicyError, match=status.split()[0]):
        ask(server)


def test_content_parts_are_joined_as_text(raw_http_server, http_reply_bytes):
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    server = raw_http_server(
        lambda n, body: http_reply_bytes(completion({"role": "assistant", "content": parts}))
    )
    assert ask(server).text == "Hello, world"


def test_refusal_part_and_null_content(raw_http_server, http_reply_bytes):
    replies = {
        1: completion({"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}),
        2: completion({"role": "assistant", "content": None, "refusal": "No."}),
        3: completion(
            {"role": "assistant", "tool_calls": [{"id": "1", "type": "function"}]},
            usage="not a dict",
        ),
    }
    server = raw_http_server(lambda n, body: http_reply_bytes(replies[n]))
    c = client(server, max_concurrency=1)
    assert c.generate([CONV], SAMPLING)[0].text == "No."
    assert c.generate([CONV], SAMPLING)[0].text == "No."  # a refusal is the model's answer
    third = c.generate([CONV], SAMPLING)[0]
    # A malformed native call is handed on as it came (the env scores the bad format), never
    # read as an empty reply.
    assert third.text == '<tool_call>{"id": "1", "type": "function"}</tool_call>'
    assert third.metadata["tool_calls"] and third.metadata["usage"] == {}


def test_one_bad_reply_in_a_batch_keeps_the_others(raw_http_server, http_reply_bytes):
    def respond(n, body):
        if body["messages"][0]["content"] == "bad":
            return http_reply_bytes(completion("not an object"))
        return http_reply_bytes(completion({"role": "assistant", "content": "ok"}))

    server = raw_http_server(respond)
    convs = [CONV, [{"role": "user", "content": "bad"}], CONV]
    with pytest.raises(BatchPolicyError, match="1 of 3") as info:
        client(server).generate(convs, SAMPLING)
    results = info.value.results
    assert [getattr(r, "text", None) for r in results] == ["ok", None, "ok"]
    assert isinstance(results[1], str) and "not a chat completion" in results[1]
