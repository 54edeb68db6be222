"""HFPolicy.sequence_logprobs: the chunked selective log-softmax equals the plain full-logits
computation (values and gradients), and models it would not be exact for take the fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM

import llm_marl.policies.hf as hf_module
import llm_marl.policies.logprob as logprob_module
from llm_marl.policies import HFPolicy, build_tiny_lm
from llm_marl.policies.logprob import chunked_logprobs, split_lm_head

ATOL = 1e-4
GRAD_RTOL = 1e-3
GRAD_ATOL = 1e-4  # float32 sums over hundreds of tokens, logsumexp merged across chunks
BIG_VOCAB = 32768  # large enough that several chunks of real size are needed (128 tokens each)


@pytest.fixture(scope="module")
def big_vocab_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_lm(tmp_path_factory.mktemp("big_vocab") / "lm", vocab_size=BIG_VOCAB, seed=3)


def _sharpen(model: torch.nn.Module) -> None:
    """Make the random init less uniform, so that position or padding mistakes show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(6.0)
            if "embed_tokens" in name:
                p.mul_(20.0)  # tied head: spreads the logits out (non-trivial softmax)


def _batch(vocab: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Ragged prompts and completions (one completion empty, one long enough for 3 chunks)."""
    gen = torch.Generator().manual_seed(seed)
    p_lens, c_lens = [3, 11, 1, 7], [300, 5, 0, 41]
    prompts = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in p_lens]
    comps = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in c_lens]
    return prompts, comps


def _plain(model, prompts, comps, temperature: float) -> list[torch.Tensor]:
    """The reference: each sequence alone, full logits, log_softmax(logits / T) at the targets."""
    out = []
    for p, c in zip(prompts, comps):
        ids = torch.tensor([list(p) + list(c)])
        logits = model(input_ids=ids).logits[0, len(p) - 1 : -1].float() / temperature
        out.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0])
    return out


def _weights(comps: list[list[int]]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return [torch.randn(len(c), generator=gen) for c in comps]


def _grads(params, lps, weights) -> list[torch.Tensor]:
    loss = sum((w * lp).sum() for w, lp in zip(weights, lps))
    return list(torch.autograd.grad(loss, params))


def _assert_same(lps, ref, params, weights) -> None:
    assert [t.shape for t in lps] == [t.shape for t in ref]
    for a, b in zip(lps, ref):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    # Both graphs are built before either backward runs: the chunks are recomputed correctly.
    new, old = _grads(params, lps, weights), _grads(params, ref, weights)
    assert any(g.abs().sum() > 0 for g in old)
    for g_new, g_old in zip(new, old):
        torch.testing.assert_close(g_new, g_old, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a, **_k):
        raise AssertionError("the full-logits fallback was used")

    monkeypatch.setattr(hf_module, "full_logits_logprobs", boom)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_full_finetune_matches_plain_logprobs_and_grads(big_vocab_path, monkeypatch, temperature):
    policy = HFPolicy(big_vocab_path, trainable=True, seed=0)
    _sharpen(policy.model)
    policy.logprob_temperature = temperature
    prompts, comps = _batch(BIG_VOCAB)
    _no_fallback(monkeypatch)
    lps = policy.sequence_logprobs(prompts, comps)
    assert lps[2].shape == (0,)
    ref = _plain(policy.model, prompts, comps, temperature)
    params = policy.parameters()
    _assert_same(lps, ref, params, _weights(comps))


def test_many_small_chunks_and_llama(tmp_path, monkeypatch):
    """Chunks of 3 tokens (CHUNK_ELEMENTS read at call time), on the llama architecture."""
    path = build_tiny_lm(tmp_path / "llama", arch="llama", vocab_size=600, seed=1)
    policy = HFPolicy(path, trainable=True, seed=0)
    _sharpen(policy.model)
    policy.logprob_temperature = 1.3
    monkeypatch.setattr(logprob_module, "CHUNK_ELEMENTS", 3 * 600 + 5)
    _no_fallback(monkeypatch)
    prompts, comps = _batch(600, seed=1)
    lps = policy.sequence_logprobs(prompts, comps)
    _assert_same(
        lps, _plain(policy.model, prompts, comps, 1.3), policy.parameters(), _weights(comps)
    )


@pytest.mark.slow  # 14 s in the fast loop at load 17 (#22)
def test_lora_matches_plain_and_reference_is_the_base(big_vocab_path, monkeypatch):
    temperature = 0.6
    base = AutoModelForCausalLM.from_pretrained(big_vocab_path)
    _sharpen(base)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"])
    policy = HFPolicy(base, tokenizer=big_vocab_path, lora_config=lora, trainable=True, seed=0)
    policy.logprob_temperature = temperature
    with torch.no_grad():  # LoRA B starts at zero: make the adapter matter
        for p in policy.parameters():
            p.normal_(0, 0.2)
    prompts, comps = _batch(BIG_VOCAB, seed=2)
    _no_fallback(monkeypatch)
    lps = policy.sequence_logprobs(prompts, comps)
    ref = _plain(policy.model, prompts, comps, temperature)
    _assert_same(lps, ref, policy.parameters(), _weights(comps))

    reference = policy.sequence_logprobs(prompts, comps, reference=True)
    assert not any(t.requires_grad for t in reference)
    with policy.model.disable_adapter(), torch.no_grad():
        base_ref = _plain(policy.model, prompts, comps, temperature)
    for a, b, c in zip(reference, base_ref, lps):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
        if len(c):
            assert not torch.allclose(a, c.detach(), atol=1e-3)  # the adapter really was off


def test_frozen_policy_builds_no_graph(big_vocab_path, monkeypatch):
    policy = HFPolicy(big_vocab_path, seed=0)
    _no_fallback(monkeypatch)
    prompts, comps = _batch(BIG_VOCAB)
    lps = policy.sequence_logprobs(prompts, comps)
    assert not any(t.requires_grad for t in lps)
    with torch.no_grad():
        for a, b in zip(lps, _plain(policy.model, prompts, comps, 1.0)):
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def _vocab_sized_saved(policy: HFPolicy, prompts, comps) -> list[tuple[int, ...]]:
    """Shapes of the tensors autograd saves for backward that have a vocabulary-sized axis,
    other than the LM head's own weight (which the model holds anyway)."""
    head = policy.model.get_output_embeddings().weight
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        policy.sequence_logprobs(prompts, comps)
    assert saved
    return [
        tuple(t.shape) for t in saved if BIG_VOCAB in t.shape and t.data_ptr() != head.data_ptr()
    ]


@pytest.mark.slow  # 10 s in the fast loop at load 17 (#22)
def test_no_vocab_sized_activation_is_saved_for_backward(big_vocab_path, monkeypatch):
    """The graph keeps hidden states, not logits; the full-logits path (forced) keeps logits."""
    policy = HFPolicy(big_vocab_path, trainable=True, seed=0)
    prompts, comps = _batch(BIG_VOCAB)
    assert _vocab_sized_saved(policy, prompts, comps) == []
    monkeypatch.setattr(hf_module, "split_lm_head", lambda *_a, **_k: None)
    assert _vocab_sized_saved(policy, prompts, comps)


def test_chunked_logprobs_matches_log_softmax_directly():
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 1000, bias=True)
    hidden = torch.randn(50, 16, generator=gen, requires_grad=True)
    targets = torch.randint(0, 1000, (50,), generator=gen)
    got = chunked_logprobs(hidden, head, targets, 0.5, chunk_elements=7000)
    want = torch.log_softmax(head(hidden) / 0.5, -1).gather(-1, targets[:, None])[:, 0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    w = torch.randn(50, generator=gen)
    params = [hidden, head.weight, head.bias]
    for a, b in zip(_grads(params, [got], [w]), _grads(params, [want], [w])):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="expected hidden"):
        chunked_logprobs(hidden[None], head, targets)


