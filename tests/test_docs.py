"""docs/envs/ is generated from the env docstrings and must be up to date and complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import llm_marl
from llm_marl.envs.base import LLMParallelEnv

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


# --- the env pages: a summary table from the code, then the docstring as Markdown ----------

DOCS = ROOT / "docs"


def _docs_module(name: str):
    """A module of docs/ (the site's build helpers live there, not in the package)."""
    import importlib

    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    return importlib.import_module(name)


def _summary_rows(page: str) -> dict[str, str]:
    """The first table of a page, as {first cell: second cell}."""
    rows = {}
    for line in page.split("\n\n# ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] != "---":
            rows[cells[0]] = cells[1]
    return rows


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_every_env_page_opens_with_a_summary_table_read_from_the_code(env_id):
    """PettingZoo's layout: before the text, one table saying what the code says (agents, who
    acts when, spaces, reward range, chance level, versions), each value checked here against
    the registry spec and the env ``make`` builds."""
    text = (DOCS / "envs" / f"{env_id}.md").read_text(encoding="utf-8")
    head = text[: text.index("\n## ")]  # the table comes before the first section
    rows = _summary_rows(head)
    spec = llm_marl.spec(env_id)
    env = llm_marl.make(env_id)
    try:
        base = env.unwrapped
        assert rows["Import"] == f'`llm_marl.make("{env_id}")`'
        agents = rows["Agents"]
        assert agents.startswith(f"{len(env.possible_agents)}: ")
        assert [a.strip(" `") for a in agents.split(": ", 1)[1].split(",")] == env.possible_agents
        assert base.turn_order and rows["Who acts when"] == base.turn_order
        assert repr(env.action_space(env.possible_agents[0])) in rows["Action"]
        assert repr(env.observation_space(env.possible_agents[0])) in rows["Observation"]
        # <think> text is stripped in LLMParallelEnv.step: the env must not bring its own step.
        assert type(base).step is LLMParallelEnv.step and "<think>" in rows["Reasoning"]
        low, high = base.reward_range
        assert f"[{low:g}, {high:g}]" in rows["Reward"]
        assert base.chance_note and base.chance_note in rows["Chance level"]
        if callable(getattr(base, "chance_level", None)):
            assert rows["Chance level"].startswith(f"{base.chance_level():.3g} per episode")
        assert rows["Max steps"] == str(base.max_steps)
        assert rows["Version"].startswith(f"v{spec.version};") and f"`{env_id}`" in rows["Version"]
        assert rows["Entry point"] == f"`{spec.entry_point}`"
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(llm_marl.registry))
def test_env_pages_are_markdown_not_a_text_block(env_id):
    text = (DOCS / "envs" / f"{env_id}.md").read_text(encoding="utf-8")
    assert "```text\n" not in text.split("\n## ", 1)[0], "the docstring is still one text block"
    assert "\n## Reward" in text or "\n## Reward (" in text, "no Reward section heading"
    assert "```pycon\n>>> import llm_marl" in text, "the example is not fenced code"
    assert ":class:`" not in text and ":mod:`" not in text and ":func:`" not in text


def test_the_env_api_page_is_markdown_with_its_vocabulary_as_sections():
    text = (DOCS / "envs" / "api.md").read_text(encoding="utf-8")
    assert "```text" not in text
    for word in ("episode", "step", "max_steps", "phase", "turn", "round"):
        assert f"\n### {word}\n" in text, word
    assert "\n## Writing an environment\n" in text
    assert "\n### `reset`\n" in text and "**Args**" in text
    import re

    signatures = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(signatures) == 7
    long = [line for block in signatures for line in block.splitlines() if len(line) > 80]
    assert not long, f"signature lines too long for the page's column: {long}"


def test_the_docstring_subset_becomes_markdown():
    md = _docs_module("docstring_md")
    doc = (
        "title — what it is.\n\n"
        "Roles (both at once)\n"
        "    ``a`` and ``b``; see :class:`~pkg.mod.Thing` and <Problem>.\n"
        "Phases\n"
        "    1. first, wrapped\n"
        "       here.\n"
        "    2. second.\n"
        "    After the list.\n\n"
        "Run it::\n\n"
        "    x = f(1)\n\n"
        ">>> 1 + 1\n"
        "2\n"
    )
    out = md.markdown(doc, lambda name: None)
    assert "## Roles\n\n*(both at once)*\n\n`a` and `b`" in out
    assert '<autoref identifier="pkg.mod.Thing" optional><code>Thing</code></autoref>' in out
    assert "&lt;Problem&gt;" in out
    assert "## Phases\n\n1. first, wrapped\n   here.\n2. second.\n\nAfter the list." in out
    assert "Run it:\n\n```python\nx = f(1)\n```" in out
    assert "```pycon\n>>> 1 + 1\n2\n```" in out


def test_roles_become_optional_autorefs_with_sphinx_titles():
    docstrings = _docs_module("docstrings")
    paths = {"Env": "llm_marl.envs.base.LLMParallelEnv"}
    text = (
        ":class:`~llm_marl.x.Y`, :meth:`Env.step`, :func:`the maker <llm_marl.make>`, "
        ":data:`!NOT_LINKED`, :py:attr:`a.b`"
    )

    def resolve(name: str) -> str | None:  # as Griffe would, in a scope that imports Env
        head, _, rest = name.partition(".")
        return f"{paths[head]}.{rest}" if head in paths else None

    out = docstrings.convert(text, resolve)
    assert docstrings.count_roles(out) == 0
    assert '<autoref identifier="llm_marl.x.Y" optional><code>Y</code></autoref>' in out
    assert 'identifier="llm_marl.envs.base.LLMParallelEnv.step" optional><code>Env.step<' in out
    assert 'identifier="llm_marl.make" optional><code>the maker</code>' in out
    assert "<code>NOT_LINKED</code>," in out and 'identifier="NOT_LINKED"' not in out
    assert 'identifier="a.b" optional><code>a.b</code>' in out


def test_every_docstring_of_the_package_loses_its_roles_under_the_griffe_extension():
    """What mkdocstrings renders: the package as Griffe loads it with our extension (fast; the
    built site is checked by the slow test below)."""
    griffe = pytest.importorskip("griffe", reason="the docs extra is not installed")
    docstrings = _docs_module("docstrings")
    package = griffe.load("llm_marl", search_paths=[str(ROOT)])

    def roles_left() -> list[str]:
        return [
            o.path
            for o in docstrings._objects(package)
            for _ in range(docstrings.count_roles(o.docstring.value) if o.docstring else 0)
        ]

    assert len(roles_left()) > 400  # the package writes Sphinx roles: the test reads real text
    docstrings.ReadableDocstrings().on_package(pkg=package, loader=None)
    left = sorted(set(roles_left()))
    assert not left, left[:10]


@pytest.mark.slow
def test_the_built_site_shows_no_literal_role_and_no_deprecated_member(tmp_path):
    """``mkdocs build --strict`` (~30 s), then docs/check_site.py on the HTML a reader gets."""
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr[-2000:]
    check = subprocess.run(
        [sys.executable, str(DOCS / "check_site.py"), str(site)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout
    html = (site / "envs" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'class="autorefs autorefs-internal"' in html  # roles became links, not just text
