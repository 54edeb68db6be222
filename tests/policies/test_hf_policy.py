"""HFPolicy on the tiny LM: batching, token/text consistency, log-probs, seeds, stop strings,
multi-turn token contexts, shared LoRA adapters, frozen/trainable parameters, checkpoints."""

from __future__ import annotations

import math
import re

import pytest
import torch
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM

from llm_marl.policies import (
    Completion,
    HFPolicy,
    Policy,
    SamplingParams,
    TokenContext,
    TrainablePolicy,
)

ATOL = 1e-4


def _convs(n: int = 8) -> list[list[dict]]:
    """Conversations of clearly different lengths (so the batch really is left-padded)."""
    out = []
    for i in range(n):
        conv = [{"role": "user", "content": "What is " + " + ".join(["3"] * (1 + 3 * i)) + "?"}]
        if i % 2:
            conv.insert(0, {"role": "system", "content": "You are a helpful assistant."})
        out.append(conv)
    return out


def _eos_biased(path: str, bias: float = 3.0) -> HFPolicy:
    """A fresh policy whose LM head favours <|im_end|>, so completions do end on their own."""
    policy = HFPolicy(path, seed=0)
    base = policy.model
    old = base.lm_head
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(old.weight)
        head.bias.zero_()
        head.bias[policy.tokenizer.convert_tokens_to_ids("<|im_end|>")] = bias
    head.requires_grad_(False)
    base.lm_head = head
    return policy


def _sharpen(policy: HFPolicy, factor: float = 8.0) -> HFPolicy:
    """Scale the attention projections: a random init attends almost uniformly, which would
    hide position / padding mistakes."""
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(factor)
    return policy


def _assert_well_formed(policy: HFPolicy, c: Completion, max_new: int) -> None:
    assert policy.tokenizer.decode(c.token_ids, skip_special_tokens=True) == c.text
    assert len(c.logprobs) == len(c.token_ids) >= 1
    assert all(lp <= 0 for lp in c.logprobs)
    ends = [j for j, t in enumerate(c.token_ids) if t in policy.end_ids]
    if c.finish_reason == "length":
        assert len(c.token_ids) == max_new and ends == []
    else:
        assert c.finish_reason == "stop"
        assert ends == [len(c.token_ids) - 1]  # the end token is kept, nothing after it


# ---------------------------------------------------------------------------- basics


def test_satisfies_the_protocols(tiny_lm_path):
    frozen = HFPolicy(tiny_lm_path)
    trainable = HFPolicy(tiny_lm_path, trainable=True)
    assert isinstance(frozen, Policy) and isinstance(trainable, TrainablePolicy)
    assert frozen.trainable is False and trainable.trainable is True


