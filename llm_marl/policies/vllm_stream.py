"""A weight stream into a vLLM engine, one decoder layer at a time.

:meth:`VLLMPolicy.stream_weights <llm_marl.policies.vllm.VLLMPolicy.stream_weights>` reads a
stream of ``(checkpoint name, full tensor)`` -- e.g.
:func:`~llm_marl.policies.sharded.full_weights` of a sharded policy, gathered one parameter at
a time -- and sends it to the engine's workers in chunks of one layer (:func:`layer_chunks`)
inside one reload session:

- :func:`start_reload` (on each worker): vLLM's ``initialize_layerwise_reload`` -- the model's
  layers wait for their weights;
- :func:`load_chunk`: the model's own ``load_weights`` on one chunk (name mapping, fused q/k/v
  and gate/up); a layer is processed and copied into the engine's tensors in place as soon as
  all its weights have come;
- :func:`finish_reload`: ``finalize_layerwise_reload`` (a layer that got nothing keeps its
  tensors, e.g. the rotary embedding, whose ``inv_freq`` is no checkpoint entry) and the
  worker's LoRA state reset, as vLLM's own ``reload_weights`` does.

That is vLLM's in-place ``reload_weights`` split over several calls, so that the sender holds
one layer at a time instead of the whole state dict. The three functions run in the vLLM
worker (``LLM.collective_rpc`` with a callable: called directly by an in-process worker,
pickled to a worker in its own process), so this module imports nothing heavy at the top.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["finish_reload", "layer_chunks", "load_chunk", "start_reload"]

_LAYER = re.compile(r"^(.*?\.layers\.\d+)\.")


def layer_chunks(
    stream: Iterable[tuple[str, Any]],
) -> Iterator[list[tuple[str, Any]]]:
    """Group consecutive entries of ``stream`` by decoder layer (``....layers.N.``); every
    other entry (embeddings, final norm, output layer) is a chunk of its own."""
    chunk: list[tuple[str, Any]] = []
    key: str | None = None
    for name, tensor in stream:
        match = _LAYER.match(name)
        layer = match.group(1) if match else None
        if chunk and (layer is None or layer != key):
            yield chunk
            chunk = []
        chunk.append((name, tensor))
        key = layer
    if chunk:
        yield chunk


def _model(worker: Any) -> Any:
    return worker.model_runner.get_model()


def start_reload(worker: Any) -> None:
    """In the worker: open a layerwise reload session on its model."""
    from vllm.model_executor.model_loader.reload.layerwise import initialize_layerwise_reload

    initialize_layerwise_reload(_model(worker))


def load_chunk(worker: Any, chunk: list[tuple[str, Any]]) -> int:
    """In the worker: load one chunk of checkpoint-format weights; the number of model
    parameters it fed."""
    import torch

    with torch.no_grad():
        return len(_model(worker).load_weights(iter(chunk)))


def finish_reload(worker: Any) -> None:
    """In the worker: close the session (unloaded layers keep their tensors) and drop the
    LoRA state computed with the old weights."""
    from vllm.model_executor.model_loader.reload.layerwise import finalize_layerwise_reload

    runner = worker.model_runner
    finalize_layerwise_reload(_model(worker), runner.model_config)
    reset = getattr(runner, "reset_lora_state", None)
    if callable(reset):
        reset()
