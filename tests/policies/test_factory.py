"""build_policy: every accepted spec form, its options, and clear errors for the rest."""

from __future__ import annotations

import doctest
import re
import textwrap

import pytest

import llm_marl.policies.factory as factory
from llm_marl.errors import ConfigError, PolicyError
from llm_marl.policies import (
    HFPolicy,
    OpenAIPolicy,
    SamplingParams,
    ScriptedPolicy,
    build_policy,
    parse_policy_spec,
)
from tests.policies.spec_table import BAD, GOOD


@pytest.fixture
def team_module(tmp_path, monkeypatch):
    (tmp_path / "factory_team.py").write_text(
        textwrap.dedent(
            """
            from llm_marl.policies import Completion

            def shout(conv):
                return conv[-1]["content"].upper()

            class Echo:
                name, trainable = "echo", False

                def generate(self, conversations, sampling, contexts=None):
                    return [Completion(c[-1]["content"]) for c in conversations]

            ECHO = Echo()
            NUMBER = 7
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "factory_team"


@pytest.mark.parametrize(("spec", "parsed"), GOOD, ids=[s for s, _ in GOOD])
def test_every_good_spec_of_the_shared_table_parses(spec, parsed):
    assert parse_policy_spec(spec) == parsed


@pytest.mark.parametrize(("spec", "message"), BAD, ids=[s or "empty" for s, _ in BAD])
def test_bad_specs_name_the_accepted_forms(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_policy(spec)


def test_openai_options_never_reach_the_url():
    policy = build_policy("openai:gpt@http://127.0.0.1:9/v1,api_key_env=K,timeout=3")
    assert (policy.model, policy.base_url, policy.api_key_env, policy.timeout) == (
        "gpt",
        "http://127.0.0.1:9/v1",
        "K",
        3.0,
    )
    policy.close()


def test_bad_types():
    with pytest.raises(ConfigError, match="a policy spec is a string"):
        build_policy(3)  # type: ignore[arg-type]


def test_vllm_specs_parse_and_say_what_to_install_when_vllm_is_missing(tmp_path):
    spec = parse_policy_spec("vllm:/models/x,dtype=bfloat16,max_model_len=2048")
    assert (spec.kind, spec.target) == ("vllm", "/models/x")
    assert spec.options == {"dtype": "bfloat16", "max_model_len": "2048"}
    with pytest.raises(ConfigError, match="unknown option 'api_key_env'"):
        parse_policy_spec("vllm:/models/x,api_key_env=K")
    with pytest.raises(ConfigError, match="max_model_len='many' is not a number"):
        build_policy("vllm:/models/x,max_model_len=many")
    with pytest.raises(ConfigError, match="always frozen"):
        build_policy("vllm:/models/x", trainable=True)
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="vLLM is not installed") as info:
            build_policy(f"vllm:{tmp_path}")
        assert "openai:" in str(info.value)  # says what to do instead


def test_scripted(team_module):
    policy = build_policy(f"scripted:{team_module}:shout")
    assert isinstance(policy, ScriptedPolicy) and policy.name == f"{team_module}:shout"
    out = policy.generate([[{"role": "user", "content": "hi"}]], SamplingParams())
    assert out[0].text == "HI"
    assert build_policy(f"scripted:{team_module}:shout,name=loud").name == "loud"
    assert build_policy(f"scripted:{team_module}:shout", name="role").name == "role"
    echo = build_policy(f"scripted:{team_module}:ECHO")
    assert echo.name == "echo" and echo.__class__.__name__ == "Echo"
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_xyz'"):
        build_policy("scripted:no_such_module_xyz:fn")
    with pytest.raises(ConfigError, match="has no attribute 'missing'"):
        build_policy(f"scripted:{team_module}:missing")
    with pytest.raises(ConfigError, match="'NUMBER' is a int"):
        build_policy(f"scripted:{team_module}:NUMBER")
    with pytest.raises(ConfigError, match="always frozen"):
        build_policy(f"scripted:{team_module}:shout", trainable=True)


def test_openai(monkeypatch):
    policy = build_policy("openai:tiny@http://127.0.0.1:9/v1,timeout=2.5,max_concurrency=3")
    assert isinstance(policy, OpenAIPolicy)
    assert (policy.model, policy.base_url, policy.timeout, policy.max_concurrency) == (
        "tiny",
        "http://127.0.0.1:9/v1",
        2.5,
        3,
    )
    assert policy.name == "tiny" and not policy.trainable
    policy.close()
    # A remote server needs a key, read from the variable the spec names.
    monkeypatch.delenv("LLM_MARL_TEST_KEY", raising=False)
    remote = "openai:gpt-4o-mini@https://api.example.com/v1,api_key_env=LLM_MARL_TEST_KEY"
    with pytest.raises(PolicyError, match="LLM_MARL_TEST_KEY is not set"):
        build_policy(remote)
    monkeypatch.setenv("LLM_MARL_TEST_KEY", "sk-test")
    policy = build_policy(remote, name="judge")
    assert policy.api_key_env == "LLM_MARL_TEST_KEY" and policy.name == "judge"
    assert policy._headers["Authorization"] == "Bearer sk-test"
    with pytest.raises(ConfigError, match="timeout='soon' is not a number"):
        build_policy("openai:tiny@http://127.0.0.1:9/v1,timeout=soon")
    with pytest.raises(ConfigError, match="timeout must be > 0"):
        build_policy("openai:tiny@http://127.0.0.1:9/v1,timeout=0")
    with pytest.raises(ConfigError, match="always frozen"):
        build_policy("openai:tiny@http://127.0.0.1:9/v1", trainable=True)


def test_hf_with_device_dtype_and_adapter(tiny_lm_path, tmp_path):
    import torch
    from peft import LoraConfig

    policy = build_policy(f"hf:{tiny_lm_path}", device="cpu", dtype="float32")
    assert isinstance(policy, HFPolicy) and not policy.trainable
    assert next(policy.model.parameters()).dtype == torch.float32
    half = build_policy(f"hf:{tiny_lm_path},dtype=bfloat16", dtype="float32")  # spec wins
    assert next(half.model.parameters()).dtype == torch.bfloat16

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trained = HFPolicy(tiny_lm_path, lora_config=lora, name="hint", trainable=True)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.3)
    trained.save(tmp_path / "hint")
    prompts, comps = [[1, 30, 31]], [[40, 41, 42]]
    expected = trained.sequence_logprobs(prompts, comps)[0].detach()
    loaded = build_policy(f"hf:{tiny_lm_path},adapter={tmp_path / 'hint'},name=hint")
    assert loaded.name == "hint" and loaded.adapter is not None and not loaded.trainable
    got = loaded.sequence_logprobs(prompts, comps, reference=False)[0].detach()
    assert torch.allclose(got, expected, atol=1e-5)
    assert not torch.allclose(
        build_policy(f"hf:{tiny_lm_path}").sequence_logprobs(prompts, comps)[0].detach(), expected
    )
    assert build_policy(f"hf:{tiny_lm_path}", trainable=True).trainable

    with pytest.raises(ConfigError, match=r"hf:.*no_model_here.*does not exist"):
        build_policy(f"hf:{tmp_path / 'no_model_here'}")
    with pytest.raises(ConfigError, match="unknown dtype"):
        build_policy(f"hf:{tiny_lm_path},dtype=float99")


def test_module_examples_run():
    failures, tried = doctest.testmod(factory, verbose=False)
    assert tried >= 2 and failures == 0


def test_vllm_specs_reach_vllm_policy_from_path(monkeypatch):
    from llm_marl.policies.vllm import VLLMPolicy

    calls = []

    def fake_from_path(path, **kwargs):
        calls.append((path, kwargs))
        return "engine"

    monkeypatch.setattr(VLLMPolicy, "from_path", staticmethod(fake_from_path))
    spec = "vllm:/m,adapter=/a,dtype=bfloat16,max_model_len=64,gpu_memory_utilization=0.5"
    assert build_policy(spec, name="hint") == "engine"
    assert calls == [
        (
            "/m",
            {
                "adapter": "/a",
                "name": "hint",
                "dtype": "bfloat16",
                "max_model_len": 64,
                "gpu_memory_utilization": 0.5,
            },
        )
    ]
    build_policy("vllm:/m", dtype="float16")  # the command line's --dtype is the default
    assert calls[-1][1]["dtype"] == "float16"
