"""Class 2: a program poisons its worker's scratch space for the jobs after it.

Every job must start in a fresh, empty working directory with an empty ``/tmp``, whatever the
previous job on the same worker left there: trees deeper than the recursion limit, paths longer
than ``PATH_MAX``, directories it made unreadable, symlinks, fifos, sockets, a full tmpfs.  A
failure to write the program into the sandbox is an infrastructure error, never a verdict.
"""

from __future__ import annotations

import pytest

from llm_marl.tools.sandbox import Limits, ProcessSandbox, Status

DOUBLE_CHECK = (
    "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 10\n"
)
CORRECT = "def double(x):\n    return 2 * x\n"

# Lists everything a job can see of its predecessors: its working directory and /tmp (with
# descriptor-relative walking, which sees past PATH_MAX too).
INSPECT = """
import os
seen = []
for root, dirs, files, _ in os.fwalk("/tmp"):
    for name in dirs + files:
        seen.append(os.path.join(root, name)[:300])
print(sorted(p for p in seen if p not in ("/tmp/work", "/tmp/work/main.py")))
"""

LEFTOVERS = {
    "deep_chain": """
import os
for _ in range(3000):           # deeper than the interpreter's recursion limit
    os.mkdir("d")
    os.chdir("d")
open("leaf", "w").write("x")
""",
    "beyond_path_max": """
import os
os.chdir("/tmp")
name = "n" * 250
for _ in range(40):              # 10,000-character paths: beyond PATH_MAX (4096)
    os.mkdir(name)
    os.chdir(name)
open("secret", "w").write("left for the next job")
""",
    "locked_directories": """
import os
os.makedirs("a/b/c")
open("a/b/c/f", "w").write("x")
open("a/b/ro", "w").write("x")
os.chmod("a/b/ro", 0)
os.chmod("a/b/c", 0)
os.chmod("a/b", 0o500)
os.chmod("a", 0)
os.makedirs("/tmp/hidden/x")
os.chmod("/tmp/hidden", 0)
""",
    "symlink_tricks": """
import os
os.symlink("/", "root")
os.symlink("/usr", "usr")
os.symlink(".", "self")
os.symlink("loop", "loop")
os.symlink("/nonexistent/target", "dangling")
os.mkdir("d")
os.symlink("..", "d/up")
os.symlink(os.getcwd(), "/tmp/work_link")
""",
    "special_files": """
import os, socket
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("sock")
os.mkfifo("/tmp/fifo2")
os.link("fifo", "fifo_hardlink")
""",
    "odd_names": """
import os
for name in ["-rf", "..." , "a\\nb", " ", "\\u2603", os.fsdecode(b"\\xff\\xfe")]:
    open(name, "w").write("x")
os.mkdir(".hidden")
open(".hidden/.x", "w").write("x")
""",
    "beyond_path_max_in_cwd": """
import os
name = "m" * 250
for _ in range(40):
    os.mkdir(name)
    os.chdir(name)
open("secret", "w").write("left for the next job")
""",
    "many_files": """
import os
os.mkdir("many")
for i in range(20000):
    open(f"many/{i}", "w").close()
""",
}


@pytest.mark.parametrize("attack", sorted(LEFTOVERS))
def test_the_next_job_starts_in_an_empty_scratch(single_sandbox, attack):
    first = single_sandbox.run(LEFTOVERS[attack])
    assert first.status is Status.OK, first
    after = single_sandbox.run(INSPECT)
    assert after.status is Status.OK, after
    assert after.stdout.strip() == "[]", f"{attack} left: {after.stdout[:500]}"
    assert single_sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").all_passed


# Fills the scratch tmpfs with files hidden beyond PATH_MAX (the old wipe skipped them), so that
# the next job cannot even write its program.
FILL_HIDDEN = """
import os
os.chdir("/tmp")                 # beside the working directory, in the scratch root
name = "n" * 250
for _ in range(20):
    os.mkdir(name)
    os.chdir(name)
chunk = b"x" * (1 << 20)
for i in range(1000):
    try:
        with open(f"fill{i}", "wb") as f:
            for _ in range(8):
                f.write(chunk)
    except OSError:
        break
print("filled")
"""


