"""The scratch wipe (``harness.wipe_tree``) on trees the test builds itself in ``tmp_path``.

The adversarial versions (programs that build these trees inside the sandbox) are in
``adversarial/test_scratch.py``; these check the function's own contract, including the cases a
sandboxed program cannot reach (a symlink to a directory outside the tree, entry and time caps).
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from llm_marl.tools.sandbox.harness import wipe_tree


@pytest.fixture
def tmp_path(tmp_path_factory):
    """A scratch directory on a tmpfs when there is one (as in the sandbox): directory
    operations on a journaling disk take milliseconds each."""
    import shutil
    import tempfile
    from pathlib import Path

    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    if base is None:
        yield tmp_path_factory.mktemp("wipe")
        return
    path = Path(tempfile.mkdtemp(prefix="llm_marl_wipe_test_", dir=base))
    yield path
    wipe_tree(str(path))
    shutil.rmtree(path, ignore_errors=True)


def _chain(root, depth: int, name: str = "d") -> str:
    here = os.getcwd()
    os.chdir(root)
    try:
        for _ in range(depth):
            os.mkdir(name)
            os.chdir(name)
        with open("leaf", "w") as f:
            f.write("x")
    finally:
        os.chdir(here)
    return str(root)


def test_deeper_than_the_recursion_limit_and_longer_than_path_max(tmp_path):
    _chain(tmp_path, 2000)  # the recursion limit is 1000
    _chain(tmp_path, 40, "n" * 250)  # 10,000-character paths
    assert wipe_tree(str(tmp_path)) is True
    assert os.listdir(tmp_path) == []


def test_locked_directories_special_files_and_symlinks_are_removed_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary").write_text("keep me")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    os.chmod(tree / "a" / "b" / "f", 0)
    os.chmod(tree / "a" / "b", 0)
    os.chmod(tree / "a", 0o500)
    os.symlink(outside, tree / "to_outside")
    os.symlink("/", tree / "to_root")
    os.symlink("loop", tree / "loop")
    os.mkfifo(tree / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tree / "sock"))
    sock.close()
    os.link(outside / "canary", tree / "hardlink")
    (tree / os.fsdecode(b"\xff\xfe name\n")).write_text("x")
    assert wipe_tree(str(tree)) is True
    assert os.listdir(tree) == []
    assert (outside / "canary").read_text() == "keep me"


def test_caps_on_entries_and_time_stop_early_and_say_so(tmp_path):
    for i in range(50):
        (tmp_path / str(i)).write_text("x")
    assert wipe_tree(str(tmp_path), max_entries=10) is False
    assert wipe_tree(str(tmp_path), deadline=time.monotonic() - 1) is False
    assert wipe_tree(str(tmp_path)) is True


def test_every_directory_is_listed_once(tmp_path, monkeypatch):
    # Linear cost, counted rather than timed: rescanning a parent after each subdirectory (what
    # a naive descriptor walk does) lists it once per child, quadratic in a wide directory.
    for i in range(300):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "f").write_text("x")
    _chain(tmp_path / "d0", 50)
    listed = []
    real_scandir = os.scandir

    def counting_scandir(fd):
        listed.append(fd)
        return real_scandir(fd)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    assert wipe_tree(str(tmp_path)) is True
    assert len(listed) == 1 + 300 + 50


def test_a_missing_directory_is_not_empty(tmp_path):
    assert wipe_tree(str(tmp_path / "missing")) is False
