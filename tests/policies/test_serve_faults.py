"""PolicyServer answers malformed requests with a 400 JSON error instead of dropping them."""

from __future__ import annotations

import json
import socket

import pytest

from llm_marl.policies import PolicyServer, ScriptedPolicy

PATH = "/v1/chat/completions"


@pytest.fixture
def server():
    with PolicyServer(ScriptedPolicy(lambda conv: "pong"), model_name="echo") as s:
        yield s


def raw_request(server, head: bytes, body: bytes = b"") -> tuple[int, dict]:
    """Send raw bytes; return the status and the JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + b"\r\n\r\n" + body)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            head_part, sep, rest = data.partition(b"\r\n\r\n")
            if sep:
                lengths = [
                    int(line.split(b":", 1)[1])
                    for line in head_part.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if lengths and len(rest) >= lengths[0]:
                    break
    assert data, "the server dropped the connection without an answer"
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.partition(b"\r\n\r\n")[2])


def post(server, body: bytes, length: str | None = None) -> tuple[int, dict]:
    length = str(len(body)) if length is None else length
    head = f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {length}"
    return raw_request(server, head.encode(), body)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b'{"model": "echo", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"[" * 200_000,
    ],
    ids=["list", "object", "inside-messages", "unclosed"],
)
def test_deeply_nested_json_gets_400(server, body):
    status, answer = post(server, body)
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert "JSON" in answer["error"]["message"] or "nested" in answer["error"]["message"]


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "+12", "0x10", "１２", "12 34", "1_0"])
def test_bad_content_length_gets_400(server, length):
    status, answer = post(server, b"{}", length=length)
    assert status == 400
    assert "Content-Length" in answer["error"]["message"]


def test_huge_content_length_gets_413_without_reading(server):
    status, answer = post(server, b"{}", length="9" * 30)
    assert status == 413 and "too large" in answer["error"]["message"]


def test_server_still_answers_after_bad_requests(server):
    post(server, b"[" * 100_000)
    post(server, b"{}", length="nope")
    body = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "ping"}]})
    status, answer = post(server, body.encode())
    assert status == 200
    assert answer["choices"][0]["message"]["content"] == "pong"
