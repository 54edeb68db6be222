"""``replace_dir``: a built directory is swapped in whole, over an old one or into a new place."""

from __future__ import annotations

import tempfile
from pathlib import Path

from llm_marl.tools.files import replace_dir


def _built(parent: Path, name: str, files: dict[str, str]) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    for rel, text in files.items():
        (tmp / rel).write_text(text)
    return tmp


def test_replace_dir_creates_a_missing_target(tmp_path):
    src = _built(tmp_path, "out", {"a.txt": "new"})
    replace_dir(src, tmp_path / "out")
    assert (tmp_path / "out" / "a.txt").read_text() == "new"
    assert not src.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_dir_replaces_an_old_version_entirely_and_leaves_no_trash(tmp_path):
    old = tmp_path / "out"
    old.mkdir()
    (old / "a.txt").write_text("old")
    (old / "stale.txt").write_text("only in the old version")
    (old / "sub").mkdir()
    (old / "sub" / "deep.txt").write_text("old too")
    src = _built(tmp_path, "out", {"a.txt": "new"})
    replace_dir(str(src), str(old))  # str paths are accepted too
    assert sorted(p.name for p in old.iterdir()) == ["a.txt"]  # nothing of the old one is left
    assert (old / "a.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no .out.old.* behind


def test_replace_dir_twice_keeps_the_latest(tmp_path):
    for version in ("1", "2", "3"):
        replace_dir(_built(tmp_path, "out", {"v": version}), tmp_path / "out")
    assert (tmp_path / "out" / "v").read_text() == "3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