def test_one_generate_call_for_the_batch(tiny_lm_path):
    policy = _eos_biased(tiny_lm_path)
    calls = []
    inner = policy.model.generate

    def counting(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return inner(*args, **kwargs)

    policy.model.generate = counting
    convs = _convs(8)
    sampling = SamplingParams(max_new_tokens=24, temperature=1.0, seed=0)
    out = policy.generate(convs, sampling)
    assert len(calls) == 1 and calls[0][0] == 8
    assert len(out) == 8
    tok = policy.tokenizer
    for conv, c in zip(convs, out):
        _assert_well_formed(policy, c, 24)
        expected = tok.apply_chat_template(conv, add_generation_prompt=True, return_dict=False)
        assert c.prompt_ids == expected  # unpadded template tokens
    # The bias makes both kinds of ending occur, so the cutting logic is really exercised.
    assert {c.finish_reason for c in out} == {"stop", "length"}


def test_a_generation_engine_samples_and_its_rows_stay_as_sampled(tiny_lm_path):
    """With an engine attached, generate samples there (one call, with a seed the policy drew)
    and a trailing pad id is a sample; transformers' rows are padded, so there it is trimmed."""
    policy = HFPolicy(tiny_lm_path, seed=0)
    policy.chat.pad_id = 7  # not an end token of the tiny LM, so trimming is observable
    rows = ([[5, 7, 7] for _ in range(3)], [[-0.5, -0.25, -0.125] for _ in range(3)])
    calls = []

    class Engine:
        def generate_ids(self, owner, prompts, sampling):
            calls.append((owner, len(prompts), sampling.seed))
            return rows

        def sync_weights(self, owner):
            pass

    policy.generation_engine = Engine()
    out = policy.generate(_convs(3), SamplingParams(max_new_tokens=3))
    assert len(calls) == 1 and calls[0][0] is policy and calls[0][1] == 3
    assert isinstance(calls[0][2], int)  # the caller gave no seed: the policy drew one
    assert [(c.token_ids, c.finish_reason) for c in out] == [([5, 7, 7], "length")] * 3
    assert out[0].logprobs == [-0.5, -0.25, -0.125]
    assert out[0].prompt_ids == policy.prompt_ids(_convs(3)[0])[0]

    policy.generation_engine = None
    policy._generate_ids = lambda prompts, sampling: rows  # a padded transformers batch
    out = policy.generate(_convs(3), SamplingParams(max_new_tokens=3))
    assert [(c.token_ids, c.finish_reason) for c in out] == [([5], "stop")] * 3


@pytest.mark.parametrize(
    ("prompts", "completions"),
    [([[1, 2]], [[3, 10**6]]), ([[-1, 2]], [[3]]), ([[1], [2]], [[3], [4, 512]])],
    ids=["huge completion id", "negative prompt id", "vocab size itself"],
)
def test_token_ids_outside_the_vocabulary_are_a_clear_error(tiny_lm_path, prompts, completions):
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    vocab = policy.model.get_input_embeddings().num_embeddings
    assert vocab == 512  # the tiny model's; the last case names it
    before = [p.detach().clone() for p in policy.parameters()]
    with pytest.raises(ValueError, match=r"token id -?\d+ is outside its vocabulary \[0, 512\)"):
        policy.sequence_logprobs(prompts, completions)
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters()))


def test_generate_logprobs_match_sequence_logprobs(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    sampling = SamplingParams(max_new_tokens=16, temperature=0.7, seed=5)
    out = policy.generate(_convs(8), sampling)
    policy.logprob_temperature = 0.7
    recomputed = policy.sequence_logprobs([c.prompt_ids for c in out], [c.token_ids for c in out])
    for c, lp in zip(out, recomputed):
        assert lp.shape == (len(c.token_ids),)
        assert lp.requires_grad
        assert torch.allclose(lp.detach(), torch.tensor(c.logprobs), atol=ATOL)
    # At temperature 1 the numbers differ: the temperature really is applied.
    policy.logprob_temperature = 1.0
    plain = policy.sequence_logprobs([out[0].prompt_ids], [out[0].token_ids])[0]
    assert not torch.allclose(plain.detach(), torch.tensor(out[0].logprobs), atol=1e-2)


def test_sampling_logprobs_ignore_top_k_and_top_p_truncation(tiny_lm_path):
    # The log-probs are recorded while generate runs, from the model's logits, before its
    # top-k / top-p warpers: they must be those of the whole tempered distribution (what
    # sequence_logprobs computes), not of the truncated one that was sampled from.
    policy = HFPolicy(tiny_lm_path, trainable=True, seed=0)
    sampling = SamplingParams(max_new_tokens=12, temperature=0.8, top_k=3, top_p=0.5, seed=9)
    out = policy.generate(_convs(6), sampling)
    policy.logprob_temperature = 0.8
    recomputed = policy.sequence_logprobs([c.prompt_ids for c in out], [c.token_ids for c in out])
    for c, lp in zip(out, recomputed):
        assert len(c.logprobs) == len(c.token_ids) > 0
        assert torch.allclose(lp.detach(), torch.tensor(c.logprobs), atol=ATOL)
    # Truncation concentrates mass: the recorded values are far below log-probs renormalised
    # over 3 tokens (the check can tell the two apart).
    assert min(min(c.logprobs) for c in out) < math.log(1 / 3) - 0.5


def test_left_padding_does_not_change_results(tiny_lm_path):
    policy = _sharpen(_eos_biased(tiny_lm_path))
    greedy = SamplingParams(max_new_tokens=12, temperature=0)
    convs = _convs(8)
    batched = policy.generate(convs, greedy)
    for conv, b in zip(convs, batched):
        alone = policy.generate([conv], greedy)[0]
        assert alone.token_ids == b.token_ids
        assert alone.prompt_ids == b.prompt_ids
        assert torch.allclose(torch.tensor(alone.logprobs), torch.tensor(b.logprobs), atol=ATOL)
    # sequence_logprobs: a sequence scores the same alone and in a padded batch.
    prompts, comps = [c.prompt_ids for c in batched], [c.token_ids for c in batched]
    together = policy.sequence_logprobs(prompts, comps)
    for p, c, lp in zip(prompts, comps, together):
        assert torch.allclose(policy.sequence_logprobs([p], [c])[0], lp, atol=ATOL)


def test_seed_reproducibility_and_global_rng(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, seed=0)
    convs = _convs(4)
    s1 = SamplingParams(max_new_tokens=10, temperature=1.0, seed=11)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    a = policy.generate(convs, s1)
    assert torch.equal(torch.get_rng_state(), state)  # the global stream is untouched
    b = policy.generate(convs, s1)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    c = policy.generate(convs, SamplingParams(max_new_tokens=10, temperature=1.0, seed=12))
    assert [x.token_ids for x in a] != [x.token_ids for x in c]
    # seed=None draws fresh seeds from the policy's own generator.
    unseeded = SamplingParams(max_new_tokens=10, temperature=1.0)
    d, e = policy.generate(convs, unseeded), policy.generate(convs, unseeded)
    assert [x.token_ids for x in d] != [x.token_ids for x in e]
    # ... which is itself seeded: a second policy with the same seed replays it.
    replay = HFPolicy(tiny_lm_path, seed=0)
    assert [x.token_ids for x in replay.generate(convs, unseeded)] == [x.token_ids for x in d]


def test_greedy_is_argmax(tiny_lm_path, tiny_policy):
    out = tiny_policy.generate(_convs(3), SamplingParams(max_new_tokens=8, temperature=0))
    model = tiny_policy.model
    for c in out:
        ids = torch.tensor([c.prompt_ids + c.token_ids])
        with torch.no_grad():
            logits = model(ids).logits[0]
        p = len(c.prompt_ids)
        predicted = logits[p - 1 : p - 1 + len(c.token_ids)].argmax(-1).tolist()
        assert predicted == c.token_ids
        # Greedy log-probs are those of the untempered distribution.
        expected = torch.log_softmax(logits[p - 1 : p - 1 + len(c.token_ids)], -1)
        expected = expected.gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(c.logprobs), expected, atol=ATOL)


