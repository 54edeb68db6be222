"""In-sandbox supervisor: runs untrusted programs and scores tests without trusting them.

This file is executed *inside* the sandbox (``python3 -I -S -c <this source>``) by both backends;
it must therefore use the standard library only, import nothing from ``llm_marl`` and run on any
Python >= 3.8.  The host imports it only for the framing helpers and the value codec.

Process layout of one warm sandbox worker
-----------------------------------------
::

    host (trusted)  --stdin/stdout frames-->  supervisor (trusted, long-lived, PID 1 of its own PID
                                              namespace under bwrap/unshare/Docker)
                                                |-- fork --> R: test runner (trusted)
                                                '-- fork --> P: program process (UNTRUSTED)

The supervisor is started once per worker (its imports are already warm) and forks two fresh
children per job, so a job costs two ``fork()`` calls rather than an interpreter start.

A *team* program (``job["owner"]``, built by ``program.TeamProgram``) adds a third child, O: the
shared code plus the entry point's author's own code, in a process that no other author's code
ever runs in; R talks to O, and O calls the other authors' functions in P (see
:func:`_owner_main`). P then holds no descriptor of R's.

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
* The tests themselves never enter P's memory nor the supervisor's: R reads them straight from the
  host channel (the supervisor's stdin) *before* P is forked; the supervisor only knows their
  number.  So P cannot read the expected values out of memory either.
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

The supervisor also enforces the wall-clock limit, caps captured output, and after every job kills
every process the job left behind: as PID 1 of its namespace it sends ``kill(-1, SIGKILL)``, which
reaches every other process of the namespace, then reaps them; without a PID namespace it falls
back to process groups plus ``PR_SET_CHILD_SUBREAPER`` sweeping.  Each child gets rlimits (CPU,
address space, processes, file size, open files, no core dumps), a fresh empty working directory
and a scrubbed environment.

Host protocol: every message is a frame: a 10-digit ASCII length, a newline, then JSON with all
non-ASCII escaped (ASCII only, see ``HEADER_SIZE``).  A job is one framed ``job`` message,
followed, for test jobs, by ``tests_len`` raw bytes of JSON that R reads itself.  The supervisor
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

try:
    import resource
except ImportError:  # pragma: no cover - every CPython on Linux has it
    resource = None

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
# FD_RPC_IN/OUT and calls the other authors' names in P through these two.
FD_UP_IN = 6  # O: responses from P
FD_UP_OUT = 7  # O: requests to P

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


def pack(obj):
    """Frame ``obj`` as length-prefixed JSON bytes (ASCII only)."""
    data = json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return b"%010d\n" % len(data) + data


def frame_size(head):
    """Body length announced by an ``HEADER_SIZE``-byte frame header."""
    if len(head) != HEADER_SIZE or head[-1:] != b"\n" or not head[:-1].isdigit():
        raise ValueError(f"malformed frame header {head!r}")
    return int(head[:-1])


def read_exact(fd, n):
    """Read exactly ``n`` bytes from ``fd``; ``None`` on EOF before the first byte."""
    chunks = []
    got = 0
    while got < n:
        try:
            chunk = os.read(fd, min(n - got, 1 << 20))
        except InterruptedError:
            continue
        if not chunk:
            if got == 0:
                return None
            raise EOFError(f"stream ended after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd, limit=MAX_FRAME):
    """Read one framed JSON message from ``fd``; ``None`` on a clean EOF."""
    head = read_exact(fd, HEADER_SIZE)
    if head is None:
        return None
    size = frame_size(head)
    if size > limit:
        raise ValueError(f"frame of {size} bytes exceeds the {limit}-byte limit")
    body = read_exact(fd, size) if size else b""
    if body is None:
        raise EOFError("stream ended inside a frame")
    return json.loads(body.decode("utf-8"))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


# --------------------------------------------------------------------------- value codec


def encode_value(value, _depth=0):
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
        it = frozenset.__iter__(value) if tag == "fs" else set.__iter__(value)
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


def decode_value(data, _depth=0):
    """Inverse of :func:`encode_value`; builds only plain built-in values."""
    if _depth > MAX_DEPTH + 1:
        raise ValueError("value is nested too deeply")
    d = _depth + 1
    t = type(data)
    if data is None or t in (bool, int, float, str):
        return data
    if t is list:
        return [decode_value(v, d) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError("malformed value on the wire")
    ((tag, v),) = data.items()
    if tag == "t":
        return tuple(decode_value(x, d) for x in v)
    if tag == "d":
        return {decode_value(k, d): decode_value(x, d) for k, x in v}
    if tag == "s":
        return {decode_value(x, d) for x in v}
    if tag == "fs":
        return frozenset(decode_value(x, d) for x in v)
    if tag == "b":
        return bytes.fromhex(v)
    if tag == "ba":
        return bytearray.fromhex(v)
    if tag == "c":
        return complex(decode_value(v[0], d), decode_value(v[1], d))
    if tag == "i":
        return int(v, 16)
    if tag == "f":
        return float(v)
    if tag == "r":
        return range(int(v[0]), int(v[1]), int(v[2]))
    if tag == "dq":
        import collections

        return collections.deque(decode_value(x, d) for x in v)
    if tag == "fr":
        import fractions

        return fractions.Fraction(decode_value(v[0], d), decode_value(v[1], d))
    if tag == "dec":
        import decimal

        return decimal.Decimal(v)
    if tag == "it":
        return iter([decode_value(x, d) for x in v])
    if tag == "kv":
        return dict.fromkeys(decode_value(x, d) for x in v).keys()
    if tag == "vv":
        return {i: decode_value(x, d) for i, x in enumerate(v)}.values()
    if tag == "iv":
        return {decode_value(k, d): decode_value(x, d) for k, x in v}.items()
    raise ValueError(f"unknown value tag {tag!r}")


# --------------------------------------------------------------------------- small helpers


def _prctl(option, arg):
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


def _safe_text(exc):
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


def _format_traceback(exc, skip_frames=1):
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


def _apply_limits(limits, nproc_rlimit):
    if resource is None:
        return

    def lower(res, value):
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

    cpu = int(limits.get("timeout", 10) + 0.999) + 1
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        new_hard = cpu + 1 if hard == resource.RLIM_INFINITY else min(cpu + 1, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, new_hard), new_hard))
    except (ValueError, OSError):
        pass
    lower(resource.RLIMIT_AS, limits.get("memory_mb", 0) * (1 << 20))
    lower(resource.RLIMIT_FSIZE, limits.get("file_size_mb", 0) * (1 << 20))
    lower(resource.RLIMIT_NOFILE, limits.get("open_files", 0))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc_rlimit:
        lower(resource.RLIMIT_NPROC, limits.get("nproc", 0))


def _wipe(path, keep_root=True):
    """Remove everything under ``path`` even if the job chmod-ed things to 000."""
    try:
        entries = os.listdir(path)
    except OSError:
        return
    for name in entries:
        full = os.path.join(path, name)
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                with contextlib.suppress(OSError):
                    os.chmod(full, 0o700)
                _wipe(full, keep_root=False)
            else:
                os.unlink(full)
        except OSError:
            pass
    if not keep_root:
        with contextlib.suppress(OSError):
            os.rmdir(path)


# --------------------------------------------------------------------------- children


def _child_common(jobdir, limits, nproc_rlimit, fds, stdin_fd):
    """Plumbing shared by P and R right after fork: fds, session, cwd, rlimits, stdio."""
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
    _apply_limits(limits, nproc_rlimit)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = ["main.py"]


def _flush_stdio():
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _program_module(name, path, source):
    module = types.ModuleType(name)
    module.__file__ = path
    module.__builtins__ = __builtins__
    sys.modules[name] = module
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    return module


def _program_main(job, jobdir):
    """P: run the untrusted program, then (test mode) serve R's calls.  Never returns."""
    mode = job["mode"]
    source = job["program"]
    code = 0
    if mode == "run":
        module = _program_module("__main__", os.path.join(jobdir, "main.py"), source)
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
    module = _program_module("solution", os.path.join(jobdir, "solution.py"), source)
    ns = module.__dict__
    _load_and_serve(ns, lambda: exec(compile(source, module.__file__, "exec"), ns), 2)


