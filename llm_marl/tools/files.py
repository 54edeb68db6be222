"""Publishing directories atomically: a reader sees the old version or the new one, never a mix.

Writers build the new version in a sibling temporary directory (same file system, so that
``os.replace`` is a rename) and hand it to :func:`replace_dir` once it is complete.
:func:`check_writable` asks, before long work, whether its result file can be written at all.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from llm_marl.errors import ConfigError

__all__ = ["NO_SPACE", "check_writable", "no_space", "replace_dir"]

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


def check_writable(path: str | os.PathLike[str], what: str) -> None:
    """:class:`~llm_marl.errors.ConfigError` naming ``what`` unless a file can be written at
    ``path``: asked before long work whose result goes there, so the work is not lost at the
    end. A file that does not exist yet is created and removed again: the one test the file
    system answers truthfully (``os.access`` says yes to root on ``/proc`` or a read-only mount).
    """
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{what} {target}: that is a directory, not a file")
    if not target.parent.is_dir():
        raise ConfigError(f"{what} {target}: {target.parent} is not a directory")
    existed = target.exists()
    try:
        with target.open("a", encoding="utf-8"):
            pass
    except OSError as err:
        raise ConfigError(f"{what} {target}: cannot write there ({err.strerror})") from None
    if not existed:
        target.unlink(missing_ok=True)
