"""Checkpoints: trainable weights + optimizer state + RNG state + step, written atomically.

Layout under ``<output_dir>/checkpoints``::

    step-000010/
        policies/<key>/      one directory per distinct trainable policy (``policy.save``);
                             ``<key>`` joins the names of the agents it plays: "left", "a+b"
        references/<key>.safetensors
                             the policy's KL reference model, when it has one (full
                             fine-tuning): a warm-up may have changed it, and a resumed run
                             must measure KL to the same reference as the uninterrupted one
        algorithm.pt         ``algorithm.state_dict()`` (optimizers, schedulers, counters); a
                             sharded learner's optimizer is a ``{"dcp": "sharded/<key>"}``
                             marker naming its DCP directory below
        sharded/<key>/       a sharded learner's trainable weights and optimizer state, written
                             by every rank with ``torch.distributed.checkpoint``
                             (:mod:`llm_marl.train.sharded_checkpoint`); loadable on any number
                             of ranks, or in one process
        rng.pt               Python, NumPy and torch RNG states
        trainer.json         step, agent -> key map, the size and SHA-256 of every other file
                             ("files", "sha256"), anything the trainer adds; written LAST
    latest                   a text file naming the newest complete checkpoint

A checkpoint is built in a temporary sibling directory and renamed into place, then ``latest``
is replaced (also by rename), so a run killed at any moment leaves either the previous or the new
checkpoint, never a torn one. Frozen policies are not saved: they never change. Temporary
directories a killed save left behind are removed by the next save or resume.

Loading checks every file before it changes anything it can check (the file list, sizes and
SHA-256 checksums, JSON, RNG states, an algorithm state free of NaN/inf). Two kinds of failure
are kept apart:

* **Corrupt** (:class:`~llm_marl.errors.CheckpointError`): a file is missing, has another size
  or checksum than when it was saved, its format cannot be parsed, or the algorithm state holds
  NaN/inf. The message names the checkpoint and the file; :func:`resume_latest` sets the
  checkpoint aside as ``corrupt-step-N`` and falls back to the previous complete one, with a
  warning.
* **Mismatch** (:class:`~llm_marl.errors.ConfigError`, a ``ValueError``): the files are intact
  but do not fit this run (another agent -> policy map, model size, LoRA setup, algorithm
  state). That is a configuration mistake, not damage: the error says what differs and no
  checkpoint is renamed or deleted, so the corrected run resumes from it.

A full disk while saving raises a :class:`~llm_marl.errors.DiskFullError` (a
:class:`CheckpointError`) in one line naming the file and the newest intact checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from llm_marl.errors import CheckpointError, ConfigError, DiskFullError
from llm_marl.policies.base import Policy, TrainablePolicy
from llm_marl.tools.files import no_space, replace_dir

CHECKPOINT_DIR = "checkpoints"
LATEST = "latest"
TRAINER_FILE = "trainer.json"
REFERENCES = "references"
SHARDED = "sharded"
"""The folder of a checkpoint that holds sharded learners' DCP checkpoints, one per key."""
DCP_MARKER = "dcp"
"""The key of an ``algorithm.pt`` optimizer entry that names a DCP directory instead of
holding the state (a sharded learner's optimizer: see :func:`dcp_path`)."""
_STEP_NAME = re.compile(r"step-\d{6,}")
CORRUPT_PREFIX = "corrupt-"
"""What :func:`resume_latest` prefixes a corrupt checkpoint's name with when it sets it aside."""
FILES = "files"
"""trainer.json's map of every other file of the checkpoint to its size in bytes."""
CHECKSUMS = "sha256"
"""trainer.json's map of every other file of the checkpoint to its SHA-256 (hex)."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


def policy_keys(policies: Mapping[str, Policy]) -> dict[str, str]:
    """agent -> checkpoint key for trainable policies (agents sharing a policy share a key)."""
    by_id: dict[int, list[str]] = {}
    for agent, policy in policies.items():
        if policy.trainable:
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


def check_rng_state(state: Any) -> None:
    """Raise ``ValueError`` unless ``state`` is a state :func:`set_rng_state` can restore.

    Each part is tried on a scratch generator, so a garbage state is refused before any global
    generator has changed.
    """
    import numpy as np
    import torch

    if not isinstance(state, Mapping):
        raise ValueError(f"expected a dict of RNG states, got {type(state).__name__}")
    missing = [k for k in ("python", "numpy", "torch") if k not in state]
    if missing:
        raise ValueError(f"no {', '.join(missing)} RNG state")
    try:
        random.Random().setstate(state["python"])
        np.random.RandomState().set_state(state["numpy"])
        torch.Generator().set_state(state["torch"])
    except (TypeError, ValueError, RuntimeError, KeyError, IndexError) as exc:
        raise ValueError(f"invalid RNG state: {type(exc).__name__}: {exc}") from None


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
    policies: Mapping[str, Policy],
    algorithm_state: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    *,
    keep: int | None = 2,
    write_extra: Callable[[Path], None] | None = None,
) -> Path:
    """Write checkpoint ``step`` atomically; keep only the newest ``keep`` (None: all).

    ``write_extra(folder)`` may add files to the checkpoint being built in ``folder`` (a
    sharded learner's ranks write their DCP shards there); they are listed and checksummed
    with the rest and published with it.

    Raises :class:`~llm_marl.errors.DiskFullError` when the disk is full, naming the file and
    the newest intact checkpoint (the previous one: the new one is never half-published).
    """
    root = Path(output_dir) / CHECKPOINT_DIR
    name = f"step-{step:06d}"
    writing = [root / name]  # the file being written, for the error
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_torn(root)
        final = _save(root, name, step, policies, algorithm_state, extra, writing, write_extra)
        writing[0] = root / LATEST
        _write_text(root / LATEST, name)
    except Exception as exc:
        if no_space(exc):
            raise disk_full(writing[0], output_dir) from exc
        raise
    if keep is not None:
        for old in sorted(_complete(root), key=_step_of)[:-keep]:
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return final


def disk_full(file: str | os.PathLike[str], output_dir: str | os.PathLike[str]) -> DiskFullError:
    """The one-line error of a full disk while writing ``file`` of the run in ``output_dir``."""
    latest = latest_checkpoint(output_dir)
    kept = (
        f"the newest intact checkpoint is {latest}; free space and resume with --resume"
        if latest is not None
        else "there is no checkpoint yet; free space and start again"
    )
    return DiskFullError(f"no space left on the device writing {file}: {kept}")


def _torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` through a Python file: a full disk is then an ``OSError`` (ENOSPC), not
    torch's ``RuntimeError: [enforce fail at inline_container.cc]``."""
    import torch

    with open(path, "wb") as f:
        torch.save(obj, f)


def _save(
    root: Path,
    name: str,
    step: int,
    policies: Mapping[str, Policy],
    algorithm_state: Mapping[str, Any],
    extra: Mapping[str, Any] | None,
    writing: list[Path],
    write_extra: Callable[[Path], None] | None = None,
) -> Path:
    final = root / name
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        keys = policy_keys(policies)
        saved: set[str] = set()
        for agent, key in keys.items():
            if key not in saved:
                # policy_keys lists trainable policies only, which implement TrainablePolicy.
                policy = cast(TrainablePolicy, policies[agent])
                writing[0] = final / "policies" / key
                policy.save(str(tmp / "policies" / key))
                reference = getattr(policy, "reference_model", None)
                if reference is not None:
                    from safetensors.torch import save_model

                    (tmp / REFERENCES).mkdir(exist_ok=True)
                    writing[0] = final / REFERENCES / f"{key}.safetensors"
                    # save_model (not save_file) handles tied weights (shared tensors).
                    save_model(reference, str(tmp / REFERENCES / f"{key}.safetensors"))
                saved.add(key)
        if write_extra is not None:
            writing[0] = final / SHARDED
            write_extra(tmp)
        writing[0] = final / "algorithm.pt"
        _torch_save(dict(algorithm_state), tmp / "algorithm.pt")
        writing[0] = final / "rng.pt"
        _torch_save(rng_state(), tmp / "rng.pt")
        # The size of every file, so that loading tells a truncated or missing file (corrupt)
        # from intact files that do not fit the run (a configuration mismatch). Last, so that
        # ``extra`` cannot replace it.
        sizes = _sizes(tmp)
        checksums = {file: _sha256(tmp / file) for file in sizes}
        meta = {
            "step": int(step),
            "policies": keys,
            **dict(extra or {}),
            FILES: sizes,
            CHECKSUMS: checksums,
        }
        writing[0] = final / TRAINER_FILE
        _write_text(tmp / TRAINER_FILE, json.dumps(meta, indent=2, default=str))
        replace_dir(tmp, final)  # re-saving a step (e.g. after a resume) replaces it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _sizes(folder: Path) -> dict[str, int]:
    """``relative POSIX path -> size in bytes`` of every file under ``folder``."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_finite(ckpt: Path, file: str, state: Any) -> None:
    """Raise :class:`CheckpointError` when a floating tensor or float of ``state`` is NaN or
    infinite: no optimizer step or counter of a sound run holds one, and loading it would make
    the next update's step NaN."""
    import torch

    todo = [state]
    while todo:
        item = todo.pop()
        if isinstance(item, Mapping):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, torch.Tensor):
            if item.is_floating_point() and not bool(torch.isfinite(item).all()):
                raise _corrupt(ckpt, file, "holds a NaN or infinite value (not finite)")
        elif isinstance(item, float) and not math.isfinite(item):
            raise _corrupt(ckpt, file, "holds a NaN or infinite value (not finite)")