def test_a_full_scratch_does_not_fail_the_jobs_after_it(single_sandbox):
    full = single_sandbox.run(FILL_HIDDEN)
    assert full.status in (Status.OK, Status.MEMORY, Status.TIMEOUT), full
    # A real solution with its docstrings is tens of KiB: it must still fit.
    padded = "# " + "docstring " * 8000 + "\n" + CORRECT
    for _ in range(2):
        report = single_sandbox.run_tests(padded, DOUBLE_CHECK, entry_point="double")
        assert report.status is Status.OK, report


def test_tests_mode_leftovers_are_wiped_too(single_sandbox):
    program = LEFTOVERS["deep_chain"].replace('os.chdir("d")', 'os.chdir("d")\n') + CORRECT
    report = single_sandbox.run_tests(program, DOUBLE_CHECK, entry_point="double")
    assert report.all_passed, report
    after = single_sandbox.run(INSPECT)
    assert after.stdout.strip() == "[]", after.stdout[:500]


def test_a_program_that_cannot_be_written_is_an_infrastructure_error(bwrap_ready):
    # A scratch space too small for the program is the sandbox's configuration, not the
    # program's fault: no verdict (the sample is dropped), and the host says what happened.
    with ProcessSandbox(workers=1, tmpfs_mb=1, limits=Limits(timeout=3)) as sandbox:
        big = "# " + "x" * (3 << 20) + "\n" + CORRECT
        report = sandbox.run_tests(big, DOUBLE_CHECK, entry_point="double")
        assert report.status is Status.INFRA_ERROR, report
        assert "could not write the program" in report.error
        assert sandbox.run_tests(CORRECT, DOUBLE_CHECK, entry_point="double").all_passed


def test_a_program_larger_than_the_file_size_limit_is_refused_and_scored(sandbox):
    limits = Limits(timeout=3, file_size_mb=1)
    big = "# " + "x" * (2 << 20) + "\n" + CORRECT
    report = sandbox.run_tests(big, DOUBLE_CHECK, entry_point="double", limits=limits)
    assert report.status is Status.FAILED and report.passed == 0
    assert "file size limit" in report.error


class _NoSyscallFilter(ProcessSandbox):
    """Workers without the system-call filter, so that a job can leave SysV IPC objects."""

    def _start_worker(self):
        import llm_marl.tools.sandbox.process as process

        original = process.ProcessWorker.__init__

        def init(worker, argv, *args, **kwargs):
            i = argv.index("--seccomp")
            original(worker, argv[:i] + argv[i + 2 :], *args, **kwargs)

        process.ProcessWorker.__init__ = init
        try:
            return super()._start_worker()
        finally:
            process.ProcessWorker.__init__ = original


IPC_LEAK = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 1 << 20, 0o1600))   # IPC_PRIVATE, IPC_CREAT: outlives the process
"""


def test_a_worker_whose_job_left_something_behind_is_retired(bwrap_ready):
    with pytest.warns(RuntimeWarning) as caught:
        sandbox = _NoSyscallFilter(workers=1, memory_cap="per-process", limits=Limits(timeout=3))
    assert any("system-call filter" in str(w.message) for w in caught)
    with sandbox:
        (worker,) = sandbox._workers
        leak = sandbox.run(IPC_LEAK)
        assert leak.status is Status.OK and int(leak.stdout) >= 0, leak
        check = sandbox.run("print(open('/proc/sysvipc/shm').read().count(chr(10)))")
        assert check.stdout.strip() == "1", check  # only the header: a fresh IPC namespace
        assert sandbox._workers != [worker] and sandbox._pool.replaced == 1


def test_the_filter_refuses_ipc_objects(sandbox):
    result = sandbox.run(IPC_LEAK)
    assert result.status is Status.OK and result.stdout.strip() == "-1", result
