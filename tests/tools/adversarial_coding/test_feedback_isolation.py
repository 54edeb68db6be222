"""Issue 28, item 13: scoring inputs must not leak through feedback.

The feedback units and the scoring units of a task ran in one job, in one program process: a
program that remembers every input it was called with could print the scoring units' inputs into
the error a feedback unit reports, which the agents read on the next turn. Feedback units now
run as a job of their own (and a statement of ``check`` that calls the program for a scoring
unit never runs there), so what the agents read holds only what the feedback units produced.
The held-out split (``feedback_fraction``) is used: there feedback units never score.
"""

from __future__ import annotations

import re

import pytest

import llm_marl

INPUTS = list(range(1001, 1009))
CHECK = "def check(candidate):\n    r = candidate(1009)\n    assert r == 2018\n" + "".join(
    f"    assert candidate({x}) == {2 * x}\n" for x in INPUTS
)
TASK = {
    "task_id": "Leak/0",
    "prompt": 'def double(x):\n    """Return 2 * x."""\n',
    "test": CHECK,
    "entry_point": "double",
}

# Each answers the check's first call (made outside any unit, which would stop the check if it
# raised) and fails every other call with the inputs it has seen.
REMEMBERS = {
    # Every input in a global; every call fails showing them all.
    "global_list": (
        "_seen = []\n"
        "def double(x):\n    _seen.append(x)\n    if x == 2018 // 2:\n        return 0\n    raise ValueError('seen ' + repr(_seen))\n    return 2 * x\n"
    ),
    # Inputs in a file of the scratch space: survives a reload of the program.
    "scratch_file": (
        "def double(x):\n    with open('seen.txt', 'a') as f:\n        f.write(f'{x} ')\n"
        "    if x == 2018 // 2:\n        return 0\n    raise ValueError('seen ' + open('seen.txt').read())\n    return 2 * x\n"
    ),
    # Right on feedback units, wrong elsewhere; remembers in a file under /tmp.
    "tmp_file": (
        "import os\n"
        "def double(x):\n    with open('/tmp/seen.txt', 'a') as f:\n        f.write(f'{x} ')\n"
        "    if x == 2018 // 2:\n        return 0\n    assert False, open('/tmp/seen.txt').read()\n    return 2 * x\n"
    ),
}


def _numbers(text: str) -> set[int]:
    """The task's inputs that ``text`` shows."""
    return {int(n) for n in re.findall(r"\b1\d{3}\b", text)} & {*INPUTS, 1009}


def _allowed(feedback_sources: list[str]) -> set[int]:
    allowed = set()
    for source in feedback_sources:
        allowed |= _numbers(source)
        if "r == 2018" in source:
            allowed.add(1009)
    return allowed


@pytest.mark.parametrize("memory", sorted(REMEMBERS))
def test_feedback_never_shows_a_scoring_input(sandbox, memory):
    env = llm_marl.make(
        "humaneval_single-v0", tasks=[TASK], sandbox=sandbox, num_rounds=2, feedback_fraction=0.25
    )
    env.reset(seed=0, options={"task_id": "Leak/0"})
    feedback, scoring = env.unwrapped.test_split()
    obs, _, _, truncs, infos = env.step({"coder": REMEMBERS[memory]})
    assert not truncs["coder"], infos["coder"]
    shown = _numbers(obs["coder"][-1]["content"])  # the feedback message
    leaked = shown - _allowed(feedback)
    assert not leaked, f"scoring inputs {sorted(leaked)} reached the feedback ({memory})"
    # The feedback does report the feedback units' own failures.
    assert shown & _allowed(feedback), obs["coder"]


def test_expert_feedback_never_shows_a_scoring_input(sandbox):
    requests: list[str] = []

    def expert(conversation):
        requests.append(str(conversation))
        return '{"main": "def double(x):\\n    return 2 * x\\n"}'

    env = llm_marl.make(
        "humaneval_single-v0",
        tasks=[TASK],
        sandbox=sandbox,
        num_rounds=2,
        feedback_fraction=0.25,
        feedback="expert",
        expert=expert,
    )
    env.reset(seed=0, options={"task_id": "Leak/0"})
    feedback, _ = env.unwrapped.test_split()
    env.step({"coder": REMEMBERS["global_list"]})
    assert requests
    leaked = _numbers(requests[-1]) - _allowed(feedback)
    assert not leaked, f"scoring inputs {sorted(leaked)} reached the expert"


def test_subset_suites_leave_out_calls_made_for_other_units():
    from llm_marl.tools.sandbox import TestSuite

    suite = TestSuite.from_check(CHECK, "double")
    sub, kept = suite.subset([1, 2])
    assert kept == (1, 2) and sub.tests == suite.tests[1:3]
    assert "1009" not in sub.check_source
    with_setup, kept = suite.subset([0, 3])
    assert kept == (0, 3) and "candidate(1009)" in with_setup.check_source
    assert "1001" not in with_setup.check_source
