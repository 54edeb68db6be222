"""Shared fixtures: the offline tiny LM, built once per machine and cached by pytest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network; transformers must not try the Hub either.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_lm_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Directory of the default tiny LM (``build_tiny_lm`` defaults).

    Kept in pytest's cache directory so that later sessions reuse it; ``build_tiny_lm`` checks
    the recorded build arguments and rebuilds if the recipe changed.
    """
    from llm_marl.policies.tiny import build_tiny_lm

    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("llm_marl_tiny_lm")) if cache is not None else None
    if root is None:
        root = tmp_path_factory.mktemp("tiny_lm")
    return build_tiny_lm(root / "default")


@pytest.fixture(scope="session")
def tiny_policy(tiny_lm_path: str):
    """A frozen :class:`HFPolicy` over the tiny LM. Shared: tests must not modify it."""
    from llm_marl.policies.hf import HFPolicy

    return HFPolicy(tiny_lm_path, name="tiny", seed=0)
