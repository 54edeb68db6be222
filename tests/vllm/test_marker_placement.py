"""Every test marked ``vllm`` lives in ``tests/vllm/``.

The main CI run deselects them (``-m "not vllm"``: its venv has no vLLM) and the vllm job of
``.ci/run`` collects only ``tests/vllm/`` (its venv has vLLM but not every test dependency).
A ``vllm`` test anywhere else would run in neither. This check is not marked: it runs in the
main suite and needs no vLLM.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def _marks_vllm(tree: ast.AST) -> bool:
    """Whether the module uses ``pytest.mark.vllm`` anywhere (decorator or ``pytestmark``)."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "vllm"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
        for node in ast.walk(tree)
    )


@pytest.mark.slow  # 17 s in the fast loop at load 17 (#22)
def test_vllm_tests_are_only_in_tests_vllm() -> None:
    misplaced = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if "vllm" not in path.relative_to(TESTS).parts[:1]
        and _marks_vllm(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not misplaced, f"tests marked vllm outside tests/vllm/ (run by no CI job): {misplaced}"


def test_the_check_sees_a_mark() -> None:
    assert _marks_vllm(ast.parse("import pytest\npytestmark = pytest.mark.vllm\n"))
    assert _marks_vllm(ast.parse("@pytest.mark.vllm\ndef test_x(): pass\n"))
    assert not _marks_vllm(ast.parse("@pytest.mark.slow\ndef test_x(): pass\n"))
