"""The tensor maths of the clipped policy-gradient loss: surrogate, k3 KL, aggregation."""

from __future__ import annotations

import pytest
import torch

from llm_marl.algos.losses import aggregate, clipped_pg_loss, k3_kl, policy_gradient_loss


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


def test_dual_clip_caps_the_loss_of_a_negative_advantage_with_a_huge_ratio():
    old = torch.zeros(1, 3)
    mask = torch.ones(1, 3)
    # ratios 20, 5 and 0.5 on the tokens of one sequence with advantage -1
    lp = torch.log(torch.tensor([[20.0, 5.0, 0.5]])).requires_grad_()
    plain, _ = clipped_pg_loss(lp, old, torch.tensor([-1.0]), mask, clip_low=0.2)
    dual, stats = clipped_pg_loss(lp, old, torch.tensor([-1.0]), mask, clip_ratio_c=10.0)
    # Without dual-clip the loss is -A * ratio = 20; dual-clip caps it at -A * c = 10.
    assert plain.tolist()[0] == pytest.approx([20.0, 5.0, 0.8])
    assert dual.tolist()[0] == pytest.approx([10.0, 5.0, 0.8])
    assert stats["dual_clipped"].tolist() == [[1.0, 0.0, 0.0]]
    dual.sum().backward()
    assert lp.grad[0, 0].item() == 0.0  # the capped token gets no gradient
    assert lp.grad[0, 1].item() == pytest.approx(5.0)  # d(-A * r)/d logp = -A * r
    # Positive advantages are never dual-clipped.
    pos, stats = clipped_pg_loss(lp.detach(), old, torch.tensor([1.0]), mask, clip_ratio_c=10.0)
    assert pos.tolist()[0] == pytest.approx([-1.2, -1.2, -0.5])
    assert stats["dual_clipped"].sum() == 0
    with pytest.raises(ValueError, match="must be > 1"):
        clipped_pg_loss(lp, old, torch.tensor([-1.0]), mask, clip_ratio_c=1.0)


def test_the_comlrl_loss_is_minus_advantage_times_summed_logprobs_averaged_over_completions():
    # Two completions of lengths 2 and 3 (right-padded), advantages +0.5 and -1.5.
    lp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.25, -3.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([0.5, -1.5])
    per_token = policy_gradient_loss(lp, adv, mask)
    loss = aggregate(per_token, mask, "sequence-sum")
    # By hand: ( -0.5 * (-1 - 2) + 1.5 * (-0.5 - 0.25 - 3) ) / 2 = (1.5 - 5.625) / 2
    assert loss.item() == pytest.approx((1.5 - 5.625) / 2)
    loss.backward()
    # d loss / d logp = -A / (number of completions), on generated tokens only
    assert lp.grad[0].tolist() == pytest.approx([-0.25, -0.25, 0.0])
    assert lp.grad[1].tolist() == pytest.approx([0.75, 0.75, 0.75])
    # With micro-batches, the whole minibatch's number of sequences normalises.
    half = aggregate(per_token[:1], mask[:1], "sequence-sum", num_sequences=2.0)
    assert half.item() == pytest.approx(1.5 / 2)
