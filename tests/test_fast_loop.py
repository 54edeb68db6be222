"""The developer's fast loop, ``pytest -m "not slow"`` (README), needs neither Docker nor vLLM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A Docker test by marker, by fixture and by parametrised backend; vLLM tests by module mark.
FILES = [
    "tests/tools/test_sandbox_docker.py",
    "tests/tools/test_sandbox_correctness.py",
    "tests/vllm/test_vllm_policy.py",
]


def test_the_fast_loop_leaves_out_the_docker_and_vllm_tests() -> None:
    """(CI's jobs still select them with ``-m docker`` / ``-m vllm``: the marks stay.)"""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"]
        + ["-m", "not slow", *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    fast = [line for line in done.stdout.splitlines() if "::" in line]
    assert fast, "the fast loop lost the process-sandbox tests too"
    assert not [t for t in fast if "[docker" in t or "test_vllm_policy" in t], fast
    # Only the one test that needs no engine (it checks the message when there is none).
    docker_file = [t for t in fast if "test_sandbox_docker" in t]
    assert [t.split("::")[1] for t in docker_file] == ["test_unreachable_engine_says_what_to_do"]
