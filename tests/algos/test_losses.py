from __future__ import annotations

import copy

import pytest
import torch

from llm_marl.algos.losses import (
    PGConfig,
    Sample,
    aggregate,
    clipped_pg_loss,
    k3_kl,
    make_optimizer,
    policy_gradient_update,
    trajectory_samples,
)
from llm_marl.rollout.types import Trajectory

from .conftest import BigramPolicy
from .helpers import turn


def test_ratio_one_gives_minus_advantage_per_token():
    lp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    per_token, stats = clipped_pg_loss(lp, lp.detach(), torch.tensor([0.5]), torch.ones(1, 2))
    assert per_token.tolist() == [[-0.5, -0.5]]
    assert stats["clipped"].sum() == 0
    # The gradient is -A * ratio * d logp = -A per token.
    per_token.sum().backward()
    assert lp.grad.tolist() == [[-0.5, -0.5]]


def test_clip_higher_is_asymmetric():
    old = torch.zeros(1, 1)
    adv = torch.tensor([1.0])
    mask = torch.ones(1, 1)
    ratio_125 = torch.log(torch.tensor([[1.25]]))
    # Symmetric 0.2 clipping caps a positive-advantage ratio at 1.2 ...
    loss, stats = clipped_pg_loss(ratio_125, old, adv, mask, clip_low=0.2)
    assert loss.item() == pytest.approx(-1.2)
    assert stats["clipped"].item() == 1.0
    # ... clip-higher (0.28) lets it reach 1.25.
    loss, stats = clipped_pg_loss(ratio_125, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(-1.25)
    assert stats["clipped"].item() == 0.0
    # The low side still clips at 1 - 0.2 for negative advantages.
    ratio_07 = torch.log(torch.tensor([[0.7]]))
    loss, _ = clipped_pg_loss(ratio_07, old, -adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(0.8)


def test_clipped_tokens_get_no_gradient():
    lp = torch.log(torch.tensor([[1.5]])).requires_grad_()
    loss, _ = clipped_pg_loss(lp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1))
    loss.sum().backward()
    assert lp.grad.item() == 0.0


def test_masked_positions_contribute_nothing_even_with_garbage():
    lp = torch.tensor([[-1.0, 50.0]], requires_grad=True)
    loss, _ = clipped_pg_loss(
        lp, torch.tensor([[-1.0, -80.0]]), torch.tensor([1.0]), torch.tensor([[1.0, 0.0]])
    )
    assert torch.isfinite(loss).all()
    loss.sum().backward()
    assert lp.grad[0, 1].item() == 0.0


def test_k3_is_nonnegative_zero_at_equality_and_unbiased():
    lp = torch.tensor([-0.1, -2.0, -1.0])
    assert torch.allclose(k3_kl(lp, lp), torch.zeros(3))
    assert (k3_kl(lp, torch.tensor([-3.0, 0.0, -1.5])) >= 0).all()
    # E_{x~pi}[k3] = KL(pi || ref) for a categorical distribution.
    pi = torch.tensor([0.6, 0.3, 0.1])
    ref = torch.tensor([0.2, 0.5, 0.3])
    exact = (pi * (pi.log() - ref.log())).sum()
    expected_k3 = (pi * k3_kl(pi.log(), ref.log())).sum()
    assert expected_k3.item() == pytest.approx(exact.item(), rel=1e-5)


def test_kl_term_is_added_with_its_coefficient():
    lp = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])
    base, _ = clipped_pg_loss(lp, lp, torch.tensor([0.0]), torch.ones(1, 1))
    with_kl, stats = clipped_pg_loss(
        lp, lp, torch.tensor([0.0]), torch.ones(1, 1), ref_logprobs=ref, kl_coef=0.5
    )
    assert (with_kl - base).item() == pytest.approx(0.5 * k3_kl(lp, ref).item())
    assert "kl" in stats


def test_token_mean_and_sequence_mean_differ_on_unequal_lengths():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    assert aggregate(per_token, mask, "token-mean").item() == pytest.approx(8 / 5)
    assert aggregate(per_token, mask, "sequence-mean").item() == pytest.approx((1 + 4) / 2)
    assert aggregate(per_token, mask, "token-sum").item() == pytest.approx(8 / 8)
    assert aggregate(per_token, mask, "token-sum", constant=2.0).item() == pytest.approx(4.0)
    with pytest.raises(ValueError):
        aggregate(per_token, mask, "median")


def test_pgconfig_validates():
    with pytest.raises(ValueError, match="aggregation"):
        PGConfig(aggregation="mean")
    with pytest.raises(ValueError, match="epochs"):
        PGConfig(epochs=0)
    with pytest.raises(ValueError, match="kl_coef"):
        PGConfig(kl_coef=-1)


# ------------------------------------------------------------------------------------ samples


def test_continuing_turns_form_one_stream_with_env_tokens_masked():
    traj = Trajectory(
        "a",
        "p",
        True,
        [
            turn("a", 0, [1, 2], [3, 4], [-0.1, -0.2]),
            turn("a", 1, [1, 2, 3, 4, 7, 7], [5], [-0.3], continues=True),
        ],
    )
    (s,) = trajectory_samples(traj, [1.0, -2.0])
    assert s.prompt_ids == [1, 2]
    assert s.completion_ids == [3, 4, 7, 7, 5]
    assert s.mask == [1, 1, 0, 0, 1]
    assert s.advantages == [1.0, 1.0, 0.0, 0.0, -2.0]
    assert s.old_logprobs == [-0.1, -0.2, 0.0, 0.0, -0.3]
    assert s.num_generated == 3
    # The stream is exactly the trajectory's token stream and mask.
    assert s.prompt_ids + s.completion_ids == traj.token_ids
    assert [0, 0] + s.mask == traj.mask


def test_a_turn_that_does_not_extend_the_stream_starts_a_new_sample():
    traj = Trajectory(
        "a", "p", True, [turn("a", 0, [1, 2], [3]), turn("a", 1, [9, 9], [4], continues=False)]
    )
    samples = trajectory_samples(traj, [0.5, 0.25])
    assert [s.prompt_ids for s in samples] == [[1, 2], [9, 9]]
    assert [s.advantages for s in samples] == [[0.5], [0.25]]
    assert samples[0].old_logprobs is None


def test_text_without_tokens_on_a_trainable_agent_is_an_error():
    traj = Trajectory("a", "api", True, [turn("a", 0, [], [], text="hello")])
    with pytest.raises(ValueError, match="token-in/token-out"):
        trajectory_samples(traj, [1.0])
    with pytest.raises(ValueError, match="advantages for"):
        trajectory_samples(traj, [1.0, 2.0])


# ------------------------------------------------------------------------------------ update


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
