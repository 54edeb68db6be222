"""In-sandbox supervisor: runs untrusted programs and scores tests without trusting them.

This file is executed *inside* the sandbox (``python3 -I -S -c <this source>``) by both backends;
it must therefore use the standard library only, import nothing from ``llm_marl`` and run on any
Python >= 3.8.  The host imports it only for the framing helpers and the value codec.

Process layout of one warm sandbox worker
-----------------------------------------
::

    host (trusted)  --stdin/stdout frames-->  supervisor S (trusted, long-lived, PID 1 of its own
                                              PID namespace under bwrap/unshare/Docker; never
                                              reads a job nor its reply)
                                                '-- fork --> M: job process (trusted, one job)
                                                               |-- fork --> R: test runner (trusted)
                                                               '-- fork --> P: program (UNTRUSTED)

The supervisor is started once per worker (its imports are already warm).  For each job it forks
a job process M, which reads the job from the host channel itself, forks two fresh children for
it, writes the reply to the host itself, sweeps the job and checks what it left, and exits; the
supervisor waits for M and forks the next one while the worker waits for its next job.  So a job
costs three ``fork()`` calls rather than an interpreter start, one of them before the job
arrives.  Because S never holds any job's data, and M and everything it forked die with their
job, no process of a later job starts from memory that once held an earlier job's program,
input, tests, output or records: not even freed memory, which a program can read byte by byte
(``ctypes`` over ``/proc/self/maps``).  M is the subreaper of its job's processes.

A *team* program (``job["owner"]``, built by ``program.TeamProgram``) adds a third child, O: the
shared code plus the entry point's author's own code, in a process that no other author's code
ever runs in; R talks to O, and O calls the other authors' functions in P (see
:func:`_owner_main`). P then holds no descriptor of R's.  O gets P's limits and system-call
filter, and a per-test timeout restarts both.

Why the verdict cannot be forged
--------------------------------
Any harness that executes the tests in the same process as the untrusted program can be fooled
(``sys.exit(0)`` before the tests, rebinding ``builtins``/``AssertionError``, frame or ``gc``
walking, ``sys.settrace`` line jumps, ``ctypes``, or returning an object whose ``__eq__`` is always
true).  So the tests never run in the program's process:

* **P** executes the program and then only *serves calls*: R sends ``(function name, arguments)``
  and P answers with the return value or the exception.  Values cross the boundary through a
  tagged JSON codec (:func:`encode_value` / :func:`decode_value`) that only carries plain data
  (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``,
  ``dict``, ``set``, ...).  An object with a rigged ``__eq__`` cannot be encoded, so a test that
  compares it fails; everything R compares is a value R itself built.
* **R** runs the test code (the dataset's asserts) in its own interpreter with pristine builtins,
  calls the program through proxies, and writes one record per test on a *result pipe* that is
  created after P was forked, so P never holds that file descriptor.  The supervisor marks itself
  non-dumpable (``PR_SET_DUMPABLE=0``) before forking, which its children inherit: P can neither
  ``ptrace`` R nor open ``/proc/<R>/fd`` or ``/proc/<R>/mem``.
* The tests themselves never enter P's memory nor M's or the supervisor's: R reads them straight
  from the host channel (the worker's stdin) *before* P is forked; M only knows their number.  So P cannot read the expected values out of memory either.
* Nothing else of the task or of earlier jobs is in any memory P can read while a unit runs,
  freed memory included: P is forked from the job's own M, which was forked from a supervisor
  that never read a job or a reply (see the process layout above), so the frames P was forked
  in, ``gc`` and a byte-by-byte read of P's address space find nothing of an earlier job; P and
  O empty the job's description (limits, the other authors' code) before any program code runs;
  the tests' size travels in a frame only R reads.  What P sees: the arguments of each call, its
  own code, the harness's code, the number of units (through the job's time budget); no task,
  test or file name (the program is ``/tmp/work/solution.py``, argv ``main.py``, a fixed
  environment).
* R's records are relayed to the host, which reads them strictly (``verdict.py``): a test counts
  as passed only when R reported it passed, in order; a missing, short, garbled or out-of-order
  record is a failure.  P exiting (``sys.exit``/``os._exit``) before or during a test, killing R,
  or printing fake results to stdout can therefore only make tests fail.

What this costs in fidelity (documented limits): arguments and return values must be plain data,
so a test that passes a callable or a custom object to the program, relies on the program
mutating an argument in place, or compares custom class instances, fails.  The tests see the
program's functions (as proxies), modules, and plain-data globals of up to 10,000 items (copies);
globals that shadow builtins (a program-level ``abs``) are hidden from them, except the entry
point.
Names the suite's own setup defines (a task's helpers, such as HumanEval/32's ``poly``, passed as
``TestSuite.from_check(task_code=...)``) are bound after the program's, so the tests use the
task's definitions.  Without ``ctypes`` in the sandbox interpreter the
supervisor cannot make itself non-dumpable and the host warns.

The job process M also enforces the time limits, caps captured output, and after every job kills
every process the job left behind: with a PID namespace it sends ``kill(-1, SIGKILL)``, which
reaches every process of the namespace but PID 1 (the supervisor) and M itself, then reaps them
(M is their subreaper); without a PID namespace it falls back to process groups plus
``PR_SET_CHILD_SUBREAPER`` sweeping.  Each child gets rlimits (CPU,
address space, processes, file size, open files, no core dumps), a fresh empty working directory
and a scrubbed environment; P also gets a system-call filter (:func:`install_seccomp`).

What the job cannot do to the supervisor or M: both ignore every catchable signal (and as PID 1
the kernel drops SIGKILL/SIGSTOP sent from inside the namespace to S; the job filter refuses
signals to S, M and R); M writes the program file itself before forking, so a failure there is
reported as an infrastructure fault, never charged to the program; after the job M empties the
scratch space relative to directory descriptors (:func:`wipe_tree`: no recursion limit, no
``PATH_MAX``, symlinks never followed), then checks that the scratch is empty and holds no space,
that no System V IPC object is left, and that the supervisor's own state (limits, niceness,
scheduling, read by pid) is what it was -- if not, its reply asks the host to retire this
worker.  If M dies without replying, or leaves a process or a changed state behind, the
supervisor exits and the host replaces the worker.  The next M is forked as soon as M has swept
its job, but starts its own job only once M has exited and been reaped (see
:meth:`Supervisor.serve`).

Time: R gives the program ``timeout`` seconds to load and ``test_timeout`` seconds of its own
time per test (only the time R waits for P counts).  When a call overruns, R asks M
over a control socket (``FD_CTL``) to kill P and everything it started (``X``), and before the
next call to start a fresh P (``P``), whose pipes M passes to R with
``SCM_RIGHTS``.  After ``max_timeouts`` timed-out tests, or when the tests' own time exceeds
``suite_timeout``, R stops (a ``Q`` record).

Host protocol: every message is a frame: a 10-digit ASCII length, a newline, then JSON with all
non-ASCII escaped (ASCII only, see ``HEADER_SIZE``).  A job is one framed ``job`` message,
followed, for test jobs, by one more frame, the tests, that R reads itself (M never learns even
their length; S reads nothing of a job).  M
answers with one ``result`` message of raw facts (exit statuses, R's records, captured output);
the host turns those into a status.
"""

import contextlib
import fcntl
import io
import json
import os
import select
import signal
import sys
import time
import types

# Annotations: this source runs as `python3 -I -S -c` on any Python >= 3.8, so an annotation
# that is not a plain builtin name is quoted (`list[int]`, `X | None` fail there when a function
# is defined). `from __future__ import annotations` is not an option: the program is compiled
# without `dont_inherit`, so the untrusted program would inherit PEP 563 string annotations.
# The names below are for mypy only: the harness imports nothing at run time that it does not use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    import resource
except ImportError:  # pragma: no cover - every CPython on Linux has it
    resource = None  # type: ignore[assignment]

PROTOCOL_VERSION = 1
# Frames are ASCII: a 10-digit decimal length and a newline, then JSON with every non-ASCII or
# control character escaped.  Docker's attach stream would treat the bytes ctrl-p ctrl-q in
# stdin as its "detach" key sequence; an ASCII-only protocol can never contain them.
HEADER_SIZE = 11
MAX_FRAME = 1 << 30
# Largest single RPC frame (a call's arguments or a return value) R accepts from P.
MAX_RPC_FRAME = 64 << 20
# Largest iterator P materialises when a function returns a generator / map / zip ...
MAX_ITER_ITEMS = 1_000_000
MAX_DEPTH = 100
MAX_ERROR_CHARS = 4000

# Fixed descriptor numbers inside the children.
FD_AUX = 3  # P in run mode: status pipe (uncaught exception type); R: result pipe
FD_RPC_IN = 4  # P: requests from R; R: responses from P
FD_RPC_OUT = 5  # P: responses to R; R: requests to P
# Team programs (job["owner"] set): O, the entry point's author's own process, answers R on
# FD_RPC_IN/OUT and calls the other authors' names in P through these two (O has no FD_CTL).
FD_UP_IN = 6  # O: responses from P
FD_UP_OUT = 7  # O: requests to P
FD_CTL = 6  # R only: control socket to the supervisor (restart requests, new pipes)

# Error types of the time rules, as the test runner reports them (``verdict.py`` reads them).
PROGRAM_TIMEOUT = "ProgramTimeout"
SUITE_TIMEOUT = "SuiteTimeout"

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

# Names of the tagged-JSON codec.  A JSON object on the wire is always exactly one tag.
_TAGS = (
    "t",
    "d",
    "s",
    "fs",
    "b",
    "ba",
    "c",
    "i",
    "f",
    "r",
    "dq",
    "fr",
    "dec",
    "it",
    "kv",
    "vv",
    "iv",
)


# --------------------------------------------------------------------------- framing


def pack(obj: object) -> bytes:
    """Frame ``obj`` as length-prefixed JSON bytes (ASCII only)."""
    data = json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return b"%010d\n" % len(data) + data


def frame_size(head: bytes) -> int:
    """Body length announced by an ``HEADER_SIZE``-byte frame header."""
    if len(head) != HEADER_SIZE or head[-1:] != b"\n" or not head[:-1].isdigit():
        raise ValueError(f"malformed frame header {head!r}")
    return int(head[:-1])


