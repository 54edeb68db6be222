"""Issue 28, items 11-12: state that outlives a job, and workers a job poisons for the next.

A program runs as the same user as its worker's supervisor, so it can try to change the
supervisor's own process state (its resource limits, niceness, scheduling policy, CPU
affinity) or leave a kernel object behind (a POSIX message queue, an abstract socket) that the
next job, another episode's, would see: a channel from one episode to the next, or a worker that
fails every correct program after it.  Every job must start from the state the harness sets and
verifies, whatever the job before it did: the inspector below sees the same state before and
after each attack, and a correct program on the same worker still passes.
"""

from __future__ import annotations

import ast

import pytest

from llm_marl.tools.sandbox import Status

# What a job can see of the state it starts in.
INSPECT = r"""
import os, resource
state = {}
for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
    state[name] = resource.getrlimit(getattr(resource, name))
state["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
state["sched"] = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
state["affinity"] = sorted(os.sched_getaffinity(0))
old = os.umask(0o077)
os.umask(old)
state["umask"] = old
try:
    state["mqueue"] = sorted(os.listdir("/dev/mqueue"))
except OSError:
    state["mqueue"] = None
abstract = []
try:
    with open("/proc/net/unix") as f:
        for line in f.read().splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7].startswith("@"):
                abstract.append(parts[7])
except OSError:
    pass
state["abstract"] = sorted(abstract)
print(repr(state))
"""

# Each tries every way it knows and ignores refusals; pid 1 is the supervisor under bwrap and
# Docker, the parent is the supervisor in every mode.
ATTACKS = {
    "resource_limits": r"""
import os, resource
for pid in {1, os.getppid()}:
    for res, value in ((resource.RLIMIT_AS, 48 << 20), (resource.RLIMIT_NPROC, 1),
                       (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NOFILE, 8),
                       (resource.RLIMIT_STACK, 1 << 16), (resource.RLIMIT_CPU, 1),
                       (resource.RLIMIT_DATA, 48 << 20)):
        for limit in ((value, value), (value, resource.RLIM_INFINITY)):
            try:
                resource.prlimit(pid, res, limit)
            except (OSError, ValueError):
                pass
""",
    "niceness": r"""
import os
for which, who in ((os.PRIO_PROCESS, 1), (os.PRIO_PROCESS, os.getppid()),
                   (os.PRIO_PGRP, 0), (os.PRIO_PGRP, 1), (os.PRIO_USER, os.getuid())):
    try:
        os.setpriority(which, who, 19)
    except OSError:
        pass
""",
    "scheduler": r"""
import os
for pid in {1, os.getppid()}:
    for policy in (os.SCHED_IDLE, os.SCHED_BATCH):
        try:
            os.sched_setscheduler(pid, policy, os.sched_param(0))
        except OSError:
            pass
    try:
        os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})
    except OSError:
        pass
""",
    "posix_mqueue": r"""
import os
try:
    fd = os.open("/dev/mqueue/llm_marl_leak", os.O_CREAT | os.O_RDWR, 0o666)
    os.close(fd)
except OSError:
    pass
""",
    "abstract_socket": r"""
import os, socket, array
# A socket that holds itself in its own queue outlives every process of the job until the
# kernel's garbage collector finds the cycle.
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(b"\0llm_marl_leak")
s.connect(b"\0llm_marl_leak")
s.sendmsg([b"hi"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [s.fileno()]))])
s.close()
""",
}

CHECK = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 10\n"
CORRECT = "def double(x):\n    return 2 * x\n"
SAFE_READ = "import resource\nresource.getrlimit(resource.RLIMIT_NOFILE)\nprint('ok')\n"


def _state(sandbox) -> dict:
    result = sandbox.run(INSPECT)
    assert result.status is Status.OK, result
    return ast.literal_eval(result.stdout)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_next_job_starts_from_the_same_state(single_sandbox, attack):
    before = _state(single_sandbox)
    for mode in ("run", "tests"):
        if mode == "run":
            hostile = single_sandbox.run(ATTACKS[attack])
        else:
            program = "def double(x):\n" + _indent(ATTACKS[attack]) + "    return 2 * x\n"
            hostile = single_sandbox.run_tests(program, CHECK, entry_point="double")
        assert hostile.status is not Status.INFRA_ERROR, hostile
        after = _state(single_sandbox)
        changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        assert not changed, f"{attack} ({mode}) changed the next job's state: {changed}"
        # Item 12: a correct program on the same worker is still scored correctly.
        report = single_sandbox.run_tests(CORRECT, CHECK, entry_point="double")
        assert report.status is Status.OK and report.passed == 2, report


def test_reading_ones_own_state_still_works(sandbox):
    assert sandbox.run(SAFE_READ).stdout == "ok\n"
    # A job may still change its *own* limits and niceness.
    own = sandbox.run(
        "import os, resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))\n"
        "os.setpriority(os.PRIO_PROCESS, 0, 5)\nprint(os.getpriority(os.PRIO_PROCESS, 0))\n"
    )
    assert own.status is Status.OK and own.stdout.strip() == "5", own


def _indent(source: str) -> str:
    return "".join("    " + line + "\n" for line in source.strip("\n").splitlines())
