"""Shared task of the adversarial suite: "double a number", with a check of three asserts."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class DoubleTask:
    """A HumanEval-style task; ``correct`` passes, every disguised wrong answer must not."""

    check: str = (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert candidate(5) == 10\n"
        "    assert abs(candidate(0.5) - 1.0) < 1e-9\n"
    )
    correct: str = "def double(x):\n    return 2 * x\n"
    entry_point: str = "double"


@pytest.fixture
def double() -> DoubleTask:
    return DoubleTask()
