"""The shared checks of user-given numbers (llm_marl/checks.py), and the configs that use them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llm_marl.checks import check_int, check_number, is_int, is_number
from llm_marl.envs.writing.guards import GuardConfig
from llm_marl.errors import ConfigError
from llm_marl.policies.base import SamplingParams
from llm_marl.tools.sandbox import Limits


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, True), (np.int64(3), True), (True, False), (np.bool_(True), False), (3.0, False)],
)
def test_is_int_takes_numpy_ints_and_refuses_bools(value, expected):
    assert is_int(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, True),
        (2, True),
        (np.float32(0.5), True),
        (math.nan, True),
        (False, False),
        ("1", False),
    ],
)
def test_is_number_takes_real_numbers_and_refuses_bools_and_text(value, expected):
    assert is_number(value) is expected


def test_check_int_returns_a_python_int_in_range():
    assert check_int(1, "n") == 1
    value = check_int(np.int64(8), "n", 1, 8)
    assert value == 8 and type(value) is int


@pytest.mark.parametrize(
    ("value", "args", "message"),
    [
        (0, (), "n must be an int >= 1, got 0"),
        (True, (), "n must be an int >= 1, got True"),
        (2.0, (), "n must be an int >= 1, got 2.0"),
        ("3", (), "n must be an int >= 1, got '3'"),
        (-1, (0,), "n must be an int >= 0, got -1"),
        (9, (1, 8), "n must be an int in [1, 8], got 9"),
    ],
)
def test_check_int_names_the_value_and_the_bound(value, args, message):
    with pytest.raises(ConfigError) as caught:
        check_int(value, "n", *args)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)  # callers' `except ValueError` still works


def test_check_int_says_why_when_told():
    with pytest.raises(ConfigError, match=r"^m must be an int >= 64 \(a reason\), got 8$"):
        check_int(8, "m", 64, why="a reason")


@pytest.mark.parametrize(
    ("value", "args", "kwargs", "message"),
    [
        (-0.5, (0,), {}, "t must be >= 0, got -0.5"),
        (0, (0,), {"open_low": True, "unit": " seconds"}, "t must be > 0 seconds, got 0"),
        (1.5, (0, 1), {}, "t must be in [0, 1], got 1.5"),
        (0.0, (0, 1), {"open_low": True}, "t must be in (0, 1], got 0.0"),
        (math.nan, (0,), {}, "t must be >= 0, got nan"),
        ("0.5", (0, 1), {}, "t must be in [0, 1], got '0.5'"),
        (True, (0, 1), {}, "t must be in [0, 1], got True"),
    ],
)
def test_check_number_refuses_out_of_range_nan_and_non_numbers(value, args, kwargs, message):
    with pytest.raises(ConfigError) as caught:
        check_number(value, "t", *args, **kwargs)
    assert str(caught.value) == message


def test_check_number_accepts_the_closed_ends():
    assert check_number(0, "t", 0, 1) == 0.0
    assert check_number(1, "t", 0, 1, open_low=True) == 1.0
    assert check_number(math.inf, "t", 0) == math.inf


# ---------------------------------------------------------------- the configs that use them
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be an int >= 1"),
        ({"max_new_tokens": 8.0}, "max_new_tokens must be an int >= 1"),
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"temperature": math.nan}, "temperature must be >= 0"),
        ({"top_p": 0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.01}, r"top_p must be in \(0, 1\]"),
        ({"top_k": -1}, "top_k must be an int >= 0"),
    ],
)
def test_sampling_params_refuse_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_sampling_params_keep_their_edge_values():
    sampling = SamplingParams(max_new_tokens=1, temperature=0, top_p=1, top_k=0)
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_p) == (1, 0, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, r"Limits.timeout must be > 0 seconds, got 0"),
        ({"suite_timeout": math.nan}, r"Limits.suite_timeout must be > 0 seconds"),
        ({"memory_mb": 63}, r"Limits.memory_mb must be an int >= 64 \(a Python process needs"),
        ({"nproc": 0}, r"Limits.nproc must be an int >= 1, got 0"),
        ({"open_files": 15}, r"Limits.open_files must be an int >= 16, got 15"),
    ],
)
def test_limits_refuse_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Limits(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_chars": 0}, "max_chars must be an int >= 1, got 0"),
        ({"max_transition_run": 2.5}, "max_transition_run must be an int >= 1"),
        ({"max_copied": 1.2}, r"max_copied must be in \[0, 1\], got 1.2"),
        ({"max_transition_density": -0.1}, r"max_transition_density must be in \[0, 1\]"),
    ],
)
def test_guard_config_refuses_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GuardConfig(**kwargs)
