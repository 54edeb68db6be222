"""``llm-marl train --dry-run``: memory per rank from configs alone, checked against what the
tiny models really allocate on CPU."""

from __future__ import annotations

import pytest
import torch

from llm_marl.cli import main
from llm_marl.train.memory import estimate, model_config, model_shape


def _rows(out: str) -> dict[str, list[str]]:
    lines = out.strip().splitlines()
    assert lines[1].split()[:2] == ["policy", "model"]
    return {line.split()[0]: line.split() for line in lines[2:]}


def test_dry_run_plans_every_policy_before_any_model_is_built(monkeypatch, capsys) -> None:
    import transformers

    def no_model(*args, **kwargs):
        raise AssertionError("--dry-run built a model")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_model)
    assert main(["train", "--dry-run"]) == 0
    one = _rows(capsys.readouterr().out)
    assert set(one) == {"left", "right"}
    assert main(["train", "--dry-run", "--policies.world_size", "2"]) == 0
    two = _rows(capsys.readouterr().out)
    assert one["left"][2] == "1" and two["left"][2] == "2"
    # Sharded over 2 ranks: half the optimizer state on each.
    assert float(two["left"][5]) == pytest.approx(float(one["left"][5]) / 2, abs=1e-3)


def test_dry_run_of_a_paper_preset_uses_known_shapes_offline(capsys) -> None:
    # Qwen3-14B (MATPO) is never downloaded in tests: its shape comes from the known table.
    argv = ["train", "--dry-run", "--algo", "matpo", "--preset", "matpo-paper"]
    assert main([*argv, "--policies.world_size", "8"]) == 0
    rows = _rows(capsys.readouterr().out)
    (row,) = rows.values()
    # 14.77e9 bf16 parameters over 8 ranks (3.44 GiB), plus the gathered root unit
    # (embeddings and untied head, 1.56e9) and two layers (0.33e9 each): 7.57 GiB.
    assert 7.4 < float(row[4]) < 7.8
    assert row[-3] in ("yes", "NO") and row[-1] == "device(s)"
    shape = model_shape(model_config("Qwen/Qwen3-14B"))
    assert 14.7e9 < shape.params < 14.9e9 and shape.layers == 40


def test_dry_run_of_an_unknown_hub_model_offline_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["train", "--dry-run", "--policies.model", "nobody/no-such-model"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-model" in err and "HF_HUB_OFFLINE" in err


def _saved_activation_bytes(policy, prompts, completions) -> int:
    """Bytes autograd keeps for backward in one forward (weights excluded), storage-unique."""
    weights = {p.untyped_storage().data_ptr() for p in policy.model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            seen[ptr] = max(seen.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        policy.sequence_logprobs(prompts, completions)
    return sum(seen.values())


@pytest.mark.parametrize("lora", [False, True])
def test_estimates_match_measured_memory_of_the_tiny_model(tiny_lm_path: str, lora: bool) -> None:
    from transformers import AutoConfig

    from llm_marl.algos.update import PGConfig, make_optimizer
    from llm_marl.policies.hf import HFPolicy

    lora_config = None
    if lora:
        from peft import LoraConfig

        lora_config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear")
    policy = HFPolicy(tiny_lm_path, trainable=True, lora_config=lora_config, seed=0)
    policy.share_prompts = False  # every row's prompt through the backbone, as planned
    rows, prompt_len, completion_len = 8, 24, 40
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(10, 400, (rows, prompt_len), generator=gen).tolist()
    completions = torch.randint(10, 400, (rows, completion_len), generator=gen).tolist()
    tokens = rows * (prompt_len + completion_len)
    plan = estimate(
        model_shape(AutoConfig.from_pretrained(tiny_lm_path), 4 if lora else None),
        lora=lora,
        tokens=tokens,
    )

    model_bytes = sum(p.numel() * p.element_size() for p in policy.model.parameters())
    assert plan.params == pytest.approx(model_bytes, rel=0.01)

    activations = _saved_activation_bytes(policy, prompts, completions)
    assert plan.activations == pytest.approx(activations, rel=0.35), (plan.activations, activations)

    optimizer, _ = make_optimizer(policy.parameters(), PGConfig(lr=1e-3))
    loss = torch.stack([lp.sum() for lp in policy.sequence_logprobs(prompts, completions)]).sum()
    loss.backward()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in policy.parameters())
    assert plan.grads == pytest.approx(grads, rel=0.01)
    optimizer.step()
    states = sum(
        t.numel() * t.element_size()
        for state in optimizer.state.values()
        for name, t in state.items()
        if name != "step"
    )
    assert plan.optimizer == pytest.approx(states, rel=0.01)
