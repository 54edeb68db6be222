"""Issue 28, item 15: while its units are scored, a program sees nothing of the task but its
arguments.

The tests never enter the program's process (it only answers calls), but that process is forked
from the worker's supervisor, and the program can walk the supervisor's frames it was forked in
(``sys._getframe``, a traceback's ``tb_frame.f_back``) or search ``gc.get_objects()``. There it
found the reply of the *previous* job on the same worker -- the test runner's record of each
unit (passed or not, with the assertion's message) and that program's output -- and the current
job's own description (limits, other authors' code, the byte size of the tests). In a group of
samples of one task (GRPO), sample 2 could read which of sample 1's guesses passed and answer
every unit right: ``ok`` without solving anything. Now the supervisor never handles a job or a
reply (each job runs in a job process of its own, which exits after it; see
``test_freed_memory.py`` for raw reads of memory), a forked child empties the job description
before the program runs, and the tests' size travels in a frame that only the test runner reads.

Checked on both backends, through the raw API and through ``humaneval_single-v0``; with the
same attacks, the inspector below lists what a program *can* see: its arguments, its own code,
the harness's own code and constants, the number of units (through the job's time budget), and
no name of the task (environment, argv, paths, host name).
"""

from __future__ import annotations

import ast

import pytest

import llm_marl
from llm_marl.tools.sandbox import TestSuite

# Finds the previous job's reply (a dict with the test runner's records under "aux" and the
# program's "stdout") through the frames it was forked in, or through gc; then answers each call
# the way the previous sample should have: keep a guess that passed, flip one that failed.
# Sample 1 guesses True everywhere and prints the order of its calls.
GROUP_ATTACK = r"""
def {entry}(*args):
    import gc, json, sys

    def in_frames():
        frame = sys._getframe()
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, dict) and isinstance(value.get("aux"), str):
                    return value
            frame = frame.f_back
        return None

    def in_gc():
        for obj in gc.get_objects():
            if type(obj) is dict and isinstance(obj.get("aux"), str) and "stdout" in obj:
                return obj
        return None

    memo = {entry}.__dict__
    if "order" not in memo:  # the first call: read the previous sample's run once
        previous = {how}() or {{}}
        memo["order"], memo["passed"] = [], []
        for line in str(previous.get("stdout", "")).splitlines():
            if line.startswith("CALL ") and line[5:] not in memo["order"]:
                memo["order"].append(line[5:])
        for line in str(previous.get("aux", "")).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("k") == "T":
                memo["passed"].append(bool(record.get("ok")))
    key = repr(args)
    print("CALL " + key, flush=True)
    order, passed = memo["order"], memo["passed"]
    if key in order and order.index(key) < len(passed):
        return passed[order.index(key)]
    return True
"""

PARITY_CHECK = (
    "def check(candidate):\n"
    "    assert candidate(3) == False\n"
    "    assert candidate(4) == True\n"
    "    assert candidate(7) == False\n"
    "    assert candidate(10) == True\n"
)

HOW = ["in_frames", "in_gc"]


@pytest.mark.parametrize("how", HOW)
def test_a_sample_cannot_learn_the_answers_from_the_sample_before_it(single_sandbox, how):
    suite = TestSuite.from_check(PARITY_CHECK, "is_even")
    attack = GROUP_ATTACK.format(how=how, entry="is_even")
    first = single_sandbox.run_tests(attack, suite)
    assert first.passed == 2  # True everywhere: half right
    second = single_sandbox.run_tests(attack, suite)
    assert second.passed == 2, "the second sample read the first one's verdicts"


# A unit whose message names the expected value, and a program that looks for it in the
# previous job's records.
MESSAGE_CHECK = (
    "def check(candidate):\n"
    "    r = candidate(12)\n"
    "    assert r == 918273, f'expected 918273, got {r!r}'\n"
)
MESSAGE_ATTACK = r"""
import gc, re, sys

def secret(x):
    texts = []
    for obj in gc.get_objects():
        if type(obj) is dict:
            texts.extend(v for v in obj.values() if isinstance(v, str) and "expected" in v)
    frame = sys._getframe()
    while frame is not None:
        texts.extend(repr(v) for v in frame.f_locals.values() if "expected" in repr(v)[:100000])
        frame = frame.f_back
    for text in texts:
        found = re.search(r"expected (\d+)", text)
        if found:
            return int(found.group(1))
    return 0
"""