def read_exact(fd: int, n: int, deadline: "float | None" = None) -> "bytes | None":
    """Read exactly ``n`` bytes from ``fd``; ``None`` on EOF before the first byte.

    With a ``deadline`` (``time.monotonic``), raises ``_Overrun`` when it passes first.
    """
    chunks = []
    got = 0
    while got < n:
        if deadline is not None and not _wait_readable(fd, deadline):
            raise _Overrun()
        try:
            chunk = os.read(fd, min(n - got, 1 << 20))
        except (InterruptedError, BlockingIOError):
            continue
        if not chunk:
            if got == 0:
                return None
            raise EOFError(f"stream ended after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int = MAX_FRAME, deadline: "float | None" = None) -> "Any":
    """Read one framed JSON message from ``fd``; ``None`` on a clean EOF."""
    head = read_exact(fd, HEADER_SIZE, deadline)
    if head is None:
        return None
    size = frame_size(head)
    if size > limit:
        raise ValueError(f"frame of {size} bytes exceeds the {limit}-byte limit")
    body = read_exact(fd, size, deadline) if size else b""
    if body is None:
        raise EOFError("stream ended inside a frame")
    return json.loads(body.decode("utf-8"), parse_int=_wire_int, parse_float=_wire_float)


# Numbers on the wire are short: the codec sends integers beyond 2**53 in hex and floats as
# their repr.  A longer decimal number is refused (converting it would take quadratic time).
_MAX_NUMBER_CHARS = 40


def _wire_int(text: str) -> int:
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("number too long on the wire")
    return int(text)


def _wire_float(text: str) -> float:
    if len(text) > _MAX_NUMBER_CHARS:
        raise ValueError("number too long on the wire")
    return float(text)


def write_all(fd: int, data: bytes, deadline: "float | None" = None) -> None:
    """Write all of ``data``; with a ``deadline``, ``fd`` must be non-blocking and ``_Overrun``
    is raised when the reader does not take the data in time."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except BlockingIOError:
            if deadline is None:
                select.select([], [fd], [])
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Overrun() from None
            select.select([], [fd], [], remaining)
            continue
        view = view[n:]


# --------------------------------------------------------------------------- value codec


def encode_value(value: "Any", _depth: int = 0) -> "Any":
    """Encode a plain-data value as tagged JSON.

    Raises ``TypeError`` for anything that is not plain data (functions, class instances, ...),
    which is how a rigged object is stopped at the process boundary.  Subclasses of the plain
    types are reduced to their base type through the base type's own methods, so an overridden
    ``__eq__`` does not survive the trip.
    """
    if _depth > MAX_DEPTH:
        raise ValueError(f"value is nested more than {MAX_DEPTH} levels deep")
    d = _depth + 1
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(1 << 53) < value < (1 << 53) else {"i": hex(value)}
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return {"f": repr(value)}
        return value
    if t is list:
        return [encode_value(v, d) for v in value]
    if t is tuple:
        return {"t": [encode_value(v, d) for v in value]}
    if t is dict:
        return {"d": [[encode_value(k, d), encode_value(v, d)] for k, v in value.items()]}
    if t is set:
        return {"s": [encode_value(v, d) for v in value]}
    if t is frozenset:
        return {"fs": [encode_value(v, d) for v in value]}
    if t is bytes:
        return {"b": value.hex()}
    if t is bytearray:
        return {"ba": bytes(value).hex()}
    if t is complex:
        return {"c": [encode_value(value.real, d), encode_value(value.imag, d)]}
    if t is range:
        return {"r": [value.start, value.stop, value.step]}
    tname = t.__name__
    mod = getattr(t, "__module__", "")
    if mod == "builtins" and tname in ("dict_keys", "dict_values", "dict_items"):
        items = [encode_value(v, d) for v in value]
        return {{"dict_keys": "kv", "dict_values": "vv", "dict_items": "iv"}[tname]: items}
    if mod == "collections" and tname == "deque":
        return {"dq": [encode_value(v, d) for v in value]}
    if mod == "fractions" and tname == "Fraction":
        return {
            "fr": [encode_value(int(value.numerator), d), encode_value(int(value.denominator), d)]
        }
    if mod == "decimal" and tname == "Decimal":
        return {"dec": str(value)}
    # Subclasses of plain types (Counter, OrderedDict, namedtuple, IntEnum, ...): keep the data,
    # drop the subclass, using the base type's methods so that overrides are not consulted.
    if isinstance(value, bool):
        return bool(int.__index__(value))
    if isinstance(value, int):
        return encode_value(int.__index__(value), _depth)
    if isinstance(value, float):
        return encode_value(float.__float__(value), _depth)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict):
        return {"d": [[encode_value(k, d), encode_value(v, d)] for k, v in dict.items(value)]}
    if isinstance(value, list):
        return [encode_value(v, d) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"t": [encode_value(v, d) for v in tuple.__iter__(value)]}
    if isinstance(value, (set, frozenset)):
        tag = "fs" if isinstance(value, frozenset) else "s"
        # value is a set in the "s" branch and a frozenset in the "fs" one; mypy cannot tell.
        it = frozenset.__iter__(value) if tag == "fs" else set.__iter__(value)  # type: ignore[arg-type]
        return {tag: [encode_value(v, d) for v in it]}
    # Iterators (generators, map, filter, zip, ...) are materialised: R gets an iterator over
    # the same items, so ``list(candidate(x))`` behaves as it would in-process.
    if hasattr(t, "__next__") and hasattr(t, "__iter__"):
        items = []
        for item in value:
            if len(items) >= MAX_ITER_ITEMS:
                raise ValueError(f"iterator yields more than {MAX_ITER_ITEMS} items")
            items.append(encode_value(item, d))
        return {"it": items}
    raise TypeError(
        f"a value of type {t.__qualname__!r} cannot cross the sandbox boundary: only plain data (None, bool, int, float, "
        "complex, str, bytes, list, tuple, dict, set, range, iterators of those) crosses the "
        "process boundary"
    )


# Most distinct keys of one decoded dict or set that may share a hash value: CPython stores
# keys with one hash in a probe chain, so n such keys cost n**2 comparisons to insert.
MAX_SAME_HASH = 64
# Nodes decoded between two looks at the clock.
_CLOCK_EVERY = 1024


class _Clock:
    """A decoding deadline (``time.monotonic``), looked at every ``_CLOCK_EVERY`` nodes."""

    __slots__ = ("deadline", "count")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.count = 0

    def tick(self) -> None:
        self.count += 1
        if self.count % _CLOCK_EVERY == 0 and time.monotonic() > self.deadline:
            raise _Overrun()


def _check_hashes(keys: "list[Any]") -> "list[Any]":
    """Refuse keys built to collide (many distinct keys with one hash): decoding stays linear."""
    if len(keys) <= MAX_SAME_HASH:
        return keys
    counts: dict[int, int] = {}
    for key in keys:
        h = hash(key)
        c = counts.get(h, 0) + 1
        if c > MAX_SAME_HASH:
            raise ValueError(f"more than {MAX_SAME_HASH} keys share one hash value")
        counts[h] = c
    return keys


def _fraction(numerator: int, denominator: int) -> "Any":
    """A Fraction from the wire without the gcd (quadratic in the size of huge integers): a
    value that is not in lowest terms only compares unequal, as it would be wrong anyway."""
    import fractions

    if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
        raise ValueError("malformed fraction on the wire")
    make = getattr(fractions.Fraction, "_from_coprime_ints", None)
    if make is not None:
        return make(numerator, denominator)
    return fractions.Fraction(numerator, denominator, _normalize=False)  # type: ignore[call-overload]


def decode_value(data: "Any", _depth: int = 0, clock: "_Clock | None" = None) -> "Any":
    """Inverse of :func:`encode_value`; builds only plain built-in values.

    Linear in the size of ``data``: dict and set keys that share a hash beyond
    ``MAX_SAME_HASH`` and fractions are handled so that no input costs more.  With a ``clock``
    (:class:`_Clock`) it raises ``_Overrun`` once the clock's deadline has passed.
    """
    if _depth > MAX_DEPTH + 1:
        raise ValueError("value is nested too deeply")
    if clock is not None:
        clock.tick()
    d = _depth + 1
    t = type(data)
    if data is None or t in (bool, int, float, str):
        return data
    if t is list:
        return [decode_value(v, d, clock) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError("malformed value on the wire")
    ((tag, v),) = data.items()
    if tag == "t":
        return tuple(decode_value(x, d, clock) for x in v)
    if tag in ("d", "iv"):
        pairs = [(decode_value(k, d, clock), decode_value(x, d, clock)) for k, x in v]
        _check_hashes([k for k, _ in pairs])
        out = dict(pairs)
        return out if tag == "d" else out.items()
    if tag in ("s", "fs", "kv"):
        items = _check_hashes([decode_value(x, d, clock) for x in v])
        if tag == "kv":
            return dict.fromkeys(items).keys()
        return set(items) if tag == "s" else frozenset(items)
    if tag == "b":
        return bytes.fromhex(v)
    if tag == "ba":
        return bytearray.fromhex(v)
    if tag == "c":
        return complex(decode_value(v[0], d, clock), decode_value(v[1], d, clock))
    if tag == "i":
        return int(v, 16)  # base 16: linear in the number of digits
    if tag == "f":
        return float(v)
    if tag == "r":
        return range(int(v[0]), int(v[1]), int(v[2]))
    if tag == "dq":
        import collections

        return collections.deque(decode_value(x, d, clock) for x in v)
    if tag == "fr":
        return _fraction(decode_value(v[0], d, clock), decode_value(v[1], d, clock))
    if tag == "dec":
        import decimal

        return decimal.Decimal(v)
    if tag == "it":
        return iter([decode_value(x, d, clock) for x in v])
    if tag == "vv":
        return {i: decode_value(x, d, clock) for i, x in enumerate(v)}.values()
    raise ValueError(f"unknown value tag {tag!r}")


# --------------------------------------------------------------------------- small helpers


def _prctl(option: int, arg: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


def _safe_text(exc: BaseException) -> str:
    """``"TypeName: message"`` without trusting the exception object to behave."""
    try:
        name = type(exc).__name__
    except BaseException:
        name = "Exception"
    try:
        msg = str(exc)
    except BaseException:
        msg = "<unprintable>"
    text = f"{name}: {msg}" if msg else name
    return text[:MAX_ERROR_CHARS]


def _format_traceback(exc: BaseException, skip_frames: int = 1) -> str:
    """Format ``exc`` like the interpreter would, hiding the harness's own frames."""
    try:
        import traceback

        tb = exc.__traceback__
        for _ in range(skip_frames):
            if tb is not None:
                tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:
        text = _safe_text(exc) + "\n"
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS // 2] + "\n...\n" + text[-MAX_ERROR_CHARS // 2 :]
    return text


def _apply_limits(limits: "dict[str, Any]", nproc_rlimit: bool, cpu_seconds: float) -> None:
    if resource is None:
        return

    def lower(res: int, value: "float | None") -> None:
        if value is None or value <= 0:
            return
        value = int(value)
        try:
            soft, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass

    cpu = int(cpu_seconds + 0.999) + 1
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        new_hard = cpu + 1 if hard == resource.RLIM_INFINITY else min(cpu + 1, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, new_hard), new_hard))
    except (ValueError, OSError):
        pass
    lower(resource.RLIMIT_AS, limits.get("memory_mb", 0) * (1 << 20))
    lower(resource.RLIMIT_FSIZE, limits.get("file_size_mb", 0) * (1 << 20))
    lower(resource.RLIMIT_NOFILE, limits.get("open_files", 0))
    # No core dumps; no POSIX message queue bytes (a queue outlives the job: on Docker a job can
    # create one through /dev/mqueue) and no locked memory (pinned pages).
    for name in ("RLIMIT_CORE", "RLIMIT_MSGQUEUE", "RLIMIT_MEMLOCK"):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            resource.setrlimit(getattr(resource, name), (0, 0))
    if nproc_rlimit:
        lower(resource.RLIMIT_NPROC, limits.get("nproc", 0))


# Directory flags for the wipe: never follow a symlink the job planted.
_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


def wipe_tree(path: str, max_entries: "int | None" = None, deadline: "float | None" = None) -> bool:
    """Empty the directory ``path`` (kept itself); True when it is empty afterwards.

    Works relative to directory descriptors (``openat``/``unlinkat``), iteratively: no recursion
    limit, no ``PATH_MAX`` (a chain of directories 100,000 deep is removed like any other),
    symlinks are removed, never followed, and directories the job made unreadable or
    unwritable (``chmod 000``) are opened up first.  Each directory is listed once, so the cost
    is linear in the number of entries; past ``max_entries`` entries or ``deadline``
    (``time.monotonic``) it stops and returns False.  Must only run when nothing else writes
    under ``path`` (every job process is dead): it climbs back up with ``..``.
    """
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    seen = 0
    complete = True
    stack = []  # (pending subdirectory names of the parent, name of the current directory)
    try:
        pending: list[str] = []
        while True:
            # List the current directory once: unlink everything but subdirectories.
            files: list[str] = []
            try:
                with os.scandir(fd) as entries:  # scandir works on its own copy of fd
                    for entry in entries:
                        seen += 1
                        if max_entries is not None and seen > max_entries:
                            return False
                        try:
                            is_dir = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            is_dir = False
                        (pending if is_dir else files).append(entry.name)
            except OSError:
                complete = False
            for name in files:  # removed after the listing, never during it
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    complete = False
            if deadline is not None and time.monotonic() > deadline:
                return False
            # Descend into the next subdirectory, or climb back up and remove this one.
            while True:
                if pending:
                    name = pending.pop()
                    with contextlib.suppress(OSError):
                        os.chmod(name, 0o700, dir_fd=fd)
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        complete = False
                        continue
                    stack.append((pending, name))
                    os.close(fd)
                    fd, pending = child, []
                    break
                if not stack:
                    return complete and not os.listdir(fd)
                parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                pending, name = stack.pop()
                try:
                    os.rmdir(name, dir_fd=fd)
                except OSError:
                    complete = False
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


