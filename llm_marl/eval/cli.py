"""``llm-marl eval``: the evaluation command line (the top-level CLI hands its arguments here)."""

from __future__ import annotations

from llm_marl.eval.math import main

__all__ = ["main"]
