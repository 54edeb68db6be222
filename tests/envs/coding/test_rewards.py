"""The MAGRPO code reward: levels, gating, weights."""

from __future__ import annotations

import pytest

from llm_marl.envs.coding.rewards import CodeFacts, CodeRewardConfig, code_reward
from llm_marl.errors import ConfigError

CFG = CodeRewardConfig()
PERFECT = CodeFacts(
    main_defined=True,
    syntax_ok=True,
    tests_passed=4,
    tests_total=4,
    aux_defined=True,
    aux_present=True,
    aux_called=True,
)


def test_paper_weights_and_maximum():
    assert CFG.max_reward(single_agent=False) == pytest.approx(4.0)
    assert CFG.max_reward(single_agent=True) == pytest.approx(2.1)
    reward, parts = code_reward(PERFECT, CFG)
    assert reward == pytest.approx(4.0)
    assert parts == {
        "aux_defined": 0.4,
        "main_defined": 0.6,
        "syntax": 0.5,
        "tests": 1.0,
        "aux_used": 0.5,
        "not_wrapper": 1.0,
        "aux_result_ignored": 0.0,
    }


def test_nothing_gives_zero():
    reward, parts = code_reward(CodeFacts(False, False, 0, 5), CFG)
    assert reward == 0.0 and set(parts.values()) == {0.0}


def test_no_entry_point_stops_after_aux():
    facts = CodeFacts(False, True, 3, 4, aux_defined=True, aux_present=True, aux_called=True)
    assert code_reward(facts, CFG)[0] == pytest.approx(0.4)


def test_syntax_error_stops_after_structure():
    facts = CodeFacts(True, False, 3, 4, aux_defined=True, aux_present=True, aux_called=True)
    assert code_reward(facts, CFG)[0] == pytest.approx(1.0)


def test_cooperation_needs_a_passing_test_and_aux():
    no_pass = CodeFacts(True, True, 0, 4, aux_defined=True, aux_present=True, aux_called=True)
    assert code_reward(no_pass, CFG)[0] == pytest.approx(1.5)
    no_aux = CodeFacts(True, True, 4, 4, aux_called=True)
    assert code_reward(no_aux, CFG)[0] == pytest.approx(2.1)


def test_wrapper_and_ignored_result():
    wrapper = CodeFacts(**{**PERFECT.__dict__, "thin_wrapper": True})
    assert code_reward(wrapper, CFG)[0] == pytest.approx(3.0)
    ignored = CodeFacts(**{**PERFECT.__dict__, "aux_result_ignored": True})
    reward, parts = code_reward(ignored, CFG)
    assert reward == pytest.approx(3.5) and parts["aux_result_ignored"] == -0.5


def test_partial_tests_scale_the_test_term():
    facts = CodeFacts(True, True, 1, 4)
    reward, parts = code_reward(facts, CFG, single_agent=True)
    assert set(parts) == {"main_defined", "syntax", "tests"}
    assert parts["tests"] == pytest.approx(0.25) and reward == pytest.approx(1.35)


def test_components_sum_to_the_reward_and_normalize_scales_to_one():
    cfg = CodeRewardConfig(normalize=True)
    reward, parts = code_reward(PERFECT, cfg)
    assert reward == pytest.approx(1.0) and sum(parts.values()) == pytest.approx(reward)
    reward, _ = code_reward(CodeFacts(True, True, 2, 2), cfg, single_agent=True)
    assert reward == pytest.approx(1.0)


def test_coerce_accepts_dicts_and_rejects_typos():
    assert CodeRewardConfig.coerce({"tests": 2.0}).tests == 2.0
    assert CodeRewardConfig.coerce(None) == CFG
    with pytest.raises(ConfigError, match="unknown reward settings"):
        CodeRewardConfig.coerce({"test": 2.0})
    with pytest.raises(TypeError, match="must be a number"):
        CodeRewardConfig(tests="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CodeRewardConfig.coerce(3)  # type: ignore[arg-type]
