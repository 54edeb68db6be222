"""DockerSandbox: a warm pool of locked-down containers, each running the sandbox supervisor.

Every container of the pool runs ``python3 -I -S -c <harness>`` as PID 1 and stays up; jobs
travel over the container's attached stdin/stdout (one hijacked HTTP connection to the engine,
no ``docker exec`` per job), and the supervisor forks a fresh job process per job inside the
container, which forks the job's own processes and exits with them (see ``harness.py``).  Containers are created with:

* no network (``network_mode="none"``: loopback only), read-only root filesystem, a private
  ``tmpfs`` on ``/tmp`` for the job's working directory, a private IPC namespace;
* user ``65534:65534`` (nobody), every capability dropped, ``no-new-privileges``;
* a memory cgroup limit (swap included), a pids limit, and a CPU quota per container.

Containers carry the label ``org.llm-marl.sandbox.owner=<host>:<pid>``; they are removed on
:meth:`DockerSandbox.close`, at interpreter exit, and containers left behind by a process that
no longer exists are removed when the next DockerSandbox starts.  A container that dies is
replaced on the next job.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import time
import warnings
from typing import Any

from llm_marl.tools.sandbox.base import JOB_OVERHEAD_MB, Limits, SandboxUnavailableError
from llm_marl.tools.sandbox.harness import SCRATCH_MAX_INODES
from llm_marl.tools.sandbox.image import DEFAULT_IMAGE, docker_client
from llm_marl.tools.sandbox.pool import (
    HARNESS_SOURCE,
    PooledSandbox,
    Worker,
    WorkerDied,
    close_quietly,
    logger,
)

OWNER_LABEL = "org.llm-marl.sandbox.owner"
_STDOUT, _STDERR = 1, 2


class DockerWorker(Worker):
    """One container; its stdin/stdout are reached through an attached socket.

    Docker multiplexes the container's stdout and stderr on that socket in frames of
    ``[stream id, 0, 0, 0, size (4 bytes, big endian)] + payload``; the supervisor's protocol
    bytes are the stdout payloads.
    """

    def __init__(
        self, client: Any, image: str, create_kwargs: dict[str, Any], start_timeout: float
    ) -> None:
        import docker

        self._client = client
        self._stdout = bytearray()
        self._raw = bytearray()
        self._stderr_tail = b""
        self._sock: Any = None
        self._sock_holder: Any = None
        try:
            self._container = client.containers.create(image, **create_kwargs)
        except docker.errors.ImageNotFound as e:
            raise SandboxUnavailableError(_missing_image_message(image)) from e
        except docker.errors.APIError as e:
            raise SandboxUnavailableError(f"cannot create a sandbox container: {e}") from e
        try:
            holder = client.api.attach_socket(
                self._container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._sock_holder = holder
            self._sock = getattr(holder, "_sock", holder)
            self._sock.setblocking(False)
            self._container.start()
            self.handshake(start_timeout)
        except Exception as e:
            detail = self._diagnostics()
            self.close()
            if isinstance(e, WorkerDied):
                raise SandboxUnavailableError(
                    f"the sandbox container did not start ({e}){detail}"
                ) from e
            raise

    @property
    def container_id(self) -> str:
        return self._container.id

    def _diagnostics(self) -> str:
        text = self._stderr_tail.decode("utf-8", "replace").strip()
        try:
            self._container.reload()
            state = self._container.attrs.get("State", {})
            text += f" [container {state.get('Status')}, exit {state.get('ExitCode')}" + (
                ", OOM-killed]" if state.get("OOMKilled") else "]"
            )
        except Exception:
            pass
        return f": {text}" if text else ""

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerDied("timed out writing to the sandbox container")
            try:
                _, writable, _ = select.select([], [self._sock], [], remaining)
                if not writable:
                    continue
                n = self._sock.send(view)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                raise WorkerDied(f"the sandbox container's input is closed ({e})") from e
            view = view[n:]

    def _recv(self, size: int, deadline: float) -> bytes:
        while len(self._stdout) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerDied("the sandbox container did not answer in time")
            try:
                readable, _, _ = select.select([self._sock], [], [], remaining)
                if not readable:
                    continue
                chunk = self._sock.recv(1 << 18)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    continue
                raise WorkerDied(f"the sandbox container's output is closed ({e})") from e
            if not chunk:
                raise WorkerDied("the sandbox container exited" + self._diagnostics())
            self._raw += chunk
            self._demux()
        out = bytes(self._stdout[:size])
        del self._stdout[:size]
        return out

    def _demux(self) -> None:
        raw = self._raw
        while len(raw) >= 8:
            size = int.from_bytes(raw[4:8], "big")
            if len(raw) < 8 + size:
                break
            stream = raw[0]
            payload = bytes(raw[8 : 8 + size])
            del raw[: 8 + size]
            if stream == _STDOUT:
                self._stdout += payload
            elif stream == _STDERR:
                self._stderr_tail = (self._stderr_tail + payload)[-2000:]

    def _kill(self) -> None:
        try:
            self._container.remove(force=True)
        except Exception as e:  # already gone, or the engine is down
            logger.debug("removing sandbox container failed: %s", e)

    def _release(self) -> None:
        close_quietly(self._sock, self._sock_holder)


def _missing_image_message(image: str) -> str:
    cmd = "python -m llm_marl.tools.sandbox build-image"
    if image != DEFAULT_IMAGE:
        cmd += f" --name {image}"
    return f"image {image} not found; run `{cmd}`"


def remove_stale_containers(client: Any) -> int:
    """Remove sandbox containers whose owning process (on this host) no longer exists."""
    host = socket.gethostname()
    removed = 0
    try:
        containers = client.containers.list(all=True, filters={"label": OWNER_LABEL})
    except Exception:
        return 0
    for container in containers:
        owner = container.labels.get(OWNER_LABEL, "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host != host or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            container.remove(force=True)
            removed += 1
        except Exception:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DockerSandbox(PooledSandbox):
    """Runs programs in a warm pool of isolated containers (see the module docstring).

    Args:
        image: image to run (default ``llm-marl-sandbox``; build it with
            ``python -m llm_marl.tools.sandbox build-image``).  Any image with ``python3`` works.
        workers: number of containers = jobs run at once (default: CPU count).
        limits: default :class:`Limits` for jobs.  The container-wide caps below are fixed when
            the container starts; a job cannot exceed them whatever its own limits say.
        memory_mb: memory cgroup limit per container, swap included: the cap on a whole job
            (default: ``limits.memory_mb + JOB_OVERHEAD_MB`` (256) for the supervisor, the test
            runner and the scratch files).
        pids_limit: processes per container (default: ``limits.nproc + 8``).
        cpus: CPU quota per container.
        tmpfs_mb: size of the container's ``/tmp`` (the job's working directory).
        base_url: Docker engine URL (default: ``DOCKER_HOST`` or the local socket).
        client: an existing ``docker.DockerClient`` (overrides ``base_url``).
        start_timeout: seconds to wait for a container to come up.
        runtime: OCI runtime of the containers (default: the engine's, usually ``runc``).  For
            programs that may attack the kernel itself, use a runtime with its own kernel, such
            as gVisor (``"runsc"``) or Kata Containers (``"kata-runtime"``), installed and
            registered with the engine; see ``docs/guides/sandbox.md``.

    Raises:
        SandboxUnavailableError: no engine reachable, image missing, or containers do not start.
    """

    backend = "docker"

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        workers: int | None = None,
        limits: Limits | None = None,
        memory_mb: int | None = None,
        pids_limit: int | None = None,
        cpus: float = 1.0,
        tmpfs_mb: int = 256,
        base_url: str | None = None,
        client: Any = None,
        start_timeout: float = 60.0,
        runtime: str | None = None,
    ) -> None:
        super().__init__(workers=workers, limits=limits)
        import docker

        self.image = image
        self._client = client or docker_client(base_url)
        try:
            self._client.images.get(image)
        except docker.errors.ImageNotFound as e:
            raise SandboxUnavailableError(_missing_image_message(image)) from e
        remove_stale_containers(self._client)
        memory = memory_mb or self.limits.memory_mb + JOB_OVERHEAD_MB
        self._start_timeout = start_timeout
        self._create_kwargs: dict[str, Any] = dict(
            command=[
                "python3",
                "-I",
                "-S",
                "-c",
                HARNESS_SOURCE,
                "--scratch",
                "/tmp",
                "--no-nproc-rlimit",
                "--seccomp",
                "default",
            ],
            stdin_open=True,
            # detach=False makes docker-py set StdinOnce: when the attached host connection goes
            # away (even if the host is SIGKILLed) the supervisor reads EOF and exits, and
            # auto_remove then deletes the container.
            detach=False,
            auto_remove=True,
            tty=False,
            # The protocol travels over stdout: a logging driver would keep every byte of it.
            log_config={"type": "none", "config": {}},
            network_mode="none",
            read_only=True,
            tmpfs={
                "/tmp": f"rw,nosuid,nodev,noexec,size={int(tmpfs_mb)}m,"
                f"nr_inodes={SCRATCH_MAX_INODES + 1000},mode=1777"
            },
            ipc_mode="none",  # no /dev/shm: /tmp is the only writable place
            user="65534:65534",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{int(memory)}m",
            memswap_limit=f"{int(memory)}m",
            pids_limit=int(pids_limit or self.limits.nproc + 8),
            nano_cpus=int(cpus * 1e9),
            working_dir="/tmp",
            hostname="sandbox",
            environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"},
            labels={OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"},
        )
        if runtime is not None:
            self._create_kwargs["runtime"] = runtime
        self._start_pool()
        if not self._workers[0].hello.get("seccomp"):
            warnings.warn(
                f"the sandbox's system-call filter cannot be installed in image {image} (its "
                f"python3 lacks ctypes?): jobs may create SysV IPC objects and sockets; a "
                f"container whose job leaves IPC objects behind is replaced",
                RuntimeWarning,
                stacklevel=2,
            )

    def _start_worker(self) -> Worker:
        return DockerWorker(self._client, self.image, self._create_kwargs, self._start_timeout)

    def container_ids(self) -> list[str]:
        """Ids of the pool's live containers (for inspection and tests)."""
        with self._lock:
            return [w.container_id for w in self._workers if isinstance(w, DockerWorker)]

    def __repr__(self) -> str:
        return f"DockerSandbox(image={self.image!r}, workers={self.size})"
