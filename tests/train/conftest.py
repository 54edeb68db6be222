"""Fixtures of the training-layer tests, shared with the algorithm tests.

``tests/algos/conftest.py`` holds the bigram toy policy and the tiny-LM fixture. Test
directories here are separate top-level packages (``--import-mode=importlib``, no
``tests/__init__.py``), so that file is loaded by path rather than imported by name.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_NAME = "llm_marl_tests_algos_conftest"


def _algos_conftest():
    if _NAME not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "algos" / "conftest.py"
        spec = importlib.util.spec_from_file_location(_NAME, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_NAME]


BigramPolicy = _algos_conftest().BigramPolicy
algo_lm_path = _algos_conftest().algo_lm_path  # a session fixture, re-registered here

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """Import ``examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
