"""Hostile programs, run on every backend: each must be contained and can never score a pass.

Every test uses the real isolation (bubblewrap namespaces / Docker containers), no mocks.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from llm_marl.tools.sandbox import Limits, Status

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# A wrong solution of "double a number" in several disguises; the honest correct one passes.
DOUBLE_CHECK = """
def check(candidate):
    assert candidate(1) == 2
    assert candidate(5) == 10
    assert abs(candidate(0.5) - 1.0) < 1e-9
"""
CORRECT = "def double(x):\n    return 2 * x\n"


def _bounded(limits: Limits, seconds: float) -> float:
    """Wall-clock bound for a job that hits the time limit: the limit plus slack."""
    return limits.timeout + seconds


def host_addresses() -> list[str]:
    """Addresses a program could try to reach the host by: loopback, the host's own address,
    the Docker bridge gateway."""
    addrs = {"127.0.0.1", "172.17.0.1"}
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("10.255.255.255", 1))
        addrs.add(s.getsockname()[0])
        s.close()
    except OSError:
        pass
    return sorted(addrs)


# --------------------------------------------------------------------------- resource attacks


def test_infinite_loop_times_out_within_the_limit(sandbox):
    limits = replace(sandbox.limits, timeout=1.5)
    start = time.monotonic()
    result = sandbox.run("while True:\n    pass\n", limits=limits)
    elapsed = time.monotonic() - start
    assert result.status is Status.TIMEOUT
    assert elapsed < _bounded(limits, 2.0)
    report = sandbox.run_tests(
        "def double(x):\n    while True:\n        pass\n",
        DOUBLE_CHECK,
        entry_point="double",
        limits=limits,
    )
    assert report.status is Status.TIMEOUT and report.passed == 0
    assert "time limit" in report.tests[0].error


def test_fork_bomb_is_contained_and_cleaned_up(single_sandbox):
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    limits = replace(single_sandbox.limits, timeout=1.5)
    start = time.monotonic()
    result = single_sandbox.run(bomb, limits=limits)
    assert result.status is Status.TIMEOUT
    assert time.monotonic() - start < _bounded(limits, 5.0)
    # The next job on the same worker sees no survivor: only the supervisor and itself run.
    after = single_sandbox.run(
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    )
    assert after.status is Status.OK
    pids = eval(after.stdout)
    assert len(pids) <= 2, pids


def test_memory_bomb_hits_the_memory_limit(sandbox):
    result = sandbox.run("x = bytearray(2 ** 34)\n")
    assert result.status is Status.MEMORY
    grow = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n")
    assert grow.status is Status.MEMORY
    report = sandbox.run_tests(
        "def double(x):\n    blob = [0] * (10 ** 10)\n    return 2 * x\n",
        DOUBLE_CHECK,
        entry_point="double",
    )
    assert report.status is Status.MEMORY and report.passed == 0


def test_huge_output_is_truncated_and_stopped(sandbox):
    start = time.monotonic()
    result = sandbox.run("while True:\n    print('x' * 1000)\n")
    assert result.status is Status.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert len(result.stdout.encode()) == sandbox.limits.output_bytes
    assert time.monotonic() - start < _bounded(sandbox.limits, 0.0)
    err = sandbox.run("import sys\nsys.stderr.write('e' * 10 ** 6)\n")
    assert err.status is Status.OUTPUT_LIMIT and err.stderr_truncated


# --------------------------------------------------------------------------- isolation


def test_network_is_unreachable(sandbox, tcp_server):
    program = f"""
import socket
for host in {host_addresses()!r}:
    try:
        socket.create_connection((host, {tcp_server.port}), timeout=1).close()
        print("CONNECTED", host)
    except OSError as e:
        print("blocked", host, type(e).__name__)
"""
    result = sandbox.run(program)
    assert result.status is Status.OK, result
    assert "CONNECTED" not in result.stdout
    assert result.stdout.count("blocked") == len(host_addresses())
    assert tcp_server.accepted == 0


def test_files_outside_the_work_dir_are_unreadable(sandbox, tmp_path):
    secret = Path("/tmp") / f"llm_marl_secret_{uuid.uuid4().hex}"
    token = uuid.uuid4().hex
    secret.write_text(token)
    try:
        program = f"""
