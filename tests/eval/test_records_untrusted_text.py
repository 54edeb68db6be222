"""EpisodeWriter given text with lone surrogates (a policy's output, a tool's observation).

Such a string cannot be encoded as UTF-8; writing it must not kill the evaluation, and the file
must stay valid UTF-8 JSONL that :func:`read_episodes` reads back.
"""

from __future__ import annotations

import json

import pytest

from llm_marl.eval.records import EpisodeWriter, read_episodes


def _record(text: str, **extra: object) -> dict[str, object]:
    return {
        "benchmark": "b",
        "task_index": 0,
        "reward": 1.0,
        "error": None,
        "success": True,
        "turns": {"agent": [{"step": 0, "text": text, "finish_reason": "stop"}]},
        **extra,
    }


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("a \ud800 b", "a \ufffd b"),
        ("\udfff", "\ufffd"),
        ("\ud83d\ude00", "\ufffd\ufffd"),  # a hand-made pair is two surrogates, replaced each
        ("Zürich 🙂 \x00", "Zürich 🙂 \x00"),  # ordinary text is untouched
        ("plain", "plain"),
    ],
)
def test_episode_writer_replaces_lone_surrogates(tmp_path, text, written):
    path = tmp_path / "episodes.jsonl"
    with EpisodeWriter(path) as writer:
        writer.write([_record(text, infos={"agent": {"obs\udc00": [text]}})])
    path.read_bytes().decode("utf-8")  # valid UTF-8
    [record] = read_episodes(path)
    assert record["turns"]["agent"][0]["text"] == written
    assert record["infos"]["agent"] == {"obs\ufffd": [written]}  # keys are scrubbed too


def test_episode_writer_keeps_writing_after_an_odd_record(tmp_path):
    path = tmp_path / "episodes.jsonl"
    with EpisodeWriter(path) as writer:
        writer.write([_record("one"), _record("two \ud800")])
        writer.write([_record("three")])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["turns"]["agent"][0]["text"] for line in lines] == [
        "one",
        "two \ufffd",
        "three",
    ]