def _load_and_serve(ns, load, harness_frames):
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


def _owner_main(job, jobdir):
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
    partners = _ProgramConnection(FD_UP_OUT, FD_UP_IN)
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
    path = os.path.join(jobdir, "solution.py")  # P wrote the whole program there
    module = types.ModuleType("solution")
    module.__file__ = path
    module.__builtins__ = __builtins__
    sys.modules["solution"] = module
    ns = module.__dict__

    def load():
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


def _exec_at(source, first_line, path, ns):
    """Run ``source`` as lines ``first_line``... of ``path`` (tracebacks match the whole file)."""
    if source:
        code = compile("\n" * (first_line - 1) + source, path, "exec", dont_inherit=True)
        exec(code, ns)


def _serve(ns):
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


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        sys.stderr.write(str(code) + "\n")
    return 1


def _send_rpc(obj):
    write_all(FD_RPC_OUT, pack(obj))


def _manifest(ns):
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


def _small(value, budget):
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


class _ProgramConnection:
    def __init__(self, fd_out=FD_RPC_OUT, fd_in=FD_RPC_IN):
        self.dead = None
        self.fd_out = fd_out
        self.fd_in = fd_in

    def call(self, name, args, kwargs):
        if self.dead:
            raise ProgramError(self.dead)
        request = pack({"name": name, "args": encode_value(args), "kwargs": encode_value(kwargs)})
        try:
            write_all(self.fd_out, request)
            reply = read_frame(self.fd_in, MAX_RPC_FRAME)
        except Exception as e:  # EOF, broken pipe, or a garbled frame: P is unusable now
            reply = None
            self.dead = f"the program's process is gone or misbehaved ({e})"
        if not isinstance(reply, dict):
            self.dead = self.dead or "the program's process exited during a call"
            raise ProgramError(self.dead)
        if "ok" in reply:
            return decode_value(reply["ok"])
        raise _rebuild_exception(str(reply.get("exc", "Exception")), str(reply.get("error", "")))


