"""make_sandbox: pick a backend by name, or the best one available ("auto")."""

from __future__ import annotations

import logging
import os
import sys
import threading
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


_checked: set[tuple[str, str, str]] = set()  # (backend, $DOCKER_HOST, image) that worked
_checked_lock = threading.Lock()


def check_sandbox(kind: str | None = None, *, image: str = DEFAULT_IMAGE) -> str:
    """Raise :class:`SandboxUnavailableError` now if ``make_sandbox(kind)`` cannot work here.

    Cheap, and starts no worker: pings the Docker engine and looks up the image, or probes
    bubblewrap. Envs that start their sandbox on first use call it at construction, so that a
    missing engine fails at ``make`` with one clear message, not at the first ``step``. A
    success is remembered per process (and per ``DOCKER_HOST`` and image). Returns the backend that
    ``make_sandbox(kind)`` would pick (``"docker"`` or ``"process"``).
    """
    kind = kind or os.environ.get(KIND_ENV) or "auto"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    where = os.environ.get("DOCKER_HOST", "")
    with _checked_lock:
        for backend in ("docker", "process"):
            if kind in (backend, "auto") and (backend, where, image) in _checked:
                return backend
    problems: dict[str, str] = {}
    for backend in ("docker", "process") if kind == "auto" else (kind,):
        problem = _docker_problem(image) if backend == "docker" else _process_problem()
        if problem is None:
            with _checked_lock:
                _checked.add((backend, where, image))
            return backend
        problems[backend] = problem
    if kind == "docker":
        raise SandboxUnavailableError(f"sandbox='docker' cannot run: {problems['docker']}")
    if kind == "process":
        raise SandboxUnavailableError(f"sandbox='process' cannot run: {problems['process']}")
    raise SandboxUnavailableError(
        "no sandbox with the documented guarantees can run here. "
        f"Docker: {problems['docker']}. ProcessSandbox: {problems['process']}"
    )


def _docker_problem(image: str) -> str | None:
    from llm_marl.tools.sandbox.docker import _missing_image_message
    from llm_marl.tools.sandbox.image import docker_client, image_exists

    try:
        client = docker_client(timeout=10)
    except SandboxUnavailableError as e:
        return str(e)
    try:
        return None if image_exists(image, client) else _missing_image_message(image)
    finally:
        client.close()


def _process_problem() -> str | None:
    from llm_marl.tools.sandbox.process import _probe, _python_paths

    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        exe, dirs = _python_paths(base)
    except SandboxUnavailableError as e:
        return str(e)
    problem = _probe("bwrap", exe, tuple(dirs), os.geteuid() == 0)
    return None if problem is None else f"bubblewrap cannot isolate programs here: {problem}"


def _reject(kwargs: dict[str, Any], keys: set[str], kind: str) -> None:
    bad = sorted(set(kwargs) & keys)
    if bad:
        raise TypeError(f"make_sandbox({kind!r}) does not accept {bad}")
