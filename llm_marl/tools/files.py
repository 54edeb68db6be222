"""Publishing directories atomically: a reader sees the old version or the new one, never a mix.

Writers build the new version in a sibling temporary directory (same file system, so that
``os.replace`` is a rename) and hand it to :func:`replace_dir` once it is complete.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["NO_SPACE", "no_space", "replace_dir"]

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a full disk (or an exhausted quota)."""
_NO_SPACE_WORDS = ("no space left on device", "disk quota exceeded", "os error 28")


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) reports a full disk.

    An ``OSError`` says so by its errno; libraries that write outside Python's file objects
    (safetensors, torch's path-based writer) wrap it in their own exception and keep only the
    OS message, which is matched too.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in NO_SPACE:
            return True
        if any(word in str(current).lower() for word in _NO_SPACE_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


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