_NOT_REBUILT = (
    "StopIteration",
    "StopAsyncIteration",
    "GeneratorExit",
    "SystemExit",
    "KeyboardInterrupt",
)


def _rebuild_exception(name, text):
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

    def __init__(self, name, conn):
        self._name = name
        self._conn = conn

    @property
    def __name__(self):
        return self._name

    def __call__(self, *args, **kwargs):
        return self._conn.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<function {self._name} (runs in the sandboxed program)>"


def _runner_main(tests_len, clean_builtins):
    """R: read the tests from the host channel, wait for P, run the tests.  Never returns."""

    def emit(kind, index=0, ok=True, error="", etype=""):
        line = json.dumps({"k": kind, "i": index, "ok": bool(ok), "err": error, "et": etype})
        write_all(FD_AUX, (line + "\n").encode("ascii"))

    try:
        raw = read_exact(0, tests_len) if tests_len else b"{}"
        if raw is None or len(raw) != tests_len:
            os._exit(3)
        spec = json.loads(raw.decode("utf-8"))
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        emit("R")
    except BaseException:
        os._exit(3)
    conn = _ProgramConnection()
    try:
        first = read_frame(FD_RPC_IN, MAX_RPC_FRAME)
    except BaseException as e:
        first = None
        conn.dead = _safe_text(e)
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
    ns = {"__builtins__": dict(clean_builtins), "__name__": "__sandbox_tests__"}
    manifest = first.get("globals")
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
            elif kind[0] == "v":
                ns[name] = decode_value(kind[1])
        except BaseException:
            continue

    # The program's entry point, taken before the test setup runs (which may bind the same name).
    candidate = ns.get(entry_point) if entry_point else None

    def record(index, exc):
        if exc is None:
            emit("T", index)
        else:
            etype = type(exc).__name__
            if isinstance(exc, ProgramError) and conn.dead:
                etype = "ProgramExit"
            emit("T", index, ok=False, error=_safe_text(exc), etype=etype)

    try:
        if spec.get("setup"):
            exec(
                compile(spec["setup"], "tests_setup.py", "exec", dont_inherit=True, optimize=0), ns
            )
    except BaseException as e:
        emit("S", ok=False, error=_format_traceback(e), etype=type(e).__name__)
        emit("D")
        os._exit(0)
    check_src = spec.get("check")
    if check_src:
        try:
            if not isinstance(candidate, _RemoteFunction):
                raise NameError(f"the program does not define a function named {entry_point!r}")
            exec(compile(check_src, "tests.py", "exec", dont_inherit=True, optimize=0), ns)
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
                exec(compile(source, f"test_{index}.py", "exec", dont_inherit=True, optimize=0), ns)
            except BaseException as e:
                record(index, e)
            else:
                record(index, None)
    emit("D")
    os._exit(0)


# --------------------------------------------------------------------------- supervisor


