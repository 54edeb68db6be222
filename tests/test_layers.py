"""The import-direction rule of docs/architecture.md, checked on the source.

Data flows bottom to top and nothing imports upward: ``errors``, ``checks`` and ``spaces`` at the
bottom (``checks`` raises ``errors``' ConfigError); ``tools`` and ``data`` above them (plain
libraries, independent of each other); ``envs`` and ``policies`` above those and independent of
each other; ``rollout`` joins them; ``algos`` on top of rollout; ``train`` and ``eval``
orchestrate, independently of each other; ``integrations`` and the CLI on top.
Every import counts, lazy ones inside functions and type-checking-only ones included: a lazy
upward import is still an upward dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llm_marl"

LAYER = {
    "errors": 0,
    "checks": 0,
    "spaces": 0,
    "tools": 1,
    "data": 1,
    "envs": 2,
    "policies": 2,
    "rollout": 3,
    "algos": 4,
    "distributed": 4,
    "train": 5,
    "eval": 5,
    "integrations": 6,
    "cli": 7,
}
"""The layer of each top-level part of ``llm_marl`` (a module or a subpackage)."""

ALLOWED_SIDEWAYS = {("checks", "errors")}
"""Imports between different parts of one layer that the architecture allows."""


def _part(module: str) -> str | None:
    """``llm_marl.envs.base`` -> ``envs``; ``llm_marl`` itself -> None (the public facade)."""
    pieces = module.split(".")
    if pieces[0] != "llm_marl" or len(pieces) < 2:
        return None
    return pieces[1]


def _module_name(path: Path, package: Path) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            if module == "llm_marl":  # "from llm_marl import envs": the names are parts
                out += [(node.lineno, f"llm_marl.{alias.name}") for alias in node.names]
    return out


def _violations(root: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(root.rglob("*.py")):
        source = _part(_module_name(path, root))
        if source is None:
            continue  # llm_marl/__init__.py re-exports the public API
        if source not in LAYER:
            problems.append(f"{path}: part {source!r} has no layer in tests/test_layers.py")
            continue
        for line, module in _imports(path, root):
            target = _part(module)
            if target is None or target == source:
                continue
            if target not in LAYER:
                problems.append(f"{path}:{line}: imports unknown part {module!r}")
            elif LAYER[target] > LAYER[source]:
                problems.append(
                    f"{path}:{line}: {source} (layer {LAYER[source]}) imports "
                    f"{module} (layer {LAYER[target]}): an upward import"
                )
            elif LAYER[target] == LAYER[source] and (source, target) not in ALLOWED_SIDEWAYS:
                problems.append(
                    f"{path}:{line}: {source} imports {module}: the two are "
                    "independent parts of one layer"
                )
    return problems


def test_no_module_imports_upward_or_sideways() -> None:
    problems = _violations()
    assert not problems, "import-direction rule broken:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "part", "expected"),
    [
        ("from llm_marl.rollout import collect\n", "envs", "upward"),
        ("def f():\n    import llm_marl.train.trainer\n", "algos", "upward"),
        ("from llm_marl.policies.base import Policy\n", "envs", "independent"),
        ("from llm_marl.errors import DataError\n", "tools", None),
        ("from llm_marl.eval import math_eval\n", "train", "independent"),
    ],
)
def test_the_checker_itself_catches_what_it_should(
    tmp_path: Path, source: str, part: str, expected: str | None
) -> None:
    """The rule must be able to fail: plant one import in a fake package and look."""
    fake = tmp_path / "llm_marl"
    (fake / part).mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / part / "__init__.py").write_text(source)
    problems = _violations(fake)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0]


def _ray_imports(root: Path = PACKAGE) -> list[str]:
    """Ray is an optional extra: only ``distributed/`` imports it, and only inside functions."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        inside = _part(_module_name(path, root)) == "distributed"
        top_level = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if not any(n == "ray" or n.startswith("ray.") for n in names):
                continue
            if not inside:
                problems.append(f"{path}:{node.lineno}: imports ray outside llm_marl/distributed")
            elif id(node) in top_level:
                problems.append(f"{path}:{node.lineno}: imports ray at import time")
    return problems


@pytest.mark.slow  # a fresh interpreter; 20 s in the fast loop at load 17 (#22)
def test_ray_is_imported_only_lazily_inside_distributed() -> None:
    problems = _ray_imports()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("part", "source", "expected"),
    [
        ("distributed", "import ray\n", "at import time"),
        ("rollout", "def f():\n    import ray\n", "outside"),
        ("distributed", "def f():\n    from ray.util import x\n", None),
    ],
)
def test_the_ray_check_can_fail(
    tmp_path: Path, part: str, source: str, expected: str | None
) -> None:
    fake = tmp_path / "llm_marl"
    (fake / part).mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / part / "__init__.py").write_text(source)
    problems = _ray_imports(fake)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0]
