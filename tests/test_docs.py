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


def test_the_custom_algorithm_guide_shows_the_whole_example():
    """Every code block of the guide is a piece of examples/custom_algorithm.py, and together
    they hold all of its code (the module docstring aside)."""
    import re

    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "guides" / "custom-algorithm.md").read_text(encoding="utf-8")
    example = (root / "examples" / "custom_algorithm.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL)
    assert len(blocks) == 3

    def lines(text: str) -> str:  # section banners and blank lines aside
        kept = (x for x in text.splitlines() if x.strip() and not x.startswith("# ----"))
        return "\n".join(kept)

    for block in blocks:
        assert lines(block) in lines(example), block[:80]
    code = example[example.index("from dataclasses import dataclass") :]
    shown = "".join(blocks)
    for line in code.splitlines():
        if line.strip() and not line.startswith("# ----"):
            assert line in shown, f"the guide leaves out: {line!r}"


def test_every_env_page_is_in_the_site_navigation():
    root = Path(__file__).resolve().parents[1]
    nav = (root / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (root / "docs" / "envs").glob("*.md"))
    assert pages, "no env pages"
    missing = [p for p in pages if f"envs/{p}" not in nav]
    assert not missing, f"env pages missing from mkdocs.yml's nav: {missing}"
