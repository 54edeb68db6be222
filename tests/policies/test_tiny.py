"""build_tiny_lm: determinism, caching, tokenizer round-trips, chat template, loadability."""

from __future__ import annotations

import json
import random
import time
import unicodedata
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from llm_marl.policies.tiny import ARGS_FILE, CHAT_TEMPLATE, build_tiny_lm


def _weights(path: str | Path) -> dict[str, torch.Tensor]:
    return load_file(str(Path(path) / "model.safetensors"))


def _random_text(rng: random.Random, n: int) -> str:
    """Characters from many scripts and planes: ASCII, controls, Latin-1, CJK, emoji, combining."""
    ranges = [
        (0x00, 0x7F),
        (0x80, 0x24F),
        (0x300, 0x36F),
        (0x370, 0x3FF),
        (0x400, 0x4FF),
        (0x590, 0x6FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1FAFF),
        (0x10000, 0x1007F),
    ]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def test_same_seed_gives_identical_model_and_tokenizer(tmp_path):
    a = build_tiny_lm(tmp_path / "a", seed=3)
    b = build_tiny_lm(tmp_path / "b", seed=3)
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and len(wa) > 0
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    assert (Path(a) / "tokenizer.json").read_bytes() == (Path(b) / "tokenizer.json").read_bytes()

    c = build_tiny_lm(tmp_path / "c", seed=4)
    wc = _weights(c)
    assert any(not torch.equal(wa[k], wc[k]) for k in wa)
    # The tokenizer does not depend on the weight seed.
    assert (Path(a) / "tokenizer.json").read_bytes() == (Path(c) / "tokenizer.json").read_bytes()


def test_build_leaves_global_rng_alone(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_lm(tmp_path / "m", seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_cache_hit_is_fast_and_does_not_rewrite(tmp_path):
    path = build_tiny_lm(tmp_path / "m")
    weights = Path(path) / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    start = time.perf_counter()
    again = build_tiny_lm(tmp_path / "m")
    elapsed = time.perf_counter() - start
    assert again == path
    assert elapsed < 0.05, f"cache hit took {elapsed:.3f}s"
    assert weights.stat().st_mtime_ns == mtime


def test_changed_arguments_rebuild(tmp_path):
    path = build_tiny_lm(tmp_path / "m", seed=0)
    before = _weights(path)
    build_tiny_lm(tmp_path / "m", seed=1)
    after = _weights(path)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    record = json.loads((Path(path) / ARGS_FILE).read_text())
    assert record["seed"] == 1


def test_refuses_to_overwrite_foreign_directory(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="does not hold a tiny LM"):
        build_tiny_lm(foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_bad_arguments_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="arch"):
        build_tiny_lm(tmp_path / "x", arch="gpt9")
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_lm(tmp_path / "x", hidden_size=30, num_heads=4)
    with pytest.raises(ValueError, match="too small"):
        build_tiny_lm(tmp_path / "x", vocab_size=100)


def test_loads_with_auto_classes_and_is_small(tiny_lm_path):
    tok = AutoTokenizer.from_pretrained(tiny_lm_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_path)
    n_params = sum(p.numel() for p in model.parameters())
    assert 50_000 < n_params < 5_000_000
    assert len(tok) == model.config.vocab_size == 512
    assert tok.eos_token == tok.pad_token == "<|endoftext|>"
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        ids = tok(special, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids) == [special]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end in model.generation_config.eos_token_id
    with torch.no_grad():
        out = model(torch.tensor([[1, 2, 3, 4]]))
    assert out.logits.shape == (1, 4, 512)


def test_loaded_tokenizer_matches_the_trained_one(tiny_lm_path):
    """AutoTokenizer may rebuild the pipeline for the model type; it must encode identically."""
    loaded = AutoTokenizer.from_pretrained(tiny_lm_path)
    raw = Tokenizer.from_file(str(Path(tiny_lm_path) / "tokenizer.json"))
    rng = random.Random(0)
    texts = ["The answer is 42.\n\ndef f(x):\n    return x", "  spaced   out  "]
    texts += [_random_text(rng, 40) for _ in range(20)]
    for text in texts:
        assert loaded(text, add_special_tokens=False)["input_ids"] == raw.encode(text).ids


def test_any_text_round_trips(tmp_path, tiny_lm_path):
    rng = random.Random(1)
    texts = [_random_text(rng, rng.randint(1, 80)) for _ in range(200)]
    texts += [
        "",
        "\x00\x01\x7f",
        "e\u0301 vs \u00e9",
        "🤖👩‍👩‍👧 中文 한국어 עברית",
        "\r\n\t  \u3000",
    ]
    # Llama arch: no normaliser, byte-exact round-trip of every string.
    llama = AutoTokenizer.from_pretrained(build_tiny_lm(tmp_path / "llama", arch="llama"))
    for text in texts:
        assert llama.decode(llama(text, add_special_tokens=False)["input_ids"]) == text
    # Qwen2 arch: transformers' Qwen2Tokenizer NFC-normalises first (as real Qwen models do).
    qwen = AutoTokenizer.from_pretrained(tiny_lm_path)
    for text in texts:
        ids = qwen(text, add_special_tokens=False)["input_ids"]
        assert qwen.decode(ids) == unicodedata.normalize("NFC", text)


def test_chat_template_renders_chatml(tiny_lm_path):
    tok = AutoTokenizer.from_pretrained(tiny_lm_path)
    assert tok.chat_template == CHAT_TEMPLATE
    conv = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "calc", "arguments": '{"x": 4}'}}
            ],
        },
        {"role": "tool", "content": "4"},
    ]
    text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\n2+2?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "calc", "arguments": "{\\"x\\": 4}"}'
        "</tool_call><|im_end|>\n"
        "<|im_start|>tool\n4<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    no_prompt = tok.apply_chat_template(conv[:2], tokenize=False, add_generation_prompt=False)
    assert no_prompt.endswith("2+2?<|im_end|>\n")
    ids = tok.apply_chat_template(conv[:2], add_generation_prompt=True, return_dict=False)
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    assert tok.decode(ids) == tok.apply_chat_template(
        conv[:2], tokenize=False, add_generation_prompt=True
    )


def test_library_use_prints_no_transformers_progress_bars(tmp_path, capfd):
    """build_tiny_lm, HFPolicy and its save print no "Loading weights" / "Writing model shards"
    bars, and transformers' own setting is back as it was afterwards."""
    from transformers.utils import logging as hf_logging

    from llm_marl.policies.hf import HFPolicy

    hf_logging.enable_progress_bar()
    policy = HFPolicy(build_tiny_lm(tmp_path / "lm", seed=7), name="quiet")
    policy.save(tmp_path / "saved")
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err and "%|" not in err
    assert hf_logging.is_progress_bar_enabled()
