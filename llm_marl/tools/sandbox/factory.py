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
            ProcessSandbox with bubblewrap (both give the guarantees documented in
            ``docs/guides/sandbox.md``); if neither can run, :class:`SandboxUnavailableError`
            says why for each -- ``"auto"`` never falls back to a weaker isolation.  Default:
            ``$LLM_MARL_SANDBOX`` or ``"auto"``.
        workers: pool size (jobs run at once); default the CPU count.
        limits: default per-job :class:`Limits`.
        **kwargs: passed to the backend (``image=``, ``memory_mb=``, ``base_url=`` for Docker;
            ``isolation=``, ``memory_cap=``, ``cgroup_parent=``, ``python=`` for
            ProcessSandbox; ``tmpfs_mb=``, ``start_timeout=`` for both).  Under ``"auto"`` each
            backend receives only the arguments it accepts; a weaker ``isolation`` or
            ``memory_cap`` must name ``kind="process"``.

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
        "runtime",
    }
    process_keys = {
        "isolation",
        "memory_cap",
        "cgroup_parent",
        "python",
        "tmpfs_mb",
        "start_timeout",
    }
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
    weaker = {k: kwargs[k] for k in ("isolation", "memory_cap") if kwargs.get(k, "auto") != "auto"}
    if weaker:
        raise ValueError(
            f"make_sandbox('auto') only picks backends with the full guarantees; for {weaker} "
            f"ask for make_sandbox('process', ...) by name"
        )
    docker_args = {k: v for k, v in kwargs.items() if k in docker_keys}
    try:
        return DockerSandbox(**common, **docker_args)
    except SandboxUnavailableError as e:
        docker_problem = str(e)
        image = kwargs.get("image", DEFAULT_IMAGE)
        logger.warning(
            "Docker sandbox unavailable (%s); using ProcessSandbox with bubblewrap instead "
            "(image %s)",
            e,
            image,
        )
    process_args = {k: v for k, v in kwargs.items() if k in process_keys}
    try:
        return ProcessSandbox(**common, **process_args)
    except SandboxUnavailableError as e:
        raise SandboxUnavailableError(
            f"no sandbox with the documented guarantees can run here. Docker: {docker_problem}. "
            f"ProcessSandbox: {e}"
        ) from e


def _reject(kwargs: dict[str, Any], keys: set[str], kind: str) -> None:
    bad = sorted(set(kwargs) & keys)
    if bad:
        raise TypeError(f"make_sandbox({kind!r}) does not accept {bad}")