def test_models_generation_config_does_not_leak_in(tiny_lm_path):
    """A checkpoint's sampling defaults (repetition penalty, top-k...) must not change what is
    sampled behind the reported log-probs."""
    policy = HFPolicy(tiny_lm_path, seed=0)
    ref = policy.generate(_convs(4), SamplingParams(max_new_tokens=12, temperature=0))
    gc = policy.model.generation_config
    gc.repetition_penalty, gc.top_k, gc.no_repeat_ngram_size, gc.min_new_tokens = 3.0, 2, 1, 5
    out = policy.generate(_convs(4), SamplingParams(max_new_tokens=12, temperature=0))
    assert [c.token_ids for c in out] == [c.token_ids for c in ref]
    assert policy.model.generation_config is gc  # restored afterwards


# ---------------------------------------------------------------------------- stop strings


def test_stop_strings_cut_text_and_tokens_consistently(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, seed=0)
    conv = _convs(1)
    free = policy.generate(conv, SamplingParams(max_new_tokens=40, temperature=1.0, seed=3))[0]
    # A two-letter stop string that occurs in the unconstrained sample, after a few characters.
    match = re.search(r"[a-z]{2}", free.text[4:])
    assert match, free.text
    stop = match.group(0)
    pos = free.text.find(stop)
    cut = policy.generate(
        conv, SamplingParams(max_new_tokens=40, temperature=1.0, seed=3, stop=(stop, "\x00"))
    )[0]
    assert cut.finish_reason == "stop" and cut.metadata["stop"] == stop
    assert stop not in cut.text
    assert policy.tokenizer.decode(cut.token_ids, skip_special_tokens=True) == cut.text
    assert free.text[:pos].startswith(cut.text)  # same sample, cut before the stop string
    assert cut.token_ids == free.token_ids[: len(cut.token_ids)]
    assert cut.logprobs == free.logprobs[: len(cut.token_ids)]
    assert len(cut.token_ids) < len(free.token_ids)


