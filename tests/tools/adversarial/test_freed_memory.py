"""Issue 28, item 15 (residual): nothing of an earlier job is in memory a later job can read.

A job's program may read its own address space byte by byte: ``ctypes`` over every readable
mapping listed in ``/proc/self/maps`` (heap, anonymous mappings, stacks, the interpreter's data),
``process_vm_readv`` on its own pid, or ``/proc/self/mem``. Whatever some process of the worker
ever held and then freed stays in those pages until it is overwritten; the kernel only zeroes a
page when it hands it to a process afresh. Before the fix, the next job's program was forked from
the worker's supervisor, which had read the previous job (its program, its input, the other
authors' code) and relayed its reply (the test runner's records with the assertion messages, the
program's output): a scan found 3 (bubblewrap) or 4 (Docker) copies of the previous job's output.

Each earlier job below leaves markers of every kind a job carries -- its program's source, the
other team member's code, its stdin, its stdout and stderr, a failing unit's message, a unit's
expected value -- and the next job's program scans its whole readable memory for them with each
reader. A marker is searched as a common prefix followed by its own suffix, so the scanner's text
never holds one whole; the scanner also plants a control marker in its own memory, which every
reader that can read must find (so the scan is shown to work, and the test can fail).
"""

from __future__ import annotations

import json
import uuid

import pytest

from llm_marl.tools.sandbox import TeamProgram, TestSuite

# Reads every readable mapping of its own process, in windows of 1 MiB copied into one
# preallocated buffer (so the scan allocates no memory that could unmap a listed region).
SCANNER = r"""
import ctypes, json, os

PREFIX = {prefix!r}
SUFFIXES = {suffixes!r}   # suffix -> marker name
CONTROL = "".join([PREFIX, {control!r}])   # must be found: proves the reader reads
WINDOW = 1 << 20
SKIP = ("[vvar]", "[vvar_vclock]", "[vsyscall]")


def regions():
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if fields[1][0] != "r" or (len(fields) > 5 and fields[5] in SKIP):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            spans.append((lo, hi))
    return spans


def scan(reader):
    buf = bytearray(WINDOW + 64)
    view = (ctypes.c_char * len(buf)).from_buffer(buf)
    pfx = PREFIX.encode()
    width = len(next(iter(SUFFIXES)))
    hits, scanned, failed = {{}}, 0, 0
    for lo, hi in regions():
        at = lo
        while at < hi:
            n = min(WINDOW + 64, hi - at)
            try:
                got = reader(view, buf, at, n)
            except OSError:
                failed += 1
                break
            if got <= 0:
                failed += 1
                break
            scanned += got
            i = buf.find(pfx, 0, got)
            while i >= 0 and i < min(got, WINDOW):
                name = SUFFIXES.get(bytes(buf[i + len(pfx):i + len(pfx) + width]).decode("latin-1"))
                if name is not None:
                    hits[name] = hits.get(name, 0) + 1
                i = buf.find(pfx, i + 1, got)
            at += WINDOW
    if not scanned:  # e.g. Docker's seccomp profile refuses process_vm_readv
        return {{"refused": "read nothing ({{}} regions failed)".format(failed)}}
    return {{"hits": hits, "bytes": scanned, "failed": failed}}


def by_ctypes(view, buf, at, n):
    ctypes.memmove(view, at, n)
    return n


libc = ctypes.CDLL(None, use_errno=True)


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def by_vm_readv(view, buf, at, n):
    local = IoVec(ctypes.addressof(view), n)
    remote = IoVec(at, n)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    got = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if got < 0:
        raise OSError(ctypes.get_errno(), "process_vm_readv")
    return got


def report():
    out = {{}}
    for name, reader in (("ctypes", by_ctypes), ("vm_readv", by_vm_readv)):
        try:
            out[name] = scan(reader)
        except OSError as e:
            out[name] = {{"refused": str(e)}}
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
    except OSError as e:
        out["proc_mem"] = {{"refused": str(e)}}
    else:
        out["proc_mem"] = scan(lambda view, buf, at, n: os.preadv(fd, [memoryview(buf)[:n]], at))
        os.close(fd)
    assert CONTROL
    print("SCAN " + json.dumps(out), flush=True)
"""


def _markers() -> tuple[str, dict[str, str]]:
    """A prefix no program text holds, and one suffix per kind of job data (plus the control)."""
    run = uuid.uuid4().hex
    prefix = "Zq7" + run[:9]
    kinds = ("control", "source", "team", "stdin", "stdout", "stderr", "message", "expected")
    return prefix, {kind: f"{kind[:3]}{uuid.uuid4().hex[:13]}" for kind in kinds}


def _whole(prefix: str, suffix: str) -> str:
    return prefix + suffix


