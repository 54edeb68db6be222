"""``ast.parse`` that is safe to call from several threads at once.

CPython 3.11 keeps the recursion-depth counter of its AST constructor in state shared by all
threads, so two threads parsing at the same moment can raise ``SystemError: AST constructor
recursion depth mismatch`` (CPython gh-106905; fixed in 3.12). ``collect`` steps envs in threads
and the coding envs parse every completion on the host, so every host-side parse of Python source
goes through :func:`parse_python`, which serialises them. The inputs are bounded by the callers
(a parse is linear in its input), so the lock costs little.
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import Any

__all__ = ["parse_python"]

# Only the interpreters with the bug pay for the lock.
_LOCK: threading.Lock | None = threading.Lock() if sys.version_info < (3, 12) else None


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse(source, filename, mode)``, serialised across threads where CPython needs it."""
    if _LOCK is None:
        return ast.parse(source, filename=filename, mode=mode)
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
