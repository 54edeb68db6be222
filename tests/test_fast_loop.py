"""The developer's fast loop, ``pytest -m "not slow"`` (README), needs neither Docker nor vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A Docker test by marker, by fixture and by parametrised backend; vLLM tests by module mark.
FILES = [
    "tests/tools/test_sandbox_docker.py",
    "tests/tools/test_sandbox_correctness.py",
    "tests/vllm/test_vllm_policy.py",
]


class _Selected:
    """Records the test ids a session keeps after ``-m`` deselected the others."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.ids = [item.nodeid for item in session.items]


def test_the_fast_loop_leaves_out_the_docker_and_vllm_tests(pytester: pytest.Pytester) -> None:
    """(CI's jobs still select them with ``-m docker`` / ``-m vllm``: the marks stay.)

    The fast loop's own collection, run in this process (pytester), with the project's config
    and conftest files."""
    selected = _Selected()
    result = pytester.inline_run(
        *("--collect-only", "-q", "-p", "no:randomly", "-m", "not slow"),
        *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")),
        *(str(ROOT / f) for f in FILES),
        plugins=[selected],
    )
    assert result.ret == pytest.ExitCode.OK, result.getreports()
    fast = selected.ids
    assert fast, "the fast loop lost the process-sandbox tests too"
    assert not [t for t in fast if "[docker" in t or "test_vllm_policy" in t], fast
    # Only the one test that needs no engine (it checks the message when there is none).
    docker_file = [t for t in fast if "test_sandbox_docker" in t]
    assert [t.split("::")[1] for t in docker_file] == ["test_unreachable_engine_says_what_to_do"]
