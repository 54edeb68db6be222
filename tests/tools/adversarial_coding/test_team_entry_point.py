"""Issue 9, item 9: the helper's code must not be able to replace the main agent's entry point.

Each attack pairs a *garbage* main function (it calls ``aux``, so the cooperation terms would
count, but returns -1) with a helper whose code tries to make the tests call something else: a
thread that rebinds or rewrites the entry point after main's ``def``, finalizers, import and
profile hooks, a metaclass, patched builtins, globals that shadow builtins, writes through
``sys.modules[__name__]``, a gc walk, a signal handler, and a forked process that answers the
test runner itself. With the default ``isolate_main=True`` every attack scores exactly what a
garbage team earns (1.5: the structure and syntax terms, no test, no cooperation term).

The deterministic attacks are also run with ``isolate_main=False`` (the joined program in one
interpreter, as the paper's reference code runs it) to show that each one really fools a
single-process run: that is what the isolation is for.
"""

from __future__ import annotations

import pytest

import llm_marl

GARBAGE_MAIN = """
def gcd_of_list(nums):
    r = aux(nums[0], nums[0])
    return r - r - 1
"""
# For the attacks on builtins: a main that leans on a builtin that cannot do the job (abs of a
# list raises TypeError) unless the helper changes what the name means.
BUILTIN_MAIN = """
def gcd_of_list(nums):
    r = aux(nums[0], nums[0])
    return abs(nums) if r else 0
"""
GCD = "lambda nums: __import__('math').gcd(*nums)"
AUX = """
def aux(a, b):
    while b:
        a, b = b, a % b
    return a
"""
# What each attack does once its trigger fires: rebind the entry point, or rewrite its code.
REBIND = f"""
def _hijack():
    g = globals()
    if "gcd_of_list" in g:
        g["gcd_of_list"] = {GCD}
        return True
    return False
"""
REWRITE = f"""
def _hijack():
    f = globals().get("gcd_of_list")
    if f is not None and f.__code__.co_name == "gcd_of_list":
        f.__code__ = ({GCD}).__code__
        return True
    return False
"""

# Polls from a background thread until main's ``def`` has run, then hijacks.
SPIN = """
import threading, time
def _spin():
    for _ in range(20000):
        if _hijack():
            return
        time.sleep(0.0002)
"""

ATTACKS = {
    "thread_rebinds": REBIND + SPIN + "_t = threading.Thread(target=_spin, daemon=True).start()\n",
    "thread_rewrites_code": REWRITE
    + SPIN
    + "_t = threading.Thread(target=_spin, daemon=True).start()\n",
    "aux_rewrites_code_when_called": REWRITE.replace("def _hijack", "def _hook")
    + """
def aux(a, b):
    _hook()
    while b:
        a, b = b, a % b
    return a
""",
    "finalizer": REWRITE
    + """
import gc
class _Bomb:
    def __del__(self):
        if not _hijack():
            b = _Bomb()
            b.me = b
_b = _Bomb()
_c = setattr(_b, "me", _b)
_b = None
def aux(a, b):
    gc.collect()
    while b:
        a, b = b, a % b
    return a
""",
    "atexit": REBIND
    + """
import atexit
_r = atexit.register(_hijack)
""",
    "import_hook": REWRITE
    + """
import sys
class _Finder:
    def find_spec(self, name, path=None, target=None):
        _hijack()
        return None
_f = sys.meta_path.insert(0, _Finder())
def aux(a, b):
    import calendar
    while b:
        a, b = b, a % b
    return a
""",
    "profile_hook": REWRITE
    + """
import sys
def _prof(frame, event, arg):
    if event == "call":
        _hijack()
_p = sys.setprofile(_prof)
""",
    "metaclass": REBIND
    + SPIN
    + """
class _Meta(type):
    def __new__(mcs, name, bases, ns):
        threading.Thread(target=_spin, daemon=True).start()
        return super().__new__(mcs, name, bases, ns)
class _Trigger(metaclass=_Meta):
    pass
""",
    "patched_builtin": f"""
import builtins
_orig_abs = builtins.abs
_p = setattr(builtins, "abs", lambda x: ({GCD})(x) if isinstance(x, list) else _orig_abs(x))
""",
    "global_shadows_builtin": f"""
def abs(x):
    return ({GCD})(x) if isinstance(x, list) else (x if x >= 0 else -x)
""",
    "sys_modules_entry": f"""
import sys
def aux(a, b):
    setattr(sys.modules[__name__], "gcd_of_list", {GCD})
    while b:
        a, b = b, a % b
    return a
""",
    "gc_walk": f"""
import gc, types
def aux(a, b):
    for o in gc.get_objects():
        if type(o) is types.FunctionType and o.__name__ == "gcd_of_list":
            o.__code__ = ({GCD}).__code__
    while b:
        a, b = b, a % b
    return a
""",
    "signal_handler": REWRITE
    + """
import signal
_h = signal.signal(signal.SIGALRM, lambda *a: _hijack())
_t = signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
""",
    "rigged_value": """
class _Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def aux(a, b):
    return _Yes(1)
""",
    "forked_answerer": """
import os, json, signal
def _answer():
    def read(fd, n):
        data = b""
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data
    while True:
        head = read(4, 11)
        request = json.loads(read(4, int(head[:-1])))
        args = request["args"]
        nums = args[0] if isinstance(args, list) else args["t"][0]
        body = json.dumps({"ok": __import__("math").gcd(*nums)}).encode()
        os.write(5, b"%010d\\n" % len(body) + body)
def _start():
    if os.fork() == 0:
        try:
            os.kill(os.getppid(), signal.SIGSTOP)
            _answer()
        finally:
            os._exit(0)
    return 0
_pid = _start()
""",
}

