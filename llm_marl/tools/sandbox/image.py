"""Build the Docker image DockerSandbox runs: a minimal Debian with Python, built locally.

No registry is needed: ``debootstrap --variant=minbase`` writes a root filesystem with
``python3-minimal`` and the rest of the standard library (``libpython3.11-stdlib``: ``ctypes``,
``decimal``, ``hashlib``...), documentation and package caches are dropped, and the tree is
imported with ``docker import``.  The build takes about 40 s and needs root (debootstrap) and
network access to a Debian mirror.

    python -m llm_marl.tools.sandbox build-image            # or, from Python:
    >>> from llm_marl.tools.sandbox import build_image
    >>> build_image()                                       # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from llm_marl.tools.sandbox.base import SandboxUnavailableError

logger = logging.getLogger("llm_marl.tools.sandbox")

DEFAULT_IMAGE = "llm-marl-sandbox"
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_PACKAGES = ("python3-minimal", "libpython3.11-stdlib")
IMAGE_LABEL = "org.llm-marl.sandbox"
# Directories that only hold documentation and package caches; removed to shrink the image.
_PRUNE = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/cache/debconf",
    "var/log",
)


def docker_client(base_url: str | None = None, timeout: float = 60.0) -> Any:
    """A connected ``docker.DockerClient``; raises SandboxUnavailableError with what to do."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - docker is a dependency of llm_marl
        raise SandboxUnavailableError(
            "the docker Python package is not installed: pip install docker"
        ) from e
    where = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = (
            docker.DockerClient(base_url=base_url, timeout=timeout)
            if base_url
            else docker.from_env(timeout=timeout)
        )
        client.ping()
    except Exception as e:
        raise SandboxUnavailableError(
            f"no Docker engine reachable at {where} ({type(e).__name__}: {e}); start dockerd "
            f"(e.g. `sudo dockerd &`) or use make_sandbox('process')"
        ) from e
    return client


def image_exists(name: str = DEFAULT_IMAGE, client: Any = None) -> bool:
    """True when the Docker engine has an image called ``name``."""
    import docker

    client = client or docker_client()
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(
    name: str = DEFAULT_IMAGE,
    *,
    suite: str = DEFAULT_SUITE,
    mirror: str = DEFAULT_MIRROR,
    packages: Sequence[str] = DEFAULT_PACKAGES,
    force: bool = False,
    client: Any = None,
    log: Callable[[str], None] | None = None,
) -> str:
    """Build (or keep) the sandbox image and return its id.

    Args:
        name: image name (``repo`` or ``repo:tag``).
        suite: Debian suite for debootstrap.
        mirror: Debian mirror URL.
        packages: packages to include besides the minbase set (must provide ``python3``).
        force: rebuild even when an image called ``name`` exists.
        client: a ``docker.DockerClient`` (default: from the environment).
        log: called with progress lines (default: the module logger at INFO).

    Raises:
        SandboxUnavailableError: no Docker engine, no debootstrap, not root, or a step failed.
    """
    import docker

    say = log or logger.info
    client = client or docker_client()
    if not force:
        try:
            image = client.images.get(name)
            say(f"image {name} already exists ({image.short_id}); pass force=True to rebuild")
            return image.id
        except docker.errors.ImageNotFound:
            pass
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailableError(
            "debootstrap is not installed: apt-get install -y debootstrap"
        )
    if os.geteuid() != 0:
        raise SandboxUnavailableError(
            "building the sandbox image runs debootstrap, which needs root: run "
            "`sudo python -m llm_marl.tools.sandbox build-image`"
        )
    root = tempfile.mkdtemp(prefix="llm_marl_image_")
    try:
        cmd = [
            "debootstrap",
            "--variant=minbase",
            "--include=" + ",".join(packages),
            suite,
            root,
            mirror,
        ]
        say("running " + " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            raise SandboxUnavailableError(f"debootstrap failed (exit {proc.returncode}):\n{tail}")
        for rel in _PRUNE:
            path = os.path.join(root, rel)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path, exist_ok=True)
        say(f"importing {root} as {name}")
        image_id = _import_tree(client, root, name)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    check = client.containers.run(
        name,
        ["python3", "-I", "-S", "-c", "import ctypes, resource, json, select; print('ok')"],
        network_disabled=True,
        remove=True,
    )
    if b"ok" not in check:
        raise SandboxUnavailableError(f"the new image {name} cannot run python3: {check!r}")
    say(f"built {name} ({image_id[:19]})")
    return image_id


def _import_tree(client: Any, root: str, name: str) -> str:
    repository, _, tag = name.partition(":")
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", root, "-c", "."], stdout=subprocess.PIPE
    )
    assert tar.stdout is not None
    try:
        out = client.api.import_image_from_stream(
            tar.stdout,
            repository=repository,
            tag=tag or "latest",
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                f"LABEL {IMAGE_LABEL}=1",
                'CMD ["python3"]',
            ],
        )
    finally:
        tar.stdout.close()
        tar.wait()
    if tar.returncode != 0:
        raise SandboxUnavailableError(f"tar of the image tree failed (exit {tar.returncode})")
    try:
        return client.images.get(name).id
    except Exception as e:
        raise SandboxUnavailableError(f"docker import did not produce {name}: {out!r}") from e
