"""Programs that try to fool the checker, on every backend: none can ever score a pass."""

from __future__ import annotations

import os
import uuid

import pytest

from llm_marl.tools.sandbox import Status

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
def test_fooling_attempts_never_pass(sandbox, attack, double):
    report = sandbox.run_tests(FOOLING_PROGRAMS[attack], double.check, entry_point="double")
    assert report.passed == 0, (attack, report)
    assert report.status is not Status.OK
    # Control: the honest solution passes on the same (shared) workers right after.
    assert sandbox.run_tests(double.correct, double.check, entry_point="double").status is Status.OK


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
