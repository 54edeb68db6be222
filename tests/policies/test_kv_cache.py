"""The growing generation cache: same samples as transformers' default cache, fewer copies."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

import llm_marl.policies.hf as hf_module
from llm_marl.policies import HFPolicy, SamplingParams, build_tiny_lm
from llm_marl.policies.kv_cache import cache_keyword, growing_cache, output_cache


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def arch_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_lm(
        tmp_path_factory.mktemp(request.param), arch=request.param, vocab_size=400, seed=3
    )


def _conversations() -> list[list[dict]]:
    # Ragged prompts: the batch is left padded, and rows finish at different steps.
    return [[{"role": "user", "content": "Task " + "word " * n}] for n in (0, 7, 2, 13, 1)]


def _both(policy: HFPolicy, sampling: SamplingParams, monkeypatch: pytest.MonkeyPatch):
    calls: list[bool] = []
    real = hf_module.growing_cache

    def spy(*args, **kwargs):
        cache = real(*args, **kwargs)
        calls.append(cache is not None)
        return cache

    monkeypatch.setattr(hf_module, "growing_cache", spy)
    grown = policy.generate(_conversations(), sampling)
    monkeypatch.setattr(hf_module, "growing_cache", lambda *a, **k: None)
    default = policy.generate(_conversations(), sampling)
    assert calls == [True]  # the first call really used the growing cache
    return grown, default


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(max_new_tokens=16, temperature=1.0, seed=11),
        SamplingParams(max_new_tokens=16, temperature=0.7, top_p=0.9, top_k=50, seed=5),
        SamplingParams(max_new_tokens=16, temperature=0.0),
        SamplingParams(max_new_tokens=16, temperature=1.0, seed=2, stop=("e",)),
    ],
    ids=["sample", "top-p-k", "greedy", "stop-string"],
)
def test_generation_is_identical_with_the_growing_cache(arch_path, sampling, monkeypatch):
    policy = HFPolicy(arch_path, seed=0)
    grown, default = _both(policy, sampling, monkeypatch)
    assert [c.token_ids for c in grown] == [c.token_ids for c in default]
    assert [c.text for c in grown] == [c.text for c in default]
    for a, b in zip(grown, default):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs))
    assert any(len(c.token_ids) > 1 for c in grown)


def _layer(capacity: int):
    cache = growing_cache(AutoModelForCausalLM.from_config(_config()), capacity)
    assert cache is not None
    return cache.layers[0]


def _config(**overrides) -> Qwen2Config:
    fields = dict(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return Qwen2Config(**{**fields, **overrides})


def test_a_layer_holds_what_concatenation_would_and_grows_past_its_capacity():
    gen = torch.Generator().manual_seed(0)
    layer = _layer(capacity=5)
    keys, values = [], []
    for n in (3, 1, 1, 4, 1, 7):  # 17 tokens into a 5-token buffer: it must grow
        k = torch.randn(2, 2, n, 8, generator=gen)
        v = torch.randn(2, 2, n, 8, generator=gen)
        keys.append(k)
        values.append(v)
        got_k, got_v = layer.update(k, v)
        assert torch.equal(got_k, torch.cat(keys, dim=-2))
        assert torch.equal(got_v, torch.cat(values, dim=-2))
        assert layer.get_seq_length() == sum(int(x.shape[-2]) for x in keys)
    # Old entries are never rewritten by later steps.
    assert torch.equal(layer.keys, torch.cat(keys, dim=-2))


def test_batch_selection_and_cropping_keep_the_layer_consistent():
    gen = torch.Generator().manual_seed(1)
    layer = _layer(capacity=16)
    k = torch.randn(3, 2, 4, 8, generator=gen)
    layer.update(k, k.clone())
    layer.batch_select_indices(torch.tensor([2, 0, 0, 1]))
    expected = k[[2, 0, 0, 1]]
    assert torch.equal(layer.keys, expected)
    step = torch.randn(4, 2, 1, 8, generator=gen)
    got_k, _ = layer.update(step, step.clone())
    assert torch.equal(got_k, torch.cat([expected, step], dim=-2))
    layer.crop(-2)
    assert torch.equal(layer.keys, torch.cat([expected, step], dim=-2)[..., :3, :])
    again, _ = layer.update(step, step.clone())
    assert torch.equal(again, torch.cat([expected[..., :3, :], step], dim=-2))


def test_models_whose_cache_is_not_all_full_attention_keep_the_default():
    sliding = Qwen2ForCausalLM(
        _config(use_sliding_window=True, sliding_window=4, max_window_layers=1)
    )
    assert growing_cache(sliding, 32) is None
    assert growing_cache(Qwen2ForCausalLM(_config()), 32) is not None


def test_the_cache_keyword_follows_the_model():
    model = Qwen2ForCausalLM(_config())
    keyword = cache_keyword(model)
    assert keyword in ("cache", "past_key_values")
    ids = torch.tensor([[5, 6, 7]])
    out = model(input_ids=ids, use_cache=True)
    cache = output_cache(out)
    assert cache is not None and cache.get_seq_length() == 3
    # Passing it back under that keyword continues the sequence.
    more = model(input_ids=torch.tensor([[8]]), use_cache=True, **{keyword: cache})
    assert output_cache(more).get_seq_length() == 4


def test_a_shared_prompt_is_prefilled_once_with_the_same_samples(arch_path):
    policy = HFPolicy(arch_path, seed=0)
    # Three prompts, four completions each (a GRPO step), interleaved.
    convs = [_conversations()[k] for k in (0, 1, 2) * 4]
    seen: list[tuple[int, int]] = []
    decoder = policy.model.get_decoder()
    decoder.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    for sampling in (
        SamplingParams(max_new_tokens=12, temperature=1.0, seed=4),
        SamplingParams(max_new_tokens=12, temperature=0.0),
    ):
        seen.clear()
        policy.share_prompts = True
        shared = policy.generate(convs, sampling)
        width = max(len(c.prompt_ids) for c in shared)
        # The 3 distinct prompts up to their last column, then every row's last column.
        assert seen[:2] == [(3, width - 1), (12, 1)]
        seen.clear()
        policy.share_prompts = False
        plain = policy.generate(convs, sampling)
        assert seen[0] == (12, width)  # the check can fail: unshared, every row is encoded
        assert [c.token_ids for c in shared] == [c.token_ids for c in plain]
        for a, b in zip(shared, plain):
            torch.testing.assert_close(
                torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=0
            )


def test_rows_with_their_own_prompts_are_not_prefilled(arch_path):
    policy = HFPolicy(arch_path, seed=0)
    seen: list[tuple[int, int]] = []
    policy.model.get_decoder().register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    out = policy.generate(_conversations(), SamplingParams(max_new_tokens=4, seed=1))
    assert seen[0] == (5, max(len(c.prompt_ids) for c in out))