# ---------------------------------------------------------------- fallbacks


def _gemma2_softcapped(tmp_path: Path, tokenizer_path: str) -> HFPolicy:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(
        vocab_size=600,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        final_logit_softcapping=2.0,  # small cap: the post-processing changes every logit
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    model = Gemma2ForCausalLM(config)
    with torch.no_grad():  # tied head: logits of a few units, so that the cap bites
        model.get_output_embeddings().weight.mul_(50.0)
    return HFPolicy(model, tokenizer=tokenizer_path, trainable=True, seed=0)


def test_softcapped_model_takes_the_fallback_and_stays_exact(tmp_path):
    tok = build_tiny_lm(tmp_path / "tok", vocab_size=600)
    policy = _gemma2_softcapped(tmp_path, tok)
    assert split_lm_head(policy.model, {"logits_to_keep": 2}) is None
    prompts, comps = _batch(600, seed=4)
    lps = policy.sequence_logprobs(prompts, comps)
    ref = _plain(policy.model, prompts, comps, 1.0)
    # The fallback matters: head(decoder(...)) without the cap gives different log-probs.
    ids = torch.tensor([prompts[0] + comps[0]])
    model = policy.model
    with torch.no_grad():
        hidden = model.get_decoder()(input_ids=ids).last_hidden_state[0, len(prompts[0]) - 1 : -1]
        uncapped = chunked_logprobs(hidden, model.get_output_embeddings(), torch.tensor(comps[0]))
    assert (uncapped - ref[0].detach()).abs().max() > 0.1
    _assert_same(lps, ref, policy.parameters(), _weights(comps))


class _HiddenPostProcessing(torch.nn.Module):
    """Wraps a causal LM and changes its logits in a way no config attribute announces."""

    def __init__(self, inner: torch.nn.Module, how: str) -> None:
        super().__init__()
        self.inner, self.how = inner, how
        self.config = inner.config

    def get_decoder(self):
        return self.inner.get_decoder()

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()

    def forward(self, input_ids, logits_to_keep=0, **kwargs):
        hidden = self.inner.get_decoder()(input_ids=input_ids, **kwargs).last_hidden_state
        hidden = hidden[:, -logits_to_keep:] if logits_to_keep else hidden
        head = self.inner.get_output_embeddings()
        if self.how == "scale_hidden":
            logits = head(hidden * 1.5)
        elif self.how == "softcap":
            logits = torch.tanh(head(hidden) / 30.0) * 30.0
        else:  # "head_twice": e.g. a multi-token-prediction head reusing lm_head
            logits = head(hidden) + 0 * head(hidden)
        return type("Out", (), {"logits": logits})()


@pytest.mark.parametrize("how", ["scale_hidden", "softcap", "head_twice"])
def test_probe_detects_unannounced_post_processing(tiny_lm_path, how):
    inner = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    wrapped = _HiddenPostProcessing(inner, how)
    assert split_lm_head(inner, {"logits_to_keep": 2}) is not None
    assert split_lm_head(wrapped, {"logits_to_keep": 2}) is None
    assert split_lm_head(wrapped, {}) is None


def test_probe_restores_training_mode(tiny_lm_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    model.train()
    assert split_lm_head(model, {"logits_to_keep": 2}) is not None
    assert all(m.training for m in model.modules())


def test_lora_on_the_lm_head_takes_the_fallback(tiny_lm_path, monkeypatch):
    base = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    _sharpen(base)
    base.config.tie_word_embeddings = False
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "lm_head"])
    policy = HFPolicy(base, tokenizer=tiny_lm_path, lora_config=lora, trainable=True, seed=0)
    with torch.no_grad():
        for p in policy.parameters():
            p.normal_(0, 0.2)
    assert split_lm_head(policy.model, {"logits_to_keep": 2}) is None
    prompts, comps = _batch(512, seed=5)
    lps = policy.sequence_logprobs(prompts, comps)
    _assert_same(
        lps, _plain(policy.model, prompts, comps, 1.0), policy.parameters(), _weights(comps)
    )


