from __future__ import annotations

import dataclasses

import pytest

import llm_marl
from llm_marl.envs.registration import EnvSpec, UnknownEnvError
from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.envs.wrappers import TurnLimit


def test_spec_is_frozen_and_kwargs_read_only():
    spec = llm_marl.spec("coordination-v0")
    assert spec.name == "coordination" and spec.version == 0 and spec.namespace is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.id = "x-v1"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.kwargs["x"] = 1  # type: ignore[index]


def test_unknown_id_names_the_closest_ids():
    with pytest.raises(UnknownEnvError, match="Did you mean 'coordination-v0'"):
        llm_marl.make("cordination-v0")
    with pytest.raises(UnknownEnvError, match="coordination-v0"):
        llm_marl.make("coordination")  # version missing


def test_malformed_id_is_rejected():
    with pytest.raises(ValueError, match="name-vN"):
        EnvSpec(id="no version", entry_point="x:y")


def test_keyword_overrides_and_typos():
    env = llm_marl.make("coordination-v0", num_symbols=4)
    assert env.num_symbols == 4
    assert env.spec.kwargs["num_symbols"] == 4
    with pytest.raises(TypeError, match="unknown arguments \\['num_symbol'\\]"):
        llm_marl.make("coordination-v0", num_symbol=4)


def test_third_party_registration_string_and_callable():
    llm_marl.register(
        "acme/coord-v3",
        "llm_marl.envs.toy.coordination:CoordinationEnv",
        kwargs={"num_symbols": 5},
        description="third-party",
    )
    try:
        env = llm_marl.make("acme/coord-v3")
        assert isinstance(env, CoordinationEnv) and env.num_symbols == 5
        assert llm_marl.spec("acme/coord-v3").namespace == "acme"
        assert "acme/coord-v3" in llm_marl.pprint_registry(print_output=False)
    finally:
        del llm_marl.registry["acme/coord-v3"]

    llm_marl.register("mine-v0", lambda **kw: CoordinationEnv(**kw), max_episode_steps=1)
    try:
        env = llm_marl.make("mine-v0")
        assert isinstance(env, TurnLimit)
        env.reset(seed=0)
        *_, truncs, _ = env.step({"left": "0", "right": "0"})
    finally:
        del llm_marl.registry["mine-v0"]


def test_bad_entry_point_is_clear():
    llm_marl.register("broken-v0", "llm_marl.envs.toy.coordination:Nope")
    try:
        with pytest.raises(ImportError, match="has no 'Nope'"):
            llm_marl.make("broken-v0")
    finally:
        del llm_marl.registry["broken-v0"]


def test_make_vec():
    vec = llm_marl.make_vec("referential-v0", 3)
    try:
        results = vec.reset(seeds=10)
        assert len(results) == 3
        steps = vec.step([{"speaker": "1"}, None, {"speaker": "2"}])
        assert steps[1] is None and steps[0] is not None
    finally:
        vec.close()
    with pytest.raises(ValueError):
        llm_marl.make_vec("referential-v0", 0)