def remove_torn(root: Path) -> list[Path]:
    """Delete what a save killed midway left in ``root`` (temporary dirs and files); return it.

    Only the run that owns ``output_dir`` may call this (it does, before saving or resuming):
    a second process saving into the same directory at the same time is not supported.
    """
    removed = []
    for path in root.glob(".*"):
        if path.name.startswith(".step-") and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif path.name.startswith(f".{LATEST}.") and path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _write_text(path: Path, text: str) -> None:
    """Write a small file atomically (write a temp file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _complete(root: Path) -> list[Path]:
    return [
        p
        for p in root.glob("step-*")
        if _STEP_NAME.fullmatch(p.name) and p.is_dir() and (p / TRAINER_FILE).is_file()
    ]


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint under ``output_dir``, or ``None``."""
    complete = complete_checkpoints(output_dir)
    return complete[0] if complete else None


def complete_checkpoints(output_dir: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints under ``output_dir``, newest first (the ``latest`` one leads)."""
    root = Path(output_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = sorted(_complete(root), key=_step_of, reverse=True)
    pointer = root / LATEST
    if pointer.is_file():
        # A garbage pointer (torn, binary, "../elsewhere") is ignored, never followed.
        named = pointer.read_text(encoding="utf-8", errors="replace").strip()
        first = [p for p in found if p.name == named]
        found = first + [p for p in found if p.name != named]
    return found


def _corrupt(ckpt: Path, file: str, what: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {ckpt} is corrupt: {ckpt / file} {what}. Delete {ckpt} to resume from "
        "the previous checkpoint (resume does so by itself when one exists), or start a fresh "
        "output_dir."
    )


def _mismatch(ckpt: Path, file: str, what: str, exc: BaseException) -> ConfigError:
    return ConfigError(
        f"checkpoint {ckpt} does not fit this run: {ckpt / file} {what} ({_brief(exc)}). Its "
        "files are intact, so the run that saved it was set up differently (another model, "
        "model size, LoRA setting or algorithm): resume with the settings it was saved with, "
        "or start a fresh output_dir. No checkpoint was changed."
    )


def _brief(exc: BaseException, limit: int = 400) -> str:
    """``Type: message`` on one line, cut at ``limit`` characters (the cause keeps it all)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _torch_load(ckpt: Path, file: str) -> Any:
    import torch

    path = ckpt / file
    if not path.is_file():
        raise _corrupt(ckpt, file, "is missing")
    try:
        # Our own files: they hold optimizer tensors and NumPy/Python RNG tuples, not just
        # weights, so weights_only cannot be used; a checkpoint is as trusted as the code.
        return torch.load(path, weights_only=False)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        raise _corrupt(ckpt, file, f"cannot be read ({type(exc).__name__}: {exc})") from exc


def _read_meta(ckpt: Path) -> dict[str, Any]:
    meta_file = ckpt / TRAINER_FILE
    if not meta_file.is_file():
        raise CheckpointError(f"{ckpt} is not a complete checkpoint (no {TRAINER_FILE})")
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, absurd nesting
        raise _corrupt(ckpt, TRAINER_FILE, f"is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _corrupt(ckpt, TRAINER_FILE, "does not hold a JSON object")
    step = meta.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise _corrupt(ckpt, TRAINER_FILE, f"has no valid 'step' (got {step!r:.40})")
    keys = meta.get("policies", {})
    if not isinstance(keys, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _inside(v) for k, v in keys.items()
    ):
        raise _corrupt(ckpt, TRAINER_FILE, "has an invalid 'policies' map")
    files = meta.get(FILES)  # absent in checkpoints written before it existed
    if files is not None and not (
        isinstance(files, dict)
        and all(
            isinstance(k, str)
            and _inside(k)
            and isinstance(v, int)
            and not isinstance(v, bool)
            and v >= 0
            for k, v in files.items()
        )
    ):
        raise _corrupt(ckpt, TRAINER_FILE, f"has an invalid {FILES!r} map")
    checksums = meta.get(CHECKSUMS)  # absent in checkpoints written before it existed
    if checksums is not None and not (
        isinstance(checksums, dict)
        and all(
            isinstance(k, str) and _inside(k) and isinstance(v, str) and _HEX64.fullmatch(v)
            for k, v in checksums.items()
        )
    ):
        raise _corrupt(ckpt, TRAINER_FILE, f"has an invalid {CHECKSUMS!r} map")
    if checksums is not None and isinstance(files, dict):
        # Written together: a file listed without its checksum would be loaded unverified.
        unsummed = sorted(set(files) - set(checksums))
        if unsummed:
            raise _corrupt(ckpt, TRAINER_FILE, f"lists {unsummed[0]} without its checksum")
    named = _STEP_DIR.fullmatch(ckpt.name)
    if named is not None and int(named.group(1)) != step:
        # The directory's name is the step it was saved at; resuming at another step would
        # replay or skip steps (a step of 10**30 ends the run at once).
        raise _corrupt(ckpt, TRAINER_FILE, f"says step {str(step)[:40]}, not {int(named.group(1))}")
    return meta


# The name save_checkpoint gives a checkpoint directory ("step-000012").
_STEP_DIR = re.compile(r"step-(\d{1,18})")


def _check_files(ckpt: Path, meta: Mapping[str, Any]) -> None:
    """Raise :class:`CheckpointError` for a required file that is missing or changed size.

    A checkpoint written before trainer.json listed its files is checked for the files every
    checkpoint holds; its policy files are judged when they are loaded.
    """
    files: Mapping[str, int] = meta.get(FILES) or {}
    for required in ("algorithm.pt", "rng.pt"):
        if required not in files and not (ckpt / required).is_file():
            # rng.pt too: without it the "same run" guarantee would break without a word.
            raise _corrupt(ckpt, required, "is missing")
    for file, size in files.items():
        path = ckpt / file
        if not path.is_file():
            raise _corrupt(ckpt, file, "is missing")
        actual = path.stat().st_size
        if actual != size:
            raise _corrupt(
                ckpt, file, f"has {actual} bytes, {size} when saved (truncated or overwritten)"
            )
    checksums: Mapping[str, str] = meta.get(CHECKSUMS) or {}
    for file, expected in checksums.items():
        path = ckpt / file
        if not path.is_file():
            raise _corrupt(ckpt, file, "is missing")
        if _sha256(path) != expected:
            raise _corrupt(
                ckpt, file, "does not match its checksum (its bytes changed since it was saved)"
            )


def _unreadable(ckpt: Path, where: str) -> tuple[str, str] | None:
    """The first file under ``ckpt/where`` whose format does not parse: ``(file, why)``.

    Only asked after a load failed, to tell damage from a mismatch; files of formats it does
    not know (tokenizer models, text) are not judged.
    """
    import torch

    target = ckpt / where
    paths = [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file())
    for path in paths:
        try:
            if path.suffix == ".safetensors":
                from safetensors import safe_open

                # The header must parse and cover the whole file (a truncated one does not).
                with safe_open(str(path), framework="pt") as handle:
                    handle.keys()
            elif path.suffix in (".pt", ".pth", ".bin"):
                torch.load(path, map_location="cpu", weights_only=False)
            elif path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
        except Exception as exc:  # each format fails in its own way
            return path.relative_to(ckpt).as_posix(), f"cannot be read ({_brief(exc)})"
    return None


def _load_error(
    ckpt: Path, file: str, what: str, exc: BaseException, listed: bool
) -> CheckpointError | ConfigError:
    """Whether ``exc``, raised loading ``ckpt/file``, means damage or a configuration mismatch."""
    bad = _unreadable(ckpt, file)
    if bad is not None:
        return _corrupt(ckpt, bad[0], bad[1])
    if not listed and isinstance(exc, FileNotFoundError):
        # No file list to tell a torn copy from a policy expecting other files: an old
        # checkpoint missing a file is taken as incomplete, as before.
        return _corrupt(ckpt, file, f"cannot be loaded ({_brief(exc)})")
    return _mismatch(ckpt, file, what, exc)


def _inside(key: str) -> bool:
    """Whether ``policies/<key>`` stays inside the checkpoint (a forged key must not escape)."""
    parts = Path(key).parts
    return bool(parts) and not Path(key).is_absolute() and ".." not in parts


def _step_of(path: Path) -> int:
    return int(path.name.split("-", 1)[1])


def _check_team(ckpt: Path, saved: Mapping[str, str], current: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` naming what differs unless the agent -> key maps are equal.

    Equal agent names are not enough: agents that shared one policy object when saved (one
    key, one optimizer) cannot be resumed as separate policies, nor the other way round.
    """
    if dict(saved) == dict(current):
        return
    differences = []
    for agent in sorted(set(saved) | set(current)):
        was, now = saved.get(agent), current.get(agent)
        if was == now:
            continue
        if was is None:
            differences.append(f"{agent!r} is trained here but was not then")
        elif now is None:
            differences.append(f"{agent!r} was trained then but is not here")
        else:
            differences.append(f"{agent!r} had policy {was!r} then, {now!r} here")
    raise ConfigError(
        f"checkpoint {ckpt} was saved by a run whose trainable agents had policies {dict(saved)} "
        f"(agents sharing one policy object share a key), but this run has {dict(current)}: "
        f"{'; '.join(differences)}. To continue it, resume with the same agents and the same "
        "sharing of policy objects (or start a fresh output_dir). No checkpoint was changed."
    )


def load_checkpoint(
    path: str | os.PathLike[str], policies: Mapping[str, Policy], *, restore_rng: bool = True
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """Load weights into ``policies``; return ``(step, algorithm_state, trainer_meta)``.

    Every file is checked (present, the size it was saved with) and read before the RNG
    changes. A corrupt file raises :class:`CheckpointError` naming it; intact files that do not
    fit ``policies`` (another agent -> policy map, model or adapter shape) raise
    :class:`~llm_marl.errors.ConfigError` saying what differs. Policy weights may already have
    been replaced then: load another checkpoint, as :func:`resume_latest` does, before using
    them.
    """
    ckpt = Path(path)
    meta = _read_meta(ckpt)
    saved_keys: dict[str, str] = meta.get("policies", {})
    _check_team(ckpt, saved_keys, policy_keys(policies))
    _check_files(ckpt, meta)
    listed = meta.get(FILES) is not None
    algorithm_state = _torch_load(ckpt, "algorithm.pt")
    if not isinstance(algorithm_state, dict):
        raise _corrupt(ckpt, "algorithm.pt", "does not hold a state dict")
    _check_finite(ckpt, "algorithm.pt", algorithm_state)
    _resolve_dcp(ckpt, algorithm_state)
    rng = None
    if restore_rng:
        rng = _torch_load(ckpt, "rng.pt")
        try:
            check_rng_state(rng)
        except ValueError as exc:
            raise _corrupt(ckpt, "rng.pt", f"holds no valid RNG state ({exc})") from None
    loaded: set[str] = set()
    for agent, key in saved_keys.items():
        if key in loaded:
            continue
        policy = cast(TrainablePolicy, policies[agent])  # a trainable policy (policy_keys)
        where = f"policies/{key}"
        try:
            policy.load(str(ckpt / where))
        except Exception as exc:  # safetensors, torch, peft and our own checks all differ
            what = f"cannot be loaded into the policy of {key.replace('+', ', ')}"
            raise _load_error(ckpt, where, what, exc, listed) from exc
        _load_reference(ckpt, key, policy, listed)
        loaded.add(key)
    if rng is not None:
        set_rng_state(rng)
    return int(meta["step"]), algorithm_state, meta


def dcp_path(entry: Any) -> str | None:
    """The DCP directory an ``algorithm.pt`` optimizer entry names (absolute once loaded by
    :func:`load_checkpoint`), or ``None`` for an entry holding the state itself."""
    if isinstance(entry, Mapping) and set(entry) == {DCP_MARKER}:
        value = entry[DCP_MARKER]
        return value if isinstance(value, str) else None
    return None


def _resolve_dcp(ckpt: Path, state: dict[str, Any]) -> None:
    """Turn the DCP markers of ``state``'s optimizers into absolute paths inside ``ckpt``,
    checking each names a DCP checkpoint there (``.metadata``); in place."""
    optimizers = state.get("optimizers")
    if not isinstance(optimizers, dict):
        return
    for key, entry in optimizers.items():
        rel = dcp_path(entry)
        if rel is None:
            continue
        if not _inside(rel) or not (ckpt / rel / ".metadata").is_file():
            raise _corrupt(ckpt, "algorithm.pt", f"names a sharded optimizer {rel!r} not found")
        optimizers[key] = {DCP_MARKER: str(ckpt / rel)}


def _load_reference(ckpt: Path, key: str, policy: Policy, listed: bool) -> None:
    reference = getattr(policy, "reference_model", None)
    if reference is None:
        return
    file = f"{REFERENCES}/{key}.safetensors"
    if not (ckpt / file).is_file():
        warnings.warn(
            f"checkpoint {ckpt} has no KL reference for {key!r} (written by an older version); "
            "the policy keeps the reference it was built with",
            stacklevel=3,
        )
        return
    from safetensors.torch import load_model

    try:
        load_model(reference, str(ckpt / file), strict=True)
    except Exception as exc:
        what = f"cannot be loaded into the KL reference of {key.replace('+', ', ')}"
        raise _load_error(ckpt, file, what, exc, listed) from exc


def resume_latest(
    output_dir: str | os.PathLike[str],
    policies: Mapping[str, Policy],
    load_algorithm_state: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Path, int, dict[str, Any], dict[str, Any]] | None:
    """Load the newest checkpoint that loads; ``None`` when ``output_dir`` has none at all.

    ``load_algorithm_state`` (e.g. ``algorithm.load_state_dict``) is applied to the loaded
    checkpoint's ``algorithm.pt``.

    A corrupt checkpoint (:class:`CheckpointError`) is set aside as ``corrupt-step-N`` with a
    warning naming it and the bad file, and the previous complete one is tried. A checkpoint
    that does not fit this run (:class:`~llm_marl.errors.ConfigError` from
    :func:`load_checkpoint`, or ``load_algorithm_state`` raising) stops the resume there and
    changes nothing on disk: the older checkpoints of the same run would not fit either.

    Raises :class:`CheckpointError` if checkpoints exist but none loads, including when the
    only ones left are ``corrupt-*`` (set aside by an earlier resume): starting afresh then
    would silently drop the run. Also removes what a killed save left behind. Returns
    ``(path, step, algorithm_state, trainer_meta)``.
    """
    root = Path(output_dir) / CHECKPOINT_DIR
    if root.is_dir():
        remove_torn(root)
    errors: list[CheckpointError] = []
    for ckpt in complete_checkpoints(output_dir):
        try:
            step, state, meta = load_checkpoint(ckpt, policies)
        except CheckpointError as exc:
            errors.append(exc)
            # Set aside (never deleted: it is evidence), so that pruning and the next resume
            # do not pick it over the good checkpoint this run goes on from.
            aside = ckpt.with_name(f"{CORRUPT_PREFIX}{ckpt.name}")
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(ckpt, aside)
            warnings.warn(f"{exc} Moved it to {aside}; trying the previous one.", stacklevel=2)
            continue
        if load_algorithm_state is not None:
            try:
                load_algorithm_state(state)
            except Exception as exc:
                # algorithm.pt was read whole, holds a dict and has its saved size: a state the
                # algorithm refuses comes from a differently set-up run, not from damage.
                raise _mismatch(
                    ckpt, "algorithm.pt", "does not fit this run's algorithm", exc
                ) from exc
        return ckpt, step, state, meta
    if errors:
        raise CheckpointError(
            f"no checkpoint under {root} can be loaded:\n" + "\n".join(f"  {e}" for e in errors)
        )
    set_aside = sorted(root.glob(f"{CORRUPT_PREFIX}step-*")) if root.is_dir() else []
    if set_aside:
        raise CheckpointError(
            f"nothing to resume under {root}: its only checkpoints "
            f"({', '.join(p.name for p in set_aside)}) were set aside as corrupt by an earlier "
            "resume. Rename one you trust back to step-N to resume from it, or start a fresh "
            "run without resume (the Trainer then moves the old files aside, deleting nothing)."
        )
    return None