def test_finish_cuts_at_token_boundary_before_stop(tiny_policy):
    """Unit check of the cutting rule on hand-made ids (stop string inside a token)."""
    tok = tiny_policy.tokenizer
    ids = tok("abc xyz<tail", add_special_tokens=False)["input_ids"]
    lps = [-1.0 - i for i in range(len(ids))]
    c = tiny_policy._finish(list(ids), lps, SamplingParams(stop=("z<",)))
    assert c.finish_reason == "stop"
    assert "z<" not in c.text and "abc xyz<tail".startswith(c.text)
    assert tok.decode(c.token_ids, skip_special_tokens=True) == c.text
    assert c.logprobs == lps[: len(c.token_ids)]


# ---------------------------------------------------------------------------- multi-turn


def _turn2(conv, first_reply):
    return conv + [
        {"role": "assistant", "content": first_reply},
        {"role": "user", "content": "And now?"},
    ]


@pytest.mark.parametrize("ending", ["im_end", "length", "endoftext"])
def test_context_prompt_extends_previous_tokens(tiny_policy, ending):
    tok = tiny_policy.tokenizer
    conv = [{"role": "user", "content": "Say hi."}]
    first_prompt, _ = tiny_policy.prompt_ids(conv)
    reply = tok("hi there", add_special_tokens=False)["input_ids"]
    if ending != "length":
        reply = reply + [tok.convert_tokens_to_ids(f"<|{ending}|>")]
    ctx = TokenContext(tuple(first_prompt + reply), num_messages=2)
    conv2 = _turn2(conv, "hi there")
    out = tiny_policy.generate(
        [conv2], SamplingParams(max_new_tokens=4, temperature=0), contexts=[ctx]
    )[0]
    assert out.prompt_ids[: len(ctx.token_ids)] == list(ctx.token_ids)
    assert out.metadata["context_extended"] is True
    bridge = tok.decode(out.prompt_ids[len(ctx.token_ids) :])
    closing = "\n" if ending == "im_end" else "<|im_end|>\n"
    assert bridge == closing + "<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n"


def test_context_from_a_real_first_turn(tiny_lm_path):
    policy = _eos_biased(tiny_lm_path)
    convs = _convs(4)
    sampling = SamplingParams(max_new_tokens=10, temperature=1.0, seed=1)
    first = policy.generate(convs, sampling)
    contexts = [
        TokenContext(tuple(c.prompt_ids + c.token_ids), len(conv) + 1)
        for conv, c in zip(convs, first)
    ]
    second = policy.generate(
        [_turn2(conv, c.text) for conv, c in zip(convs, first)], sampling, contexts
    )
    for ctx, c in zip(contexts, second):
        assert c.prompt_ids[: len(ctx.token_ids)] == list(ctx.token_ids)
        assert c.metadata["context_extended"] is True


def test_context_falls_back_to_rerender(tiny_policy):
    conv = [{"role": "user", "content": "Say hi."}]
    first_prompt, _ = tiny_policy.prompt_ids(conv)
    reply = tiny_policy.tokenizer("hi there", add_special_tokens=False)["input_ids"]
    ctx = TokenContext(tuple(first_prompt + reply), num_messages=2)
    conv2 = _turn2(conv, "something else entirely")  # the env rewrote the reply
    out = tiny_policy.generate(
        [conv2, conv], SamplingParams(max_new_tokens=3, temperature=0), contexts=[ctx, None]
    )
    assert out[0].metadata["context_extended"] is False
    assert out[0].prompt_ids == tiny_policy.prompt_ids(conv2)[0]
    assert "context_extended" not in out[1].metadata


def test_bad_inputs(tiny_policy):
    with pytest.raises(TypeError, match="list of conversations"):
        tiny_policy.generate([{"role": "user", "content": "x"}], SamplingParams())
    with pytest.raises(ValueError, match="contexts"):
        tiny_policy.generate(_convs(2), SamplingParams(), contexts=[None])
    assert tiny_policy.generate([], SamplingParams()) == []
    with pytest.raises(ValueError, match="prompts"):
        tiny_policy.sequence_logprobs([[1, 2]], [[3], [4]])


# ---------------------------------------------------------------------------- parameters


def test_frozen_policy_has_no_grad(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path)
    assert all(not p.requires_grad for p in policy.model.parameters())
    with pytest.raises(RuntimeError, match="frozen"):
        policy.parameters()
    lp = policy.sequence_logprobs([[1, 5, 6]], [[7, 8]])[0]
    assert not lp.requires_grad