def test_swapping_the_head_is_probed_again(tiny_lm_path):
    """The verdict is cached per model but keyed by the head module: a new head is re-checked."""
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    first = split_lm_head(model, {"logits_to_keep": 2})
    assert first is not None
    old = model.lm_head
    model.lm_head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    second = split_lm_head(model, {"logits_to_keep": 2})
    assert second is not None and second.head is model.lm_head


def test_bfloat16_head_matches_the_full_logits_path():
    """Low-precision heads: the head runs in bf16 then log-softmax in float32, as before."""
    from llm_marl.policies.logprob import full_logits_logprobs

    gen = torch.Generator().manual_seed(1)
    head = torch.nn.Linear(16, 900, bias=True).to(torch.bfloat16)
    hidden = torch.randn(40, 16, generator=gen).to(torch.bfloat16).requires_grad_(True)
    targets = torch.randint(0, 900, (40,), generator=gen)
    got = chunked_logprobs(hidden, head, targets, 0.8, chunk_elements=5000)
    want = full_logits_logprobs(head(hidden), targets, 0.8)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    w = torch.randn(40, generator=gen)
    params = [hidden, head.weight, head.bias]
    for a, b in zip(_grads(params, [got], [w]), _grads(params, [want], [w])):
        assert a.dtype == b.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), b.float(), atol=2e-2, rtol=2e-2)


