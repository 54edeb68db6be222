"""``make`` checks every keyword argument at the edge (llm_marl/envs/arguments.py).

Before, a value of the wrong type reached the constructor and failed there with an internal
message (``format_weight='abc'``: "'<=' not supported between instances of 'float' and
'str'"; ``prompts='abc'``: an ``AttributeError``), or was accepted and broke an episode later
(``grading_timeout=nan``, ``timeout=inf``, ``isolate_main='no'``, ``personas=nan``).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import llm_marl
from llm_marl.envs.registration import _load_entry_point
from llm_marl.errors import ConfigError, EnvArgumentError


def _defaults(env_id: str) -> dict[str, object]:
    """Each constructor parameter's default, over the env class's ``__init__`` chain."""
    spec = llm_marl.spec(env_id)
    factory = _load_entry_point(spec.entry_point, env_id)
    out: dict[str, object] = {}
    for cls in factory.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None or cls is object:
            continue
        for name, p in inspect.signature(init).parameters.items():
            if p.default is not inspect.Parameter.empty and name not in spec.kwargs:
                out.setdefault(name, p.default)
    return out


def _bad_values(default: object) -> list[object]:
    """Values no parameter with this default takes."""
    if isinstance(default, bool):
        return ["no", 1.5, [True]]
    if isinstance(default, int):
        return ["3", True, 2.5]
    if isinstance(default, float):
        return ["0.5", math.nan, math.inf, -math.inf, False]
    return []


CASES = [
    (env_id, name, value)
    for env_id in sorted(llm_marl.registry)
    for name, default in _defaults(env_id).items()
    for value in _bad_values(default)
]


@pytest.mark.parametrize(("env_id", "name", "value"), CASES, ids=repr)
def test_a_bad_value_for_a_typed_parameter_fails_in_make_naming_it(env_id, name, value):
    with pytest.raises(EnvArgumentError, match=rf"make\('{env_id}'\): {name} must be") as info:
        llm_marl.make(env_id, **{name: value})
    # Both kinds Python raises for a bad argument, and the library's own ConfigError.
    assert isinstance(info.value, TypeError | ValueError | ConfigError)


def test_every_env_has_typed_parameters_under_test():
    """The table above is not empty by accident: every family's numbers and switches."""
    checked = {(e, n) for e, n, _ in CASES}
    for expected in [
        ("math_hint-v0", "format_weight"),
        ("math_single-v0", "require_boxed"),
        ("math_debate-v0", "personas"),
        ("coop_humaneval-v0", "timeout"),
        ("coop_humaneval-v0", "isolate_main"),
        ("coordination-v0", "num_symbols"),
        ("websearch-v0", "max_delegations"),
        ("tldr-v0", "show_title"),
    ]:
        assert expected in checked


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("math_single-v0", {"prompts": "abc"}, "prompts must be Mapping"),
        ("math_single-v0", {"grading_timeout": math.nan}, "grading_timeout must be a finite"),
        ("math_single-v0", {"limit": True}, "limit must be int | None, got True"),
        ("math_single-v0", {"dataset": 3}, "dataset must be"),
        ("coop_humaneval-v0", {"benchmark": ["humaneval"]}, "benchmark must be str | None"),
        ("tldr-v0", {"dataset": 0.5}, "dataset must be"),
        ("coordination-v0", {"tasks": "abc"}, "tasks must be"),
    ],
)
def test_optional_and_container_parameters_are_checked_too(env_id, kwargs, message):
    with pytest.raises(EnvArgumentError, match=message):
        llm_marl.make(env_id, **kwargs)


@pytest.mark.parametrize("embedder", ["abc", 0.5, [1.0], object()])
def test_an_embedder_without_encode_is_refused_in_make(embedder):
    """``embedder`` is typed ``Any`` (any object with ``encode``): the env checks it itself,
    instead of failing at the first scored episode."""
    with pytest.raises(TypeError, match="embedder must have encode"):
        llm_marl.make("tldr-v0", embedder=embedder)


def test_the_constructor_s_own_words_are_kept_after_the_parameter_s():
    with pytest.raises(ValueError, match=r"num_debaters must be .*number of solvers"):
        llm_marl.make("math_debate-v0", num_debaters=True)


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("coordination-v0", {"num_symbols": np.int64(5), "format_weight": np.float32(0.1)}),
        ("math_hint-v0", {"format_weight": 0}),  # an int where a float is annotated
        ("coop_humaneval-v0", {"timeout": 3, "isolate_main": False}),
        ("websearch-v0", {"max_delegations": 2}),
    ],
)
def test_good_values_of_other_numeric_types_are_accepted(env_id, kwargs):
    env = llm_marl.make(env_id, **kwargs)
    for name, value in kwargs.items():
        assert getattr(env.unwrapped, name, value) == value
    env.close()


def test_the_cli_reports_a_nan_env_arg_as_a_number():
    from llm_marl.envs.registration import parse_env_args

    assert math.isnan(parse_env_args(["format_weight=nan"])["format_weight"])
    assert parse_env_args(["sandbox=process"]) == {"sandbox": "process"}
    with pytest.raises(EnvArgumentError, match="format_weight must be a finite number"):
        llm_marl.make("math_hint-v0", **parse_env_args(["format_weight=nan"]))


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("format_weight=nan", "format_weight must be a finite number"),
        ("format_weight=abc", "format_weight must be float, got 'abc' (str)"),
        ("require_boxed=[1]", "require_boxed must be bool"),
        ("limit=True", "limit must be int | None, got True"),
    ],
)
def test_llm_marl_play_answers_a_bad_env_arg_in_one_line(capsys, pair, message):
    """Through the command a user types: exit status 2, one line naming the parameter."""
    from llm_marl.cli import main

    assert main(["play", "math_single-v0", "--random", "--env-arg", pair]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
