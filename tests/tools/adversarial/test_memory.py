"""Class 3: a job takes more memory than its limit by spreading it out.

``RLIMIT_AS`` caps one process; a job that forks (or spawns interpreters, or maps shared
memory, or writes files to its tmpfs, or threads) could hold many times ``Limits.memory_mb``.
Each program below grabs as much memory as it can in its own way, keeps it, and reports how
much it holds at the end; the total must stay within the job's cap on every backend:
``memory_mb + JOB_OVERHEAD_MB`` (Docker's container cgroup, ProcessSandbox's worker cgroup), or
the single-process bound of ProcessSandbox without a cgroup.
"""

from __future__ import annotations

import os
import re
import warnings

import pytest

from llm_marl.tools.sandbox import Limits, ProcessSandbox, SandboxUnavailableError, Status
from llm_marl.tools.sandbox.base import JOB_OVERHEAD_MB
from llm_marl.tools.sandbox.harness import SCRATCH_MAX_INODES

KIDS = 8
PER_KID_MB = 192  # 8 x 192 MiB = 1.5 GiB: three times the job's cap

HOLDER = r"""
import mmap, os, select, subprocess, sys, threading, time
CHUNK = 32 << 20

def hold(kind, limit_mb, w, key):
    held, total = [], 0
    buf = b"\x01" * CHUNK if kind == "memfd" else None
    while total < limit_mb:
        try:
            if kind == "bytes":
                held.append(b"\x01" * CHUNK)
            elif kind in ("mmap_private", "mmap_shared"):
                flags = mmap.MAP_ANONYMOUS | (
                    mmap.MAP_SHARED if kind == "mmap_shared" else mmap.MAP_PRIVATE)
                m = mmap.mmap(-1, CHUNK, flags=flags)
                for i in range(0, CHUNK, 4096):
                    m[i] = 1
                held.append(m)
            elif kind == "memfd":
                fd = os.memfd_create("hold")
                held.append(fd)
                written = os.write(fd, buf)  # may be short when memory runs out
                if written < CHUNK:
                    total += written >> 20
                    break
        except (MemoryError, OSError):
            break
        total += 32
        os.write(w, b"%s %d\n" % (key.encode(), total))
    time.sleep(60)

def collect(r, keys, seconds=2.5):
    latest, buf = {}, b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([r], [], [], 0.05)
        if ready:
            chunk = os.read(r, 65536)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                key, total = line.split()
                latest[key.decode()] = int(total)
        if keys and all(latest.get(k, 0) >= PER for k in keys):
            break
    return latest
"""

FORKS = r"""
r, w = os.pipe()
kids = []
for i in range(KIDS):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            hold(KIND, PER, w, str(os.getpid()))
        finally:
            os._exit(0)
    kids.append(pid)
latest = collect(r, [str(k) for k in kids])
time.sleep(0.5)  # let the kernel finish off whatever it is killing
alive = [k for k in kids if os.waitpid(k, os.WNOHANG) == (0, 0)]
print("HELD", sum(latest.get(str(k), 0) for k in alive) + FILES_MB, "KIDS", len(kids))
"""

THREADS = r"""
r, w = os.pipe()
threads = [threading.Thread(target=hold, args=(KIND, PER, w, f"t{i}"), daemon=True)
           for i in range(KIDS)]
for t in threads:
    t.start()
latest = collect(r, [f"t{i}" for i in range(KIDS)])
print("HELD", sum(latest.values()) + FILES_MB, "KIDS", len(threads))
"""

SPAWNS = r"""
r, w = os.pipe()
procs = []
for i in range(KIDS):
    code = HOLDER_SOURCE + f"\nPER = {PER}\nhold('bytes', PER, {w}, str(os.getpid()))\n"
    try:
        procs.append(subprocess.Popen([sys.executable, "-S", "-c", code], pass_fds=[w]))
    except OSError:
        break
latest = collect(r, [str(p.pid) for p in procs], seconds=3.5)
time.sleep(0.5)
alive = [p for p in procs if p.poll() is None]
print("HELD", sum(latest.get(str(p.pid), 0) for p in alive) + FILES_MB, "KIDS", len(procs))
"""