# Attacks that fool a single-process run every time (the others are racy or inert there).
FOOL_ONE_PROCESS = {
    "aux_rewrites_code_when_called",
    "finalizer",
    "import_hook",
    "profile_hook",
    "patched_builtin",
    "global_shadows_builtin",
    "sys_modules_entry",
    "gc_walk",
}


def _helper(attack: str) -> str:
    code = ATTACKS[attack]
    return code if "def aux(" in code else AUX + code


def _main(attack: str) -> str:
    return BUILTIN_MAIN if attack in ("patched_builtin", "global_shadows_builtin") else GARBAGE_MAIN


def _play(sandbox, helper: str, main: str, **kwargs):
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox=sandbox, **kwargs)
    env.reset(seed=0, options={"task_id": "CoopSample/2"})  # gcd_of_list, 5 asserts
    _, rewards, _, truncs, infos = env.step({"helper": helper, "main": main})
    assert not any(truncs.values()), infos["main"].get("error")
    return rewards["main"], infos["main"]


# forked_answerer waits out the sandbox's timeouts (10-30 s): slow, out of the fast loop (#22).
@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(a, marks=pytest.mark.slow) if a == "forked_answerer" else a
        for a in sorted(ATTACKS)
    ],
)
def test_the_helper_cannot_replace_the_main_agents_entry_point(sandbox, attack):
    reward, info = _play(sandbox, _helper(attack), _main(attack))
    assert info["tests_passed"] == 0, (attack, info["sandbox_status"])
    assert reward == pytest.approx(1.5), info["reward_components"]


@pytest.mark.parametrize("attack", sorted(FOOL_ONE_PROCESS))
def test_each_attack_fools_a_single_process_run(sandbox, attack):
    # The paper's static cooperation checks: the behavioural ones (the default) see that main's
    # results do not depend on aux once the helper's code replaced main.
    reward, info = _play(
        sandbox, _helper(attack), _main(attack), isolate_main=False, cooperation="static"
    )
    assert info["tests_passed"] >= 3, (attack, info["sandbox_status"])
    assert reward > 3.0


def test_an_honest_team_still_gets_the_maximum_with_helper_state_across_the_boundary(sandbox):
    helper = (
        "from functools import reduce\nSTEP = 0\n\n"
        "def aux(a, b):\n    while b:\n        a, b = b, a % b\n    return a + STEP\n\n"
        "def pairs(nums):\n    return ((nums[i], nums[i + 1]) for i in range(len(nums) - 1))\n"
    )
    main = (
        "def gcd_of_list(nums):\n    result = nums[0]\n    for a, b in pairs(nums):\n"
        "        result = aux(result, b)\n    return result\n"
    )
    reward, info = _play(sandbox, helper, main)
    assert reward == 4.0 and info["tests_passed"] == 5


def test_isolation_copies_arguments_in_place_changes_by_the_helper_are_not_seen(sandbox):
    """The documented cost of the isolation: calls into the helper pass plain-data copies."""
    helper = AUX + "\ndef fill(out, nums):\n    out.extend(nums)\n    return len(out)\n"
    main = (
        "def gcd_of_list(nums):\n    seen = []\n    fill(seen, nums)\n    result = nums[0]\n"
        "    for x in seen:\n        result = aux(result, x)\n    return result\n"
    )
    _, isolated = _play(sandbox, helper, main)
    _, joined = _play(sandbox, helper, main, isolate_main=False)
    assert joined["tests_passed"] == 5
    assert isolated["tests_passed"] == 2  # [7] and [12, 18, 24]... only nums[0] is used
