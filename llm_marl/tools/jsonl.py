"""Reading JSON Lines files of objects, with errors that name the file and line.

Every JSONL reader of the library (episode records, search corpora, ...) walks lines the same
way: blank lines are skipped, a line that is not a JSON object is a :class:`DataError` naming
``path:line``. What a record must hold is each caller's business.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_marl.errors import DataError

__all__ = ["iter_objects"]


def iter_objects(
    path: str | os.PathLike[str], what: str = "file"
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for each non-blank line of ``path`` (numbered from 1).

    Raises :class:`DataError` when the file cannot be opened (``what`` names it: "episodes
    file", "corpus file", ...) or a line is not valid JSON or not a JSON object. Lines are read
    one at a time, so a large file costs memory for one record only.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} {path} does not exist")
    try:
        handle = path.open(encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot read {what} {path}: {err}") from err
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{where}: not valid JSON ({err})") from None
            if not isinstance(record, dict):
                raise DataError(f"{where}: each line must be a JSON object")
            yield number, record
