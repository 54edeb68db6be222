"""Issue 9, item 11: the program cannot redefine the helpers the task itself gives.

HumanEval/32's tests check ``poly(coeffs, candidate(coeffs)) ≈ 0`` with the prompt's ``poly``;
/38 and /50 check ``candidate(encode_*(s)) == s`` with the prompt's encoder. A program that
redefined those names (``poly`` returning 0, an identity encoder) passed with a wrong answer.
The tests now bind the task's definitions after the program's names, so every way of replacing
them — a module-level ``def``, ``globals()``, a call at run time, ``builtins`` — changes nothing.
"""

from __future__ import annotations

import pytest

import llm_marl
from llm_marl.envs.coding.code_utils import task_preamble
from llm_marl.tools.sandbox import TestSuite

WRONG_ZERO = "def find_zero(xs):\n    r = aux(xs)\n    return 0.0 * r\n"
HELPER = "def aux(xs):\n    return 1.0\n"
POLY_ZERO = "def poly(xs, x):\n    return 0.0\n"

REDEFINITIONS = {
    "main_def": (HELPER, POLY_ZERO + "\n" + WRONG_ZERO),
    "helper_def": (HELPER + "\n" + POLY_ZERO, WRONG_ZERO),
    "main_globals": (HELPER, "_p = globals().update(poly=lambda xs, x: 0.0)\n" + WRONG_ZERO),
    "helper_at_run_time": (
        "def aux(xs):\n    globals()['poly'] = lambda xs, x: 0.0\n    return 1.0\n",
        WRONG_ZERO,
    ),
    "main_class": (
        HELPER,
        "class poly:\n    def __new__(cls, xs, x):\n        return 0.0\n\n" + WRONG_ZERO,
    ),
    "builtins": (
        HELPER,
        "import builtins\n_b = setattr(builtins, 'poly', lambda xs, x: 0.0)\n"
        "_d = globals().pop('poly')\n" + WRONG_ZERO,
    ),
}


@pytest.fixture(scope="module")
def humaneval():
    return {t["task_id"]: t for t in llm_marl.make("humaneval-v0").unwrapped.tasks}


def _step(env, task, actions):
    env.reset(seed=0, options={"task": task})
    _, rewards, _, truncs, infos = env.step(actions)
    agent = next(iter(actions))
    assert not truncs[agent], infos[agent].get("error")
    return rewards, infos[agent]


@pytest.mark.parametrize("isolate_main", [True, False], ids=["isolated", "one-process"])
@pytest.mark.parametrize("how", sorted(REDEFINITIONS))
def test_redefining_poly_does_not_pass_humaneval_32(sandbox, humaneval, how, isolate_main):
    env = llm_marl.make("humaneval-v0", sandbox=sandbox, isolate_main=isolate_main)
    helper, main = REDEFINITIONS[how]
    rewards, info = _step(env, humaneval["HumanEval/32"], {"helper": helper, "main": main})
    assert info["tests_total"] == 1 and info["tests_passed"] == 0, info["sandbox_status"]
    assert rewards["main"] == pytest.approx(1.5)


@pytest.mark.parametrize(
    "task_id, code",
    [
        (
            "HumanEval/38",
            "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
        ),
        (
            "HumanEval/50",
            "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
        ),
        (
            "HumanEval/32",
            "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 123.0\n",
        ),
    ],
)
def test_a_single_coder_cannot_redefine_the_task_helpers_either(sandbox, humaneval, task_id, code):
    env = llm_marl.make("humaneval_single-v0", sandbox=sandbox)
    rewards, info = _step(env, humaneval[task_id], {"coder": code})
    assert info["tests_passed"] == 0, info["sandbox_status"]
    assert rewards["coder"] == pytest.approx(1.1)


def test_the_right_answer_still_passes_with_a_program_that_shadows_poly(sandbox, humaneval):
    """A correct find_zero passes even if its own helper is named poly and differs."""
    task = humaneval["HumanEval/32"]
    code = (
        "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n\n"
        "def find_zero(xs):\n    lo, hi = -1000.0, 1000.0\n    for _ in range(200):\n"
        "        mid = (lo + hi) / 2\n        if poly(xs, lo) * poly(xs, mid) <= 0:\n"
        "            hi = mid\n        else:\n            lo = mid\n    return lo\n"
    )
    env = llm_marl.make("humaneval_single-v0", sandbox=sandbox)
    _, info = _step(env, task, {"coder": code})
    assert info["tests_passed"] == 1


def test_suite_task_code_is_what_the_tests_use(sandbox):
    task_code = "def scale(x):\n    return 10 * x\n"
    suite = TestSuite.from_check(
        "def check(candidate):\n    assert candidate(2) == scale(2)\n", "f", task_code=task_code
    )
    cheat = "def scale(x):\n    return 0\n\ndef f(x):\n    return 0\n"
    assert sandbox.run_tests(cheat, suite).passed == 0
    assert sandbox.run_tests("def f(x):\n    return 20 if x == 2 else 0\n", suite).passed == 1
    with pytest.raises(ValueError, match="leave the entry point's stub out"):
        TestSuite.from_check("def check(c):\n    assert c(1)\n", "f", task_code="def f(x): pass")


# Issue 28, item 15: the raw sandbox API (no task code) protects the task's names too: a check
# that reads a name only the task defines is refused instead of taking the program's.
RAW_REDEFINITIONS = {
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
    "HumanEval/32": "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 123.0\n",
}


@pytest.mark.parametrize("task_id", sorted(RAW_REDEFINITIONS))
def test_the_raw_api_never_takes_a_task_name_from_the_program(sandbox, humaneval, task_id):
    task = humaneval[task_id]
    with pytest.raises(ValueError, match="task_code"):
        sandbox.run_tests(RAW_REDEFINITIONS[task_id], task["test"], entry_point=task["entry_point"])
    # With the task's code the same program fails, and the reference solution passes.
    preamble = task_preamble(task["prompt"], task["entry_point"])  # the prompt without the stub
    suite = TestSuite.from_check(task["test"], task["entry_point"], task_code=preamble)
    assert sandbox.run_tests(RAW_REDEFINITIONS[task_id], suite).passed == 0
    reference = task["prompt"] + task["canonical_solution"]
    assert sandbox.run_tests(reference, suite).all_passed


def test_standard_modules_a_check_reads_are_the_test_runners_own(sandbox):
    check = "def check(candidate):\n    assert math.isclose(candidate(2.0), 4.0)\n"
    fake = "class math:\n    isclose = staticmethod(lambda a, b: True)\n\ndef f(x):\n    return 0\n"
    assert sandbox.run_tests(fake, check, entry_point="f").passed == 0
    assert sandbox.run_tests("def f(x):\n    return 2 * x\n", check, entry_point="f").all_passed
