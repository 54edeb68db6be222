"""ProcessSandbox specifics: isolation modes, rlimits, environment, pool life cycle, errors."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from llm_marl.tools.sandbox import (
    InfrastructureError,
    Limits,
    ProcessSandbox,
    SandboxError,
    Status,
    TestJob,
    make_sandbox,
)

# The program's parent is its job's job process, whose parent is the supervisor.
GRANDPARENT = (
    "def grandparent():\n"
    "    with open(f'/proc/{os.getppid()}/stat') as f:\n"
    "        return int(f.read().rpartition(')')[2].split()[1])\n"
)

PROBE = f"""
import os, resource
{GRANDPARENT}
print(grandparent(), os.getuid())
print(sorted(os.listdir("/")))
print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_NPROC)[0],
      resource.getrlimit(resource.RLIMIT_NOFILE)[0], resource.getrlimit(resource.RLIMIT_CORE)[0])
print(sorted(os.environ))
"""


def test_bwrap_isolation_shows_only_the_system_and_applies_rlimits(process_sandbox):
    assert process_sandbox.isolation == "bwrap"
    result = process_sandbox.run(PROBE)
    assert result.status is Status.OK, result
    ids, root, limits, env = result.stdout.strip().split("\n")
    ppid, uid = map(int, ids.split())
    assert ppid == 1  # its own PID namespace, whose PID 1 is the supervisor (M's parent)
    assert uid != os.getuid() or os.getuid() != 0
    assert "work" not in eval(root) and "home" not in eval(root) and "etc" not in eval(root)
    lim = process_sandbox.limits
    assert limits.split() == [str(lim.memory_mb), str(lim.nproc), str(lim.open_files), "0"]
    assert set(eval(env)) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD"}


def test_environment_is_scrubbed(bwrap_ready, monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv("LLM_MARL_TEST_SECRET", token)
    with ProcessSandbox(workers=1) as sandbox:
        result = sandbox.run("import os\nprint(dict(os.environ))")
    assert token not in result.stdout and "LLM_MARL_TEST_SECRET" not in result.stdout


def test_isolation_none_still_runs_when_asked_for_by_name_and_warns():
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        sandbox = ProcessSandbox(workers=1, isolation="none", limits=Limits(timeout=2))
    with sandbox:
        report = sandbox.run_tests(
            "def f(x):\n    return x + 1\n", ["assert f(1) == 2", "assert f(1) == 3"]
        )
        assert [t.passed for t in report.tests] == [True, False]
        assert sandbox.run("while True:\n    pass\n").status is Status.TIMEOUT


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux unshare not installed")
def test_isolation_unshare_blocks_the_network_when_asked_for_by_name():
    with pytest.warns(RuntimeWarning, match="filesystem is visible"):
        sandbox = ProcessSandbox(workers=1, isolation="unshare", limits=Limits(timeout=3))
    with sandbox:
        result = sandbox.run(
            f"import os, socket\n{GRANDPARENT}print(grandparent())\n"
            "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    print('NET')\n"
            "except OSError:\n    print('no net')\n"
        )
    assert result.status is Status.OK, result
    ppid, verdict = result.stdout.split("\n")[:2]
    assert ppid == "1"  # own PID namespace: the supervisor, the job process's parent, is PID 1
    assert verdict == "no net"


def test_dead_worker_is_replaced(bwrap_ready):
    with ProcessSandbox(workers=1, limits=Limits(timeout=3)) as sandbox:
        (worker,) = list(sandbox._workers)
        os.kill(worker.supervisor_pid, signal.SIGKILL)
        worker._proc.wait()
        result = sandbox.run("print('back')")
        assert result.status is Status.OK and result.stdout == "back\n"
        assert list(sandbox._workers) != [worker]


def test_close_stops_every_worker(bwrap_ready):
    sandbox = ProcessSandbox(workers=2)
    procs = [w._proc for w in sandbox._workers]
    supervisors = [w.supervisor_pid for w in sandbox._workers]
    sandbox.close()
    sandbox.close()
    assert all(p.poll() is not None for p in procs)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_running(pid) for pid in supervisors):
        time.sleep(0.05)
    assert not any(_running(pid) for pid in supervisors)
    with pytest.raises(SandboxError, match="closed"):
        sandbox.run("print(1)")


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


class _Unrestartable(ProcessSandbox):
    """A sandbox whose replacement workers cannot start (the machine ran out of something)."""

    started = 0

    def _start_worker(self):
        type(self).started += 1
        if type(self).started > 1:
            raise OSError("cannot fork a new worker")
        return super()._start_worker()


def test_infrastructure_failure_is_reported_not_scored(bwrap_ready):
    with _Unrestartable(workers=1, limits=Limits(timeout=3)) as sandbox:
        (worker,) = list(sandbox._workers)
        os.kill(worker.supervisor_pid, signal.SIGKILL)
        worker._proc.wait()
        report = sandbox.run_tests("def f():\n    return 1\n", ["assert f() == 1"])
        assert report.status is Status.INFRA_ERROR
        assert "cannot fork a new worker" in report.error
        with pytest.raises(InfrastructureError):
            _ = report.fraction
        with pytest.raises(InfrastructureError):
            _ = report.passed
        run = sandbox.run("print(1)")
        assert run.status is Status.INFRA_ERROR and not run.ok


def test_make_sandbox_process_and_auto_uses_bwrap_without_docker(bwrap_ready, caplog):
    with make_sandbox("process", workers=1) as sandbox:
        assert isinstance(sandbox, ProcessSandbox)
    with caplog.at_level(logging.WARNING, logger="llm_marl.tools.sandbox"):
        sandbox = make_sandbox("auto", workers=1, base_url="unix:///nonexistent/docker.sock")
    with sandbox:
        assert isinstance(sandbox, ProcessSandbox)
        assert sandbox.isolation == "bwrap"
        assert sandbox.memory_cap in ("cgroup", "single-process")
        assert sandbox.run("print(2)").stdout == "2\n"
    assert "using ProcessSandbox with bubblewrap" in caplog.text
    assert "no Docker engine reachable" in caplog.text


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="kind must be one of"):
        make_sandbox("vm")
    with pytest.raises(TypeError, match="does not accept"):
        make_sandbox("process", image="x")
    with pytest.raises(ValueError, match="isolation must be one of"):
        ProcessSandbox(isolation="chroot")
    with pytest.raises(ValueError, match="memory_cap must be one of"):
        ProcessSandbox(memory_cap="lots")
    with pytest.raises(ValueError, match="only picks backends with the full guarantees"):
        make_sandbox("auto", isolation="none")
    with pytest.raises(ValueError, match="test_timeout"):
        Limits(test_timeout=0)
    with pytest.raises(ValueError, match="max_timeouts"):
        Limits(max_timeouts=0)
    with pytest.raises(ValueError, match="timeout"):
        Limits(timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Limits(memory_mb=8)


def test_malformed_tests_raise_before_running(process_sandbox):
    with pytest.raises(ValueError, match="entry_point"):
        process_sandbox.run_tests("def f(): pass", "def check(candidate):\n    assert 1\n")
    with pytest.raises(ValueError, match="not valid Python"):
        process_sandbox.run_tests("def f(): pass", ["assert f( =="])
    with pytest.raises(ValueError, match="not valid Python"):
        process_sandbox.run_tests_batch([TestJob("def f(): pass", ["assert ("])])


def test_workers_go_away_when_the_host_is_killed(bwrap_ready):
    script = (
        "import time\n"
        "from llm_marl.tools.sandbox import ProcessSandbox\n"
        "sandbox = ProcessSandbox(workers=2)\n"
        "assert sandbox.run('print(1)').ok\n"
        "print(' '.join(str(w.supervisor_pid) for w in sandbox._workers), flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        proc.kill()  # SIGKILL: no atexit hook runs
        proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(_running(pid) for pid in pids)


def test_close_quietly_closes_every_end_skips_none_and_survives_a_broken_one():
    """A worker's release closes all its channel ends even when one of them is broken."""
    from llm_marl.tools.sandbox.pool import close_quietly

    class Broken:
        def close(self) -> None:
            raise BrokenPipeError("the worker died with data unread")

    r, w = os.pipe()
    reader, writer = os.fdopen(r, "rb"), os.fdopen(w, "wb")
    close_quietly(Broken(), None, reader, writer)
    assert reader.closed and writer.closed
    close_quietly(reader, writer)  # idempotent: already closed ends are fine

    class Wrong:
        def close(self) -> None:
            raise ValueError("not an OSError: a bug, not a dead worker")

    with pytest.raises(ValueError):
        close_quietly(Wrong())