def test_a_failing_units_message_does_not_reach_the_next_job(single_sandbox):
    suite = TestSuite.from_check(MESSAGE_CHECK, "secret")
    assert single_sandbox.run_tests("def secret(x):\n    return 1\n", suite).passed == 0
    assert single_sandbox.run_tests(MESSAGE_ATTACK, suite).passed == 0


# HumanEval/77 (iscube): eight units with boolean answers, through the env. Two samples of the
# same task in a row on one worker, as a GRPO group plays them.
@pytest.mark.parametrize("how", HOW)
def test_through_the_env_a_group_cannot_share_answers(single_sandbox, how):
    env = llm_marl.make("humaneval_single-v0", sandbox=single_sandbox)
    task = next(t for t in env.unwrapped.tasks if t["task_id"] == "HumanEval/77")
    code = GROUP_ATTACK.format(how=how, entry="iscube")
    results = []
    for _ in range(2):
        env.reset(seed=0, options={"task": task})
        _, _, _, truncs, infos = env.step({"coder": code})
        assert not truncs["coder"], infos["coder"].get("error")
        results.append((infos["coder"]["tests_passed"], infos["coder"]["tests_total"]))
    (first, total), (second, _) = results
    assert 0 < first < total  # the True-everywhere guess is partly right
    assert second == first, "the second sample read the first one's verdicts"
    env.close()


# Everything a program can find while a unit runs: frames above it (names, values, code
# constants), gc, the environment, argv, paths, the host name, pid 1's command line.
INSPECT = r"""
import gc, os, sys

# The markers are built at run time, so that the program's own text does not hold them.
WATCH = tuple(m[::-1] for m in ("999_lavEnamuH", "999/lavEnamuH", "REKRAM_KSAT",
                                 "REKRAM_SUOIVERP", ")14("))
KEYS = ("tests_len", "n_tests", "limits", "memory_mb", "aux", "stdout")

def look(x):
    texts, names, keys = [], set(), set()
    mine = globals()
    for obj in gc.get_objects():  # before the frames: their f_locals are dicts too
        if type(obj) is dict and obj is not mine:
            keys.update(k for k in obj if isinstance(k, str))
            texts.extend(v for v in obj.values() if isinstance(v, str))
    frame = sys._getframe(1)
    while frame is not None:
        texts.extend(repr(c) for c in frame.f_code.co_consts)
        for name, value in frame.f_locals.items():
            names.add(name)
            if value is not mine:
                texts.append(repr(value)[:1_000_000])
        frame = frame.f_back
    blob = "\n".join(texts)
    with open("/proc/1/cmdline", "rb") as f:
        blob += f.read().decode("utf-8", "replace")
    seen = {
        "found": sorted(m for m in WATCH if m in blob),
        "keys": sorted(k for k in KEYS if k in keys),
        "tests_len_name": "tests_len" in names,
        "env": sorted(os.environ),
        "env_text": " ".join(os.environ.values()),
        "argv": list(sys.argv),
        "paths": [os.getcwd(), __file__] + os.listdir("."),
        "host": os.uname().nodename,
    }
    print(repr(seen))
    return x + 1
"""


def test_what_a_program_sees_while_a_unit_runs(single_sandbox):
    check = "def check(candidate):\n    assert candidate(41) == 42\n    assert candidate(1) == 2\n"
    suite = TestSuite.from_check(
        check, "look", task_code="TASK_MARKER_HumanEval_999 = 'HumanEval/999'\n"
    )
    # A job before it, whose program printed and failed.
    single_sandbox.run_tests("def look(x):\n    print('PREVIOUS_MARKER')\n    return 0\n", suite)
    report = single_sandbox.run_tests(INSPECT, suite)
    assert report.all_passed, report
    seen = ast.literal_eval(report.stdout.splitlines()[0])
    # Nothing of the task, its tests or the job before; no description of the job (limits, the
    # size of the tests) and no test records or output.
    assert seen["found"] == [] and seen["keys"] == [] and not seen["tests_len_name"], seen
    # No task name in the process's surroundings either.
    assert seen["argv"] == ["main.py"]
    assert seen["paths"] == ["/tmp/work", "/tmp/work/solution.py", "solution.py"]
    assert set(seen["env"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "HOSTNAME"}, seen["env"]
    assert "HumanEval" not in seen["env_text"] + seen["host"]
