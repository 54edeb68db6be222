"""MiniLM requests of concurrently stepped envs share one forward pass, and a text is encoded
once (issue 28, item 6: the meaning term must cost little next to generation)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest


@pytest.fixture(scope="module")
def embedder():
    from llm_marl.envs.writing.embeddings import MiniLMEmbedder

    return MiniLMEmbedder()


def test_concurrent_requests_are_served_in_one_forward_pass(embedder):
    texts = [[f"post number {i} about a cat", f"summary {i} of the cat post"] for i in range(6)]
    calls: list[int] = []
    forward = embedder._forward

    def counting(batch):
        calls.append(len(batch))
        return forward(batch)

    embedder._forward = counting
    results: dict[int, np.ndarray] = {}
    try:
        with embedder._lock:  # the model is busy: every request queues behind it
            threads = [
                threading.Thread(
                    target=lambda i=i: results.__setitem__(i, embedder.encode(texts[i]))
                )
                for i in range(6)
            ]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while len(embedder._pending) < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
        for t in threads:
            t.join(60)
    finally:
        del embedder._forward
    assert calls == [12], calls  # the 12 texts of 6 callers, one pass
    for i in range(6):
        alone = forward(texts[i])
        assert results[i].shape == (2, 384)
        assert np.allclose(results[i], alone, atol=1e-5)


def test_a_text_is_encoded_once(embedder):
    calls: list[int] = []
    forward = embedder._forward

    def counting(batch):
        calls.append(len(batch))
        return forward(batch)

    embedder._forward = counting
    try:
        first = embedder.encode(["a source read by many episodes", "answer one"])
        again = embedder.encode(["a source read by many episodes", "answer two"])
    finally:
        del embedder._forward
    assert calls == [2, 1]  # the source the second time came from the cache
    assert np.array_equal(first[0], again[0])
