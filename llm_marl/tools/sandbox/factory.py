"""make_sandbox: pick a backend by name, or the best one available ("auto")."""

from __future__ import annotations

import logging
import os
from typing import Any

from llm_marl.tools.sandbox.base import Limits, SandboxUnavailableError
from llm_marl.tools.sandbox.image import DEFAULT_IMAGE
from llm_marl.tools.sandbox.pool import PooledSandbox

logger = logging.getLogger("llm_marl.tools.sandbox")

KINDS = ("auto", "docker", "process")
# Environment knob for the default kind (constructor arguments win).
KIND_ENV = "LLM_MARL_SANDBOX"


def make_sandbox(
    kind: str | None = None,
    *,
    workers: int | None = None,
    limits: Limits | None = None,
    **kwargs: Any,
) -> PooledSandbox:
    """Create a sandbox.

    Args:
        kind: ``"docker"`` (:class:`DockerSandbox`), ``"process"`` (:class:`ProcessSandbox`) or
            ``"auto"``: Docker when an engine is reachable and the image exists, else
            ProcessSandbox with a logged warning.  Default: ``$LLM_MARL_SANDBOX`` or ``"auto"``.
        workers: pool size (jobs run at once); default the CPU count.
        limits: default per-job :class:`Limits`.
        **kwargs: passed to the backend (``image=``, ``memory_mb=``, ``base_url=`` for Docker;
            ``isolation=``, ``python=`` for ProcessSandbox).  Under ``"auto"`` each backend
            receives only the arguments it accepts.

    Raises:
        ValueError: unknown kind.
        SandboxUnavailableError: the requested backend cannot run here; the message says why
            and what to do (start dockerd, build the image, install bubblewrap...).
    """
    from llm_marl.tools.sandbox.docker import DockerSandbox
    from llm_marl.tools.sandbox.process import ProcessSandbox

    kind = kind or os.environ.get(KIND_ENV) or "auto"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    docker_keys = {
        "image",
        "memory_mb",
        "pids_limit",
        "cpus",
        "tmpfs_mb",
        "base_url",
        "client",
        "start_timeout",
    }
    process_keys = {"isolation", "python", "start_timeout"}
    unknown = set(kwargs) - docker_keys - process_keys
    if unknown:
        raise TypeError(f"make_sandbox() got unexpected arguments: {sorted(unknown)}")
    common: dict[str, Any] = {"workers": workers, "limits": limits}
    if kind == "docker":
        _reject(kwargs, process_keys - docker_keys, "docker")
        return DockerSandbox(**common, **kwargs)
    if kind == "process":
        _reject(kwargs, docker_keys - process_keys, "process")
        return ProcessSandbox(**common, **kwargs)
    docker_args = {k: v for k, v in kwargs.items() if k in docker_keys}
    try:
        return DockerSandbox(**common, **docker_args)
    except SandboxUnavailableError as e:
        image = kwargs.get("image", DEFAULT_IMAGE)
        logger.warning(
            "Docker sandbox unavailable (%s); falling back to ProcessSandbox (image %s)", e, image
        )
    process_args = {k: v for k, v in kwargs.items() if k in process_keys}
    return ProcessSandbox(**common, **process_args)


def _reject(kwargs: dict[str, Any], keys: set[str], kind: str) -> None:
    bad = sorted(set(kwargs) & keys)
    if bad:
        raise TypeError(f"make_sandbox({kind!r}) does not accept {bad}")
