"""docs/envs/ is generated from the env docstrings and must be up to date and complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import llm_marl

ROOT = Path(__file__).resolve().parents[1]


def test_every_env_page_is_current():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "build.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_every_env_docstring_documents_roles_reward_and_usage(env_id):
    page = (ROOT / "docs" / "envs" / f"{env_id.replace('/', '__')}.md").read_text()
    assert "reward" in page.lower(), f"{env_id}: the reward is not documented"
    assert ">>> import llm_marl" in page, f"{env_id}: no usage example"
    env = llm_marl.make(env_id)
    try:
        for agent in env.possible_agents:
            assert agent in page, f"{env_id}: role {agent!r} is not documented"
    finally:
        env.close()