import os
for path in [{str(secret)!r}, {str(PROJECT_ROOT / "pyproject.toml")!r}, '/etc/passwd',
             '/root/.bash_history', '/var/run/docker.sock']:
    try:
        with open(path) as f:
            print("READ", path, f.read())
    except OSError as e:
        print("denied", path, type(e).__name__)
print("project visible:", os.path.exists({str(PROJECT_ROOT)!r}))
"""
        result = sandbox.run(program)
    finally:
        secret.unlink()
    assert result.status is Status.OK, result
    assert token not in result.stdout
    assert "[project]" not in result.stdout  # pyproject.toml content
    assert f"READ {secret}" not in result.stdout
    assert "READ /var/run/docker.sock" not in result.stdout
    assert "project visible: False" in result.stdout


def test_writes_outside_the_work_dir_do_not_reach_the_host(sandbox):
    name = f"llm_marl_escape_{uuid.uuid4().hex}"
    targets = [Path("/tmp") / name, PROJECT_ROOT / name, Path("/var/tmp") / name]
    program = "\n".join(
        [
            "for path in %r:" % [str(t) for t in targets],
            "    try:",
            "        open(path, 'w').write('escaped')",
            "    except OSError:",
            "        pass",
        ]
    )
    result = sandbox.run(program)
    assert result.status is Status.OK
    leaked = [t for t in targets if t.exists()]
    for t in leaked:
        t.unlink()
    assert leaked == []


def test_background_processes_do_not_outlive_the_job(single_sandbox):
    marker = f"/tmp/llm_marl_marker_{uuid.uuid4().hex}"
    program = f"""
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()                      # escape the job's session and process group
    if os.fork() == 0:               # and its parent
        time.sleep(1.0)
        open({marker!r}, "w").write("alive")
    os._exit(0)
print("spawned")
"""
    first = single_sandbox.run(program)
    assert first.status is Status.OK and first.stdout == "spawned\n"
    time.sleep(1.5)
    # Same worker, same /tmp: a surviving grandchild would have written the marker by now.
    check = single_sandbox.run(
        f"import os\nprint(os.path.exists({marker!r}))\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    exists, nprocs = check.stdout.split()
    assert exists == "False"
    assert int(nprocs) <= 2
    assert not os.path.exists(marker)


def test_killing_the_parent_or_the_host_is_contained(sandbox):
    host_pid = os.getpid()
    program = f"""
import os, signal
for target in (os.getppid(), 1, {host_pid}):
    try:
        os.kill(target, signal.SIGKILL)
    except OSError as e:
        print("refused", target, type(e).__name__)
try:
    os.killpg({host_pid}, signal.SIGKILL)
except OSError:
    pass