# --------------------------------------------------------------------------- seccomp

# System call numbers per machine (``uname -m``).  Unknown machines get no filter (the hello
# message says so, and a sandbox that needs one refuses to start).
# Numbers from 424 up are the same on every architecture (the unified table).
_UNIFIED = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "clone3": 435, "memfd_secret": 447, "setxattrat": 463,
    "pidfd_send_signal": 424, "pidfd_open": 434,
}  # fmt: skip
_SYSCALLS = {
    "x86_64": dict(
        _UNIFIED,
        arch=0xC000003E,  # AUDIT_ARCH_X86_64
        x32=True,
        clone=56, fork=57, vfork=58,
        unshare=272, setns=308, mount=165, umount2=166, pivot_root=155,
        shmget=29, msgget=68, semget=64, mq_open=240, memfd_create=319,
        socket=41, socketpair=53, add_key=248, request_key=249, keyctl=250,
        setxattr=188, lsetxattr=189, fsetxattr=190,
        inotify_init=253, inotify_init1=294, fanotify_init=300,
        prlimit64=302, setpriority=141, sched_setparam=142, sched_setscheduler=144,
        sched_setaffinity=203, sched_setattr=314, ioprio_set=251, setsockopt=54, fcntl=72,
        kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
        sendmsg=46, sendmmsg=307,
    ),
    "aarch64": dict(
        _UNIFIED,
        arch=0xC00000B7,  # AUDIT_ARCH_AARCH64
        x32=False,
        clone=220,
        unshare=97, setns=268, mount=40, umount2=39, pivot_root=41,
        shmget=194, msgget=186, semget=190, mq_open=180, memfd_create=279,
        socket=198, socketpair=199, add_key=217, request_key=218, keyctl=219,
        setxattr=5, lsetxattr=6, fsetxattr=7,
        inotify_init1=26, fanotify_init=262,
        prlimit64=261, setpriority=140, sched_setparam=118, sched_setscheduler=119,
        sched_setaffinity=122, sched_setattr=274, ioprio_set=30, setsockopt=208, fcntl=25,
        kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240,
        sendmsg=211, sendmmsg=269,
    ),
}  # fmt: skip
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (CLONE_NEWTIME, 0x80,
# is part of the exit-signal byte for clone() and cannot be used there).
_CLONE_NEW_NAMESPACES = 0x7E020000
_AF_UNIX = 1
_SOL_SOCKET = 1
_BUFFER_OPTS = (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
_F_SETPIPE_SZ = 1031


def _seccomp_program(no_fork: bool) -> "list[tuple[int, int, int, int]] | None":
    """The job's system-call filter as a list of ``(code, jt, jf, k)`` BPF instructions.

    Always: no new namespaces or mounts (a private tmpfs or user namespace would hold memory
    outside every count), no SysV IPC objects, POSIX message queues, keyring keys or io_uring
    instances (they outlive the process and would carry state or memory into the next job), no
    extended attributes or inotify/fanotify instances (kernel memory outside the count), no
    sockets other than ``AF_UNIX`` (there is no network anyway; TCP buffers are kernel memory
    outside the count).
    With ``no_fork``: no new processes (threads are fine) and no ``memfd_create``, so that the
    job is one address space and ``RLIMIT_AS`` bounds all the memory it can hold.
    """
    table = _SYSCALLS.get(os.uname().machine)
    if table is None:
        return None
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow = 0x7FFF0000

    def errno(code: int) -> int:
        return 0x00050000 | code

    eperm, eagain, eacces, enosys = errno(1), errno(11), errno(13), errno(38)
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, table["arch"]), (ret, 0, 0, enosys), (ld, 0, 0, 0)]
    if table["x32"]:
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, enosys)]
    denied = {"clone3": enosys}
    for name in ("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree",
                 "move_mount", "fsopen", "fsconfig", "fsmount", "fspick"):  # fmt: skip
        denied[name] = eperm
    for name in ("shmget", "msgget", "semget", "io_uring_setup", "io_uring_enter",
                 "io_uring_register", "add_key", "request_key", "keyctl", "memfd_secret",
                 "mq_open", "inotify_init", "inotify_init1", "fanotify_init"):  # fmt: skip
        denied[name] = enosys
    for name in ("setxattr", "lsetxattr", "fsetxattr", "setxattrat"):
        denied[name] = errno(95)  # EOPNOTSUPP
    # sendmsg is the only way to pass descriptors (SCM_RIGHTS): a socket in flight, closed by
    # every process, keeps its full buffers alive outside every count (send/sendto still work).
    for name in ("sendmsg", "sendmmsg"):
        denied[name] = eperm
    if no_fork:
        denied.update({"fork": eagain, "vfork": eagain, "memfd_create": enosys})
    for name, action in denied.items():
        if name in table:
            prog += [(jeq, 0, 1, table[name]), (ret, 0, 0, action)]
    # clone: never into new namespaces; with no_fork, threads only.  args[0] (the flags) is at
    # offset 16, low word first (both machines are little-endian).
    clone = [(ld, 0, 0, 16), (jset, 0, 1, _CLONE_NEW_NAMESPACES), (ret, 0, 0, eperm)]
    if no_fork:
        clone += [(jset, 0, 1, _CLONE_THREAD), (ret, 0, 0, allow), (ret, 0, 0, eagain)]
    else:
        clone += [(ret, 0, 0, allow)]
    prog += [(jeq, 0, len(clone), table["clone"])] + clone
    for name in ("socket", "socketpair"):
        sock = [(ld, 0, 0, 16), (jeq, 0, 1, _AF_UNIX), (ret, 0, 0, allow), (ret, 0, 0, eacces)]
        prog += [(ld, 0, 0, 0), (jeq, 0, len(sock), table[name])] + sock
    # Another process's limits, priority, scheduling or CPU affinity (the supervisor's, which
    # every later job would inherit): only the caller's own (pid 0) may change.
    own_only = [(ld, 0, 0, 16), (jeq, 0, 1, 0), (ret, 0, 0, allow), (ret, 0, 0, eperm)]
    for name in ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setattr",
                 "sched_setaffinity"):  # fmt: skip
        prog += [(ld, 0, 0, 0), (jeq, 0, len(own_only), table[name])] + own_only
    # setpriority(which, who, nice): PRIO_PROCESS (0) of the caller (0) only.
    prio = [(ld, 0, 0, 16), (jeq, 0, 3, 0), (ld, 0, 0, 24), (jeq, 0, 1, 0),
            (ret, 0, 0, allow), (ret, 0, 0, eperm)]  # fmt: skip
    prog += [(ld, 0, 0, 0), (jeq, 0, len(prio), table["setpriority"])] + prio
    # Kernel buffers outside the address space: socket buffers may not grow past the system's
    # defaults (SO_SNDBUF/SO_RCVBUF and their FORCE forms), nor pipes (F_SETPIPE_SZ).
    sockopt = [(ld, 0, 0, 24), (jeq, 0, 5, _SOL_SOCKET), (ld, 0, 0, 32)]
    sockopt += [(jeq, 4 - i, 0, opt) for i, opt in enumerate(_BUFFER_OPTS)]
    sockopt += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    prog += [(ld, 0, 0, 0), (jeq, 0, len(sockopt), table["setsockopt"])] + sockopt
    pipe = [(ld, 0, 0, 24), (jeq, 1, 0, _F_SETPIPE_SZ), (ret, 0, 0, allow), (ret, 0, 0, eperm)]
    prog += [(ld, 0, 0, 0), (jeq, 0, len(pipe), table["fcntl"])] + pipe
    return prog + [(ret, 0, 0, allow)]


def _guard_program(pids: "tuple[int, ...]") -> "list[tuple[int, int, int, int]] | None":
    """A second filter, made per job: no signal may reach ``pids`` (the test runner and the
    supervisor), by pid, by process group, or through ``kill(-1)``; no pidfd may be opened on
    them and no signal is sent through a pidfd.  A stopped or killed test runner could otherwise
    hold the job until its deadline or end it early."""
    table = _SYSCALLS.get(os.uname().machine)
    if table is None:
        return None
    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, eperm = 0x7FFF0000, 0x00050001
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, table["arch"]), (ret, 0, 0, allow), (ld, 0, 0, 0)]
    prog += [(jeq, 0, 1, table["pidfd_send_signal"]), (ret, 0, 0, eperm)]
    values = {0xFFFFFFFF}  # kill(-1): every process the caller may signal
    for pid in pids:
        values.update((pid & 0xFFFFFFFF, (-pid) & 0xFFFFFFFF))
    targets = sorted(values)
    block = [(ld, 0, 0, 16)]
    block += [(jeq, len(targets) - i, 0, v) for i, v in enumerate(targets)]
    block += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    for name in ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"):
        prog += [(ld, 0, 0, 0), (jeq, 0, len(block), table[name])] + block
    return prog + [(ret, 0, 0, allow)]


class _Filter:
    """A job filter built once (in the supervisor) and installed in each job's P cheaply."""

    def __init__(
        self, no_fork: bool, program: "list[tuple[int, int, int, int]] | None" = None
    ) -> None:
        import ctypes
        import struct

        if program is None:
            program = _seccomp_program(no_fork)
        if program is None:
            raise OSError("no system-call table for this machine")
        raw = b"".join(struct.pack("HBBI", *insn) for insn in program)
        self._buf = ctypes.create_string_buffer(raw, len(raw))

        class _Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._prog = _Prog(len(program), ctypes.addressof(self._buf))
        self._byref = ctypes.byref
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl

    def install(self) -> bool:
        """Install the filter in this process; True on success."""
        if self._prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return self._prctl(22, 2, self._byref(self._prog), 0, 0) == 0  # PR_SET_SECCOMP


_filters: dict = {}


def install_seccomp(no_fork: bool, guarded: "tuple[int, ...]" = ()) -> bool:
    """Install the job filter (:func:`_seccomp_program`) in this process, and with ``guarded``
    pids the signal guard (:func:`_guard_program`) on top; True on success."""
    try:
        if no_fork not in _filters:
            _filters[no_fork] = _Filter(no_fork)
        if not _filters[no_fork].install():
            return False
        if guarded:
            return _Filter(no_fork, _guard_program(guarded)).install()
        return True
    except Exception:
        return False


def _probe_seccomp(no_fork: bool) -> bool:
    """Whether the filter installs and holds here (checked once, in a throw-away child).

    Builds the filter in this process first, so that forked jobs only install it.
    """
    try:
        _filters.setdefault(no_fork, _Filter(no_fork))
    except Exception:
        return False
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if install_seccomp(no_fork):
                code = 0
                if no_fork:
                    try:
                        child = os.fork()
                    except OSError:
                        pass
                    else:
                        if child == 0:
                            os._exit(0)
                        code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# --------------------------------------------------------------------------- children


def _child_common(
    jobdir: str,
    limits: "dict[str, Any]",
    nproc_rlimit: bool,
    fds: "dict[int, int]",
    stdin_fd: int,
    signals: "dict[Any, Any]",
    cpu_seconds: float,
) -> None:
    """Plumbing shared by P and R right after fork: fds, session, cwd, rlimits, stdio, signals."""
    os.setsid()
    # Move the descriptors the child keeps onto fixed numbers, then close everything else
    # (in particular the supervisor's host channel on 0/1).
    targets = {0: stdin_fd}
    targets.update(fds)
    # Stage copies above every target number first, so that no dup2 clobbers a source.
    staged = {t: fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for t, fd in targets.items()}
    for target, fd in staged.items():
        os.dup2(fd, target)
    os.closerange(max(targets) + 1, 1 << 16)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    os.chdir(jobdir)
    os.umask(0o022)  # the job's umask is the harness's, never inherited
    _apply_limits(limits, nproc_rlimit, cpu_seconds)
    # The supervisor ignores every signal; a job starts with the interpreter's defaults.
    for sig, handler in signals.items():
        with contextlib.suppress(OSError, ValueError, TypeError):
            signal.signal(sig, handler)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    sys.argv = ["main.py"]


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _program_module(name: str, path: str) -> "Any":
    """The module the program runs as; its source file was written by the supervisor."""
    module = types.ModuleType(name)
    module.__file__ = path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules[name] = module
    return module


