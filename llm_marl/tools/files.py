"""Publishing directories atomically: a reader sees the old version or the new one, never a mix.

Writers build the new version in a sibling temporary directory (same file system, so that
``os.replace`` is a rename) and hand it to :func:`replace_dir` once it is complete.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["replace_dir"]


def replace_dir(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Move the complete directory ``src`` to ``dst``, replacing what ``dst`` holds.

    ``src`` must be on the same file system as ``dst`` (build it with
    ``tempfile.mkdtemp(dir=dst.parent)``). A directory cannot be renamed over a non-empty one,
    so an existing ``dst`` is first renamed into a fresh sibling trash directory and deleted
    from there: ``dst`` is missing only for the instant between the two renames, and a crash
    leaves at worst a hidden ``.NAME.old.*`` directory behind, never a half-written ``dst``.
    """
    out = Path(dst)
    if out.exists():
        trash = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.replace(out, trash / "d")
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(src, out)