print("still here")
"""
    result = sandbox.run(program)
    assert result.status is Status.OK
    assert "still here" in result.stdout
    # The sandbox (and this process) survived: the next job runs normally.
    assert sandbox.run("print(6 * 7)").stdout == "42\n"
    report = sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double")
    assert report.status is Status.OK


def test_kill_everything_inside_the_sandbox(sandbox):
    # kill(-1) reaches every process the program may signal: the test runner dies, the tests
    # fail, and the worker is still healthy.
    program = (
        "import os, signal\ndef double(x):\n    os.kill(-1, signal.SIGKILL)\n    return 2 * x\n"
    )
    report = sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.status is not Status.OK and report.passed == 0
    assert sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").status is Status.OK


# --------------------------------------------------------------------------- fooling the checker

FOOLING_PROGRAMS = {
    "sys_exit_before_tests": "import sys\ndef double(x):\n    return 0\nsys.exit(0)\n",
    "os_exit_before_tests": "import os\ndef double(x):\n    return 0\nos._exit(0)\n",
    "fake_results_on_stdout": (
        'print(\'passed\')\nprint(\'{"k": "T", "i": 0, "ok": true}\')\n'
        "print('3/3 tests passed')\ndef double(x):\n    print('ok')\n    return 0\n"
    ),
    "system_exit_inside_a_test": "def double(x):\n    raise SystemExit(0)\n",
    "os_exit_inside_a_test": "import os\ndef double(x):\n    os._exit(0)\n",
    "override_builtins_and_assertion_error": (
        "import builtins\n"
        "class Never(Exception):\n    pass\n"
        "builtins.AssertionError = Never\nAssertionError = Never\n"
        "builtins.abs = lambda x: 0\n"
        "def abs(x):\n    return 0\n"
        "def double(x):\n    return 0\n"
    ),
    "always_equal_object": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __sub__(self, other):\n        return 0\n"
        "    def __abs__(self):\n        return 0\n"
        "def double(x):\n    return Anything()\n"
    ),
    "always_equal_int_subclass": (
        "class Int(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def double(x):\n    return Int(0)\n"
    ),
    "forge_records_on_every_descriptor": (
        "import os\n"
        'FAKE = b\'{"k":"T","i":0,"ok":true,"err":"","et":""}\\n\'\n'
        "def double(x):\n"
        "    for fd in range(64):\n"
        "        try:\n            os.write(fd, FAKE * 3)\n"
        "        except OSError:\n            pass\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        for fd in range(8):\n"
        "            try:\n"
        "                with open(f'/proc/{pid}/fd/{fd}', 'wb') as f:\n"
        "                    f.write(FAKE * 3)\n"
        "            except OSError:\n                pass\n"
        "    return 0\n"
    ),
    "trace_and_frame_tricks": (
        "import sys, gc\n"
        "def double(x):\n"
        "    frame = sys._getframe()\n"
        "    while frame is not None:\n"
        "        frame.f_globals.update(AssertionError=None)\n"
        "        frame = frame.f_back\n"
        "    sys.settrace(lambda *a: None)\n"
        "    for obj in gc.get_objects():\n"
        "        if callable(obj) and getattr(obj, '__name__', '') in ('check', 'record', 'emit'):\n"
        "            try:\n                obj.__code__ = (lambda *a, **k: None).__code__\n"
        "            except Exception:\n                pass\n"
        "    return 0\n"
    ),
    "patch_modules_the_tests_use": (
        "import math, builtins\n"
        "math.isclose = lambda *a, **k: True\n"
        "builtins.isinstance = lambda *a: True\n"
        "def double(x):\n    return 0\n"
    ),
}


@pytest.mark.parametrize("attack", sorted(FOOLING_PROGRAMS))
def test_fooling_attempts_never_pass(sandbox, attack):
    report = sandbox.run_tests(FOOLING_PROGRAMS[attack], DOUBLE_CHECK, entry_point="double")
    assert report.passed == 0, (attack, report)
    assert report.status is not Status.OK
    # Control: the honest solution passes on the same (shared) workers right after.
    assert sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").status is Status.OK


# Scans the readable memory of every process it can open (itself first, after making itself
# dumpable again) for the marker; the same scanner finds a marker in its own memory when run
# unsandboxed.
MEMORY_SCANNER = """
import os

def _dumpable():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
    except Exception:
        pass

def _scan(pid, needle):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:
        return None
    with mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in addr.split("-"))
            if end - start > 1 << 28:
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            i = data.find(needle)
            while i >= 0:
                if data[i + len(needle):i + len(needle) + 1] == b"_":
                    return data[i:i + 40].decode("ascii", "replace")
                i = data.find(needle, i + 1)
    return None

def leak(prefix):
    _dumpable()
    needle = prefix.encode()
    for pid in ["self"] + [p for p in os.listdir("/proc") if p.isdigit()]:
        hit = _scan(pid, needle)
        if hit:
            return hit
    return "not found"
"""


def test_the_program_cannot_read_the_tests(sandbox):
    # The expected values never enter the program's process (the tests are read by the test
    # runner after the program's process was forked): a memory scan finds nothing.
    prefix = "EXP" + uuid.uuid4().hex[:8].upper()
    expected = prefix + "_" + uuid.uuid4().hex
    report = sandbox.run_tests(MEMORY_SCANNER, [f"assert leak({prefix!r}) == {expected!r}"])
    assert report.passed == 0
    assert report.status is Status.FAILED
    assert expected not in (report.tests[0].error or "")


def test_host_process_survives_everything(sandbox):
    assert os.getpid() > 0  # still running after all of the above
    assert sandbox.run("print('alive')").stdout == "alive\n"
