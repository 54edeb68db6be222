"""Isolation on every backend: no network, no host files, no process outlives its job, the host
and the worker survive whatever the program signals.  Plus: ``auto`` never downgrades."""

from __future__ import annotations

import os
import shutil
import socket
import time
import uuid
import warnings
from pathlib import Path

import pytest

from llm_marl.tools.sandbox import (
    Limits,
    ProcessSandbox,
    SandboxUnavailableError,
    Status,
    make_sandbox,
)

PROJECT_ROOT = Path(__file__).resolve().parents[3]


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
    if getattr(single_sandbox, "memory_cap", None) == "single-process":
        # Without a cgroup the job is one process: the background process never starts.
        assert first.status is Status.FAILED and "BlockingIOError" in first.stderr, first
    else:
        assert first.status is Status.OK and first.stdout == "spawned\n"
    time.sleep(1.5)
    # Same worker, same /tmp: a surviving grandchild would have written the marker by now.
    check = single_sandbox.run(
        f"import os\nprint(os.path.exists({marker!r}))\n"
        "ours = {1, os.getppid(), os.getpid()}\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit() and int(p) not in ours]))"
    )
    exists, strays = check.stdout.split()
    assert exists == "False"
    # Only the supervisor (PID 1), this job's own job process and the program itself.
    assert int(strays) == 0
    assert not os.path.exists(marker)


def test_back_to_back_jobs_never_see_the_previous_job_process(single_sandbox):
    """A job starts only once the previous job's job process has exited and been reaped.

    The next job process is forked while the previous one still writes its reply; before it
    waited for that one's end, a loaded machine let a job see it (alive or a zombie) in
    ``/proc``, and the new job's sweep took it for a survivor and retired the worker.  The race
    is rare per job (about 1 in 75 under load), hence many short jobs.
    """
    before = single_sandbox._pool.replaced
    program = (
        "import os\nours = {1, os.getppid(), os.getpid()}\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in ours))"
    )
    seen = [single_sandbox.run(program) for _ in range(60)]
    assert all(r.status is Status.OK for r in seen), [r for r in seen if r.status is not Status.OK]
    strays = [r.stdout for r in seen if r.stdout != "[]\n"]
    assert strays == []
    assert single_sandbox._pool.replaced == before


def test_killing_the_parent_or_the_host_is_contained(sandbox, double):
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
    report = sandbox.run_tests(double.correct, double.check, entry_point="double")
    assert report.status is Status.OK


def test_kill_everything_inside_the_sandbox(sandbox, double):
    # kill(-1) reaches every process the program may signal: the test runner dies, the tests
    # fail, and the worker is still healthy.
    program = (
        "import os, signal\ndef double(x):\n    os.kill(-1, signal.SIGKILL)\n    return 2 * x\n"
    )
    report = sandbox.run_tests(program, double.check, entry_point="double")
    assert report.status is not Status.OK and report.passed == 0
    assert sandbox.run_tests(double.correct, double.check, entry_point="double").status is Status.OK


# --------------------------------------------------------------------------- never downgrade


@pytest.fixture
def no_bubblewrap(monkeypatch, tmp_path):
    """A host where bubblewrap is not installed (unshare still is)."""
    from llm_marl.tools.sandbox import process

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "python3", "sh"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    process._probe.cache_clear()
    yield
    process._probe.cache_clear()


def test_auto_isolation_fails_with_the_install_hint_instead_of_downgrading(no_bubblewrap):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a downgrade "with a warning" is a failure too
        with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap"):
            ProcessSandbox(workers=1)
        with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
            make_sandbox("auto", workers=1, base_url="unix:///nonexistent/docker.sock")
        with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
            ProcessSandbox(workers=1, isolation="bwrap")


def test_weaker_isolation_only_when_asked_for_by_name(no_bubblewrap):
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        sandbox = ProcessSandbox(workers=1, isolation="none", limits=Limits(timeout=3))
    with sandbox:
        assert sandbox.isolation == "none"
        assert sandbox.run("print(1)").stdout == "1\n"
    if shutil.which("unshare"):
        try:
            with pytest.warns(RuntimeWarning, match="filesystem is visible and writable"):
                sandbox = ProcessSandbox(workers=1, isolation="unshare", limits=Limits(timeout=3))
        except SandboxUnavailableError:
            return  # unshare cannot make namespaces here either: it says so instead
        with sandbox:
            assert sandbox.isolation == "unshare"


def test_auto_picks_bubblewrap_when_it_works(process_sandbox):
    assert process_sandbox.isolation == "bwrap"


WRITE_EVERYWHERE = """
import os
wrote = []
for d in ("/", "/dev", "/dev/shm", "/usr", "/bin", "/lib", "/proc", "/var/tmp", "/run", "/etc",
          "/home", "/root", "/sys"):
    try:
        with open(os.path.join(d, "llm_marl_planted"), "w") as f:
            f.write("x" * 100000)
        wrote.append(d)
    except OSError:
        pass
print("WROTE", wrote)
"""


def test_the_only_writable_place_is_the_scratch(single_sandbox):
    # bwrap's own root and /dev are tmpfs mounts: writable, they would hold memory outside the
    # scratch cap and survive into the next job (no wipe reaches them).
    result = single_sandbox.run(WRITE_EVERYWHERE)
    assert result.status is Status.OK, result
    assert result.stdout.strip() == "WROTE []"
    again = single_sandbox.run(
        "import os\nprint([d for d in ('/', '/dev', '/dev/shm') "
        "if os.path.exists(os.path.join(d, 'llm_marl_planted'))])"
    )
    assert again.stdout.strip() == "[]"