def _join(prefix: str, suffix: str) -> str:
    """Code that builds the marker at run time (its text never holds the marker whole)."""
    return f'"".join([{prefix!r}, {suffix!r}])'


def _scanner(prefix: str, suffixes: dict[str, str], mode: str) -> str:
    names = {suffix: kind for kind, suffix in suffixes.items()}
    body = SCANNER.format(prefix=prefix, suffixes=names, control=suffixes["control"])
    if mode == "run":
        return body + "\nreport()\n"
    return body + "\n\ndef probe_memory():\n    report()\n    return 1\n"


def _scan_report(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("SCAN ")]
    assert lines, f"the scanner did not report: {stdout[-2000:]!r}"
    return json.loads(lines[-1][5:])


def _assert_clean(report: dict, what: str) -> None:
    readers = 0
    for reader, result in report.items():
        if "refused" in result:
            # The program's own memory is always open to ctypes; /proc/self/mem is closed (the
            # worker is not dumpable), process_vm_readv is where the engine's filter refuses it.
            assert reader != "ctypes", f"{reader} could not read at all: {result}"
            continue
        readers += 1
        assert result["bytes"] > 1 << 20, f"{reader} read only {result['bytes']} bytes"
        hits = dict(result["hits"])
        assert hits.pop("control", 0) >= 1, f"{reader} did not find its own control marker"
        assert not hits, f"{reader} found {what} in freed memory: {hits}"
    assert readers >= 1


def _first_job_tests(sandbox, prefix: str, suffixes: dict[str, str]) -> None:
    """A team program scored on two units: one fails with a message, one has an expected
    value that is a marker; the program prints a marker, and each author's code holds one."""
    helper = f"def helper(x):\n    # {_whole(prefix, suffixes['team'])}\n    return x + 1\n"
    main = (
        "def f(x):\n"
        f"    # {_whole(prefix, suffixes['source'])}\n"
        f"    print({_join(prefix, suffixes['stdout'])}, flush=True)\n"
        "    import sys\n"
        f"    print({_join(prefix, suffixes['stderr'])}, file=sys.stderr, flush=True)\n"
        "    return helper(x)\n"
    )
    check = (
        "def check(candidate):\n"
        f"    assert candidate(1) == 7, {_join(prefix, suffixes['message'])}\n"
        f"    assert candidate(2) in (3, {_whole(prefix, suffixes['expected'])!r})\n"
    )
    suite = sandbox.failable(TestSuite.from_check(check, "f"))
    report = sandbox.run_tests(TeamProgram("", (helper, main), 1), suite)
    assert [t.passed for t in report.tests] == [False, True]
    assert _whole(prefix, suffixes["message"]) in report.tests[0].error
    assert _whole(prefix, suffixes["stdout"]) in report.stdout


def _first_job_run(sandbox, prefix: str, suffixes: dict[str, str]) -> None:
    """A script that reads a marker on stdin and prints markers on stdout and stderr."""
    program = (
        f"# {_whole(prefix, suffixes['source'])}\n"
        "import sys\n"
        "data = sys.stdin.read()\n"
        f"print({_join(prefix, suffixes['stdout'])}, len(data))\n"
        f"print({_join(prefix, suffixes['stderr'])}, file=sys.stderr)\n"
    )
    result = sandbox.run(program, stdin=_whole(prefix, suffixes["stdin"]) + "\n")
    assert _whole(prefix, suffixes["stdout"]) in result.stdout


@pytest.mark.parametrize("first", ["tests", "run"])
def test_a_program_scored_next_finds_nothing_of_the_job_before(single_sandbox, first):
    """The next sample of a task is scored on the same worker (a GRPO group): the program,
    while its unit runs, scans its memory for anything of the job before."""
    prefix, suffixes = _markers()
    scanner = _scanner(prefix, suffixes, "tests")
    suite = single_sandbox.failable(
        TestSuite.from_check("def check(candidate):\n    assert candidate() == 1\n", "probe_memory")
    )
    if first == "tests":
        _first_job_tests(single_sandbox, prefix, suffixes)
    else:
        _first_job_run(single_sandbox, prefix, suffixes)
    report = single_sandbox.run_tests(scanner, suite)
    assert report.passed == 1, report
    _assert_clean(_scan_report(report.stdout), f"the previous {first} job's data")


def test_a_script_run_next_finds_nothing_of_the_jobs_before(single_sandbox):
    """A script run after both kinds of job scans its memory for anything of either."""
    prefix, suffixes = _markers()
    _first_job_tests(single_sandbox, prefix, suffixes)
    _first_job_run(single_sandbox, prefix, suffixes)
    result = single_sandbox.run(_scanner(prefix, suffixes, "run"))
    _assert_clean(_scan_report(result.stdout), "the previous jobs' data")