class Supervisor:
    def __init__(self, scratch, wipe, nproc_rlimit):
        self.scratch = scratch
        self.wipe = wipe
        self.nproc_rlimit = nproc_rlimit
        self.pid1 = os.getpid() == 1
        self.subreaper = False
        self.hardened = _prctl(PR_SET_DUMPABLE, 0)
        # Die with the process that started us (bwrap, unshare, or the host itself).  Armed here,
        # after any uid change, because changing credentials clears the parent-death signal.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if not self.pid1:
            self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        import builtins

        self.clean_builtins = dict(builtins.__dict__)

    # -- host channel
    def hello(self):
        return {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "python": sys.version.split()[0],
            "pid1": self.pid1,
            "subreaper": self.subreaper,
            "hardened": self.hardened,
            "uid": os.getuid(),
        }

    def serve(self):
        write_all(1, pack(self.hello()))
        while True:
            job = read_frame(0)
            if job is None:
                return
            if job.get("type") == "ping":
                write_all(1, pack({"type": "pong"}))
                continue
            try:
                reply = self.run_job(job)
            except BaseException as e:
                # The host channel may be out of step now (unread test bytes): report and quit;
                # the host starts a fresh worker.
                write_all(1, pack({"type": "fatal", "error": f"{type(e).__name__}: {e}"}))
                return
            write_all(1, pack(reply))

    # -- one job
    def run_job(self, job):
        limits = job.get("limits", {})
        mode = job["mode"]
        tests_len = int(job.get("tests_len", 0))
        jobdir = os.path.join(self.scratch, "work")
        for path in [self.scratch] + self.wipe:
            _wipe(path)
        os.mkdir(jobdir, 0o700)
        start = time.monotonic()
        deadline = start + float(limits.get("timeout", 10.0))
        fds = _FdSet()
        children = {}
        pending = b""
        try:
            devnull = fds.add(os.open(os.devnull, os.O_RDONLY))
            out_r, out_w = fds.pipe()
            err_r, err_w = fds.pipe()
            aux_r, aux_w = fds.pipe()
            runner = None
            if mode == "tests":
                req_r, req_w = fds.pipe()  # R -> P
                resp_r, resp_w = fds.pipe()  # P -> R
                runner = self._fork(
                    lambda: _runner_main(tests_len, self.clean_builtins),
                    jobdir,
                    limits,
                    {1: devnull, 2: devnull, FD_AUX: aux_w, FD_RPC_IN: resp_r, FD_RPC_OUT: req_w},
                    stdin_fd=0,
                )
                children[runner] = "runner"
                # P must never hold the write end of R's result pipe.
                fds.close(aux_w)
                ok, pending = self._await_ready(aux_r, deadline)
                if not ok:
                    raise _Fatal("the test runner failed before reading the tests")
                program_fds = {
                    1: out_w,
                    2: err_w,
                    FD_AUX: devnull,
                    FD_RPC_IN: req_r,
                    FD_RPC_OUT: resp_w,
                }
                stdin_fd = devnull
                if job.get("owner") is not None:
                    # A team program: R talks to O (the entry point's author's own process), and
                    # P, the whole program, only to O (see _owner_main).
                    up_req_r, up_req_w = fds.pipe()  # O -> P
                    up_resp_r, up_resp_w = fds.pipe()  # P -> O
                    owner_fds = dict(program_fds)
                    owner_fds.update({FD_UP_IN: up_resp_r, FD_UP_OUT: up_req_w})
                    program_fds.update({FD_RPC_IN: up_req_r, FD_RPC_OUT: up_resp_w})
                    owner = self._fork(
                        lambda: _owner_main(job, jobdir), jobdir, limits, owner_fds, devnull
                    )
                    children[owner] = "owner"
            else:
                program_fds = {1: out_w, 2: err_w, FD_AUX: aux_w}
                stdin_fd = self._stdin_fd(job.get("stdin") or "", jobdir, devnull, fds)
            program = self._fork(
                lambda: _program_main(job, jobdir), jobdir, limits, program_fds, stdin_fd=stdin_fd
            )
            children[program] = "program"
            # Keep only the read ends the supervisor listens to.
            for fd in list(fds.open):
                if fd not in (out_r, err_r, aux_r):
                    fds.close(fd)
            watch = runner if runner is not None else program
            facts, streams = self._collect(limits, deadline, out_r, err_r, aux_r, watch, pending)
        except BaseException:
            self._sweep(list(children))
            fds.close_all()
            raise
        # Exit statuses of processes that ended on their own, before the sweep.
        own = {}
        for pid in children:
            got, status = _waitpid_nohang(pid)
            if got:
                own[pid] = status
        swept = self._sweep(list(children))
        # Every job process is dead now, so the pipes hold all that was written: drain them.
        for fd in (out_r, err_r, aux_r):
            streams.drain(fd)
        fds.close_all()
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
        _wipe(self.scratch)
        facts["type"] = "result"
        return facts

    def _stdin_fd(self, data, jobdir, devnull, fds):
        if not data:
            return devnull
        path = os.path.join(jobdir, ".stdin")
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
        fd = fds.add(os.open(path, os.O_RDONLY))
        os.unlink(path)
        return fd

    def _fork(self, body, jobdir, limits, fds, stdin_fd):
        pid = os.fork()
        if pid == 0:
            try:
                _child_common(jobdir, limits, self.nproc_rlimit, fds, stdin_fd)
                body()
            except BaseException:
                pass
            os._exit(70)
        return pid

    def _await_ready(self, aux_r, deadline):
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

    def _collect(self, limits, deadline, out_r, err_r, aux_r, watch, pending):
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
        timed_out = False
        exceeded = None
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                wait_for = open_fds + ([pidfd] if pidfd is not None else [])
                timeout = remaining if pidfd is not None else min(remaining, 0.002)
                try:
                    readable, _, _ = select.select(wait_for, [], [], timeout)
                except InterruptedError:
                    continue
                for fd in readable:
                    if fd == pidfd:
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
        return {"timed_out": timed_out, "output_exceeded": exceeded}, streams

    def _sweep(self, children):
        """Kill every process the job created and reap them; return exit statuses by pid."""
        statuses = {}
        if self.pid1:
            for _ in range(10000):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                except PermissionError:
                    pass
                if not _reap_all(statuses):
                    break
                time.sleep(0.0005)
            return statuses
        for pid in children:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        for _ in range(10000):
            strays = _child_pids()
            for pid in strays:
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(OSError):
                        kill(pid, signal.SIGKILL)
            if not _reap_all(statuses) and not strays:
                break
            time.sleep(0.0005)
        return statuses


