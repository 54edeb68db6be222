"""An on-disk cache of search responses, so that a run with live engines can be replayed exactly.

Each entry is one JSON file named by the SHA-256 of the request (engine name, method, URL, query
parameters and body -- never the API key), holding the request and the engine's decoded JSON
response. Writes are atomic (temporary file + rename), so a crash never leaves half an entry and
concurrent writers of the same entry are harmless.

Modes (the ``cache_mode`` of a live engine):

* ``"use"``: answer from the cache when the entry exists, else ask the engine and store the
  answer (the default);
* ``"replay"``: answer only from the cache; a missing entry raises
  :class:`~llm_marl.errors.InfrastructureError` (no network, no API key needed): an exact replay;
* ``"refresh"``: always ask the engine and overwrite the entry;
* ``"off"``: no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CACHE_MODES", "ResponseCache"]

CACHE_MODES = ("use", "replay", "refresh", "off")


class ResponseCache:
    """JSON responses on disk, keyed by request (see the module docstring).

    Args:
        path: The cache directory (created when the first entry is written).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        """The entry name of a request (a JSON-serialisable dict without secrets).

        ``surrogatepass``: a request holding a lone surrogate (from a JSON ``\\udXXX`` escape)
        still gets a name, and a different one from its neighbours; every other request keeps
        the name it always had.
        """
        canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, request: dict[str, Any]) -> Any | None:
        """The stored response for ``request``, or None (also for an unreadable entry)."""
        file = self._file(self.key(request))
        try:
            entry = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("request") != json.loads(json.dumps(request)):
            return None
        return entry.get("response")

    def put(self, request: dict[str, Any], response: Any) -> None:
        """Store ``response`` for ``request`` atomically."""
        file = self._file(self.key(request))
        file.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"request": request, "response": response}, ensure_ascii=False)
        if not data.isascii():
            try:
                data.encode("utf-8")
            except UnicodeEncodeError:
                # Lone surrogates (a response's JSON may escape them too) cannot be written as
                # UTF-8; \\udXXX escapes can, and load back as exactly the same strings.
                data = json.dumps({"request": request, "response": response})
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=file.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.path.glob("*/*.json")) if self.path.is_dir() else 0
