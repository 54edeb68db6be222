"""The grading worker: a child process that runs the comparisons that may not terminate.

The parent (:mod:`.pool`) starts it with
``python -c BOOTSTRAP <this directory> <memory MiB> <parent pid>``.
The bootstrap loads this directory as a stand-alone package (``_llm_marl_grading``) so that the
worker imports only the grading modules, sympy and (optionally) math-verify, never the rest of
``llm_marl`` (torch, transformers). Every module of this package therefore uses relative imports
only.

Protocol: one JSON object per line on stdin and stdout. After its imports the worker prints
``{"ready": true}`` (or ``{"ready": false, "error": ...}``); then for each request
``{"id", "pred", "ref", "mv"}`` it answers ``{"id", "correct", "reason"}``. It exits when stdin
closes, and is killed (``PR_SET_PDEATHSIG``) when the parent dies, even mid-computation. A request
that runs too long is not answered: the parent kills the process, which is the only way to stop
sympy mid-computation.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from typing import IO, Any

__all__ = ["BOOTSTRAP", "judge", "main"]

PACKAGE_ALIAS = "_llm_marl_grading"

BOOTSTRAP = f"""
import importlib, sys, types
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
pkg = types.ModuleType({PACKAGE_ALIAS!r})
pkg.__path__ = [sys.argv[1]]
sys.modules[{PACKAGE_ALIAS!r}] = pkg
importlib.import_module({PACKAGE_ALIAS!r} + ".worker").main()
"""


def _limit_memory(megabytes: int) -> None:
    """Cap the address space so that a runaway computation fails fast instead of swapping."""
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # pragma: no cover - non-POSIX or not permitted
        pass


def _die_with_parent(parent_pid: int) -> None:
    """Get SIGKILL when the parent (its spawning thread, which lives as long as the parent
    process) exits; exit now if it is already gone. Linux only; elsewhere stdin EOF ends us."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    except (OSError, AttributeError, ImportError):  # pragma: no cover - not Linux
        return
    if parent_pid and os.getppid() != parent_pid:
        os._exit(0)


_math_verify: Any = None


def _math_verify_equal(pred: str, ref: str) -> bool:
    """math-verify's verdict on the raw strings (False if it is not installed or fails)."""
    global _math_verify
    if _math_verify is None:
        try:
            import math_verify

            logging.getLogger("math_verify").setLevel(logging.CRITICAL)
            _math_verify = math_verify
        except ImportError:
            _math_verify = False
    if _math_verify is False:
        return False
    try:
        gold = _math_verify.parse("\\boxed{" + ref + "}", parsing_timeout=None)
        guess = _math_verify.parse("\\boxed{" + pred + "}", parsing_timeout=None)
        if not gold or not guess:
            return False
        return bool(_math_verify.verify(gold, guess, timeout_seconds=None))
    except Exception:  # noqa: BLE001 - any failure inside math-verify is "not confirmed"
        return False


# Relations and connectives that math-verify reads one side of ("1 \\lor 2" is 2, "13 \\equiv r"
# is r, "r \\approx 13" is r): a prediction that adds one the reference lacks would score for a
# candidate it only names beside another, or denies ("3 \\neq r").
_RELATIONS = frozenset(
    """lor vee land wedge implies impliedby Rightarrow rightarrow Leftarrow leftarrow to gets iff
    Leftrightarrow leftrightarrow longrightarrow Longrightarrow mapsto sim approx equiv neq ne
    le leq ge geq lt gt cong simeq propto not""".split()  # noqa: SIM905 - a word list
)


def _top_level_relations(text: str) -> set[str]:
    """The relation commands (and ``\\\\``, a line break) of ``text`` outside any braces: one
    linear scan (``\\lim_{n \\to \\infty}`` keeps its arrow inside its subscript)."""
    found: set[str] = set()
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        elif ch == "\\":
            j = i + 1
            while j < n and text[j].isalpha():
                j += 1
            name = text[i + 1 : j] if j > i + 1 else text[i + 1 : i + 2]
            if depth == 0 and (name in _RELATIONS or name == "\\"):
                found.add(name)
            i = max(j, i + 2)
            continue
        i += 1
    return found


def judge(pred: str, ref: str, use_math_verify: bool) -> tuple[bool, str]:
    """Full comparison with the sympy backend; math-verify (if asked) on what that leaves open."""
    from .compare import compare_readings
    from .normalize import canonical_form
    from .parse import parse_answer
    from .symbolic import SympyBackend

    verdict = compare_readings(
        parse_answer(canonical_form(pred)), parse_answer(canonical_form(ref)), SympyBackend()
    )
    if verdict is True:
        return True, "equivalent (symbolic)"
    if verdict is False:
        return False, "not equivalent (symbolic)"
    # only what our checks cannot decide goes to math-verify (e.g. \sum, \int, ratios)
    if _top_level_relations(pred) - _top_level_relations(ref):
        return False, "not equivalent (a relation the reference lacks)"
    if use_math_verify and _math_verify_equal(pred, ref):
        return True, "equivalent (math-verify)"
    return False, "not equivalent (undecided: no checker could confirm)"


def _send(out: IO[str], obj: dict) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


def main() -> None:
    """Serve requests from stdin until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which kills us
    memory = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    _die_with_parent(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    _limit_memory(memory)
    out = sys.stdout
    try:
        import sympy  # noqa: F401 - import before "ready" so requests do not pay for it

        from . import symbolic  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        _send(out, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    _send(out, {"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            req_id = req.get("id")
        except (ValueError, AttributeError):
            continue
        try:
            correct, reason = judge(str(req["pred"]), str(req["ref"]), bool(req.get("mv")))
        except MemoryError:
            correct, reason = False, "not equivalent (symbolic check ran out of memory)"
        except Exception as exc:  # noqa: BLE001 - a grader never crashes on model output
            correct, reason = False, f"not equivalent (symbolic check failed: {type(exc).__name__})"
        _send(out, {"id": req_id, "correct": correct, "reason": reason})


if __name__ == "__main__":  # pragma: no cover - started through BOOTSTRAP
    main()
