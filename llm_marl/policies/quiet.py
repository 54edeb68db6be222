"""Keep transformers' progress bars off the console while models load and save.

Loading and saving a model prints bars ("Loading weights", "Writing model shards") that would
bury a run's own bar and table; the training and evaluation commands load and save inside
:func:`quiet_transformers`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["quiet_transformers"]

_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_restore = False


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' / huggingface_hub's progress bars inside the block.

    Loading and saving a model prints bars ("Loading weights", "Writing model shards") that
    would bury the run's own bar and table. The setting is global in transformers, so nested and
    concurrent blocks share one counter and the previous state comes back after the last one.
    """
    global _quiet_depth, _quiet_restore
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # nothing to hide
        yield
        return
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_restore = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0 and _quiet_restore:
                hf_logging.enable_progress_bar()