FILES = r"""
FILES_MB = 0
for i in range(6):                 # 192 MiB of files in the scratch tmpfs first
    try:
        with open(f"/tmp/fill{i}", "wb") as f:
            f.write(b"\x02" * CHUNK)
        FILES_MB += 32
    except OSError:
        break
"""


def _program(driver: str, kind: str = "bytes", files: bool = False) -> str:
    setup = f"KIDS = {KIDS}\nPER = {PER_KID_MB}\nKIND = {kind!r}\nFILES_MB = 0\n"
    setup += f"HOLDER_SOURCE = {HOLDER!r}\n"
    return HOLDER + setup + (FILES if files else "") + driver


ATTACKS = {
    "fork_bytes": _program(FORKS),
    "fork_mmap_private": _program(FORKS, "mmap_private"),
    "fork_mmap_shared": _program(FORKS, "mmap_shared"),
    "fork_memfd": _program(FORKS, "memfd"),
    "tmpfs_files_then_fork": _program(FORKS, files=True),
    "threads_bytes": _program(THREADS),
    "threads_mmap_shared": _program(THREADS, "mmap_shared"),
    "spawn_interpreters": _program(SPAWNS),
}


def _held(stdout: str) -> int | None:
    match = re.search(r"HELD (\d+)", stdout)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_job_never_holds_more_than_its_cap(sandbox, attack):
    limits = Limits(timeout=6, memory_mb=256, nproc=32)
    result = sandbox.run(ATTACKS[attack], limits=limits)
    cap = limits.memory_mb + JOB_OVERHEAD_MB
    held = _held(result.stdout)
    if held is None:
        # The kernel killed the program itself while the job was over its cap, or the job
        # thrashed against its cgroup's limit until its time ran out: a failing verdict either
        # way (never a pass, never an infrastructure error).
        assert result.status in (Status.MEMORY, Status.FAILED, Status.TIMEOUT), result
    else:
        assert held <= cap, f"{attack} held {held} MiB, the cap is {cap} MiB ({result})"
    # The worker is healthy afterwards.
    assert sandbox.run("print('ok')").stdout == "ok\n"


def test_a_memory_bomb_inside_a_test_is_a_memory_verdict(sandbox):
    program = (
        "import os\ndef double(x):\n    for _ in range(16):\n        if os.fork() == 0:\n"
        "            blob = b'x' * (200 << 20)\n            import time; time.sleep(5)\n"
        "    blob = b'x' * (10 ** 10)\n    return 2 * x\n"
    )
    check = "def check(candidate):\n    assert candidate(1) == 2\n"
    report = sandbox.run_tests(program, check, entry_point="double")
    assert report.status in (Status.MEMORY, Status.FAILED) and report.passed == 0, report


# --------------------------------------------------------------------------- ProcessSandbox modes


def test_process_sandbox_says_how_it_caps_memory(process_sandbox):
    assert process_sandbox.memory_cap in ("cgroup", "single-process")
    if os.geteuid() != 0 and not os.environ.get("LLM_MARL_SANDBOX_CGROUP"):
        # A non-root user without a delegated cgroup (bwrap's normal case).
        assert process_sandbox.memory_cap == "single-process"


