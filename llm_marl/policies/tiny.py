"""An offline tiny causal LM + byte-level BPE tokenizer, for tests, demos and CPU learning runs.

:func:`build_tiny_lm` writes a randomly initialised Qwen2 (or Llama) model and a freshly trained
byte-level BPE tokenizer with a ChatML chat template into a directory that
``AutoTokenizer.from_pretrained`` / ``AutoModelForCausalLM.from_pretrained`` load like any Hub
checkpoint. Nothing is downloaded: the tokenizer is trained in milliseconds on a small corpus
written for this module, and the byte-level alphabet guarantees that *any* text round-trips.

The build is deterministic for a given set of arguments (bit-identical weights, identical
tokenizer) and cached: calling it again on a directory that already holds a model built with the
same arguments returns at once.

>>> path = build_tiny_lm("/tmp/tiny-lm")                      # doctest: +SKIP
>>> policy = HFPolicy(path, trainable=True)                    # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

from llm_marl.policies.quiet import quiet_transformers
from llm_marl.tools.files import replace_dir

TINY_LM_VERSION = 2
"""Bump when the build recipe changes, so that cached directories are rebuilt (2: the context
grew from 2,048 to :data:`TINY_LM_CONTEXT` positions)."""

TINY_LM_CONTEXT = 32768
"""Positions the tiny LM (and its tokenizer) declare. A stand-in for the small real models it
replaces in tests and smokes (Qwen2.5-0.5B/1.5B/3B declare 32,768): the paper presets' prompts
(MATPO's tool descriptions and search results) run past 2,048 tokens of the tiny byte-level
tokenizer, and a policy refuses a prompt its context cannot hold. Rotary position embeddings
have no table of this size, so the weights and every output are the same as at 2,048."""

ARGS_FILE = "llm_marl_tiny.json"
"""Written last into a built directory: the arguments it was built with (the cache key)."""

EOS_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (EOS_TOKEN, IM_START, IM_END)

# ChatML. Tool calls of assistant messages are rendered as JSON inside <tool_call> tags so that a
# conversation with tool use still renders to plain text; content may be missing (None).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- elif message['content'] is not none -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- if message.get('tool_calls') -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- if not loop.first or message['content'] -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>' + (call['function'] if call.get('function') else call) | tojson"
    " + '</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# A small corpus, written for this module, that gives the BPE merges something to learn from:
# chat roles, English prose, arithmetic, a little code and the answer formats the toy and
# benchmark envs use. It only shapes which merges exist; any text still round-trips.
_CORPUS = """\
system
user
assistant
tool
You are a helpful assistant. Answer the question and put the final answer in \\boxed{}.
You are the helper. Write a short hint that helps your partner solve the task.
You are the main agent. Use the hint from your partner and give the answer.
The answer is 42. The answer is 7. The answer is yes. The answer is no.
Let us think step by step. First we add the numbers, then we multiply the result by two.
What is 3 + 4? 3 + 4 = 7. What is 12 - 5? 12 - 5 = 7. What is 6 * 7? 6 * 7 = 42.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 100 1000
one two three four five six seven eight nine ten
red green blue yellow black white left right up down north south east west
The quick brown fox jumps over the lazy dog. A cat sat on the mat.
<answer>7</answer> <answer>42</answer> <hint>add</hint> <critique>correct</critique>
def add(a, b):
    return a + b

def solve(numbers: list[int]) -> int:
    total = 0
    for n in numbers:
        if n % 2 == 0:
            total += n
    return total

class Solution:
    def __init__(self):
        self.items = []

import math
print(math.sqrt(16))
assert add(2, 3) == 5
Summarize the following text in one sentence. The summary should be short and clear.
Search the web for the question, read the page, and report what you found.
{"name": "search", "arguments": {"query": "capital of France"}}
The capital of France is Paris. The capital of Japan is Tokyo.
Please try again. That is correct. That is wrong. Good job, well done!
"""


def _args_record(
    seed: int,
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    arch: str,
    corpus: list[str] | None,
) -> dict[str, Any]:
    corpus_text = "\x00".join(corpus) if corpus is not None else _CORPUS
    return {
        "version": TINY_LM_VERSION,
        "seed": seed,
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "arch": arch,
        "corpus_sha256": hashlib.sha256(corpus_text.encode("utf-8")).hexdigest(),
        # The template is part of the recipe: editing it must invalidate cached builds.
        "chat_template_sha256": hashlib.sha256(CHAT_TEMPLATE.encode("utf-8")).hexdigest(),
    }


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / ARGS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _train_tokenizer(vocab_size: int, corpus: list[str], *, nfc: bool) -> Any:
    """Train a byte-level BPE tokenizer (a few ms) and wrap it for transformers.

    The pre-tokenisation pipeline is the one transformers' ``Qwen2Tokenizer`` rebuilds on load
    (its split regex, then byte-level mapping), so what we train is exactly what
    ``AutoTokenizer`` gives back. ``nfc`` adds Qwen2's NFC normaliser: transformers forces it for
    ``model_type="qwen2"`` checkpoints, so text is NFC-normalised before encoding (as with real
    Qwen models); without it (Llama arch) every string round-trips byte for byte.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    min_vocab = len(alphabet) + len(SPECIAL_TOKENS)
    if vocab_size < min_vocab:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a byte-level tokenizer needs at least "
            f"{min_vocab} entries (256 bytes + {len(SPECIAL_TOKENS)} special tokens)"
        )
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        clean_up_tokenization_spaces=False,
        model_max_length=TINY_LM_CONTEXT,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


