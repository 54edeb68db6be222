"""A damaged metrics.jsonl refuses the resume in one error naming the file and the line, and
changes no file (issue 28, items 7-8, round 3).

Before, a resume over a metrics file with a line that is JSON but not a row (``[1, 2]``, ``5``),
a row whose step is not a number, bytes that are not UTF-8, or deeply nested JSON died with an
``AttributeError`` / ``TypeError`` / ``UnicodeDecodeError`` / ``RecursionError`` traceback naming
no file, after config.yaml had already been rewritten. A torn last line (a writer killed in
the middle of a row) is still dropped quietly: that is how a crashed run leaves the file.
"""

from __future__ import annotations

import pytest

from llm_marl.errors import CheckpointError

from .test_disk_full import _trainer


def _snapshot(root):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics")
    _trainer(root, steps=2).train()
    return root / "run"


DAMAGE = {
    "a-json-list": (b"[1, 2]\n", 2, "a JSON list"),
    "a-json-number": (b"5\n", 2, "a JSON int"),
    "step-a-string": (b'{"step": "x", "reward": 1}\n', 2, "step is 'x'"),
    "step-null": (b'{"step": null}\n', 2, "step is None"),
    "step-negative": (b'{"step": -4}\n', 2, "step is -4"),
    "step-a-bool": (b'{"step": true}\n', 2, "step is True"),
    "not-utf8": (b'{"step": 1, "note": "\xff\xfe"}\n', 2, "not UTF-8"),
    "garbage": (b"\x00\x13 garbage\n", 2, "not JSON"),
    "deeply-nested": (b"[" * 100_000 + b"]" * 100_000 + b"\n", 2, "not JSON"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_a_damaged_metrics_file_refuses_the_resume_and_changes_nothing(
    finished_run, tmp_path, name
):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    line, number, words = DAMAGE[name]
    metrics = run / "metrics.jsonl"
    rows = metrics.read_bytes().splitlines(keepends=True)
    # The damage sits between intact rows (line `number`), so it is not a torn last line.
    metrics.write_bytes(rows[0] + line + b"".join(rows[1:]))
    before = _snapshot(run)
    trainer = _trainer(tmp_path, steps=4)
    trainer.config.resume = True
    with pytest.raises(CheckpointError) as info:
        trainer.train()
    message = str(info.value)
    assert "metrics.jsonl" in message and f"line {number}" in message and words in message
    assert "\n" not in message
    assert _snapshot(run) == before


def test_a_torn_last_row_is_still_dropped_quietly(finished_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    metrics = run / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes() + b'{"step": 3, "rew')
    trainer = _trainer(tmp_path, steps=3)
    trainer.config.resume = True
    result = trainer.train()
    assert [r["step"] for r in result.history] == [1, 2, 3]