def test_single_process_mode_allows_threads_but_not_processes(bwrap_ready):
    with ProcessSandbox(workers=1, memory_cap="single-process", limits=Limits(timeout=5)) as sb:
        assert sb.memory_cap == "single-process"
        forked = sb.run("import os\nos.fork()\n")
        assert forked.status is Status.FAILED and "BlockingIOError" in forked.stderr
        spawned = sb.run("import subprocess\nsubprocess.run(['true'])\n")
        assert spawned.status is Status.FAILED
        threaded = sb.run(
            "import threading\nout = []\n"
            "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n"
            "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sorted(out))\n"
        )
        assert threaded.status is Status.OK and threaded.stdout == str(list(range(8))) + "\n"
        memfd = sb.run("import os\nos.memfd_create('x')\n")
        assert memfd.status is Status.FAILED


def test_cgroup_mode_is_used_where_the_host_allows_it_and_refused_elsewhere(bwrap_ready):
    try:
        sandbox = ProcessSandbox(workers=1, memory_cap="cgroup", limits=Limits(timeout=5))
    except SandboxUnavailableError as e:
        assert "LLM_MARL_SANDBOX_CGROUP" in str(e)
        return
    with sandbox:
        assert sandbox.memory_cap == "cgroup"
        (worker,) = sandbox._workers
        assert worker.cgroup is not None
        assert sandbox.run("import os\nprint(os.fork() > 0 or os._exit(0))").status is Status.OK
        path = worker.cgroup.path
    assert not os.path.exists(path), "the worker's cgroup is removed with it"


def test_per_process_cap_only_when_asked_for_by_name_and_with_a_warning(bwrap_ready):
    with pytest.warns(RuntimeWarning, match="NOT capped"):
        sandbox = ProcessSandbox(workers=1, memory_cap="per-process", limits=Limits(timeout=3))
    with sandbox:
        assert sandbox.memory_cap == "per-process"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default never warns about memory
        with ProcessSandbox(workers=1, limits=Limits(timeout=3)) as default:
            assert default.memory_cap != "per-process"


# --------------------------------------------------------------------------- kernel memory

MANY_FILES = """
import os
os.mkdir("many")
n = 0
try:
    for n in range(300_000):
        open(f"many/{n}", "w").close()
except OSError:
    pass
print("FILES", n)
"""


@pytest.mark.slow  # 14 s in the fast loop at load 17 (#22)
def test_files_in_the_scratch_space_are_capped_too(sandbox):
    # Each file is a tmpfs inode: kernel memory that no address-space limit sees.
    result = sandbox.run(MANY_FILES, limits=Limits(timeout=20))
    match = re.search(r"FILES (\d+)", result.stdout)
    if result.status is Status.MEMORY:
        assert "files in the scratch space" in (result.error or "")
    else:
        assert match is not None and int(match.group(1)) <= SCRATCH_MAX_INODES + 1000, result
    assert sandbox.run("import os\nprint(os.listdir('/tmp'))").stdout == "['work']\n"


KERNEL_OBJECTS = {
    "xattr": (
        "import os\nopen('f', 'w').close()\n"
        "os.setxattr('f', 'user.big', b'x' * 60000)\nprint('SET')\n"
    ),
    "inotify": "import ctypes\nfd = ctypes.CDLL(None).inotify_init()\nprint('FD' if fd >= 0 else 'no')\n",
    "posix_mqueue": (
        "import ctypes\nlibrt = ctypes.CDLL(None)\n"
        "q = librt.mq_open(b'/llm_marl', 0o102, 0o600, None)\nprint('Q' if q >= 0 else 'no')\n"
    ),
    "sysv_msg": "import ctypes\nprint('Q' if ctypes.CDLL(None).msgget(0, 0o1600) >= 0 else 'no')\n",
    "tcp_buffers": (
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "    print('SOCK')\nexcept OSError:\n    print('no')\n"
    ),
}


@pytest.mark.parametrize("attack", sorted(KERNEL_OBJECTS))
def test_kernel_objects_outside_every_count_are_refused(sandbox, attack):
    result = sandbox.run(KERNEL_OBJECTS[attack])
    assert result.status is not Status.INFRA_ERROR, result
    assert not any(word in result.stdout for word in ("SET", "FD", "Q", "SOCK")), result
