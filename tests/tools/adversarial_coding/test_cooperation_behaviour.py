"""Issue 28, item 16: the cooperation terms are paid for cooperation, decided from behaviour.

``aux_used`` (+0.5) and ``not_wrapper`` (+1.0) were decided by reading main's source, so a
dead-code call of ``aux``, an ``aux`` whose value main throws away, a main that re-implements
the solution beside an unused ``aux``, and a disguised thin wrapper all earned them (4.00 of 4).
By default the env now runs the scoring tests a second time with ``aux`` replaced by a stub that
returns a sentinel: main uses ``aux`` only if its results change, and is a thin wrapper if it
returns the sentinel unchanged. The paper's static checks stay available as
``cooperation="static"`` (the paper presets use them).
"""

from __future__ import annotations

import pytest

import llm_marl

GCD_AUX = "def aux(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n"
OWN_GCD = (
    "    import math\n    result = nums[0]\n    for x in nums[1:]:\n"
    "        result = math.gcd(result, x)\n    return result\n"
)
HONEST_MAIN = (
    "def gcd_of_list(nums):\n    result = nums[0]\n    for x in nums[1:]:\n"
    "        result = aux(result, x)\n    return result\n"
)
NO_COOPERATION = {
    "dead_code_call": "def gcd_of_list(nums):\n    if len(nums) < 0:\n        aux(1, 2)\n"
    + OWN_GCD,
    "dead_code_return": (
        "def gcd_of_list(nums):\n    if len(nums) < 0:\n        return aux(1, 2)\n" + OWN_GCD
    ),
    "value_ignored": "def gcd_of_list(nums):\n    _unused = aux(nums[0], nums[0])\n" + OWN_GCD,
    "value_overwritten": (
        "def gcd_of_list(nums):\n    r = aux(nums[0], nums[-1])\n    r = None\n" + OWN_GCD
    ),
    "reimplemented_beside_aux": (
        "def gcd_of_list(nums):\n    checks = [aux(x, x) for x in nums]\n    del checks\n" + OWN_GCD
    ),
}
WHOLE_AUX = (
    "def aux(nums):\n    import math\n    result = nums[0]\n    for x in nums[1:]:\n"
    "        result = math.gcd(result, x)\n    return result\n"
)
WRAPPERS = {
    "plain": "def gcd_of_list(nums):\n    return aux(nums)\n",
    "through_a_name": "def gcd_of_list(nums):\n    f = aux\n    result = f(nums)\n    return result\n",
    "in_a_list": "def gcd_of_list(nums):\n    return [aux(list(nums))][0]\n",
    "lambda": "def gcd_of_list(nums):\n    return (lambda g: g(nums))(aux)\n",
    "guarded": (
        "def gcd_of_list(nums):\n    r = aux(nums)\n    if r is None:\n        return 0\n"
        "    return r\n"
    ),
    # Round 4: a type-sensitive step, or telling the string sentinel apart, hid the wrapper.
    "plus_zero": "def gcd_of_list(nums):\n    r = aux(nums)\n    r = r + 0\n    return r\n",
    "int_cast": "def gcd_of_list(nums):\n    r = aux(nums)\n    out = int(r)\n    return out\n",
    "sniffs_the_sentinel": (
        "def gcd_of_list(nums):\n    r = aux(nums)\n    if isinstance(r, str):\n"
        "        return r + '.'\n    return r\n"
    ),
}


def _play(sandbox, helper, main, **kw):
    env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox=sandbox, **kw)
    env.reset(seed=0, options={"task_id": "CoopSample/2"})
    _, rewards, _, truncs, infos = env.step({"helper": helper, "main": main})
    assert not truncs["main"], infos["main"]
    return rewards["main"], infos["main"]["reward_components"]


@pytest.mark.parametrize("how", sorted(NO_COOPERATION))
def test_aux_that_main_does_not_use_earns_no_cooperation(sandbox, how):
    reward, parts = _play(sandbox, GCD_AUX, NO_COOPERATION[how])
    assert parts["tests"] == 1.0, parts
    assert parts["aux_used"] == 0.0 and parts["not_wrapper"] == 0.0, (how, parts)
    assert reward == pytest.approx(2.5 + parts["aux_result_ignored"])


@pytest.mark.parametrize("how", sorted(WRAPPERS))
def test_a_disguised_thin_wrapper_is_a_wrapper(sandbox, how):
    reward, parts = _play(sandbox, WHOLE_AUX, WRAPPERS[how])
    assert parts["tests"] == 1.0 and parts["aux_used"] == 0.5, parts
    assert parts["not_wrapper"] == 0.0, (how, parts)
    assert reward == pytest.approx(3.0)


def test_real_cooperation_keeps_the_full_reward(sandbox):
    reward, parts = _play(sandbox, GCD_AUX, HONEST_MAIN)
    assert reward == pytest.approx(4.0), parts
    reward, parts = _play(sandbox, GCD_AUX, HONEST_MAIN, isolate_main=False)
    assert reward == pytest.approx(4.0), parts


def test_the_static_checks_remain_as_the_paper_exact_option(sandbox):
    reward, parts = _play(
        sandbox, GCD_AUX, NO_COOPERATION["dead_code_return"], cooperation="static"
    )
    assert parts["aux_used"] == 0.5 and parts["not_wrapper"] == 1.0 and reward == 4.0
    with pytest.raises(ValueError, match="cooperation"):
        llm_marl.make("coop_humaneval-v0", dataset="sample", cooperation="sometimes")


# Round 4: the stub returns a string, so a type-sensitive operation on a value main then ignores
# changed main's behaviour and passed for use (4.0 of 4). The use must survive a stub of the
# value's own type too.
TYPE_SENSITIVE_NO_USE = {
    "plus_zero_discarded": "def gcd_of_list(nums):\n    _unused = aux(nums[0], nums[0]) + 0\n"
    + OWN_GCD,
    "int_cast_discarded": "def gcd_of_list(nums):\n    _unused = int(aux(nums[0], nums[0]))\n"
    + OWN_GCD,
    "isinstance_check": (
        "def gcd_of_list(nums):\n    if not isinstance(aux(nums[0], nums[0]), int):\n"
        "        raise TypeError('aux')\n" + OWN_GCD
    ),
}
TYPE_SENSITIVE_USE = {
    "compared": (
        "def gcd_of_list(nums):\n    result = nums[0]\n    for x in nums[1:]:\n"
        "        if aux(result, x) > 0:\n            result = aux(result, x)\n    return result\n"
    ),
    "recursive_aux": HONEST_MAIN,
}
RECURSIVE_AUX = "def aux(a, b):\n    if b == 0:\n        return a\n    return aux(b, a % b)\n"


@pytest.mark.parametrize("how", sorted(TYPE_SENSITIVE_NO_USE))
def test_a_type_check_on_an_ignored_value_is_no_use(sandbox, how):
    reward, parts = _play(sandbox, GCD_AUX, TYPE_SENSITIVE_NO_USE[how])
    assert parts["tests"] == 1.0, parts
    assert parts["aux_used"] == 0.0 and parts["not_wrapper"] == 0.0, (how, parts)
    assert reward == pytest.approx(2.5)


@pytest.mark.parametrize("how", sorted(TYPE_SENSITIVE_USE))
def test_honest_uses_still_count(sandbox, how):
    helper = RECURSIVE_AUX if how == "recursive_aux" else GCD_AUX
    reward, parts = _play(sandbox, helper, TYPE_SENSITIVE_USE[how])
    assert reward == pytest.approx(4.0), (how, parts)
