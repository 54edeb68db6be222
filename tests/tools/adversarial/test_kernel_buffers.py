"""Issue 28, item 18: memory a job holds outside its address space.

Socket buffers, pipe buffers and descriptors passed in flight are kernel memory that no
``RLIMIT_AS`` sees, and in the single-process mode (no cgroup of its own) nothing else counted
them: growing each socket's buffer to the system's maximum (``SO_SNDBUF``; 4 MiB x 2 on many
hosts) and passing full sockets in flight pinned 425-456 MiB past a 256 MiB cap.  Buffers may no
longer grow past the system's defaults (sockets) or the default pipe size, and locked memory and
POSIX message queue bytes are zero, on every backend and mode, so the descriptor limit bounds
what a job can hold there.
"""

from __future__ import annotations

import re

import pytest

from llm_marl.tools.sandbox import Limits, ProcessSandbox, Status

FILL = r"""
import array, fcntl, os, socket
held = 0
CHUNK = b"x" * 65536

def fill(fd_send):
    global held
    os.set_blocking(fd_send, False)
    while True:
        try:
            n = os.write(fd_send, CHUNK)
        except OSError:
            return
        held += n

def grow(s):
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF, 32, 33):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, 1 << 30)
        except OSError:
            pass

kept = []
carrier, _keep = socket.socketpair()
carrier.setblocking(False)
for _ in range(10_000):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, KIND)
    except OSError:
        break
    grow(a)
    grow(b)
    fill(a.fileno())
    try:  # pass both ends in flight and close them here: their buffers stay alive
        carrier.sendmsg([b"."], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                   array.array("i", [a.fileno(), b.fileno()]))])
    except OSError:
        kept.append((a, b))  # still open here: their buffers count, and so do their fds
    else:
        a.close()
        b.close()
for _ in range(10_000):
    try:
        r, w = os.pipe()
    except OSError:
        break
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass
    fill(w)
    kept.append((r, w))
print("HELD", held >> 20)
"""

LOCKED = r"""
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
buf = mmap.mmap(-1, 64 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
print("LOCKED" if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(64 << 20)) == 0 else "no")
"""

# Far below what the attack held before (425+ MiB): the defaults times the descriptor limit.
BOUND_MB = 96


def _held(stdout: str) -> int | None:
    match = re.search(r"HELD (\d+)", stdout)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("kind", ["SOCK_STREAM", "SOCK_DGRAM"])
def test_socket_and_pipe_buffers_stay_bounded(sandbox, kind):
    result = sandbox.run(FILL.replace("KIND", f"socket.{kind}"), limits=Limits(timeout=20))
    held = _held(result.stdout)
    assert held is not None, result
    assert held <= BOUND_MB, f"{kind}: the job held {held} MiB of kernel buffers"
    assert sandbox.run("print('ok')").stdout == "ok\n"


def test_locked_memory_is_refused(sandbox):
    result = sandbox.run(LOCKED)
    assert result.status is Status.OK and result.stdout.strip() == "no", result


def test_single_process_mode_bounds_buffers_too(bwrap_ready):
    with ProcessSandbox(workers=1, memory_cap="single-process", limits=Limits(timeout=20)) as sb:
        result = sb.run(FILL.replace("KIND", "socket.SOCK_STREAM"))
        held = _held(result.stdout)
        assert held is not None and held <= BOUND_MB, result
