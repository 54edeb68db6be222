"""Memory cgroups for ProcessSandbox: one per worker, holding the worker's whole process tree.

A cgroup is the only way to cap the memory of a *group* of processes (``RLIMIT_AS`` is per
process, and a job may fork).  Everything the job's processes charge -- their pages, the files
they write to the scratch tmpfs, kernel buffers on cgroup v2 -- counts against the worker's
``memory.max`` (v2) / ``memory.limit_in_bytes`` (v1), which the host sets before each job to
``Limits.memory_mb`` plus :data:`~llm_marl.tools.sandbox.base.JOB_OVERHEAD_MB` (the supervisor,
the test runner and the scratch files; the same bound a DockerSandbox container gets).  When the
job overruns it, the kernel's OOM killer ends a job process (they carry ``oom_score_adj=1000``),
and the host reads the cgroup's OOM-kill counter to report ``Status.MEMORY``.

Where a cgroup can be made (:func:`find_parent`):

* ``$LLM_MARL_SANDBOX_CGROUP`` (or ``ProcessSandbox(cgroup_parent=...)``): a cgroup directory you
  can write to -- on cgroup v2 a delegated subtree with ``memory`` in its
  ``cgroup.subtree_control`` (e.g. ``systemd-run --user -p Delegate=yes``), on v1 a directory of
  the memory hierarchy;
* otherwise the process's own memory cgroup, when it is writable: on cgroup v1 hosts as root, or
  on v2 when ``memory`` is enabled for its children.

Without one, ProcessSandbox holds the bound another way (a single-process job under a
system-call filter; see ``docs/guides/sandbox.md``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass

CGROUP_ENV = "LLM_MARL_SANDBOX_CGROUP"
_names = itertools.count()


class CgroupUnavailable(Exception):
    """No writable memory cgroup here (the message says why)."""


@dataclass(frozen=True)
class CgroupParent:
    """A cgroup directory under which worker cgroups are created."""

    path: str
    version: int  # 1 or 2

    def create(self) -> WorkerCgroup:
        """A new, empty child cgroup for one worker."""
        name = f"llm-marl-sandbox-{os.getpid()}-{next(_names)}"
        path = os.path.join(self.path, name)
        os.mkdir(path)
        return WorkerCgroup(path, self.version)


class WorkerCgroup:
    """The memory cgroup of one worker."""

    def __init__(self, path: str, version: int) -> None:
        self.path = path
        self.version = version
        self.limit: int | None = None

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this cgroup from its first instruction: a shell puts itself in,
        then ``exec``-s the command, so every process the worker ever forks is born inside."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.procs_file, *argv]

    def set_limit(self, nbytes: int) -> None:
        """Cap the memory (swap included) of everything in the cgroup at ``nbytes``."""
        if nbytes == self.limit:
            return
        if self.version == 2:
            _write(self.path, "memory.max", str(nbytes))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
                _write(self.path, "memory.swap.max", "0")
        else:
            # memsw (memory + swap) must stay >= the memory limit at every step: raise it
            # first, lower it last.
            with open(os.path.join(self.path, "memory.limit_in_bytes")) as f:
                current = int(f.read())
            steps = ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]
            for name in steps if nbytes > current else reversed(steps):
                try:
                    _write(self.path, name, str(nbytes))
                except FileNotFoundError:
                    if name == "memory.limit_in_bytes":
                        raise
        self.limit = nbytes

    def oom_kills(self) -> int:
        """Processes the OOM killer has killed in this cgroup so far (0 if not reported)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill whatever is left inside and delete the cgroup (best effort, bounded)."""
        for _ in range(100):
            try:
                with open(self.procs_file) as f:
                    pids = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                pids = []
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _write(directory: str, name: str, value: str) -> None:
    with open(os.path.join(directory, name), "w") as f:
        f.write(value)


def _own_cgroups() -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of this process, from ``/proc/self/cgroup``."""
    v2 = v1 = None
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, controllers, path = line.rstrip("\n").split(":", 2)
                if hid == "0" and controllers == "":
                    v2 = path
                elif "memory" in controllers.split(","):
                    v1 = path
    except (OSError, ValueError):
        pass
    return v2, v1


def _mounts() -> tuple[str | None, str | None, str, str]:
    """(v2 mount point, v1 memory mount point, v2 mount root, v1 mount root)."""
    v2 = v1 = None
    root2 = root1 = "/"
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rfields = left.split(), right.split()
                if len(fields) < 5 or len(rfields) < 3:
                    continue
                fstype, options = rfields[0], rfields[2].split(",")
                if fstype == "cgroup2" and v2 is None:
                    v2, root2 = fields[4], fields[3]
                elif fstype == "cgroup" and "memory" in options and v1 is None:
                    v1, root1 = fields[4], fields[3]
    except OSError:
        pass
    return v2, v1, root2, root1


def _join(mount: str, root: str, path: str) -> str:
    if root != "/" and path.startswith(root):
        path = path[len(root) :]
    return os.path.join(mount, path.lstrip("/"))


def _usable(path: str, version: int) -> str | None:
    """None when worker cgroups with a memory limit can be created under ``path``; else why."""
    if not os.path.isdir(path):
        return f"{path} is not a directory"
    if version == 2:
        try:
            with open(os.path.join(path, "cgroup.subtree_control")) as f:
                if "memory" not in f.read().split():
                    return f"the memory controller is not enabled for the children of {path}"
        except OSError as e:
            return f"cannot read {path}/cgroup.subtree_control ({e})"
    if not os.access(path, os.W_OK):
        return f"{path} is not writable"
    try:
        probe = CgroupParent(path, version).create()
    except OSError as e:
        return f"cannot create a cgroup under {path} ({e})"
    try:
        probe.set_limit(64 << 20)
        if not os.access(probe.procs_file, os.W_OK):
            return f"cannot move processes into cgroups under {path}"
    except OSError as e:
        return f"cannot set a memory limit under {path} ({e})"
    finally:
        probe.remove()
    return None


def find_parent(explicit: str | None = None) -> CgroupParent:
    """Where worker cgroups can be created; raises :class:`CgroupUnavailable` with the reasons."""
    explicit = explicit or os.environ.get(CGROUP_ENV) or None
    mount2, mount1, root2, root1 = _mounts()
    if explicit:
        version = 2 if os.path.exists(os.path.join(explicit, "cgroup.controllers")) else 1
        problem = _usable(explicit, version)
        if problem:
            raise CgroupUnavailable(f"the cgroup {explicit} cannot be used: {problem}")
        return CgroupParent(explicit, version)
    own2, own1 = _own_cgroups()
    reasons = []
    candidates = []
    if mount2 and own2 is not None:
        candidates.append((_join(mount2, root2, own2), 2))
    if mount1 and own1 is not None:
        candidates.append((_join(mount1, root1, own1), 1))
    if not candidates:
        reasons.append("no cgroup file system is mounted")
    for path, version in candidates:
        problem = _usable(path, version)
        if problem is None:
            return CgroupParent(path, version)
        reasons.append(f"cgroup v{version}: {problem}")
    raise CgroupUnavailable("; ".join(reasons))