# ------------------------------------------------------------------ one prompt, many completions


def _group(vocab: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """A GRPO group: one 23-token prompt, ragged completions (one of them empty)."""
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (23,), generator=gen).tolist()
    comps = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in (17, 4, 0, 40)]
    return [prompt] * len(comps), comps


def _count_backbone_tokens(policy: HFPolicy) -> list[int]:
    """Records how many token positions each call of the backbone runs."""
    policy.sequence_logprobs([[1]], [[2]])  # the one-time split probe runs before counting
    seen: list[int] = []
    decoder = policy.model.get_decoder()
    decoder.register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(int(kwargs["input_ids"].numel())), with_kwargs=True
    )
    return seen


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_a_shared_prompt_is_encoded_once_with_the_same_logprobs_and_grads(tmp_path, arch):
    path = build_tiny_lm(tmp_path / arch, arch=arch, vocab_size=600, seed=2)
    policy = HFPolicy(path, trainable=True, seed=0)
    _sharpen(policy.model)
    policy.logprob_temperature = 0.8
    prompts, comps = _group(600)
    seen = _count_backbone_tokens(policy)
    lps = policy.sequence_logprobs(prompts, comps)
    # The prompt ran once (23 positions), then the completions (4 rows x 40 columns).
    assert seen == [23, 4 * 40]
    ref = _plain(policy.model, prompts, comps, 0.8)
    _assert_same(lps, ref, policy.parameters(), _weights(comps))
    # And the check can fail: switched off, each row runs its prompt again.
    policy.share_prompts = False
    seen.clear()
    policy.sequence_logprobs(prompts, comps)
    assert seen == [4 * (23 + 40)]