class _ModelShape(TypedDict):
    """The config fields shared by every tiny architecture (typed so ``**`` unpacking is)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: None
    eos_token_id: int
    pad_token_id: int


def tiny_config(
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    arch: str = "qwen2",
) -> Any:
    """The ``transformers`` config of the model :func:`build_tiny_lm` builds with these
    arguments, without building anything (memory planning reads shapes from it)."""
    return _make_config(arch, vocab_size, hidden_size, num_layers, num_heads, eos_id=0)


def _make_config(
    arch: str,
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    eos_id: int,
) -> Any:
    common: _ModelShape = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": 4 * hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_heads,
        "max_position_embeddings": TINY_LM_CONTEXT,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
    }
    if arch == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(**common, use_sliding_window=False)
    if arch == "llama":
        from transformers import LlamaConfig

        return LlamaConfig(**common)
    raise ValueError(f"unknown arch {arch!r}: use 'qwen2' or 'llama'")


def build_tiny_lm(
    path: str | os.PathLike[str],
    *,
    seed: int = 0,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    arch: str = "qwen2",
    corpus: Iterable[str] | None = None,
) -> str:
    """Build (or reuse) a tiny random-init causal LM + tokenizer under ``path``; return ``path``.

    Args:
        path: Output directory. Created if missing. If it already holds a tiny LM built with the
            same arguments, nothing is done. A directory that holds something else is refused.
        seed: Seeds the weight initialisation (the global torch RNG is left untouched).
        vocab_size: Tokenizer + embedding size (>= 259: 256 bytes and 3 special tokens).
        hidden_size, num_layers, num_heads: Model shape (MLP width is ``4 * hidden_size``).
        arch: ``"qwen2"`` (default) or ``"llama"``.
        corpus: Texts to train the BPE merges on (default: a small built-in corpus).

    With the defaults the model has about 0.2M parameters (tied embeddings) and runs a forward
    pass over a short batch in a millisecond or two on CPU.
    """
    if arch not in ("qwen2", "llama"):
        raise ValueError(f"unknown arch {arch!r}: use 'qwen2' or 'llama'")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} must be divisible by num_heads={num_heads}")
    corpus_list = list(corpus) if corpus is not None else None
    if corpus_list is not None and not all(isinstance(t, str) for t in corpus_list):
        raise TypeError("corpus must be an iterable of str")
    record = _args_record(seed, vocab_size, hidden_size, num_layers, num_heads, arch, corpus_list)
    out = Path(path)
    if _read_record(out) == record:
        return str(path)
    if out.exists() and any(out.iterdir()) and _read_record(out) is None:
        raise FileExistsError(
            f"{out} exists and does not hold a tiny LM built by llm_marl; "
            "pass an empty or new directory"
        )

    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    tokenizer = _train_tokenizer(
        vocab_size,
        corpus_list if corpus_list is not None else [_CORPUS],
        nfc=arch == "qwen2",
    )
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    im_end_id = tokenizer.convert_tokens_to_ids(IM_END)
    config = _make_config(arch, vocab_size, hidden_size, num_layers, num_heads, eos_id)
    # fork_rng: seeding must not disturb the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Generation stops on either end token; no sampling defaults are stored (callers choose).
    model.generation_config = GenerationConfig(
        eos_token_id=[im_end_id, eos_id], pad_token_id=eos_id, bos_token_id=None
    )

    # Build in a sibling temp dir and swap it in, so a crash or a concurrent builder never leaves
    # a half-written directory that looks valid (the args file is the last thing written).
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with quiet_transformers():  # no "Writing model shards" bar from a library call
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        (tmp / ARGS_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
        if out.exists() and _read_record(out) == record:  # another process finished first
            return str(path)
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return str(path)