def test_full_finetuning_and_reference_copy(tiny_lm_path):
    policy = HFPolicy(tiny_lm_path, trainable=True)
    prompts, comps = [[1, 40, 41, 42]], [[50, 51, 52]]
    with pytest.raises(ValueError, match="reference_model"):
        policy.sequence_logprobs(prompts, comps, reference=True)
    ref = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    policy = HFPolicy(tiny_lm_path, trainable=True, reference_model=ref)
    assert not any(p.requires_grad for p in ref.parameters())
    with torch.no_grad():  # e.g. a trainer computing old log-probs
        assert not policy.sequence_logprobs(prompts, comps)[0].requires_grad
    before = policy.sequence_logprobs(prompts, comps)[0]
    assert before.requires_grad
    opt = torch.optim.SGD(policy.parameters(), lr=0.05)
    (-before.sum()).backward()
    opt.step()
    after = policy.sequence_logprobs(prompts, comps)[0]
    assert after.sum() > before.sum()  # the update raised the completion's likelihood
    reference = policy.sequence_logprobs(prompts, comps, reference=True)[0]
    assert not reference.requires_grad
    assert torch.allclose(reference, before.detach(), atol=ATOL)


# ---------------------------------------------------------------------------- shared LoRA


def _lora() -> LoraConfig:
    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)


def _perturb(policy: HFPolicy, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.5)


def test_shared_lora_adapters_on_one_base(tiny_lm_path):
    policies = HFPolicy.shared_lora(tiny_lm_path, ["helper", "main"], _lora(), seed=0)
    helper, main = policies["helper"], policies["main"]
    assert helper.model is main.model and isinstance(helper.model, PeftModel)
    assert (helper.name, main.name) == ("helper", "main")
    assert all(
        ".helper." in n
        for n, p in helper.model.named_parameters()
        if any(p is q for q in helper.parameters())
    )
    helper_ids = {id(p) for p in helper.parameters()}
    main_ids = {id(p) for p in main.parameters()}
    assert helper_ids and main_ids and not helper_ids & main_ids

    base = HFPolicy(tiny_lm_path)
    convs = _convs(3)
    greedy = SamplingParams(max_new_tokens=10, temperature=0)
    base_out = base.generate(convs, greedy)
    prompts, comps = [c.prompt_ids for c in base_out], [c.token_ids for c in base_out]
    base_lp = base.sequence_logprobs(prompts, comps)

    _perturb(helper, seed=1)
    helper_lp = helper.sequence_logprobs(prompts, comps)
    main_lp = main.sequence_logprobs(prompts, comps)
    ref_lp = helper.sequence_logprobs(prompts, comps, reference=True)
    for b, h, m, r in zip(base_lp, helper_lp, main_lp, ref_lp):
        assert torch.allclose(m.detach(), b, atol=ATOL)  # main's adapter is still a no-op
        assert torch.allclose(r, b, atol=ATOL)  # reference = base with adapters disabled
        assert not torch.allclose(h.detach(), b, atol=1e-2)
        assert not r.requires_grad
    assert [c.token_ids for c in main.generate(convs, greedy)] == comps
    assert [c.token_ids for c in helper.generate(convs, greedy)] != comps

    # Gradients reach exactly the active policy's adapter, never the base.
    sum(x.sum() for x in helper.sequence_logprobs(prompts, comps)).backward()
    assert all(p.grad is not None for p in helper.parameters())
    assert all(p.grad is None for p in main.parameters())
    assert all(p.grad is None for n, p in helper.model.named_parameters() if "lora_" not in n)
    # A second policy may view an existing adapter of the same PeftModel by name.
    view = HFPolicy(helper.model, helper.tokenizer, adapter="main", name="main-view")
    for a, b in zip(view.sequence_logprobs(prompts, comps), main_lp):
        assert torch.allclose(a, b.detach(), atol=ATOL)
        assert not a.requires_grad  # the view is frozen even though "main" is trainable
    with pytest.raises(ValueError, match="not found"):
        HFPolicy(helper.model, helper.tokenizer, adapter="nobody")
    # Switching adapters keeps both trainable adapters trainable.
    assert all(p.requires_grad for p in helper.parameters() + main.parameters())


