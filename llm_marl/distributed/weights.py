"""Weight sync from the learner to remote engines, both ends.

* LoRA: the adapter's state dict (``peft.get_peft_model_state_dict``: kilobytes to megabytes)
  goes through Ray's object store; the engine loads it into its copy of the adapter.
* Full weights: a ``torch.distributed`` gloo group formed for the sync (the learner is rank 0
  and every engine of the pool one more rank; a ``TCPStore`` on the learner's node is the
  rendezvous), one broadcast per tensor of the model's ``state_dict``. A group formed per sync
  survives engine restarts with no bookkeeping.
* Files (fallback): the learner writes :meth:`HFPolicy.save` output to a directory every node
  can read and engines :meth:`HFPolicy.load` it.
"""

from __future__ import annotations

import datetime
from typing import Any

from llm_marl.policies.hf import HFPolicy

SYNC_TIMEOUT_S = 300.0
"""How long a gloo group may take to form and broadcast before the sync fails."""


def adapter_state(policy: HFPolicy) -> dict[str, Any]:
    """The LoRA adapter's weights of ``policy`` as CPU tensors."""
    from peft import get_peft_model_state_dict

    assert policy.adapter is not None, "a LoRA policy"
    with policy._state.lock:
        state = get_peft_model_state_dict(policy.model, adapter_name=policy.adapter)
        return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}


def load_adapter_state(policy: HFPolicy, state: dict[str, Any]) -> None:
    """Load :func:`adapter_state` output into ``policy``'s adapter (the engine side)."""
    from peft import set_peft_model_state_dict

    with policy._state.lock:
        result = set_peft_model_state_dict(policy.model, state, adapter_name=policy.adapter)
    unexpected = getattr(result, "unexpected_keys", None) or []
    if unexpected:
        raise RuntimeError(f"adapter sync: {len(unexpected)} unexpected key(s): {unexpected[:3]}")


def open_store(host: str) -> Any:
    """A ``TCPStore`` server on ``host`` (a free port) for one sync's rendezvous."""
    import torch.distributed as dist

    return dist.TCPStore(
        host,
        0,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=SYNC_TIMEOUT_S),
    )


def gloo_group(host: str, port: int, rank: int, world: int, tag: str, own_host: str) -> Any:
    """Join the gloo group of one sync (``rank`` 0 is the learner, which also runs the store)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=SYNC_TIMEOUT_S)
    store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
    options = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
    options._timeout = timeout
    # Bind gloo to this process's own address (its node's IP; 127.0.0.1 on one machine).
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=own_host)]
    return dist.ProcessGroupGloo(dist.PrefixStore(tag, store), rank, world, options)


def broadcast_state(group: Any, tensors: list[Any]) -> None:
    """Broadcast each tensor from rank 0 of ``group`` (in place on the receivers)."""
    for t in tensors:
        group.broadcast([t]).wait()


def send_full(policy: HFPolicy, group: Any) -> None:
    """The learner's side of a full-weight sync: its ``state_dict``, tensor by tensor."""
    import torch

    with policy._state.lock, torch.no_grad():
        tensors = [t.detach().to("cpu").contiguous() for t in policy.model.state_dict().values()]
    broadcast_state(group, tensors)


def receive_full(policy: HFPolicy, group: Any) -> None:
    """An engine's side: receive every tensor of the ``state_dict`` and copy it in."""
    import torch

    with policy._state.lock, torch.no_grad():
        state = policy.model.state_dict()
        buffers = [torch.empty(t.shape, dtype=t.dtype) for t in state.values()]
        broadcast_state(group, buffers)
        for target, value in zip(state.values(), buffers):
            target.copy_(value)
