"""One sandbox per kind per process, created on first use and shared by every coding env.

A ``VectorEnv`` of 32 coding envs must not start 32 worker pools: every env that was given a
sandbox *kind* (``"auto"``, ``"docker"``, ``"process"``) asks :func:`shared_sandbox` for it when it
first runs code, and gets the same thread-safe instance. Closing an env does not stop the shared
sandbox (a rollout builds and closes envs every iteration; restarting warm workers each time
would be slow); :func:`close_shared_sandboxes` stops them, and the sandbox package stops them at
interpreter exit anyway. A sandbox *instance* passed to an env belongs to the caller.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_marl.tools.sandbox import Sandbox

SANDBOX_KINDS = ("auto", "docker", "process")

_shared: dict[str, Sandbox] = {}
_lock = threading.Lock()


def shared_sandbox(kind: str) -> Sandbox:
    """The process-wide sandbox of ``kind``, started on the first call."""
    if kind not in SANDBOX_KINDS:
        raise ValueError(f"unknown sandbox kind {kind!r}; choose one of {SANDBOX_KINDS}")
    with _lock:
        box = _shared.get(kind)
        if box is None or getattr(box, "closed", False):
            from llm_marl.tools.sandbox import make_sandbox

            # "auto" defers to the sandbox package's default ($LLM_MARL_SANDBOX, else Docker
            # when reachable with its image, else the process sandbox).
            box = make_sandbox(None if kind == "auto" else kind)
            _shared[kind] = box
        return box


def close_shared_sandboxes() -> None:
    """Stop every shared sandbox (the next coding env step starts a fresh one)."""
    with _lock:
        boxes = list(_shared.values())
        _shared.clear()
    for box in boxes:
        box.close()