def program_file_name(mode: str) -> str:
    return "main.py" if mode == "run" else "solution.py"


def _install_job_filter(seccomp: "str | None", guarded: "tuple[int, ...]" = ()) -> None:
    """Install the job's system-call filter (with the signal guard of ``guarded`` pids); exit
    rather than run without a promised one."""
    if seccomp is not None and not install_seccomp(seccomp == "no-fork", guarded):
        # The host was promised this filter (the start-up probe passed): never run without it.
        with contextlib.suppress(BaseException):
            sys.stderr.write("sandbox: could not install the system-call filter\n")
        os._exit(71)


def _program_main(
    job: "dict[str, Any]", jobdir: str, seccomp: "str | None", guarded: "tuple[int, ...]" = ()
) -> None:
    """P: run the untrusted program, then (test mode) serve R's calls.  Never returns."""
    mode = job["mode"]
    source = job["program"]
    _forget_job(job)
    _install_job_filter(seccomp, guarded)
    code = 0
    if mode == "run":
        module = _program_module("__main__", os.path.join(jobdir, program_file_name(mode)))
        try:
            exec(compile(source, module.__file__, "exec"), module.__dict__)
        except SystemExit as e:
            code = _exit_code(e)
        except BaseException as e:
            with contextlib.suppress(BaseException):
                write_all(FD_AUX, type(e).__name__.encode("ascii", "replace")[:100] + b"\n")
            with contextlib.suppress(BaseException):
                sys.stderr.write(_format_traceback(e))
            code = 1
        _flush_stdio()
        os._exit(code)

    # Test mode: load the program, publish its global names, serve calls.
    module = _program_module("solution", os.path.join(jobdir, program_file_name(mode)))
    ns = module.__dict__
    _load_and_serve(ns, lambda: exec(compile(source, module.__file__, "exec"), ns), 2)


def _forget_job(job: "dict[str, Any]") -> None:
    """Empty ``job`` (and its limits) in this child: the supervisor's frames the child was
    forked in refer to that one dict, so the program, which can walk those frames or search
    ``gc``, finds nothing of the job there (its limits, the other authors' code, the size of
    the tests); the caller keeps what the child needs.  The supervisor's copy is untouched."""
    limits = job.get("limits")
    if isinstance(limits, dict):
        limits.clear()
    job.clear()


def _load_and_serve(
    ns: "dict[str, Any]", load: "Callable[[], object]", harness_frames: int
) -> None:
    """Run ``load()`` (program code into ``ns``), tell the caller the names it defined or why it
    failed (hiding the ``harness_frames`` outermost frames of the traceback), then answer the
    caller's calls.  Never returns."""
    try:
        load()
    except BaseException as e:
        _flush_stdio()
        error = _format_traceback(e, skip_frames=harness_frames)
        _send_rpc({"loaded": False, "etype": type(e).__name__, "error": error})
        os._exit(1)
    _flush_stdio()
    _send_rpc({"loaded": True, "globals": _manifest(ns)})
    _serve(ns)


def _owner_main(
    job: "dict[str, Any]", jobdir: str, seccomp: "str | None", guarded: "tuple[int, ...]" = ()
) -> None:
    """O: the entry point's author's code, in a process no other author's code ever ran in.

    A team program (``job["owner"]``) has a trusted shared part (the task's imports and given
    functions) and parts written by different authors. P loads the whole program as usual but
    only answers O. O runs the shared part, binds the other authors' names as proxies to P (small
    plain values as copies; names that shadow a builtin are left out, as for the tests), then runs
    its own author's part and serves R. So the tests call the entry point its author defined, and
    nothing the other authors' code does at run time (threads, finalizers, import hooks, patched
    builtins or modules, rebinding globals, rewriting ``__code__``...) can reach it: what crosses
    from P is plain data returned by explicit calls.  Never returns.
    """
    owner = job["owner"]
    _forget_job(job)
    _install_job_filter(seccomp, guarded)
    partners = _PartnerConnection()
    try:
        first = read_frame(FD_UP_IN, MAX_RPC_FRAME)
    except BaseException as e:
        first = {"loaded": False, "etype": "ProgramExit", "error": _safe_text(e)}
    if not isinstance(first, dict) or not first.get("loaded"):
        first = first if isinstance(first, dict) else {}
        _send_rpc(
            {
                "loaded": False,
                "etype": str(first.get("etype", "ProgramExit")),
                "error": str(first.get("error", "the program exited before it finished loading")),
            }
        )
        os._exit(1)
    module = _program_module("solution", os.path.join(jobdir, program_file_name("tests")))
    path = module.__file__  # P wrote the whole program there
    ns = module.__dict__

    def load() -> None:
        import builtins

        _exec_at(owner["shared"], int(owner["shared_line"]), path, ns)
        manifest = first.get("globals")
        for name, kind in manifest.items() if isinstance(manifest, dict) else ():
            if name in ns or name.startswith("__") or hasattr(builtins, name):
                continue
            try:
                if kind[0] == "f":
                    ns[name] = _RemoteFunction(name, partners)
                elif kind[0] == "v":
                    ns[name] = decode_value(kind[1])
                elif kind[0] == "m":
                    import importlib

                    ns[name] = importlib.import_module(str(kind[1]))
            except BaseException:
                continue
        _exec_at(owner["code"], int(owner["code_line"]), path, ns)

    _load_and_serve(ns, load, 3)


def _exec_at(source: str, first_line: int, path: str, ns: "dict[str, Any]") -> None:
    """Run ``source`` as lines ``first_line``... of ``path`` (tracebacks match the whole file)."""
    if source:
        code = compile("\n" * (first_line - 1) + source, path, "exec", dont_inherit=True)
        exec(code, ns)


def _serve(ns: "dict[str, Any]") -> None:
    """Answer calls to the functions of ``ns`` until the caller closes the channel."""
    while True:
        try:
            request = read_frame(FD_RPC_IN, MAX_RPC_FRAME)
        except BaseException:
            break
        if request is None:
            break
        try:
            fn = ns[request["name"]]
            args = decode_value(request["args"])
            kwargs = decode_value(request["kwargs"])
            result = fn(*args, **kwargs)
            reply = {"ok": encode_value(result)}
        except BaseException as e:
            reply = {"exc": type(e).__name__, "error": _safe_text(e)}
        _flush_stdio()
        try:
            _send_rpc(reply)
        except BaseException as e:
            try:
                _send_rpc({"exc": type(e).__name__, "error": _safe_text(e)})
            except BaseException:
                break
    _flush_stdio()
    os._exit(0)


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        sys.stderr.write(str(code) + "\n")
    return 1


def _send_rpc(obj: object) -> None:
    write_all(FD_RPC_OUT, pack(obj))


def _manifest(ns: "dict[str, Any]") -> "dict[str, Any]":
    """Describe the program's globals for R: callables, modules, small plain values."""
    out = {}
    for name, value in list(ns.items()):
        if name.startswith("__"):
            continue
        try:
            if type(value).__name__ == "module":
                out[name] = ["m", str(value.__name__)]
            elif callable(value):
                out[name] = ["f"]
            elif _small(value, 10_000):
                out[name] = ["v", encode_value(value)]
        except BaseException:
            continue
    return out


def _small(value: object, budget: int) -> bool:
    """True when ``value`` holds at most ``budget`` items in all (cheap to ship to the tests);
    a program's big precomputed tables stay where they are."""
    stack = [value]
    while stack:
        budget -= 1
        if budget < 0:
            return False
        item = stack.pop()
        if isinstance(item, (str, bytes, bytearray)):
            budget -= len(item) // 64
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            if len(item) > budget:
                return False
            stack.extend(item)
    return True


class ProgramError(Exception):
    """Raised in the test runner when the program raised something R cannot re-create."""


class ProgramTimeout(Exception):
    """Raised in the test runner when a call into the program exceeded the test's time budget."""


class _StopTests(BaseException):
    """Stops the remaining tests (too many timeouts, or the test code is too slow)."""


