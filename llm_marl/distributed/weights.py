"""Weight sync from the learner to remote engines, both ends.

* LoRA: the adapter's state dict (``peft.get_peft_model_state_dict``: kilobytes to megabytes)
  goes through Ray's object store; the engine loads it into its copy of the adapter.
* Full weights: a ``torch.distributed`` group formed for the sync (the learner -- rank 0 of a
  sharded learner -- is rank 0 and every engine of the pool one more rank; a ``TCPStore`` on
  the learner's node is the rendezvous), one broadcast per parameter, streamed from
  :func:`~llm_marl.policies.sharded.full_weights` (a sharded learner gathers each parameter
  only when it is sent). :func:`sync_backend` picks the group's backend: NCCL when both ends
  hold CUDA tensors, gloo otherwise. A group formed per sync survives engine restarts with no
  bookkeeping.
* Files (fallback): the learner writes :meth:`HFPolicy.save` output to a directory every node
  can read and engines :meth:`HFPolicy.load` it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from llm_marl.policies.hf import HFPolicy
from llm_marl.policies.sharded import full_weights

SyncBackend = Literal["gloo", "nccl"]

SYNC_TIMEOUT_S = 300.0
"""How long a sync group may take to form and broadcast before the sync fails."""


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


def sync_backend(sender_device: str, receiver_devices: Sequence[str]) -> SyncBackend:
    """The backend of a learner-engine sync group: ``"nccl"`` when the sender and every
    receiver hold their weights on CUDA, else ``"gloo"`` (NCCL moves only CUDA tensors; gloo
    moves CPU ones). The one place this choice is made."""
    cuda = [sender_device, *receiver_devices]
    return "nccl" if all(d.startswith("cuda") for d in cuda) else "gloo"


def sync_device(backend: str) -> str:
    """Where a sync group's tensors must be for ``backend``."""
    return "cuda" if backend == "nccl" else "cpu"


def sync_group(
    host: str, port: int, rank: int, world: int, tag: str, own_host: str, backend: str = "gloo"
) -> Any:
    """Join the group of one sync (``rank`` 0 is the learner, which also runs the store), on
    ``backend`` (:func:`sync_backend`)."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=SYNC_TIMEOUT_S)
    store = dist.PrefixStore(tag, dist.TCPStore(host, port, is_master=False, timeout=timeout))
    if backend == "nccl":  # not exercised on CPU CI
        nccl = dist.ProcessGroupNCCL.Options()
        nccl._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world, nccl)
    options = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
    options._timeout = timeout
    # Bind gloo to this process's own address (its node's IP; 127.0.0.1 on one machine).
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=own_host)]
    return dist.ProcessGroupGloo(store, rank, world, options)


def gloo_group(host: str, port: int, rank: int, world: int, tag: str, own_host: str) -> Any:
    """:func:`sync_group` on gloo."""
    return sync_group(host, port, rank, world, tag, own_host, "gloo")


def broadcast_state(group: Any, tensors: Iterable[Any]) -> None:
    """Broadcast each tensor from rank 0 of ``group`` (in place on the receivers)."""
    for t in tensors:
        group.broadcast([t]).wait()


def send_stream(stream: Iterable[tuple[str, Any]], group: Any, device: str = "cpu") -> None:
    """Broadcast each ``(name, full tensor)`` of ``stream`` as rank 0 of ``group``, one at a
    time (on ``device``: :func:`sync_device`), so that only one parameter is in flight."""
    import torch

    with torch.no_grad():
        broadcast_state(group, (t.detach().to(device).contiguous() for _, t in stream))


def send_full(policy: HFPolicy, group: Any, device: str = "cpu") -> None:
    """The learner's side of a full-weight sync of an unsharded policy: its parameters
    (:func:`~llm_marl.policies.sharded.full_weights` order), tensor by tensor."""
    with policy._state.lock:
        send_stream(full_weights(policy), group, device)


def receive_full(policy: HFPolicy, group: Any, device: str = "cpu") -> None:
    """An engine's side: receive every parameter, in
    :func:`~llm_marl.policies.sharded.full_weights` order (the sender's, sharded or not, for
    the same architecture), and copy it in."""
    import torch

    with policy._state.lock, torch.no_grad():
        for _, target in full_weights(policy):
            buffer = torch.empty(target.shape, dtype=target.dtype, device=device)
            group.broadcast([buffer]).wait()
            target.copy_(buffer)


def copy_weights(policy: HFPolicy, weights: dict[str, Any]) -> None:
    """Copy ``{name: tensor}`` named as :func:`~llm_marl.policies.sharded.full_weights` names
    them into ``policy``'s parameters; every parameter must be given."""
    import torch

    with policy._state.lock, torch.no_grad():
        targets = dict(full_weights(policy))
        if set(targets) != set(weights):
            missing = sorted(set(targets) ^ set(weights))
            raise RuntimeError(f"weights do not fit {policy.name!r}: {missing[:3]}")
        for name, target in targets.items():
            target.copy_(weights[name])
