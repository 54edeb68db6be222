"""Checkpoints: trainable weights + optimizer state + RNG state + step, written atomically.

Layout under ``<output_dir>/checkpoints``::

    step-000010/
        policies/<key>/      one directory per distinct trainable policy (``policy.save``);
                             ``<key>`` joins the names of the agents it plays: "left", "a+b"
        algorithm.pt         ``algorithm.state_dict()`` (optimizers, schedulers, counters)
        rng.pt               Python, NumPy and torch RNG states
        trainer.json         step, agent -> key map, anything the trainer adds; written LAST
    latest                   a text file naming the newest complete checkpoint

A checkpoint is built in a temporary sibling directory and renamed into place, then ``latest``
is replaced (also by rename), so a run killed at any moment leaves either the previous or the new
checkpoint, never a torn one. Frozen policies are not saved: they never change.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CHECKPOINT_DIR = "checkpoints"
LATEST = "latest"
TRAINER_FILE = "trainer.json"


def policy_keys(policies: Mapping[str, Any]) -> dict[str, str]:
    """agent -> checkpoint key for trainable policies (agents sharing a policy share a key)."""
    by_id: dict[int, list[str]] = {}
    for agent, policy in policies.items():
        if getattr(policy, "trainable", False):
            by_id.setdefault(id(policy), []).append(agent)
    return {agent: "+".join(agents) for agents in by_id.values() for agent in agents}


def rng_state() -> dict[str, Any]:
    """The global RNG states a training step may touch."""
    import numpy as np
    import torch

    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    output_dir: str | os.PathLike[str],
    step: int,
    policies: Mapping[str, Any],
    algorithm_state: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    *,
    keep: int | None = 2,
) -> Path:
    """Write checkpoint ``step`` atomically; keep only the newest ``keep`` (None: all)."""
    import torch

    root = Path(output_dir) / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:06d}"
    final = root / name
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        keys = policy_keys(policies)
        saved: set[str] = set()
        for agent, key in keys.items():
            if key not in saved:
                policies[agent].save(str(tmp / "policies" / key))
                saved.add(key)
        torch.save(dict(algorithm_state), tmp / "algorithm.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        meta = {"step": int(step), "policies": keys, **dict(extra or {})}
        _write_text(tmp / TRAINER_FILE, json.dumps(meta, indent=2, default=str))
        if final.exists():  # re-saving a step (e.g. after a resume): replace it
            trash = Path(tempfile.mkdtemp(prefix=f".{name}.old.", dir=root))
            os.replace(final, trash / "d")
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _write_text(root / LATEST, name)
    if keep is not None:
        for old in sorted(_complete(root))[:-keep]:
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return final


def _write_text(path: Path, text: str) -> None:
    """Write a small file atomically (write a temp file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _complete(root: Path) -> list[Path]:
    return [p for p in root.glob("step-*") if p.is_dir() and (p / TRAINER_FILE).is_file()]


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under ``output_dir``, or ``None``."""
    root = Path(output_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return None
    pointer = root / LATEST
    if pointer.is_file():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / TRAINER_FILE).is_file():
            return candidate
    complete = sorted(_complete(root))
    return complete[-1] if complete else None


def load_checkpoint(
    path: str | os.PathLike[str], policies: Mapping[str, Any], *, restore_rng: bool = True
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """Load weights into ``policies``; return ``(step, algorithm_state, trainer_meta)``."""
    import torch

    ckpt = Path(path)
    meta_file = ckpt / TRAINER_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{ckpt} is not a complete checkpoint (no {TRAINER_FILE})")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    saved_keys: dict[str, str] = meta.get("policies", {})
    current = policy_keys(policies)
    if set(saved_keys) != set(current):
        raise ValueError(
            f"checkpoint {ckpt} holds trainable agents {sorted(saved_keys)} but this run trains "
            f"{sorted(current)}; resume with the same agents (or start a fresh output dir)"
        )
    loaded: set[str] = set()
    for agent, key in saved_keys.items():
        if key not in loaded:
            policies[agent].load(str(ckpt / "policies" / key))
            loaded.add(key)
    # Our own files: they hold optimizer tensors and NumPy/Python RNG tuples, not just weights.
    algorithm_state = torch.load(ckpt / "algorithm.pt", weights_only=False)
    if restore_rng and (ckpt / "rng.pt").is_file():
        set_rng_state(torch.load(ckpt / "rng.pt", weights_only=False))
    return int(meta["step"]), algorithm_state, meta