def _groups(vocab: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Three GRPO groups of different prompt lengths (one group of a single row), interleaved
    as a minibatch may hold them, with ragged completions (one empty)."""
    gen = torch.Generator().manual_seed(seed)
    heads = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in (23, 9, 15)]
    order = [0, 1, 0, 2, 1, 0, 1]
    comps = [
        torch.randint(0, vocab, (n,), generator=gen).tolist() for n in (17, 4, 0, 40, 8, 3, 21)
    ]
    return [heads[k] for k in order], comps


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_several_prompt_groups_share_one_pass_with_the_same_logprobs_and_grads(tmp_path, arch):
    path = build_tiny_lm(tmp_path / arch, arch=arch, vocab_size=600, seed=2)
    policy = HFPolicy(path, trainable=True, seed=0)
    _sharpen(policy.model)
    policy.logprob_temperature = 0.7
    prompts, comps = _groups(600)
    seen = _count_backbone_tokens(policy)
    lps = policy.sequence_logprobs(prompts, comps)
    # The three distinct prompts ran once, left padded to 23 columns, then the 7 completions.
    assert seen == [3 * 23, 7 * 40]
    _assert_same(
        lps, _plain(policy.model, prompts, comps, 0.7), policy.parameters(), _weights(comps)
    )
    # Without sharing, each row runs its prompt again.
    policy.share_prompts = False
    seen.clear()
    policy.sequence_logprobs(prompts, comps)
    assert seen == [7 * (23 + 40)]


def test_a_shared_prompt_under_lora_and_for_the_reference(big_vocab_path):
    base = AutoModelForCausalLM.from_pretrained(big_vocab_path)
    _sharpen(base)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"])
    policy = HFPolicy(base, tokenizer=big_vocab_path, lora_config=lora, trainable=True, seed=0)
    with torch.no_grad():
        for p in policy.parameters():
            p.normal_(0, 0.2)
    prompts, comps = _group(BIG_VOCAB, seed=3)
    lps = policy.sequence_logprobs(prompts, comps)
    _assert_same(
        lps, _plain(policy.model, prompts, comps, 1.0), policy.parameters(), _weights(comps)
    )
    reference = policy.sequence_logprobs(prompts, comps, reference=True)
    with policy.model.disable_adapter(), torch.no_grad():
        base_ref = _plain(policy.model, prompts, comps, 1.0)
    for a, b in zip(reference, base_ref):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_rows_with_different_prompts_are_not_shared(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    seen = _count_backbone_tokens(policy)
    prompts = [[5, 6, 7], [5, 6, 8]]
    lps = policy.sequence_logprobs(prompts, [[9, 10], [11]])
    assert seen == [2 * (3 + 2)]
    _assert_same(
        lps,
        _plain(policy.model, prompts, [[9, 10], [11]], 1.0),
        policy.parameters(),
        _weights([[9, 10], [11]]),
    )


def test_a_checkpointed_model_in_training_mode_encodes_each_row_and_stays_exact(tiny_lm_path):
    # Checkpointed layers neither fill nor read a key/value cache: sharing the prompt would
    # silently drop it from the completions' context. The policy must encode each row instead.
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    model = policy.model
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.train()
    prompts, comps = _group(int(model.config.vocab_size), seed=4)
    lps = policy.sequence_logprobs(prompts, comps)
    _assert_same(lps, _plain(model, prompts, comps, 1.0), policy.parameters(), _weights(comps))


@pytest.mark.slow  # 18 s in the fast loop at load 17 (#22)
def test_shared_prompt_gradients_are_bit_identical_from_call_to_call(tmp_path):
    # The gradient of a shared prompt's key/value cache sums over its completions. Gathered
    # with advanced indexing, CPU backward adds the repeats with parallel atomics in a varying
    # order, and two identical training runs drifted apart; index_select adds them in order.
    path = build_tiny_lm(tmp_path / "lm", vocab_size=600, hidden_size=128, num_layers=2, seed=4)
    policy = HFPolicy(path, trainable=True, seed=0)
    prompts, comps = _groups(600, seed=5)
    prompts, comps = prompts * 6, comps * 6  # many repeats of each prompt in one pass
    params = list(policy.parameters())
    weights = _weights(comps)
    first = _grads(params, policy.sequence_logprobs(prompts, comps), weights)
    for _ in range(6):
        again = _grads(params, policy.sequence_logprobs(prompts, comps), weights)
        assert all(torch.equal(a, b) for a, b in zip(first, again))
