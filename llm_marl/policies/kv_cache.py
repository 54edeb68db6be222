"""Key/value caches for :class:`~llm_marl.policies.HFPolicy`: naming and a growing cache.

transformers' default generation cache (``DynamicCache``) appends each step's keys and values
with ``torch.cat``: step ``t`` copies the whole cache, ``O(T^2)`` bytes over a completion, which
was about a fifth of the CPU time of a batched sampling call on small models. Its
``StaticCache`` avoids the copies but attends over its whole preallocated length at every step.
:func:`growing_cache` gives a ``DynamicCache`` whose layers write each step into a buffer
allocated once for the whole call and hand attention views of only the filled part: no copy of
old entries, no attention over empty ones. The keys, values and masks that attention sees are
the same as the default cache's, so the sampled tokens and log-probs are too (tested).

The module also knows the two names of the cache argument (``cache`` since transformers 5,
``past_key_values`` before) and of the cache a forward returns.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["cache_keyword", "growing_cache", "output_cache"]


def cache_keyword(module: Any) -> str:
    """The keyword under which ``module``'s forward takes a key/value cache.

    transformers 5 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes in
    5.40); older releases only know ``past_key_values``.
    """
    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(output: Any) -> Any:
    """The key/value cache a forward returned, under its new name or its old one."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def growing_cache(model: Any, capacity: int) -> Any | None:
    """A ``DynamicCache`` for ``model`` whose layers grow into buffers of ``capacity`` tokens.

    ``capacity`` is the longest sequence the call will reach (prompt width + new tokens); a
    layer that outgrows it anyway doubles its buffer. ``None`` when this transformers has no
    per-layer cache API (before 4.56) or the model's cache would not be all plain full-attention
    layers (sliding windows, linear attention, ...): the caller then lets ``generate`` build
    its default cache.
    """
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return None
    config = getattr(model, "config", None)
    if config is None:
        return None
    try:
        cache = DynamicCache(config=config)
    except Exception:  # noqa: BLE001  (an exotic config: keep transformers' own choice)
        return None
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    cache.layers = [_growing_layer_class()(capacity) for _ in layers]
    return cache


_CLASS: Any = None


def _growing_layer_class() -> Any:
    """``GrowingLayer``, built on first use (transformers is imported lazily)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` that writes new entries into a preallocated buffer.

        ``keys`` / ``values`` are always views of the filled part of the buffers, so every
        inherited method that reads them sees what a ``DynamicLayer`` would hold. Methods that
        replace them (batch selection, cropping, reordering) are followed by re-adopting the
        result as the new buffer contents.
        """

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self.capacity = max(1, int(capacity))
            self._key_buffer: torch.Tensor | None = None
            self._value_buffer: torch.Tensor | None = None

        def _allocate(self, like: torch.Tensor, length: int) -> torch.Tensor:
            shape = (*like.shape[:-2], max(self.capacity, length), like.shape[-1])
            return like.new_empty(shape)

        def _adopt(self) -> None:
            """Take the current ``keys`` / ``values`` (whatever produced them) as the buffers."""
            keys, values = self.keys, self.values
            if not self.is_initialized or keys is None or values is None or keys.dim() < 2:
                self._key_buffer = self._value_buffer = None
                return
            length = int(keys.shape[-2])
            key_buffer = self._allocate(keys, length)
            value_buffer = self._allocate(values, length)
            key_buffer[..., :length, :] = keys
            value_buffer[..., :length, :] = values
            self._key_buffer, self._value_buffer = key_buffer, value_buffer
            self.keys = key_buffer[..., :length, :]
            self.values = value_buffer[..., :length, :]

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            key_buffer, value_buffer = self._key_buffer, self._value_buffer
            start = 0
            if key_buffer is not None and self.keys is not None:
                start = int(self.keys.shape[-2])
            end = start + int(key_states.shape[-2])
            if key_buffer is None or value_buffer is None or end > key_buffer.shape[-2]:
                # Outgrown (or first use): a new buffer, twice the need when regrowing.
                self.capacity = max(self.capacity, 2 * end if key_buffer is not None else end)
                old_keys, old_values = self.keys, self.values
                key_buffer = self._allocate(key_states, end)
                value_buffer = self._allocate(value_states, end)
                if start and old_keys is not None and old_values is not None:
                    key_buffer[..., :start, :] = old_keys
                    value_buffer[..., :start, :] = old_values
                self._key_buffer, self._value_buffer = key_buffer, value_buffer
            key_buffer[..., start:end, :] = key_states
            value_buffer[..., start:end, :] = value_states
            keys, values = key_buffer[..., :end, :], value_buffer[..., :end, :]
            self.keys, self.values = keys, values
            return keys, values

        def reset(self) -> None:
            super().reset()
            self._key_buffer = self._value_buffer = None

        def crop(self, tokens_to_remove: int) -> None:
            super().crop(tokens_to_remove)
            self._adopt()

        def batch_repeat_interleave(self, repeats: int) -> None:
            super().batch_repeat_interleave(repeats)
            self._adopt()

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            super().batch_select_indices(indices)
            self._adopt()

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            super().reorder_cache(beam_idx)
            self._adopt()

    _CLASS = GrowingLayer
    return _CLASS