class _ProgramConnection:
    """R's side of the calls into P, with the program's time accounted per test.

    Only the time spent waiting for the program counts against ``test_timeout``; when a call
    overruns, the supervisor kills P (and everything it started) and, before the next call,
    hands R the pipes of a freshly loaded P.
    """

    def __init__(self, limits: "dict[str, Any]") -> None:
        self.dead: str | None = None
        self.load_timeout = float(limits.get("timeout", 10.0))
        self.test_timeout = float(limits.get("test_timeout", 10.0))
        self.max_timeouts = int(limits.get("max_timeouts", 3))
        self.suite_timeout = float(limits.get("suite_timeout", 60.0))
        self.used = 0.0  # program seconds of the current test
        self.program_seconds = 0.0  # program seconds of the whole job
        self.timed_out = False  # the current test ran out of time
        self.timeouts = 0
        self.needs_restart = False
        self.started = time.monotonic()

    def suite_seconds(self) -> float:
        """Seconds the tests' own code has taken so far (wall time minus the program's)."""
        return time.monotonic() - self.started - self.program_seconds

    def _charge(self, since: float) -> None:
        spent = time.monotonic() - since
        self.used += spent
        self.program_seconds += spent

    def first_frame(self) -> "Any":
        """P's first message ("loaded" or not), within the load budget."""
        since = time.monotonic()
        deadline = since + self.load_timeout
        try:
            if not _wait_readable(FD_RPC_IN, deadline):
                return "timeout"
            return read_frame(FD_RPC_IN, MAX_RPC_FRAME, deadline)
        except _Overrun:
            return "timeout"
        except BaseException as e:
            self.dead = _safe_text(e)
            return None
        finally:
            self.program_seconds += time.monotonic() - since

    def call(self, name: str, args: "tuple[Any, ...]", kwargs: "dict[str, Any]") -> "Any":
        if self.timed_out:
            raise ProgramTimeout(f"time limit exceeded ({self.test_timeout:g} s per test)")
        if self.needs_restart and not self.dead:
            self._restart()
        if self.dead:
            raise ProgramError(self.dead)
        request = pack({"name": name, "args": encode_value(args), "kwargs": encode_value(kwargs)})
        since = time.monotonic()
        deadline = since + max(0.0, self.test_timeout - self.used)
        try:
            write_all(FD_RPC_OUT, request, deadline)
            reply = read_frame(FD_RPC_IN, MAX_RPC_FRAME, deadline)
            # Decoding what the program returned is on its clock, and inside its deadline.
            value = _decode_reply(reply, deadline)
        except _Overrun:
            self._charge(since)
            self.timed_out = True
            self.timeouts += 1
            self.needs_restart = True
            _ask_supervisor(b"X")  # kill the runaway program now, not at the next call
            raise ProgramTimeout(
                f"time limit exceeded ({self.test_timeout:g} s per test)"
            ) from None
        except Exception as e:  # EOF, broken pipe, or a garbled frame: P is unusable now
            reply = None
            self.dead = f"the program's process is gone or misbehaved ({e})"
        self._charge(since)
        if not isinstance(reply, dict):
            self.dead = self.dead or "the program's process exited during a call"
            raise ProgramError(self.dead)
        if "ok" in reply:
            return value
        raise _rebuild_exception(str(reply.get("exc", "Exception")), str(reply.get("error", "")))

    def end_test(self) -> bool:
        """Called after each scored test: True when that test ran out of time."""
        timed_out = self.timed_out
        self.used = 0.0
        self.timed_out = False
        return timed_out

    def _restart(self) -> None:
        """Take over the pipes of the fresh P the supervisor started, and wait for it to load."""
        self.needs_restart = False
        _ask_supervisor(b"P")
        fds = _receive_fds(2, time.monotonic() + 30.0)
        if fds is None:
            self.dead = "the program could not be restarted after a timeout"
            return
        for target, fd in zip((FD_RPC_IN, FD_RPC_OUT), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.set_blocking(FD_RPC_OUT, False)  # writes to P honour the test's deadline
        first = self.first_frame()
        if first == "timeout":
            self.dead = f"reloading the program exceeded the time limit ({self.load_timeout:g} s)"
        elif not isinstance(first, dict) or not first.get("loaded"):
            self.dead = "the program failed to load again after a timeout"


def _decode_reply(reply: object, deadline: float) -> "Any":
    """The value of an ``ok`` reply, decoded before ``deadline`` (else ``_Overrun``)."""
    if isinstance(reply, dict) and "ok" in reply:
        return decode_value(reply["ok"], clock=_Clock(deadline))
    return None


class _PartnerConnection:
    """O's side of the calls into P (team programs).

    No clock of its own: the call runs inside one of R's calls to O, which R's per-test deadline
    bounds; when that deadline passes the supervisor kills O and P together.
    """

    def __init__(self) -> None:
        self.dead: str | None = None

    def call(self, name: str, args: "tuple[Any, ...]", kwargs: "dict[str, Any]") -> "Any":
        if self.dead:
            raise ProgramError(self.dead)
        request = pack({"name": name, "args": encode_value(args), "kwargs": encode_value(kwargs)})
        try:
            write_all(FD_UP_OUT, request)
            reply = read_frame(FD_UP_IN, MAX_RPC_FRAME)
        except Exception as e:  # EOF, broken pipe, or a garbled frame: P is unusable now
            reply = None
            self.dead = f"the program's process is gone or misbehaved ({e})"
        if not isinstance(reply, dict):
            self.dead = self.dead or "the program's process exited during a call"
            raise ProgramError(self.dead)
        if "ok" in reply:
            return decode_value(reply["ok"])
        raise _rebuild_exception(str(reply.get("exc", "Exception")), str(reply.get("error", "")))


class _Overrun(Exception):
    """A deadline passed while talking to P."""


def _wait_readable(fd: int, deadline: float) -> bool:
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            readable, _, _ = select.select([fd], [], [], remaining)
        except InterruptedError:
            continue
        return bool(readable)


def _ask_supervisor(message: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(FD_CTL, message)


def _receive_fds(count: int, deadline: float) -> "list[int] | None":
    """``count`` descriptors the supervisor sends on the control socket, or None."""
    import array
    import socket

    try:
        sock = socket.socket(fileno=os.dup(FD_CTL))
    except OSError:
        return None
    try:
        if not _wait_readable(sock.fileno(), deadline):
            return None
        fds = array.array("i")
        msg, ancdata, _, _ = sock.recvmsg(1, socket.CMSG_LEN(count * fds.itemsize))
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        if msg != b"N" or len(fds) != count:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            return None
        return list(fds)
    except OSError:
        return None
    finally:
        sock.close()


_NOT_REBUILT = (
    "StopIteration",
    "StopAsyncIteration",
    "GeneratorExit",
    "SystemExit",
    "KeyboardInterrupt",
)


def _rebuild_exception(name: str, text: str) -> BaseException:
    import builtins

    prefix = name + ": "
    msg = text[len(prefix) :] if text.startswith(prefix) else ("" if text == name else text)
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and name not in _NOT_REBUILT:
        try:
            return cls(msg) if msg else cls()
        except BaseException:
            pass
    return ProgramError(text or name)


class _RemoteFunction:
    """Stands for one of the program's functions inside R; calling it calls into P."""

    __slots__ = ("_name", "_conn")

    def __init__(self, name: str, conn: "_ProgramConnection | _PartnerConnection") -> None:
        self._name = name
        self._conn = conn

    @property
    def __name__(self) -> str:
        return self._name

    def __call__(self, *args: "Any", **kwargs: "Any") -> "Any":
        return self._conn.call(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self._name} (runs in the sandboxed program)>"


# Most value nodes of the program's globals the test runner decodes (see ``_manifest``).
MAX_MANIFEST_NODES = 200_000
# CPython's default bound on the digits of an int converted to or from a decimal string.
_DEFAULT_INT_DIGITS = 4300


def _tests_int_digits() -> None:
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(_DEFAULT_INT_DIGITS)


def _compile_test(source: str, filename: str) -> types.CodeType:
    """Compile trusted test code; its own literals may be longer than the bound in force."""
    if not hasattr(sys, "set_int_max_str_digits"):
        return compile(source, filename, "exec", dont_inherit=True, optimize=0)
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return compile(source, filename, "exec", dont_inherit=True, optimize=0)
    finally:
        sys.set_int_max_str_digits(previous)


class _SentinelWatch(_RemoteFunction):
    """The entry point's proxy, counting its calls and the calls that returned ``sentinel``,
    and keeping a fingerprint of every value it returned (the same in every process)."""

    __slots__ = ("_sentinel", "calls", "hits", "digest")

    def __init__(self, proxy: "_RemoteFunction", sentinel: object) -> None:
        super().__init__(proxy._name, proxy._conn)
        self._sentinel = sentinel
        self.calls = 0
        self.hits = 0
        self.digest = 0

    def __call__(self, *args: "Any", **kwargs: "Any") -> "Any":
        import zlib

        self.calls += 1
        try:
            value = self._conn.call(self._name, args, kwargs)
        except BaseException as e:
            self.digest = zlib.crc32(type(e).__name__.encode("ascii", "replace"), self.digest)
            raise
        if type(value) is str and value == self._sentinel:
            self.hits += 1
        self.digest = digest_step(self.digest, value)
        return value


def digest_step(digest: int, value: "Any") -> int:
    """The watch's digest of main's results after one more call returned ``value`` (it starts
    at 0): the env predicts, with it, the digest of a main that returned one value every time."""
    import zlib

    return zlib.crc32(_fingerprint(value).to_bytes(4, "little"), digest)


def _fingerprint(value: "Any", depth: int = 0) -> int:
    """A CRC-32 of a decoded value that is equal for equal values in any process (no salted
    hashes), linear in its size; unordered containers combine their items' fingerprints."""
    import zlib

    t = type(value)
    name = t.__name__.encode("ascii", "replace")
    if depth > MAX_DEPTH:
        return zlib.crc32(name)
    if t in (set, frozenset, dict) or name in (b"dict_keys", b"dict_items", b"dict_values"):
        items = value.items() if t is dict else value
        return (zlib.crc32(name) + sum(_fingerprint(v, depth + 1) for v in items)) & 0xFFFFFFFF
    if t in (list, tuple) or name == b"deque":
        h = zlib.crc32(name)
        for v in value:
            h = zlib.crc32(_fingerprint(v, depth + 1).to_bytes(4, "little"), h)
        return h
    if t is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"), zlib.crc32(name))
    if t in (bytes, bytearray):
        return zlib.crc32(bytes(value), zlib.crc32(name))
    if t in (bool, int):
        size = (value.bit_length() + 8) // 8
        return zlib.crc32(value.to_bytes(size, "little", signed=True), zlib.crc32(name))
    if t in (float, complex):
        return zlib.crc32(repr(value).encode("ascii"), zlib.crc32(name))
    return zlib.crc32(name)  # iterators (not consumed), fractions, decimals, ranges: by type


def _runner_main(clean_builtins: "dict[str, Any]", limits: "dict[str, Any]") -> None:
    """R: read the tests from the host channel, wait for P, run the tests.  Never returns.

    Time rules (``Limits``): the program's module-level code gets ``timeout`` seconds; each
    scored test gets ``test_timeout`` seconds of the program's own time; a test that overruns
    fails, P is replaced by a freshly loaded one, and after ``max_timeouts`` such tests the rest
    are not run; the test code's own time is counted apart (``suite_timeout``).
    """

    def emit(kind: str, index: int = 0, ok: bool = True, error: str = "", etype: str = "") -> None:
        line = json.dumps({"k": kind, "i": index, "ok": bool(ok), "err": error, "et": etype})
        write_all(FD_AUX, (line + "\n").encode("ascii"))

    try:
        size = frame_size(read_exact(0, HEADER_SIZE) or b"")
        raw = read_exact(0, size) if size else b"{}"
        if raw is None or len(raw) != size:
            os._exit(3)
        spec = json.loads(raw.decode("utf-8"))
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        emit("R")
    except BaseException:
        os._exit(3)
    conn = _ProgramConnection(limits)
    os.set_blocking(FD_RPC_OUT, False)
    first = conn.first_frame()
    if first == "timeout":
        emit(
            "L",
            ok=False,
            error=f"loading the program exceeded the time limit ({conn.load_timeout:g} s)",
            etype=PROGRAM_TIMEOUT,
        )
        emit("D")
        os._exit(0)
    if not isinstance(first, dict):
        emit(
            "L",
            ok=False,
            error="the program exited before it finished loading (exit/_exit during import?)",
            etype="ProgramExit",
        )
        emit("D")
        os._exit(0)
    if not first.get("loaded"):
        emit(
            "L",
            ok=False,
            error=str(first.get("error", ""))[:MAX_ERROR_CHARS],
            etype=str(first.get("etype", "")),
        )
        emit("D")
        os._exit(0)
    emit("L")
    entry_point = spec.get("entry_point")
    ns: dict[str, Any] = {"__builtins__": dict(clean_builtins), "__name__": "__sandbox_tests__"}
    manifest = first.get("globals")
    # The program's plain values are decoded inside its load budget, MAX_MANIFEST_NODES at most.
    clock = _Clock(time.monotonic() + conn.load_timeout)
    for name, kind in manifest.items() if isinstance(manifest, dict) else ():
        if name in clean_builtins and name != entry_point:
            # A program-level ``abs``/``len``/``isinstance`` must not change what the tests
            # mean; tests always see the real builtins.
            continue
        try:
            if kind[0] == "f":
                ns[name] = _RemoteFunction(name, conn)
            elif kind[0] == "m":
                # Only modules this interpreter already has warm: importing arbitrary names
                # chosen by the program could have side effects here.
                if kind[1] in sys.modules:
                    ns[name] = sys.modules[kind[1]]
            elif kind[0] == "v" and clock.count < MAX_MANIFEST_NODES:
                ns[name] = decode_value(kind[1], clock=clock)
        except _Overrun:
            clock.count = MAX_MANIFEST_NODES  # out of time: no more values
        except BaseException:
            continue
    # The tests run with the interpreter's default bound on int <-> str conversions, so that a
    # huge integer the program returns cannot make the tests' own code take quadratic time.
    _tests_int_digits()

    # The program's entry point, taken before the test setup runs (which may bind the same name).
    candidate = ns.get(entry_point) if entry_point else None
    # A cooperation probe (``spec["sentinel"]``, see ``TestSuite.sentinel``): count the entry
    # point's calls and those that returned the sentinel unchanged, here, where no program code
    # runs.
    sentinel = spec.get("sentinel")
    watch = None
    if isinstance(sentinel, str) and isinstance(candidate, _RemoteFunction):
        watch = candidate = ns[entry_point] = _SentinelWatch(candidate, sentinel)

    def record(index: int, exc: "BaseException | None") -> None:
        if conn.end_test():  # whatever the test code made of it, the test ran out of time
            emit("T", index, ok=False, error=f"time limit exceeded ({conn.test_timeout:g} s "
                 f"per test)", etype=PROGRAM_TIMEOUT)  # fmt: skip
        elif exc is None:
            emit("T", index)
        else:
            etype = type(exc).__name__
            if isinstance(exc, ProgramError) and conn.dead:
                etype = "ProgramExit"
            emit("T", index, ok=False, error=_safe_text(exc), etype=etype)
        if conn.timeouts >= conn.max_timeouts:
            emit("Q", ok=False, etype=PROGRAM_TIMEOUT, error=(
                f"stopped after {conn.timeouts} tests exceeded the time limit "
                f"({conn.test_timeout:g} s per test)"))  # fmt: skip
            raise _StopTests()
        if conn.suite_seconds() > conn.suite_timeout:
            emit("Q", ok=False, etype=SUITE_TIMEOUT, error=(
                f"the test code itself took more than suite_timeout={conn.suite_timeout:g} s "
                f"(not the program's time)"))  # fmt: skip
            raise _StopTests()

    try:
        if spec.get("setup"):
            exec(_compile_test(spec["setup"], "tests_setup.py"), ns)
    except BaseException as e:
        emit("S", ok=False, error=_format_traceback(e), etype=type(e).__name__)
        emit("D")
        os._exit(0)
    check_src = spec.get("check")
    if check_src:
        try:
            if not isinstance(candidate, _RemoteFunction):
                raise NameError(f"the program does not define a function named {entry_point!r}")
            exec(_compile_test(check_src, "tests.py"), ns)
            factory = ns.pop(spec["factory"])
            check = factory(record, BaseException)
        except BaseException as e:
            emit("S", ok=False, error=_safe_text(e), etype=type(e).__name__)
            emit("D")
            os._exit(0)
        # Tests left without a record (check stopped early) count as failed.
        with contextlib.suppress(BaseException):
            check(candidate)
    else:
        for index, source in enumerate(spec.get("tests", [])):
            try:
                try:
                    exec(_compile_test(source, f"test_{index}.py"), ns)
                except BaseException as e:
                    record(index, e)
                else:
                    record(index, None)
            except _StopTests:
                break
    if watch is not None:
        emit("W", watch.calls, error=str(watch.hits), etype=str(watch.digest))
    emit("D")
    os._exit(0)


# --------------------------------------------------------------------------- supervisor


class _Infra(Exception):
    """The sandbox itself failed before the program ran (no verdict on the program)."""


def job_seconds(limits: "dict[str, Any]", n_tests: "int | None") -> float:
    """Same bound as ``Limits.job_seconds`` on the host: the longest a job may legitimately take."""
    timeout = float(limits.get("timeout", 10.0))
    if n_tests is None:
        return timeout
    loads = 1 + min(int(limits.get("max_timeouts", 3)), n_tests)
    return (
        loads * timeout
        + n_tests * float(limits.get("test_timeout", 10.0))
        + float(limits.get("suite_timeout", 60.0))
    )


# Most entries and seconds the post-job wipe spends before it gives up and retires the worker
# (whose private scratch then disappears with it).
WIPE_MAX_ENTRIES = 1_000_000
WIPE_SECONDS = 20.0
# Bytes the scratch file system may still use after the wipe (beyond what it used at start-up).
SCRATCH_SLACK_BYTES = 1 << 20
# Most files and directories a job may keep in its scratch tmpfs.  Their inodes are kernel
# memory that no address-space limit sees; the supervisor checks every SCRATCH_POLL_SECONDS and
# stops a job past this many (Docker's tmpfs also gets it as ``nr_inodes``).
SCRATCH_MAX_INODES = 100_000
SCRATCH_POLL_SECONDS = 0.02
# How often the supervisor checks that the test runner has not been stopped.
RUNNER_POLL_SECONDS = 0.05


def _on_child(signum: int, frame: object) -> None:
    """The supervisor's SIGCHLD handler: nothing to do; the signal only wakes it up (its
    wake-up pipe, ``signal.set_wakeup_fd``) to reap."""


# The reply the supervisor sends for a job whose job process M was stopped (see Supervisor.serve).
_STOPPED_REPLY = {
    "type": "result",
    "timed_out": True,
    "job_process_stopped": True,
    "output_exceeded": None,
    "stdout": "",
    "stderr": "",
    "stdout_truncated": False,
    "stderr_truncated": False,
    "aux": "",
    "duration": 0.0,
    "retire": "the job stopped its job process",
}


class Supervisor:
    def __init__(
        self,
        scratch: str,
        wipe: "list[str]",
        nproc_rlimit: bool,
        seccomp: "str | None",
        signals: "dict[Any, Any]",
    ) -> None:
        self.scratch = scratch
        self.wipe = wipe
        self.nproc_rlimit = nproc_rlimit
        self.signals = signals
        self.pid = os.getpid()
        self.pid1 = self.pid == 1
        self.subreaper = False
        self.hardened = _prctl(PR_SET_DUMPABLE, 0)
        # Die with the process that started us (bwrap, unshare, or the host itself).  Armed here,
        # after any uid change, because changing credentials clears the parent-death signal.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if not self.pid1:
            self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        # The job's system-call filter: "no-fork" (the job is one address space, so that
        # RLIMIT_AS bounds its memory), "default", or None when it cannot be installed here.
        self.seccomp = seccomp if seccomp and _probe_seccomp(seccomp == "no-fork") else None
        # A dedicated scratch file system (a tmpfs) can be checked for space left behind.
        parent = os.path.dirname(scratch.rstrip("/")) or "/"
        self.scratch_dedicated = os.stat(scratch).st_dev != os.stat(parent).st_dev
        self.scratch_baseline = _used_bytes(scratch) if self.scratch_dedicated else 0
        self.inodes_baseline = _used_inodes(scratch) if self.scratch_dedicated else 0
        # What every job inherits from the supervisor, as it was before any job ran; checked
        # (and restored where it can be) after every job.
        self.state_baseline = _process_state()
        # POSIX message queues live in a file system (Docker mounts one on /dev/mqueue).
        self.mqueue = MQUEUE_DIR if os.path.isdir(MQUEUE_DIR) else None
        # Abstract unix sockets of the worker's own network namespace (none at start).
        self.abstract_baseline = _abstract_sockets() if self.pid1 else set()
        import builtins

        self.clean_builtins = dict(builtins.__dict__)

    # -- host channel
    def hello(self) -> "dict[str, Any]":
        return {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "python": sys.version.split()[0],
            "pid1": self.pid1,
            "subreaper": self.subreaper,
            "hardened": self.hardened,
            "seccomp": self.seccomp,
            "uid": os.getuid(),
        }

    def serve(self) -> None:
        """Serve jobs until the host channel closes: one short-lived job process per job.

        The supervisor itself never reads a job nor its reply.  It forks a job process M,
        which reads the next job from the host channel, runs it (:meth:`run_job`: M forks the
        job's own processes, sweeps them and checks what they left), writes the reply and
        exits.  So every job's processes are forked from a process that never held another
        job's data, and whatever a job's processes held dies with them and with M: the kernel
        hands out only zeroed pages, and no process of the worker keeps freed memory that once
        held a job's program, input, tests, output or records.

        The next M is forked while the worker waits for its next job: when M has swept its job
        and is about to reply, it passes a baton (one byte on a pipe of its own) and the
        supervisor forks the next M at once, which then waits on the host channel; the one
        before only writes its reply and exits.  The supervisor learns of every M's end (or
        stop) from ``SIGCHLD``, through a wake-up pipe.

        An M starts its job only once every M before it has ended and been reaped: the
        supervisor then writes one byte ("go") on a pipe of the new M's own.  Until then the
        one before may still be running (between its reply and its exit) or be a zombie in
        ``/proc``: the new job could see it, and the new M's sweep would take it for a survivor
        of its own job (or kill it mid-exit), which retires the worker.
        """
        write_all(1, pack(self.hello()))
        wake = os.pipe()
        for fd in wake:
            os.set_blocking(fd, False)
        signal.signal(signal.SIGCHLD, _on_child)
        signal.set_wakeup_fd(wake[1])
        batons: dict[int, int] = {}  # job process -> read end of its baton pipe
        finishing: set[int] = set()  # job processes that passed the baton (their job is over)
        alive: set[int] = set()  # job processes not reaped yet
        go: dict[int, int] = {}  # job process -> write end of its go pipe, until it gets "go"
        spare = self._spawn(batons, wake, alive, go)

        def give_go() -> None:
            """Let the spare start its job once it is the only job process left."""
            if spare in go and alive == {spare}:
                fd = go.pop(spare)
                os.write(fd, b"G")
                os.close(fd)

        def take_baton(pid: int) -> None:
            """Read ``pid``'s baton pipe (readable: the byte, or its end) and stop watching it;
            a passed baton makes ``pid`` finishing and, from the spare, starts the next M."""
            nonlocal spare
            fd = batons.pop(pid)
            try:
                passed = os.read(fd, 1) == b"B"
            except OSError:
                passed = False
            os.close(fd)
            if passed:
                finishing.add(pid)
                if pid == spare:
                    spare = self._spawn(batons, wake, alive, go)

        while True:
            give_go()
            readable, _, _ = select.select([wake[0], *batons.values()], [], [])
            with contextlib.suppress(OSError):
                while os.read(wake[0], 512):
                    pass
            for pid, fd in list(batons.items()):
                if fd in readable:
                    take_baton(pid)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if os.WIFSTOPPED(status):
                    # Only a job can have stopped M (on a machine without the job's signal
                    # guard; M, unlike the supervisor, is not PID 1): end the job as a timeout
                    # at once, with a reply that holds nothing of it; the host retires the
                    # worker.
                    self._sweep()
                    write_all(1, pack(_STOPPED_REPLY))
                    return
                alive.discard(pid)
                if pid in batons:
                    # It ended after select() returned: its baton pipe holds the byte (if it
                    # passed it) and its end.
                    take_baton(pid)
                ok = pid in finishing and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
                finishing.discard(pid)
                # Not ok: the channel closed, M reported a fault and asked to stop, or it died
                # (its reply may be cut short), or an orphan of a job reached the supervisor.
                # M swept its job and checked (and restored) this process's state before it
                # passed the baton; a state still changed means its checks were bypassed.
                # Either way the worker stops, and the host starts a fresh one.
                if not ok or _restore_state(self.state_baseline):
                    self._sweep()
                    return

    def _spawn(
        self,
        batons: "dict[int, int]",
        wake: "tuple[int, int]",
        alive: "set[int]",
        go: "dict[int, int]",
    ) -> int:
        """Fork the next job process M; record its baton pipe in ``batons``, its go pipe in
        ``go`` and its pid in ``alive``; its pid."""
        baton_r, baton_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (baton_r, go_w, *wake, *batons.values(), *go.values()):
                    os.close(fd)
                code = self._job_process(baton_w, go_r)
            finally:
                os._exit(code)
        os.close(baton_w)
        os.close(go_r)
        batons[pid] = baton_r
        go[pid] = go_w
        alive.add(pid)
        return pid

    def _job_process(self, baton: int, go: int) -> int:
        """M: read one message from the host, answer it, and return the exit status (0: the
        worker may serve another job).  M starts on it only after the supervisor wrote ``G``
        on ``go`` (every job process before M has ended).  Before a reply after which the
        worker may serve on, M writes ``B`` on ``baton``: the supervisor then forks the next
        job process."""
        # Die with the supervisor (without a PID namespace nothing else would end M), and adopt
        # every orphan of the job so that M's sweep reaps it.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != self.pid:
            return 1
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        job = read_frame(0)
        if job is None:
            return 1
        # Read the job while the job process before exits, but start it only once that one is
        # gone (reaped): nothing of it may be in /proc, nor be hit by this job's sweep.
        if os.read(go, 1) != b"G":
            return 1
        os.close(go)
        if job.get("type") == "ping":
            os.write(baton, b"B")
            write_all(1, pack({"type": "pong"}))
            return 0
        try:
            reply = self.run_job(job)
        except _Infra as e:
            write_all(1, pack({"type": "infra", "error": str(e)}))
            return 1
        except BaseException as e:
            # The host channel may be out of step now (unread test bytes): report and quit;
            # the host starts a fresh worker.
            import traceback

            where = traceback.extract_tb(e.__traceback__)[-1]
            error = f"{type(e).__name__}: {e} (harness line {where.lineno}, {where.name})"
            write_all(1, pack({"type": "fatal", "error": error}))
            return 1
        # Every process of the job is gone: the next job process may start now.
        os.write(baton, b"B")
        write_all(1, pack(reply))
        return 0

    # -- one job
    def _prepare(self, job: "dict[str, Any]", jobdir: str, has_tests: bool) -> None:
        """Make the job's working directory and write the program into it.

        Anything failing here is the sandbox's fault (the scratch was verified empty after the
        previous job), never the program's: it is reported as an infrastructure error.
        """
        try:
            os.mkdir(jobdir, 0o700)
            path = os.path.join(jobdir, program_file_name(job["mode"]))
            # The program runs from memory; the file only serves tracebacks, so characters that
            # cannot be written (lone surrogates) are replaced.
            with open(path, "w", encoding="utf-8", errors="replace") as f:
                f.write(job["program"])
        except OSError as e:
            with contextlib.suppress(BaseException):
                if has_tests:  # consume the tests' frame: keep the channel in step
                    read_exact(0, frame_size(read_exact(0, HEADER_SIZE) or b""))
            raise _Infra(f"could not write the program into the sandbox ({e})") from e

    def run_job(self, job: "dict[str, Any]") -> "dict[str, Any]":
        limits = job.get("limits", {})
        mode = job["mode"]
        has_tests = mode == "tests"
        n_tests = int(job.get("n_tests", 0)) if mode == "tests" else None
        seconds = job_seconds(limits, n_tests)
        jobdir = os.path.join(self.scratch, "work")
        self._prepare(job, jobdir, has_tests)
        start = time.monotonic()
        deadline = start + seconds
        fds = _FdSet()
        job_state: dict[str, Any] = {"program": None, "owner": None, "runner": None, "restarts": 0}
        pending = b""
        ctl = None
        try:
            devnull = fds.add(os.open(os.devnull, os.O_RDONLY))
            out_r, out_w = fds.pipe()
            err_r, err_w = fds.pipe()
            aux_r, aux_w = fds.pipe()
            if mode == "tests":
                import socket

                req_r, req_w = fds.pipe()  # R -> P
                resp_r, resp_w = fds.pipe()  # P -> R
                ctl, ctl_runner = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                job_state["runner"] = self._fork(
                    lambda: _runner_main(self.clean_builtins, limits),
                    jobdir,
                    limits,
                    {
                        1: devnull,
                        2: devnull,
                        FD_AUX: aux_w,
                        FD_RPC_IN: resp_r,
                        FD_RPC_OUT: req_w,
                        FD_CTL: ctl_runner.fileno(),
                    },
                    0,
                    seconds,
                )
                ctl_runner.close()
                # P must never hold the write end of R's result pipe.
                fds.close(aux_w)
                ok, pending = self._await_ready(aux_r, deadline)
                if not ok:
                    raise _Fatal("the test runner failed before reading the tests")

                def start_program(req: int, resp: int) -> None:
                    """P (and O) answering R on ``req``/``resp``, writing to the job's streams:
                    at the start, and when R asks for a fresh one (``control``)."""
                    job_state.update(
                        self._fork_program(
                            job,
                            jobdir,
                            limits,
                            seconds,
                            out_w,
                            err_w,
                            devnull,
                            req,
                            resp,
                            job_state["runner"],
                        )
                    )

                start_program(req_r, resp_w)
                for fd in (req_r, req_w, resp_r, resp_w):
                    fds.close(fd)
                # out_w / err_w / devnull stay open: a restarted P writes to the same streams.
                watch = job_state["runner"]
            else:
                stdin_fd = self._stdin_fd(job.get("stdin") or "", jobdir, devnull, fds)
                # Neither M nor the supervisor may be signalled by the job (pids taken here, in
                # M: the lambda runs in the child).
                guarded = (self.pid, os.getpid())
                job_state["program"] = self._fork(
                    lambda: _program_main(job, jobdir, self.seccomp, guarded),
                    jobdir,
                    limits,
                    {1: out_w, 2: err_w, FD_AUX: aux_w},
                    stdin_fd,
                    seconds,
                )
                # Keep only the read ends the supervisor listens to.
                for fd in list(fds.open):
                    if fd not in (out_r, err_r, aux_r):
                        fds.close(fd)
                watch = job_state["program"]

            def control(request: bytes) -> None:
                """R's requests: ``X`` kill the runaway program now; ``P`` start a fresh one."""
                if b"X" in request:
                    self._kill_all_but(job_state["runner"])
                if b"P" not in request:
                    return
                job_state["restarts"] += 1
                if job_state["restarts"] > int(limits.get("max_timeouts", 3)):
                    return  # R never asks for more: ignore a confused runner
                self._kill_all_but(job_state["runner"])
                fds_new = []
                try:
                    new_req_r, new_req_w = os.pipe()
                    fds_new += [new_req_r, new_req_w]
                    new_resp_r, new_resp_w = os.pipe()
                    fds_new += [new_resp_r, new_resp_w]
                    start_program(new_req_r, new_resp_w)
                    sent = [new_resp_r, new_req_w]
                except OSError:
                    sent = []  # no fresh program: R is told so, and its remaining tests fail
                try:
                    with contextlib.suppress(OSError):  # R may have gone meanwhile
                        _send_fds(ctl, sent)
                finally:
                    for fd in fds_new:
                        with contextlib.suppress(OSError):
                            os.close(fd)

            facts, streams = self._collect(
                limits, deadline, out_r, err_r, aux_r, watch, pending, ctl, control, mode == "tests"
            )
        except BaseException:
            self._sweep()
            fds.close_all()
            if ctl is not None:
                ctl.close()
            raise
        children = {
            job_state[role]: role
            for role in ("runner", "program", "owner")
            if job_state[role] is not None
        }
        # Exit statuses of processes that ended on their own, before the sweep.
        own = {}
        for pid in children:
            got, status = _waitpid_nohang(pid)
            if got:
                own[pid] = status
        swept, clean = self._sweep()
        # Every job process is dead now, so the pipes hold all that was written: drain them.
        for fd in (out_r, err_r, aux_r):
            streams.drain(fd)
        fds.close_all()
        if ctl is not None:
            ctl.close()
        facts.update(streams.decoded(out_r, err_r, aux_r))
        facts["duration"] = time.monotonic() - start
        for pid, role in children.items():
            if pid in own:
                info = _describe_status(own[pid])
                if info is not None:
                    info["swept"] = False
            else:
                info = _describe_status(swept.get(pid))
                if info is not None:
                    info["swept"] = True
            facts[role + "_exit"] = info
        problem = None if clean else "processes of the job survived the sweep"
        problem = problem or self._leftovers()
        if problem:
            facts["retire"] = problem
        facts["type"] = "result"
        return facts

    def _leftovers(self) -> "str | None":
        """Empty the scratch space and check that the job left nothing behind; the reason to
        retire this worker, or None.  A retired worker's scratch tmpfs and IPC namespace die
        with it, so the next job always starts clean."""
        deadline = time.monotonic() + WIPE_SECONDS
        for path in [self.scratch] + self.wipe:
            if not wipe_tree(path, WIPE_MAX_ENTRIES, deadline):
                return f"the job's files under {path} could not all be removed"
        if self.scratch_dedicated:
            used = _used_bytes(self.scratch)
            if used > self.scratch_baseline + SCRATCH_SLACK_BYTES:
                return f"the scratch space still holds {used} bytes after the wipe"
        if self.pid1:  # a private IPC namespace: anything in it was left by the job
            for kind in ("shm", "msg", "sem"):
                try:
                    with open(f"/proc/sysvipc/{kind}") as f:
                        if len(f.read().splitlines()) > 1:
                            return f"the job left System V IPC objects ({kind})"
                except OSError:
                    continue
        if self.mqueue is not None:
            wipe_tree(self.mqueue, WIPE_MAX_ENTRIES, deadline)
            try:
                if os.listdir(self.mqueue):
                    return "the job left POSIX message queues behind"
            except OSError:
                return "the POSIX message queue directory cannot be read"
        if self.pid1 and _abstract_sockets() - self.abstract_baseline:
            # A socket kept alive only by a reference in flight (a cycle of SCM_RIGHTS messages)
            # dies in the kernel's garbage collection, which closing a unix socket starts.
            for _ in range(20):
                import socket

                a, b = socket.socketpair()
                a.close()
                b.close()
                time.sleep(0.005)
                if not _abstract_sockets() - self.abstract_baseline:
                    break
            else:
                return "the job left abstract unix sockets behind"
        # Jobs are forked from M, which is forked from the supervisor: the supervisor's state is
        # what the next job inherits (M's own dies with it).
        changed = _restore_state(self.state_baseline, self.pid)
        if changed:
            return "the job changed the worker's own state (" + ", ".join(changed) + ")"
        return None

    def _fork_program(
        self,
        job: "dict[str, Any]",
        jobdir: str,
        limits: "dict[str, Any]",
        seconds: float,
        out_w: int,
        err_w: int,
        devnull: int,
        req_r: int,
        resp_w: int,
        runner: "int | None",
    ) -> "dict[str, int]":
        """Start what answers R on ``req_r``/``resp_w``: P, or for a team program O in front of
        P (see :func:`_owner_main`).  Returns the new pids by role."""
        streams = {1: out_w, 2: err_w, FD_AUX: devnull}

        # Neither the test runner, nor the job process M, nor the supervisor may be
        # signalled by the job.
        guarded = tuple(p for p in (self.pid, os.getpid(), runner) if p)

        def fork(main: "Callable[..., None]", channels: "dict[int, int]") -> int:
            """One role: ``main`` with the job's streams and its own RPC descriptors."""
            return self._fork(
                lambda: main(job, jobdir, self.seccomp, guarded),
                jobdir,
                limits,
                {**streams, **channels},
                devnull,
                seconds,
            )

        if job.get("owner") is None:
            program = fork(_program_main, {FD_RPC_IN: req_r, FD_RPC_OUT: resp_w})
            return {"program": program}
        up = []
        try:
            up_req_r, up_req_w = os.pipe()  # O -> P
            up += [up_req_r, up_req_w]
            up_resp_r, up_resp_w = os.pipe()  # P -> O
            up += [up_resp_r, up_resp_w]
            program = fork(_program_main, {FD_RPC_IN: up_req_r, FD_RPC_OUT: up_resp_w})
            owner = fork(
                _owner_main,
                {FD_RPC_IN: req_r, FD_RPC_OUT: resp_w, FD_UP_IN: up_resp_r, FD_UP_OUT: up_req_w},
            )
        finally:
            for fd in up:  # the children hold their own copies
                with contextlib.suppress(OSError):
                    os.close(fd)
        return {"program": program, "owner": owner}

    def _stdin_fd(self, data: str, jobdir: str, devnull: int, fds: "_FdSet") -> int:
        if not data:
            return devnull
        path = os.path.join(jobdir, ".stdin")
        try:
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(data)
            fd = fds.add(os.open(path, os.O_RDONLY))
            os.unlink(path)
        except OSError as e:
            raise _Infra(f"could not write the job's stdin into the sandbox ({e})") from e
        return fd

    def _fork(
        self,
        body: "Callable[[], None]",
        jobdir: str,
        limits: "dict[str, Any]",
        fds: "dict[int, int]",
        stdin_fd: int,
        seconds: float,
    ) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                _child_common(
                    jobdir, limits, self.nproc_rlimit, fds, stdin_fd, self.signals, seconds
                )
                body()
            except BaseException:
                pass
            os._exit(70)
        return pid

    def _await_ready(self, aux_r: int, deadline: float) -> "tuple[bool, bytes]":
        """Wait for R's ``R`` record, i.e. R has consumed the tests from the host channel."""
        buf = b""
        limit = max(deadline, time.monotonic() + 30.0)
        while b"\n" not in buf:
            remaining = limit - time.monotonic()
            if remaining <= 0:
                return False, b""
            readable, _, _ = select.select([aux_r], [], [], remaining)
            if not readable:
                return False, b""
            chunk = os.read(aux_r, 4096)
            if not chunk:
                return False, b""
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        try:
            return json.loads(line.decode("ascii")).get("k") == "R", rest
        except ValueError:
            return False, b""

    def _collect(
        self,
        limits: "dict[str, Any]",
        deadline: float,
        out_r: int,
        err_r: int,
        aux_r: int,
        watch: int,
        pending: bytes,
        ctl: "Any",
        control: "Callable[[bytes], None]",
        is_runner: bool,
    ) -> "tuple[dict[str, Any], _Streams]":
        cap = int(limits.get("output_bytes", 1 << 20))
        streams = _Streams({out_r: cap, err_r: cap, aux_r: 16 << 20})
        streams.feed(aux_r, pending)
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(watch)
            except OSError:
                pidfd = None
        open_fds = [out_r, err_r, aux_r]
        ctl_fd = ctl.fileno() if ctl is not None else None
        timed_out = False
        exceeded = None
        too_many_files = False
        runner_stopped = False
        next_poll = time.monotonic() + SCRATCH_POLL_SECONDS
        next_state = time.monotonic() + RUNNER_POLL_SECONDS
        try:
            while True:
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    timed_out = True
                    break
                if is_runner and now >= next_state:
                    # A stopped test runner would hold the job until its deadline: it counts
                    # as a timeout now (the job's filter keeps its signals from reaching R; this
                    # covers a machine without that filter).
                    next_state = now + RUNNER_POLL_SECONDS
                    if _is_stopped(watch):
                        timed_out = runner_stopped = True
                        break
                if self.scratch_dedicated and now >= next_poll:
                    next_poll = now + SCRATCH_POLL_SECONDS
                    used = _used_inodes(self.scratch) - self.inodes_baseline
                    if used > SCRATCH_MAX_INODES:
                        too_many_files = True
                        break
                wait_for = open_fds + ([pidfd] if pidfd is not None else [])
                if ctl_fd is not None:
                    wait_for.append(ctl_fd)
                timeout = remaining if pidfd is not None else min(remaining, 0.002)
                if self.scratch_dedicated:
                    timeout = min(timeout, SCRATCH_POLL_SECONDS)
                if is_runner:
                    timeout = min(timeout, RUNNER_POLL_SECONDS)
                try:
                    readable, _, _ = select.select(wait_for, [], [], timeout)
                except InterruptedError:
                    continue
                for fd in readable:
                    if fd == pidfd:
                        continue
                    if fd == ctl_fd:
                        try:
                            request = ctl.recv(64)
                        except OSError:
                            request = b""
                        if not request:
                            ctl_fd = None  # R is gone; the pidfd says so too
                        else:
                            control(request)
                        continue
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        open_fds.remove(fd)
                        continue
                    streams.feed(fd, chunk)
                exceeded = streams.exceeded({out_r: "stdout", err_r: "stderr", aux_r: "records"})
                if exceeded:
                    break
                # Do not reap here: run_job collects the status before sweeping.
                if (pidfd is None or pidfd in readable or not open_fds) and _has_exited(watch):
                    break
        finally:
            if pidfd is not None:
                os.close(pidfd)
        facts: dict[str, Any] = {"timed_out": timed_out, "output_exceeded": exceeded}
        if runner_stopped:
            facts["runner_stopped"] = True
        if too_many_files:
            facts["files_exceeded"] = SCRATCH_MAX_INODES
        return facts, streams

    def _kill_all_but(self, spare: "int | None") -> None:
        """Kill every process of the job except ``spare`` (the test runner) and reap them."""
        me = os.getpid()
        for _ in range(10000):
            if self.pid1:
                others = [p for p in _all_pids() if p not in (1, me, spare)]
            else:
                others = [p for p in _child_pids() if p != spare]
            if not others:
                return
            for pid in others:
                for kill in (os.killpg, os.kill) if not self.pid1 else (os.kill,):
                    with contextlib.suppress(OSError):
                        kill(pid, signal.SIGKILL)
            for pid in _child_pids():
                if pid != spare:
                    _waitpid_nohang(pid)
            time.sleep(0.0005)

    def _sweep(self) -> "tuple[dict[int, int], bool]":
        """Kill every process the job created and reap them.

        Returns the exit statuses by pid, and whether no job process is left.
        """
        statuses: dict[int, int] = {}
        if self.pid1:
            for _ in range(10000):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(-1, signal.SIGKILL)
                if not _reap_all(statuses):
                    break
                time.sleep(0.0005)
            # kill(-1) spares PID 1 and the caller (M, or the supervisor itself).
            return statuses, not [p for p in _all_pids() if p not in (1, os.getpid())]
        for _ in range(10000):
            strays = _child_pids()
            for pid in strays:
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(OSError):
                        kill(pid, signal.SIGKILL)
            if not _reap_all(statuses) and not strays:
                break
            time.sleep(0.0005)
        return statuses, not _child_pids()


MQUEUE_DIR = "/dev/mqueue"


def _process_state(pid: int = 0) -> "dict[str, Any]":
    """The state of process ``pid`` (0: this one) that every job forked below it inherits:
    resource limits, niceness, scheduling policy and priority, CPU affinity."""
    state: dict[str, Any] = {}
    if resource is not None:
        for name in sorted(dir(resource)):
            if name.startswith("RLIMIT_"):
                with contextlib.suppress(ValueError, OSError):
                    state[name] = resource.prlimit(pid, getattr(resource, name))
    readers = (
        ("nice", lambda: os.getpriority(os.PRIO_PROCESS, pid)),
        ("scheduler", lambda: os.sched_getscheduler(pid)),
        ("sched_priority", lambda: os.sched_getparam(pid).sched_priority),
        ("affinity", lambda: sorted(os.sched_getaffinity(pid))),
    )
    for key, read in readers:
        with contextlib.suppress(Exception):
            state[key] = read()
    return state


def _restore_state(baseline: "dict[str, Any]", pid: int = 0) -> "list[str]":
    """Put back what a job changed of process ``pid``'s state (0: this one; the supervisor,
    when the job process M checks it by pid) where an unprivileged process can: lowered limits
    and a raised niceness usually cannot be undone; the keys still different afterwards."""
    current = _process_state(pid)
    for key, value in baseline.items():
        if current.get(key) == value:
            continue
        with contextlib.suppress(Exception):
            if key.startswith("RLIMIT_"):
                resource.prlimit(pid, getattr(resource, key), value)
            elif key == "nice":
                os.setpriority(os.PRIO_PROCESS, pid, value)
            elif key in ("scheduler", "sched_priority"):
                param = os.sched_param(baseline.get("sched_priority", 0))
                os.sched_setscheduler(pid, baseline.get("scheduler", 0), param)
            elif key == "affinity":
                os.sched_setaffinity(pid, value)
    current = _process_state(pid)
    return sorted(k for k in baseline if current.get(k) != baseline[k])


def _abstract_sockets() -> "set[str]":
    """Names of the abstract unix sockets of this network namespace (``/proc/net/unix``)."""
    names: set[str] = set()
    try:
        with open("/proc/net/unix") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return names
    for line in lines:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith("@"):
            names.add(parts[7])
    return names


def _send_fds(sock: "Any", fds: "list[int]") -> None:
    """Pass ``fds`` to R (``N``), or tell it that there are none (``F``)."""
    import array
    import socket

    if not fds:
        sock.sendall(b"F")
        return
    sock.sendmsg([b"N"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _all_pids() -> "list[int]":
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _used_inodes(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_files - st.f_ffree


def _used_bytes(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class _Fatal(Exception):
    pass


class _FdSet:
    """The descriptors one job opened, so that each is closed exactly once."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def add(self, fd: int) -> int:
        self.open.add(fd)
        return fd

    def pipe(self) -> "tuple[int, int]":
        r, w = os.pipe()
        self.open.update((r, w))
        return r, w

    def close(self, fd: int) -> None:
        if fd in self.open:
            self.open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def close_all(self) -> None:
        for fd in list(self.open):
            self.close(fd)


class _Streams:
    """Captured output with a per-stream byte cap (the excess is counted, not kept)."""

    def __init__(self, caps: "dict[int, int]") -> None:
        self.caps = caps
        self.data = {fd: bytearray() for fd in caps}
        self.totals = {fd: 0 for fd in caps}

    def feed(self, fd: int, chunk: bytes) -> None:
        if not chunk:
            return
        self.totals[fd] += len(chunk)
        room = self.caps[fd] - len(self.data[fd])
        if room > 0:
            self.data[fd] += chunk[:room]

    def exceeded(self, names: "dict[int, str]") -> "str | None":
        for fd, name in names.items():
            if self.totals[fd] > self.caps[fd]:
                return name
        return None

    def drain(self, fd: int, max_bytes: int = 64 << 20) -> None:
        """Read what is left without blocking (a stray writer must not hang us)."""
        try:
            os.set_blocking(fd, False)
        except OSError:
            return
        read = 0
        while read < max_bytes:
            try:
                chunk = os.read(fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if not chunk:
                return
            read += len(chunk)
            self.feed(fd, chunk)

    def decoded(self, out_r: int, err_r: int, aux_r: int) -> "dict[str, Any]":
        return {
            "stdout": bytes(self.data[out_r]).decode("utf-8", "replace"),
            "stderr": bytes(self.data[err_r]).decode("utf-8", "replace"),
            "stdout_truncated": self.totals[out_r] > self.caps[out_r],
            "stderr_truncated": self.totals[err_r] > self.caps[err_r],
            "aux": bytes(self.data[aux_r]).decode("utf-8", "replace"),
        }


def _is_stopped(pid: int) -> bool:
    """True when ``pid`` is stopped (a stop signal) or traced, per ``/proc/<pid>/stat``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat.rpartition(b")")[2].split()[:1]
    return state in ([b"T"], [b"t"])


def _has_exited(pid: int) -> bool:
    """True once ``pid`` has terminated, without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _waitpid_nohang(pid: int) -> "tuple[int, int | None]":
    try:
        return os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return 0, None


def _reap_all(statuses: "dict[int, int]") -> bool:
    """Reap every exited child; return True while children remain."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def _child_pids() -> "list[int]":
    me = str(os.getpid())
    try:
        with open(f"/proc/self/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            if stat.rsplit(")", 1)[1].split()[1] == me:
                pids.append(int(entry))
        except (OSError, IndexError):
            continue
    return pids


def _describe_status(status: "int | None") -> "dict[str, Any] | None":
    if status is None:
        return None
    if os.WIFEXITED(status):
        return {"code": os.WEXITSTATUS(status), "signal": None}
    if os.WIFSIGNALED(status):
        return {"code": None, "signal": os.WTERMSIG(status)}
    return None


# Imported once by the supervisor so that every forked job finds them ready (the modules that
# HumanEval / MBPP style programs import most).
_WARM_MODULES = (
    "abc",
    "array",
    "base64",
    "bisect",
    "cmath",
    "collections",
    "collections.abc",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "importlib",
    "itertools",
    "json",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "traceback",
    "types",
    "typing",
    "unicodedata",
)


# What the job process and the test runner import as they run a job: imported once by the
# supervisor, since every job process is forked afresh from it and would import them again.
_HARNESS_MODULES = ("socket", "zlib")


def _ignore_signals() -> "dict[Any, Any]":
    """Ignore every signal a job could send the supervisor; return the previous dispositions.

    As PID 1 of its namespace the kernel already drops signals that have no handler, but the
    interpreter installs one for SIGINT (KeyboardInterrupt), and without a PID namespace nothing
    protects it: so every catchable signal is ignored (SIGCHLD excepted, which must keep its
    default for ``waitpid``).  Forked job processes get the previous dispositions back.
    """
    uncatchable = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD}
    valid = signal.valid_signals() if hasattr(signal, "valid_signals") else set(signal.Signals)
    previous = {}
    for sig in valid:
        if sig in uncatchable:
            continue
        try:
            handler = signal.getsignal(sig)
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            continue
        previous[sig] = signal.SIG_DFL if handler is None else handler
    return previous


def main(argv: "list[str]") -> "Any":
    scratch = None
    wipe = []
    nproc_rlimit = True
    uid = gid = None
    seccomp = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--scratch":
            scratch = args.pop(0)
        elif flag == "--wipe":
            wipe.append(args.pop(0))
        elif flag == "--no-nproc-rlimit":
            nproc_rlimit = False
        elif flag == "--uid":
            uid = int(args.pop(0))
        elif flag == "--gid":
            gid = int(args.pop(0))
        elif flag == "--seccomp":
            seccomp = args.pop(0)
            if seccomp not in ("default", "no-fork"):
                raise SystemExit(f"unknown --seccomp mode {seccomp!r}")
        else:
            raise SystemExit(f"unknown harness option {flag!r}")
    if gid is not None:
        os.setgroups([])
        os.setgid(gid)
    if uid is not None:
        os.setuid(uid)
    # Never import from the working directory (the job can write there).
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and p != os.getcwd()]
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    if scratch is None:
        import tempfile

        scratch = tempfile.mkdtemp(prefix="llm_marl_sandbox_")
    os.makedirs(scratch, exist_ok=True)
    os.chdir(scratch)
    for name in _WARM_MODULES + _HARNESS_MODULES:
        with contextlib.suppress(Exception):
            __import__(name)
    signals = _ignore_signals()
    supervisor = Supervisor(scratch, wipe, nproc_rlimit, seccomp, signals)
    # Move every object allocated so far out of the collector's reach: forked children then do
    # not touch (and copy-on-write) the supervisor's pages when they collect garbage.
    import gc

    gc.collect()
    gc.freeze()
    supervisor.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