def test_shared_lora_frozen_adapter(tiny_lm_path):
    policies = HFPolicy.shared_lora(
        tiny_lm_path, ["critic", "actor"], _lora(), trainable={"critic": True, "actor": False}
    )
    critic, actor = policies["critic"], policies["actor"]
    with pytest.raises(RuntimeError, match="frozen"):
        actor.parameters()
    critic.generate(_convs(1), SamplingParams(max_new_tokens=2))
    actor.generate(_convs(1), SamplingParams(max_new_tokens=2))
    assert all(p.requires_grad for p in critic.parameters())
    actor_params = critic._state.adapter_params["actor"]
    assert actor_params and not any(p.requires_grad for p in actor_params)
    assert not actor.sequence_logprobs([[1, 2]], [[3, 4]])[0].requires_grad


@pytest.mark.parametrize("reference_of", ["critic", "actor"])
@pytest.mark.parametrize("active", ["critic", "actor"])
def test_a_reference_pass_keeps_each_adapters_trainability(tiny_lm_path, active, reference_of):
    """Leaving peft's disable_adapter made the active adapter trainable and froze the others:
    with the frozen actor's adapter active, the critic's became frozen."""
    policies = HFPolicy.shared_lora(
        tiny_lm_path, ["critic", "actor"], _lora(), trainable={"critic": True, "actor": False}
    )
    params = policies["critic"]._state.adapter_params
    with torch.no_grad():
        policies[active].sequence_logprobs([[1, 2]], [[3, 4]])  # makes its adapter active
    policies[reference_of].sequence_logprobs([[1, 2]], [[3, 4]], reference=True)
    assert all(p.requires_grad for p in params["critic"])
    assert not any(p.requires_grad for p in params["actor"])

    class Interrupted(Exception):
        pass

    def interrupted(*args, **kwargs):
        raise Interrupted

    embeddings = policies["critic"].model.get_input_embeddings()
    embeddings.forward = interrupted  # a Ctrl-C in the middle of the reference pass
    try:
        with pytest.raises(Interrupted):
            policies[reference_of].sequence_logprobs([[1, 2]], [[3, 4]], reference=True)
    finally:
        del embeddings.forward
    assert all(p.requires_grad for p in params["critic"])
    assert not any(p.requires_grad for p in params["actor"])


# ---------------------------------------------------------------------------- checkpoints


def test_lora_save_load_roundtrip(tiny_lm_path, tmp_path):
    policies = HFPolicy.shared_lora(tiny_lm_path, ["first", "second"], _lora())
    a = policies["first"]
    _perturb(a, seed=2)
    prompts, comps = [[1, 30, 31]], [[40, 41, 42]]
    saved_lp = a.sequence_logprobs(prompts, comps)[0].detach()
    a.save(tmp_path / "ckpt")
    _perturb(a, seed=3)
    assert not torch.allclose(a.sequence_logprobs(prompts, comps)[0].detach(), saved_lp)
    a.load(tmp_path / "ckpt")
    assert torch.allclose(a.sequence_logprobs(prompts, comps)[0].detach(), saved_lp, atol=1e-6)
    assert all(p.requires_grad for p in a.parameters())
    # The directory is a regular peft adapter: loadable as such.
    fresh = HFPolicy(tiny_lm_path, adapter=str(tmp_path / "ckpt"), name="a2", trainable=True)
    assert torch.allclose(fresh.sequence_logprobs(prompts, comps)[0].detach(), saved_lp, atol=1e-6)


def test_full_save_load_roundtrip(tiny_lm_path, tmp_path):
    policy = HFPolicy(tiny_lm_path, trainable=True)
    _perturb(policy, seed=4)
    prompts, comps = [[1, 30, 31]], [[40, 41, 42]]
    saved_lp = policy.sequence_logprobs(prompts, comps)[0].detach()
    policy.save(tmp_path / "full")
    policy.save(tmp_path / "full")  # overwriting an existing checkpoint is fine
    _perturb(policy, seed=5)
    policy.load(tmp_path / "full")
    assert torch.allclose(policy.sequence_logprobs(prompts, comps)[0].detach(), saved_lp)
    reloaded = HFPolicy(str(tmp_path / "full"))
    assert torch.allclose(reloaded.sequence_logprobs(prompts, comps)[0], saved_lp, atol=1e-6)
    with pytest.raises(FileNotFoundError):
        policy.load(tmp_path / "missing")