class _Fatal(Exception):
    pass


class _FdSet:
    """The descriptors one job opened, so that each is closed exactly once."""

    def __init__(self):
        self.open = set()

    def add(self, fd):
        self.open.add(fd)
        return fd

    def pipe(self):
        r, w = os.pipe()
        self.open.update((r, w))
        return r, w

    def close(self, fd):
        if fd in self.open:
            self.open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def close_all(self):
        for fd in list(self.open):
            self.close(fd)


class _Streams:
    """Captured output with a per-stream byte cap (the excess is counted, not kept)."""

    def __init__(self, caps):
        self.caps = caps
        self.data = {fd: bytearray() for fd in caps}
        self.totals = {fd: 0 for fd in caps}

    def feed(self, fd, chunk):
        if not chunk:
            return
        self.totals[fd] += len(chunk)
        room = self.caps[fd] - len(self.data[fd])
        if room > 0:
            self.data[fd] += chunk[:room]

    def exceeded(self, names):
        for fd, name in names.items():
            if self.totals[fd] > self.caps[fd]:
                return name
        return None

    def drain(self, fd, max_bytes=64 << 20):
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

    def decoded(self, out_r, err_r, aux_r):
        return {
            "stdout": bytes(self.data[out_r]).decode("utf-8", "replace"),
            "stderr": bytes(self.data[err_r]).decode("utf-8", "replace"),
            "stdout_truncated": self.totals[out_r] > self.caps[out_r],
            "stderr_truncated": self.totals[err_r] > self.caps[err_r],
            "aux": bytes(self.data[aux_r]).decode("utf-8", "replace"),
        }


def _has_exited(pid):
    """True once ``pid`` has terminated, without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _waitpid_nohang(pid):
    try:
        return os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return 0, None


def _reap_all(statuses):
    """Reap every exited child; return True while children remain."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def _child_pids():
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


def _describe_status(status):
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


def main(argv):
    scratch = None
    wipe = []
    nproc_rlimit = True
    uid = gid = None
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
    for name in _WARM_MODULES:
        with contextlib.suppress(Exception):
            __import__(name)
    supervisor = Supervisor(scratch, wipe, nproc_rlimit)
    # Move every object allocated so far out of the collector's reach: forked children then do
    # not touch (and copy-on-write) the supervisor's pages when they collect garbage.
    import gc

    gc.collect()
    gc.freeze()
    supervisor.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
