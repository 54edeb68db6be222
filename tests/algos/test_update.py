"""The policy-gradient update loop: epochs x minibatches x micro-batches, clipping, KL, warmup."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from llm_marl.algos.losses import k3_kl
from llm_marl.algos.samples import Sample
from llm_marl.algos.update import PGConfig, make_optimizer, policy_gradient_update

from .conftest import BigramPolicy


def test_pgconfig_validates():
    with pytest.raises(ValueError, match="aggregation"):
        PGConfig(aggregation="mean")
    with pytest.raises(ValueError, match="epochs"):
        PGConfig(epochs=0)
    with pytest.raises(ValueError, match="kl_coef"):
        PGConfig(kl_coef=-1)


def _samples(policy, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = 1 + i % 3
        comp = torch.randint(0, 8, (length,), generator=g).tolist()
        with torch.no_grad():
            old = policy.sequence_logprobs([[i % 8]], [comp])[0].tolist()
        adv = float(torch.randn(1, generator=g))
        out.append(Sample([i % 8], comp, [1] * length, [adv] * length, old))
    return out


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-mean", "token-sum"])
def test_micro_batching_changes_memory_not_the_update(aggregation):
    a, b = BigramPolicy(seed=1), BigramPolicy(seed=1)
    samples = _samples(a)
    cfg_full = PGConfig(lr=0.1, aggregation=aggregation, max_grad_norm=None)
    cfg_micro = PGConfig(lr=0.1, aggregation=aggregation, max_grad_norm=None, micro_batch_size=2)
    opt_a, _ = make_optimizer(a.parameters(), cfg_full)
    opt_b, _ = make_optimizer(b.parameters(), cfg_micro)
    a.calls = b.calls = 0
    policy_gradient_update(a, opt_a, copy.deepcopy(samples), cfg_full)
    policy_gradient_update(b, opt_b, copy.deepcopy(samples), cfg_micro)
    assert torch.allclose(a.table, b.table, atol=1e-6)
    # One batched log-prob pass per micro-batch: 1 for the whole batch, 3 for micro-batches of 2.
    assert (a.calls, b.calls) == (1, 3)


def test_update_raises_the_probability_of_positive_advantage_tokens():
    policy = BigramPolicy(seed=2)
    good = Sample([0], [5], [1], [1.0], None)
    bad = Sample([0], [6], [1], [-1.0], None)
    with torch.no_grad():
        before = policy.sequence_logprobs([[0], [0]], [[5], [6]])
    cfg = PGConfig(lr=0.05, epochs=3)
    opt, sched = make_optimizer(policy.parameters(), cfg)
    metrics = policy_gradient_update(policy, opt, [good, bad], cfg, scheduler=sched)
    with torch.no_grad():
        after = policy.sequence_logprobs([[0], [0]], [[5], [6]])
    assert after[0].item() > before[0].item()
    assert after[1].item() < before[1].item()
    assert metrics["optimizer_steps"] == 3
    assert metrics["num_tokens"] == 2


def test_ppo_epochs_are_clipped_against_the_rollout_policy():
    policy = BigramPolicy(seed=3)
    sample = Sample([1], [2], [1], [1.0], None)
    cfg = PGConfig(lr=0.5, epochs=30, clip_low=0.2, max_grad_norm=None)
    # Plain SGD: no momentum, so parameters stop exactly when the clipped gradient vanishes.
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    with torch.no_grad():
        start = policy.sequence_logprobs([[1]], [[2]])[0].item()
    metrics = policy_gradient_update(policy, opt, [sample], cfg)
    with torch.no_grad():
        end = policy.sequence_logprobs([[1]], [[2]])[0].item()
    # Once the ratio passes 1.2 the gradient vanishes: the ratio stops just past the clip
    # boundary (the last step may overshoot it), far below what 30 unclipped steps would reach.
    assert 1.2 <= torch.exp(torch.tensor(end - start)).item() < 2.0
    assert metrics["clip_frac"] > 0


def test_kl_update_uses_the_reference_pass():
    policy = BigramPolicy(seed=4)
    with torch.no_grad():
        policy.table.add_(1.0 * torch.eye(8))  # drift away from the reference
    sample = Sample([1], [1], [1], [0.0], None)
    cfg = PGConfig(lr=0.1, kl_coef=1.0, epochs=5)
    opt, _ = make_optimizer(policy.parameters(), cfg)
    with torch.no_grad():
        ref = policy.sequence_logprobs([[1]], [[1]], reference=True)[0]
        kl_before = k3_kl(policy.sequence_logprobs([[1]], [[1]])[0], ref).item()
    metrics = policy_gradient_update(policy, opt, [sample], cfg)
    with torch.no_grad():
        kl_after = k3_kl(policy.sequence_logprobs([[1]], [[1]])[0], ref).item()
    assert kl_after < kl_before
    assert metrics["kl"] > 0


def test_minibatches_take_several_optimizer_steps():
    policy = BigramPolicy(seed=5)
    cfg = PGConfig(lr=0.01, minibatch_size=2, epochs=2)
    opt, _ = make_optimizer(policy.parameters(), cfg)
    metrics = policy_gradient_update(policy, opt, _samples(policy, n=6), cfg)
    assert metrics["optimizer_steps"] == 6


def test_warmup_scales_the_learning_rate():
    policy = BigramPolicy()
    cfg = PGConfig(lr=1.0, warmup_steps=4)
    opt, sched = make_optimizer(policy.parameters(), cfg)
    lrs = []
    for _ in range(5):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])


def test_no_trainable_parameters_is_a_clear_error():
    frozen = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        make_optimizer([frozen], PGConfig())


def test_the_comlrl_loss_update_matches_the_hand_computed_gradient_step():
    # One plain policy-gradient step with SGD-like AdamW settings is hard to compute by hand;
    # compare instead with the gradient of -mean_i A_i * sum_t logp_it computed directly.
    policy = BigramPolicy(seed=4)
    samples = [
        Sample([0], [5, 6], [1, 1], [0.5, 0.5], None),
        Sample([1], [2, 3, 4], [1, 1, 1], [-1.5, -1.5, -1.5], None),
    ]
    expected_policy = BigramPolicy(seed=4)
    lps = expected_policy.sequence_logprobs([[0], [1]], [[5, 6], [2, 3, 4]])
    expected_loss = -(0.5 * lps[0].sum() - 1.5 * lps[1].sum()) / 2
    expected_loss.backward()
    cfg = PGConfig(
        lr=0.1,
        loss="policy-gradient",
        aggregation="sequence-sum",
        max_grad_norm=None,
        weight_decay=0.01,
    )
    opt, _ = make_optimizer(policy.parameters(), cfg)
    grads = {}
    policy.table.register_hook(lambda g: grads.setdefault("table", g.clone()))
    metrics = policy_gradient_update(policy, opt, samples, cfg)
    assert metrics["loss"] == pytest.approx(expected_loss.item(), rel=1e-6)
    assert torch.allclose(grads["table"], expected_policy.table.grad, atol=1e-7)
    # No old log-probs are needed (no ratio): the only log-prob pass is the training one.
    assert all(s.old_logprobs is None for s in samples)
    assert "clip_frac" not in metrics and opt.param_groups[0]["weight_decay"] == 0.01


def test_policy_gradient_loss_refuses_a_kl_term():
    with pytest.raises(ValueError, match="no KL term"):
        PGConfig(loss="policy-gradient", kl_coef=0.1)
    with pytest.raises(ValueError, match="unknown loss"):
        PGConfig(loss="reinforce")
    with pytest.raises(ValueError, match="clip_ratio_c"):
        PGConfig(clip_ratio_c=0.5)


@pytest.mark.parametrize(
    ("loss", "aggregation"), [("clipped", "sequence-mean"), ("policy-gradient", "sequence-sum")]
)
def test_each_turn_of_a_multi_turn_stream_is_one_completion(loss, aggregation):
    # CoMLRL updates each turn's completions separately. One two-turn stream (a 2-token turn,
    # an env bridge token, a 3-token turn) must therefore give the gradient of the two turns
    # trained as two separate samples: under the old per-row mean the long turn weighed 3/5.
    # BigramPolicy conditions only on the previous token, so the split samples see the same
    # log-probs as the stream.
    stream = Sample(
        [0],
        [5, 6, 2, 3, 4, 7],
        [1, 1, 0, 1, 1, 1],
        [0.8, 0.8, 0.0, -1.2, -1.2, -1.2],
        None,
        turn_spans=[(0, 2), (3, 6)],
    )
    split = [
        Sample([0], [5, 6], [1, 1], [0.8, 0.8], None),
        Sample([0, 5, 6, 2], [3, 4, 7], [1, 1, 1], [-1.2] * 3, None),
    ]
    cfg = PGConfig(lr=0.1, loss=loss, aggregation=aggregation, max_grad_norm=None)
    grads = []
    for samples in ([stream], split):
        policy = BigramPolicy(seed=5)
        opt, _ = make_optimizer(policy.parameters(), cfg)
        policy.table.register_hook(lambda g, out=grads: out.append(g.clone()))
        policy_gradient_update(policy, opt, samples, cfg)
    assert torch.allclose(grads[0], grads[1], atol=1e-7)
    # The check can fail: the same stream without its turn spans is weighted per row.
    policy = BigramPolicy(seed=5)
    opt, _ = make_optimizer(policy.parameters(), cfg)
    policy.table.register_hook(lambda g, out=grads: out.append(g.clone()))
    policy_gradient_update(policy, opt, [dataclasses.replace(stream, turn_spans=None)], cfg)
    assert not torch.allclose(grads[2], grads[1], atol=1e-4)


class _RecordingBigram(BigramPolicy):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.batches: list[list[tuple[int, ...]]] = []

    def sequence_logprobs(self, prompt_ids, completion_ids, *, reference=False):
        self.batches.append([tuple(p) for p in prompt_ids])
        return super().sequence_logprobs(prompt_ids, completion_ids, reference=reference)


def test_default_micro_batches_are_prompt_groups_with_the_same_update():
    g = torch.Generator().manual_seed(3)

    def sample(prompt):
        comp = torch.randint(0, 8, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g)
        adv = float(torch.randn(1, generator=g))
        return Sample(prompt, comp.tolist(), [1] * len(comp), [adv] * len(comp), None)

    # Two GRPO groups (4 and 3 completions, interleaved as episodes may come) and three samples
    # whose prompts nobody shares.
    prompts = [[1], [2], [1], [2], [1], [3], [2], [1], [4, 4], [5]]
    samples = [sample(p) for p in prompts]
    packed, grouped, single = (_RecordingBigram(seed=6) for _ in range(3))
    cfg = PGConfig(lr=0.1, aggregation="sequence-mean", max_grad_norm=None, kl_coef=0.1)
    # A budget of one token: every prompt group gets a pass of its own (a group is never split).
    cfg_grouped = dataclasses.replace(cfg, micro_batch_tokens=1)
    cfg_single = dataclasses.replace(cfg, micro_batch_size=1)
    for policy, config in ((packed, cfg), (grouped, cfg_grouped), (single, cfg_single)):
        opt, _ = make_optimizer(policy.parameters(), config)
        policy_gradient_update(policy, opt, copy.deepcopy(samples), config)
    # Per pass (old log-probs, reference log-probs, training). The default budget holds the
    # whole minibatch, grouped by prompt.
    assert [sorted(batch) for batch in packed.batches] == [sorted(prompts_of(samples))] * 3
    groups = [[(1,)] * 4, [(2,)] * 3, [(3,)], [(4, 4)], [(5,)]]
    assert sorted(sorted(batch) for batch in grouped.batches) == sorted(groups * 3)
    assert len(single.batches) == 3 * len(samples)
    # Micro-batching changes the passes, not the update.
    assert torch.allclose(packed.table, single.table, atol=1e-6)
    assert torch.allclose(grouped.table, single.table, atol=1e-6)


def prompts_of(samples: list[Sample]) -> list[tuple[int, ...]]:
    return [tuple(s.prompt_ids) for s in samples]


def test_packed_passes_respect_the_token_budget_and_keep_groups_whole():
    from llm_marl.algos.update import _micro_batches

    def group(prompt_len: int, completion_lens: list[int], tag: int) -> list[Sample]:
        prompt = [tag] * prompt_len
        return [Sample(prompt, [1] * n, [1] * n, [0.0] * n, None) for n in completion_lens]

    samples = [
        *group(10, [5, 6], 1),  # cost alone: 10 + 2 * 6 = 22
        *group(4, [30, 2, 2], 2),  # 4 + 3 * 30 = 94
        *group(8, [7], 3),  # 8 + 7 = 15
        *group(2, [200, 1], 4),  # larger than the budget: a pass of its own
    ]
    passes = list(_micro_batches(samples, PGConfig(micro_batch_tokens=100)))
    # Sorted by longest completion: groups 1 and 3 pack (2 * 10 + 3 * 7 = 41 <= 100); adding
    # group 2 would cost 3 * 10 + 6 * 30 = 210; group 4 is alone.
    assert [sorted({s.prompt_ids[0] for s in p}) for p in passes] == [[1, 3], [2], [4]]
    assert sorted(map(id, (s for p in passes for s in p))) == sorted(map(id, samples))
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        PGConfig(micro_batch_tokens=0)
