"""ProcessSandbox: warm supervisor subprocesses isolated with bubblewrap.

Each worker is ``python3 -I -S -c <harness>`` (isolated mode, no site-packages, stdlib only),
wrapped according to ``isolation``:

* ``"bwrap"`` (the default; ``"auto"`` means this and nothing weaker): new PID, network, IPC, UTS
  and cgroup namespaces; the supervisor is PID 1 of its namespace; the filesystem is empty except
  read-only ``/usr`` (plus ``/lib*`` links and the interpreter's own prefix), fresh ``/proc`` and
  read-only ``/dev``, and a private tmpfs ``/tmp``, the only writable place, that holds the job's
  working directory.  The project,
  ``/home``, ``/root``, ``/etc``, the host's ``/tmp`` and the Docker socket are not there at all.
  No network interface but loopback.
* ``"unshare"`` (only when asked for by name, with a warning): PID, network, IPC and UTS
  namespaces through util-linux ``unshare``; the filesystem stays visible and writable.
* ``"none"`` (only when asked for by name, with a warning): plain subprocess with rlimits,
  scrubbed environment and a private temp dir; the filesystem and network stay reachable.

Memory (``memory_cap``): the job as a whole is capped, not only each process:

* ``"cgroup"``: the worker runs in its own memory cgroup (:mod:`.cgroup`), set before each job to
  ``Limits.memory_mb`` + ``JOB_OVERHEAD_MB`` -- the bound a DockerSandbox container gets;
* ``"single-process"``: where no cgroup can be made (the usual case for a non-root user), a
  system-call filter keeps the job one process (threads allowed, no ``fork``) without
  ``memfd_create``, SysV shared memory or private mounts, so its ``RLIMIT_AS`` of
  ``Limits.memory_mb`` bounds everything it can hold besides its scratch files (a tmpfs of
  ``tmpfs_mb``) and a few MiB of pipe buffers;
* ``"auto"`` (default): the first of those two that works here, else an error;
* ``"per-process"``: only when asked for by name, with a warning -- ``RLIMIT_AS`` per process
  and up to ``Limits.nproc`` processes, which is *not* a bound on the job.

When the host runs as root, the supervisor drops to an unprivileged uid of its own before any
job (so that ``RLIMIT_NPROC`` applies, which the kernel never enforces for root).  Every worker
process is started by the one spawner thread of :mod:`llm_marl.tools.workers`, so that
``bwrap --die-with-parent`` ties it to the host process, not to a short-lived thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from typing import Any

from llm_marl.tools.sandbox import harness
from llm_marl.tools.sandbox.base import JOB_OVERHEAD_MB, Limits, SandboxUnavailableError
from llm_marl.tools.sandbox.cgroup import (
    CgroupParent,
    CgroupUnavailable,
    WorkerCgroup,
    find_parent,
)
from llm_marl.tools.sandbox.pool import (
    HARNESS_SOURCE,
    FdChannelMixin,
    PooledSandbox,
    Worker,
    WorkerDied,
    close_quietly,
    logger,
)
from llm_marl.tools.workers import popen

ISOLATIONS = ("auto", "bwrap", "unshare", "none")
MEMORY_CAPS = ("auto", "cgroup", "single-process", "per-process")
_SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
_INSTALL_HINT = (
    "install bubblewrap (apt-get install -y bubblewrap; it needs unprivileged user namespaces, "
    "or root), use make_sandbox('docker'), or ask for a weaker isolation by name "
    "(isolation='unshare' or 'none')"
)
_uid_counter = iter(range(1 << 20))
_uid_lock = threading.Lock()


def _python_paths(python: str) -> tuple[str, list[str]]:
    """The real interpreter binary and the directories it needs (prefixes, binary dir)."""
    exe = os.path.realpath(python)
    probe = subprocess.run(
        [exe, "-I", "-S", "-c", "import sys; print(sys.base_prefix); print(sys.base_exec_prefix)"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": _SANDBOX_PATH},
    )
    if probe.returncode != 0:
        raise SandboxUnavailableError(
            f"the sandbox interpreter {exe} does not start: {probe.stderr.strip()}; pass "
            f"python=<path to a python3 executable>"
        )
    dirs = {os.path.realpath(p) for p in probe.stdout.split()} | {os.path.dirname(exe)}
    return exe, sorted(dirs)


def _world_readable(dirs: list[str]) -> bool:
    """True when every directory and all its ancestors are searchable (and readable) by others."""
    for d in dirs:
        path = d
        while True:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return False
            if not mode & 0o001 or (path == d and not mode & 0o004):
                return False
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return True


def _sandbox_uid(index: int) -> int:
    """A uid no real account uses, unique per worker, so RLIMIT_NPROC counts one job only."""
    return 2_000_000_000 + (os.getpid() % 100_000) * 64 + index % 64


def _bwrap_argv(exe: str, python_dirs: list[str], as_root: bool, tmpfs_mb: int = 256) -> list[str]:
    argv = [
        "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        _SANDBOX_PATH,
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    if as_root:
        # No user namespace (it would map everything to root); drop every capability but the
        # two the supervisor needs to switch to its unprivileged uid, which also clears them.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    made: set[str] = set()
    for d in python_dirs:
        if d == "/usr" or d.startswith("/usr/"):
            continue
        # bwrap would copy the host's modes onto the parents it creates (e.g. /root is 0700),
        # which would lock the unprivileged supervisor out of its own interpreter.
        parent = os.path.dirname(d)
        ancestors = []
        while parent not in ("/", ""):
            ancestors.append(parent)
            parent = os.path.dirname(parent)
        for a in reversed(ancestors):
            if a not in made:
                made.add(a)
                argv += ["--perms", "0755", "--dir", a]
        argv += ["--ro-bind", d, d]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(int(tmpfs_mb) << 20),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        # Everything but /tmp read-only: bwrap's own root and /dev are tmpfs mounts that an
        # unprivileged (user-namespace) sandbox could otherwise fill, and that no job wipes.
        "--remount-ro",
        "/",
        "--remount-ro",
        "/dev",
        "--chdir",
        "/tmp",
        exe,
    ]
    return argv


def _unshare_argv(exe: str, as_root: bool) -> list[str]:
    argv = ["unshare", "--fork", "--pid", "--mount-proc", "--net", "--ipc", "--uts", "--kill-child"]
    if not as_root:
        argv += ["--user", "--map-root-user"]
    return argv + [exe]


@functools.lru_cache(maxsize=8)
def _probe(isolation: str, exe: str, python_dirs: tuple[str, ...], as_root: bool) -> str | None:
    """Run a trivial command under ``isolation``; ``None`` if it works, else the error."""
    if isolation == "bwrap":
        if shutil.which("bwrap") is None:
            return "bwrap is not installed (apt-get install -y bubblewrap)"
        argv = _bwrap_argv(exe, list(python_dirs), as_root)
    elif isolation == "unshare":
        if shutil.which("unshare") is None:
            return "unshare (util-linux) is not installed"
        argv = _unshare_argv(exe, as_root)
    else:
        return None
    try:
        proc = subprocess.run(
            argv + ["-I", "-S", "-c", "import os, socket; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": _SANDBOX_PATH},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if proc.returncode != 0 or proc.stdout.strip() != "1":
        return (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")[-500:]
    return None


def _start_time(pid: int | None) -> str | None:
    """Start time of ``pid`` (field 22 of /proc/<pid>/stat), to recognise pid reuse."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class ProcessWorker(FdChannelMixin, Worker):
    """A supervisor subprocess; talks length-prefixed JSON over its stdin/stdout pipes."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        scratch: str | None,
        start_timeout: float,
        cgroup: WorkerCgroup | None = None,
    ) -> None:
        self._scratch = scratch
        self.cgroup = cgroup
        self._oom_before = 0
        self.supervisor_pid: int | None = None
        self._supervisor_start: str | None = None
        # The supervisor's own stderr (a crash traceback, bwrap's complaints) goes to a file:
        # a pipe nobody reads could fill up and block it.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        info_r = info_w = None
        if argv[0] == "bwrap":
            # bwrap reports the host pid of the sandboxed supervisor on this descriptor; close()
            # kills it directly (bwrap's own --die-with-parent cannot reach it once it dropped
            # its uid).
            info_r, info_w = os.pipe()
            argv = [argv[0], "--info-fd", str(info_w)] + argv[1:]
        if cgroup is not None:
            argv = cgroup.wrap(argv)
        try:
            self._proc = popen(
                argv,
                stderr=self._stderr,
                env=env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=(info_w,) if info_w is not None else (),
            )
        except OSError as e:
            self._cleanup_files()
            raise SandboxUnavailableError(f"cannot start the sandbox worker {argv[0]}: {e}") from e
        finally:
            if info_w is not None:
                os.close(info_w)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._wfd = self._proc.stdin.fileno()
        self._rfd = self._proc.stdout.fileno()
        os.set_blocking(self._wfd, False)
        try:
            self.handshake(start_timeout)
            if info_r is not None:
                self._read_info(info_r)
                info_r = None
            else:
                self.supervisor_pid = self._proc.pid
            self._supervisor_start = _start_time(self.supervisor_pid)
        except WorkerDied as e:
            err = self._stderr_tail()
            self.close()
            raise SandboxUnavailableError(
                f"the sandbox worker did not start ({e}){': ' + err if err else ''}"
            ) from e
        finally:
            if info_r is not None:
                os.close(info_r)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def before_job(self, limits: Limits) -> None:
        if self.cgroup is not None:
            try:
                self.cgroup.set_limit((limits.memory_mb + JOB_OVERHEAD_MB) << 20)
                self._oom_before = self.cgroup.oom_kills()
            except OSError as e:
                raise WorkerDied(f"cannot set the worker's memory cgroup ({e})") from e

    def after_job(self, facts: dict[str, Any] | None) -> dict[str, Any]:
        if self.cgroup is not None and self.cgroup.oom_kills() > self._oom_before:
            return {"oom_killed": True}
        return {}

    def _read_info(self, fd: int) -> None:
        import json

        data = b""
        try:
            while True:
                chunk = os.read(fd, 4096)  # bwrap wrote and closed it before the handshake
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        try:
            self.supervisor_pid = int(json.loads(data.decode())["child-pid"])
        except (ValueError, KeyError) as e:
            raise WorkerDied(f"bwrap did not report the supervisor pid ({data!r})") from e

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace").strip()[-1000:]
        except (OSError, ValueError):
            return ""

    def _kill(self) -> None:
        proc = self._proc if hasattr(self, "_proc") else None
        pid = self.supervisor_pid
        # Kill the supervisor itself (only if the pid still names the same process): as PID 1 of
        # its namespace its death takes every job process with it.
        if (
            pid is not None
            and self._supervisor_start is not None
            and (_start_time(pid) == self._supervisor_start)
        ):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                proc.kill()

    def _release(self) -> None:
        proc = self._proc if hasattr(self, "_proc") else None
        if proc is not None:
            close_quietly(proc.stdin, proc.stdout)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._cleanup_files()

    def _cleanup_files(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self._scratch:
            # Iterative and descriptor-relative: a job's 100,000-deep directory chain neither
            # overflows the stack nor escapes the removal (shutil.rmtree recurses).
            harness.wipe_tree(self._scratch)
            with contextlib.suppress(OSError):
                os.rmdir(self._scratch)


class ProcessSandbox(PooledSandbox):
    """Runs programs in warm, isolated supervisor subprocesses (see the module docstring).

    Args:
        workers: number of supervisors = jobs run at once (default: CPU count).
        limits: default :class:`Limits` for jobs.
        isolation: ``"auto"`` / ``"bwrap"`` (bubblewrap; ``"auto"`` never picks anything
            weaker), or, only when asked for by name, ``"unshare"`` or ``"none"`` (with a
            warning).  One that does not work here raises :class:`SandboxUnavailableError`
            with what to install.
        memory_cap: how the job's total memory is capped: ``"auto"`` (``"cgroup"`` where a
            memory cgroup can be made, else ``"single-process"``), ``"cgroup"``,
            ``"single-process"``, or ``"per-process"`` (only by name, with a warning: not a bound
            on the job).  See the module docstring and ``docs/guides/sandbox.md``.
        cgroup_parent: cgroup directory for the worker cgroups (default:
            ``$LLM_MARL_SANDBOX_CGROUP``, else this process's own memory cgroup if writable).
        tmpfs_mb: size of each bwrap worker's private ``/tmp`` (the job's scratch space).
        python: interpreter the programs run under (default: the base interpreter of
            ``sys.executable``); only its standard library is importable.
        start_timeout: seconds to wait for a worker to start.
    """

    backend = "process"

    def __init__(
        self,
        *,
        workers: int | None = None,
        limits: Limits | None = None,
        isolation: str = "auto",
        memory_cap: str = "auto",
        cgroup_parent: str | None = None,
        tmpfs_mb: int = 256,
        python: str | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        super().__init__(workers=workers, limits=limits)
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        if memory_cap not in MEMORY_CAPS:
            raise ValueError(f"memory_cap must be one of {MEMORY_CAPS}, got {memory_cap!r}")
        if not isinstance(tmpfs_mb, int) or tmpfs_mb < 1:
            raise ValueError(f"tmpfs_mb must be a positive integer, got {tmpfs_mb!r}")
        base = python or getattr(sys, "_base_executable", None) or sys.executable
        self._exe, dirs = _python_paths(base)
        self._python_dirs = tuple(dirs)
        self._as_root = os.geteuid() == 0
        self._start_timeout = start_timeout
        self._tmpfs_mb = tmpfs_mb
        self.isolation = self._choose_isolation(isolation)
        self._cgroup_parent: CgroupParent | None = None
        self.memory_cap = self._choose_memory_cap(memory_cap, cgroup_parent)
        if self._as_root and self.isolation != "bwrap" and not _world_readable(dirs):
            # Without bwrap the supervisor drops to an unprivileged uid that cannot read an
            # interpreter installed under a private directory such as /root/.pyenv.
            fallback = shutil.which("python3", path="/usr/bin:/bin")
            if python is None and fallback and _world_readable(_python_paths(fallback)[1]):
                logger.info(
                    "ProcessSandbox uses %s: %s is not readable by the sandbox user",
                    fallback,
                    self._exe,
                )
                self._exe, dirs = _python_paths(fallback)
                self._python_dirs = tuple(dirs)
            else:
                warnings.warn(
                    f"{self._exe} lives in a directory the unprivileged sandbox user cannot read; "
                    f"programs will only find modules the supervisor pre-imported (pass "
                    f"python='/usr/bin/python3' or install bubblewrap)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._start_pool()
        hello = self._workers[0].hello
        if self.memory_cap == "single-process" and hello.get("seccomp") != "no-fork":
            self.close()
            raise SandboxUnavailableError(
                "ProcessSandbox cannot cap the job's memory here: no writable memory cgroup "
                f"({self._cgroup_problem}) and the system-call filter that keeps a job in one "
                "process cannot be installed (it needs ctypes in the sandbox interpreter and "
                "Linux on x86_64 or aarch64).  Set $LLM_MARL_SANDBOX_CGROUP to a delegated "
                "cgroup, use make_sandbox('docker'), or pass memory_cap='per-process' to accept "
                "a per-process cap only"
            )
        if not hello.get("seccomp"):
            warnings.warn(
                "the sandbox's system-call filter is not available here (no ctypes, or not "
                "Linux x86_64/aarch64): jobs may create SysV IPC objects and sockets; a worker "
                "whose job leaves IPC objects behind is retired",
                RuntimeWarning,
                stacklevel=2,
            )
        if not hello.get("hardened"):
            warnings.warn(
                "the sandbox supervisor could not make itself non-dumpable (no ctypes?): a "
                "hostile program could inspect the test runner",
                RuntimeWarning,
                stacklevel=2,
            )

    _cgroup_problem = ""

    def _choose_isolation(self, requested: str) -> str:
        if requested in ("auto", "bwrap"):
            err = _probe("bwrap", self._exe, self._python_dirs, self._as_root)
            if err is None:
                return "bwrap"
            raise SandboxUnavailableError(
                f"ProcessSandbox needs bubblewrap, which does not work here ({err}); "
                + _INSTALL_HINT
            )
        if requested == "unshare":
            err = _probe("unshare", self._exe, self._python_dirs, self._as_root)
            if err is not None:
                raise SandboxUnavailableError(
                    f"isolation='unshare' does not work here ({err}); {_INSTALL_HINT}"
                )
            warnings.warn(
                "ProcessSandbox uses `unshare` (asked for by name): network and processes are "
                "isolated but the filesystem is visible and writable to programs (install "
                "bubblewrap for full isolation: apt-get install -y bubblewrap)",
                RuntimeWarning,
                stacklevel=3,
            )
            return "unshare"
        warnings.warn(
            "ProcessSandbox runs WITHOUT isolation (isolation='none'): programs can read and "
            "write your files and reach the network; only rlimits and a scrubbed environment "
            "apply",
            RuntimeWarning,
            stacklevel=3,
        )
        return "none"

    def _choose_memory_cap(self, requested: str, cgroup_parent: str | None) -> str:
        if requested == "per-process":
            warnings.warn(
                "memory_cap='per-process': each process of a job is capped at Limits.memory_mb "
                "but a job may start Limits.nproc of them, so the job as a whole is NOT capped",
                RuntimeWarning,
                stacklevel=3,
            )
            return "per-process"
        if requested in ("auto", "cgroup"):
            try:
                self._cgroup_parent = find_parent(cgroup_parent)
                return "cgroup"
            except CgroupUnavailable as e:
                self._cgroup_problem = str(e)
                if requested == "cgroup":
                    raise SandboxUnavailableError(
                        f"memory_cap='cgroup': no writable memory cgroup here ({e}); set "
                        f"$LLM_MARL_SANDBOX_CGROUP to a delegated cgroup or use "
                        f"memory_cap='auto'"
                    ) from e
        return "single-process"

    def _start_worker(self) -> Worker:
        with _uid_lock:
            index = next(_uid_counter)
        seccomp = "no-fork" if self.memory_cap == "single-process" else "default"
        harness_args = ["-I", "-S", "-c", HARNESS_SOURCE, "--seccomp", seccomp]
        env = {"PATH": _SANDBOX_PATH, "LANG": "C.UTF-8"}
        scratch = None
        if self.isolation == "bwrap":
            argv = _bwrap_argv(self._exe, list(self._python_dirs), self._as_root, self._tmpfs_mb)
            argv += harness_args + ["--scratch", "/tmp"]
            cwd = "/"
        else:
            argv = (
                _unshare_argv(self._exe, self._as_root)
                if self.isolation == "unshare"
                else [self._exe]
            )
            scratch = tempfile.mkdtemp(prefix="llm_marl_sandbox_")
            argv += harness_args + ["--scratch", scratch]
            cwd = scratch
            env.update({"HOME": scratch, "TMPDIR": scratch})
            if self.isolation == "none" and not self._as_root:
                # RLIMIT_NPROC would count every process of this user, not just the job's.
                argv.append("--no-nproc-rlimit")
        if self._as_root:
            uid = _sandbox_uid(index)
            argv += ["--uid", str(uid), "--gid", str(uid)]
            if scratch is not None:
                os.chown(scratch, uid, uid)
        cgroup = None
        if self._cgroup_parent is not None:
            try:
                cgroup = self._cgroup_parent.create()
            except OSError as e:
                raise SandboxUnavailableError(f"cannot create the worker's cgroup ({e})") from e
        try:
            return ProcessWorker(argv, env, cwd, scratch, self._start_timeout, cgroup)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise

    def __repr__(self) -> str:
        return (
            f"ProcessSandbox(workers={self.size}, isolation={self.isolation!r}, "
            f"memory_cap={self.memory_cap!r}, python={self._exe!r})"
        )


def bwrap_available() -> bool:
    """True when bubblewrap is installed and can create namespaces here."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        exe, dirs = _python_paths(base)
    except SandboxUnavailableError:
        return False
    return _probe("bwrap", exe, tuple(dirs), os.geteuid() == 0) is None
