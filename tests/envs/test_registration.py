from __future__ import annotations

import dataclasses

import pytest

import llm_marl
from llm_marl.envs import LLMParallelEnv
from llm_marl.envs.registration import EnvSpec, UnknownEnvError, _load_entry_point
from llm_marl.envs.toy.coordination import CoordinationEnv
from llm_marl.envs.wrappers import StepLimit


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

    llm_marl.register("mine-v0", lambda **kw: CoordinationEnv(**kw), max_steps=1)
    try:
        env = llm_marl.make("mine-v0")
        assert isinstance(env, StepLimit) and env.max_steps == 1
        assert isinstance(env.unwrapped, CoordinationEnv)
        env.reset(seed=0)
        env.step({"left": "0", "right": "0"})
        assert env.agents == []
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


# ---------------------------------------------------------------------- the step cap
@pytest.mark.parametrize("cap", [1, 2, 3])
def test_make_max_steps_wraps_in_step_limit_and_is_recorded_in_the_spec(cap):
    env = llm_marl.make("math_critic-v0", max_steps=cap)
    assert isinstance(env, StepLimit) and env.max_steps == cap
    assert env.spec.max_steps == cap and "max_steps" not in env.spec.kwargs
    _, infos = env.reset(seed=0)
    steps = 0
    while env.agents:
        active = [a for a in env.agents if infos[a]["active"]]
        *_, truncs, infos = env.step(dict.fromkeys(active, "\\boxed{1}"))
        steps += 1
    assert steps == cap and all(truncs.values()) == (cap < 3)
    again = llm_marl.make(env.spec)  # the spec rebuilds the same thing
    assert isinstance(again, StepLimit) and again.max_steps == cap


def test_make_without_a_cap_returns_the_env_itself():
    env = llm_marl.make("referential-v0")
    assert type(env).__name__ == "ReferentialEnv" and env.spec.max_steps is None
    assert env.max_steps == 2, "the env's own cap (its class attribute)"


def test_make_max_steps_overrides_the_registered_cap():
    llm_marl.register("capped-v0", "llm_marl.envs.toy.referential:ReferentialEnv", max_steps=1)
    try:
        assert llm_marl.make("capped-v0").max_steps == 1
        assert llm_marl.make("capped-v0", max_steps=5).max_steps == 5
    finally:
        del llm_marl.registry["capped-v0"]


@pytest.mark.parametrize("cap", [0, -2, 1.5, "2", True])
def test_bad_caps_are_rejected_at_register_and_make(cap):
    with pytest.raises((TypeError, ValueError), match="max_steps must be"):
        llm_marl.register("bad-cap-v0", "x:y", max_steps=cap)
    assert "bad-cap-v0" not in llm_marl.registry
    with pytest.raises((TypeError, ValueError), match="max_steps must be"):
        llm_marl.make("referential-v0", max_steps=cap)


def test_the_old_name_max_episode_steps_is_gone():
    with pytest.raises(TypeError, match="max_episode_steps"):
        llm_marl.register("old-v0", CoordinationEnv, max_episode_steps=1)  # type: ignore[call-arg]
    assert "old-v0" not in llm_marl.registry
    with pytest.raises(TypeError, match=r"unknown arguments \[.max_episode_steps.\]"):
        llm_marl.make("referential-v0", max_episode_steps=1)
    assert not hasattr(llm_marl.spec("referential-v0"), "max_episode_steps")


def test_unknown_kwargs_error_mentions_max_steps():
    with pytest.raises(TypeError, match="and max_steps"):
        llm_marl.make("referential-v0", max_turns=2)


@pytest.mark.parametrize(
    "factory", [lambda: object(), lambda: "env", lambda: __import__("pettingzoo").ParallelEnv()]
)
def test_an_entry_point_must_return_an_llm_env(factory):
    llm_marl.register("notenv-v0", factory)
    try:
        with pytest.raises(TypeError, match="LLMParallelEnv subclass"):
            llm_marl.make("notenv-v0")
    finally:
        del llm_marl.registry["notenv-v0"]


# ---------------------------------------------------------------------- metadata per id
@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_metadata_name_is_the_id_on_the_class_and_the_instance(env_id):
    cls = _load_entry_point(llm_marl.spec(env_id).entry_point, env_id)
    assert isinstance(cls, type) and issubclass(cls, LLMParallelEnv)
    assert cls.metadata["name"] == env_id, "class-level, before any instance exists"
    env = llm_marl.make(env_id)
    try:
        assert env.metadata["name"] == env_id
        assert env.unwrapped.metadata["name"] == env_id
        assert str(env) == env_id  # PettingZoo's __str__ reads metadata["name"]
        assert env.spec.id == env_id
        assert {"render_modes", "is_parallelizable"} <= set(cls.metadata)
    finally:
        env.close()


def test_every_registered_id_has_its_own_class():
    classes = {}
    for env_id in llm_marl.registry:
        cls = _load_entry_point(llm_marl.spec(env_id).entry_point, env_id)
        assert cls not in classes.values(), f"{env_id} shares {cls.__name__} with another id"
        classes[env_id] = cls


@pytest.mark.parametrize(
    ("env_id", "benchmark"),
    [("humaneval-v0", "humaneval"), ("mbpp_single-v0", "mbpp"), ("coop_humaneval-v0", None)],
)
def test_coding_classes_default_to_their_own_benchmark(env_id, benchmark):
    cls = _load_entry_point(llm_marl.spec(env_id).entry_point, env_id)
    env = cls(sandbox="process")
    try:
        assert env.metadata["name"] == env_id
        assert env.benchmark == (benchmark or "coophumaneval")
    finally:
        env.close()


@pytest.mark.parametrize(
    ("env_id", "own", "inherited"),
    [
        ("math_hint-v0", "hint_prompt", "grading_timeout"),
        ("math_critic-v0", "drafts", "require_boxed"),
        ("websearch-v0", "max_delegations", "corpus"),
        ("websearch_single-v0", "max_turns", "search_k"),
    ],
)
def test_a_typo_is_caught_through_forwarded_kwargs(env_id, own, inherited):
    # These classes take their own arguments and forward **kwargs to their base: make() still
    # names every accepted argument, the subclass's and the base's.
    with pytest.raises(TypeError, match="unknown arguments \\['limt'\\]") as err:
        llm_marl.make(env_id, limt=1)
    assert f"'{own}'" in str(err.value) and f"'{inherited}'" in str(err.value)


class _Forwarding(CoordinationEnv):
    def __init__(self, *, shout: bool = False, **kwargs):
        self.shout = shout
        super().__init__(**kwargs)


def test_third_party_forwarding_class_and_open_factory():
    llm_marl.register("fwd-v0", _Forwarding)
    llm_marl.register("open-v0", lambda **kw: CoordinationEnv(**kw))
    try:
        env = llm_marl.make("fwd-v0", shout=True, num_symbols=4)
        assert env.shout and env.num_symbols == 4
        with pytest.raises(TypeError, match="unknown arguments \\['num_symbol'\\].*'shout'"):
            llm_marl.make("fwd-v0", num_symbol=4)
        # A plain callable with **kwargs cannot be looked through: the call itself decides.
        with pytest.raises(TypeError, match="unexpected keyword argument 'num_symbol'"):
            llm_marl.make("open-v0", num_symbol=4)
    finally:
        del llm_marl.registry["fwd-v0"], llm_marl.registry["open-v0"]
