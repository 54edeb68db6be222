"""The README and the custom-env guide say what is true: the registration example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import llm_marl

README = Path(__file__).resolve().parents[1] / "README.md"
GUIDE = README.parent / "docs" / "guides" / "custom-env.md"


def test_custom_env_guide_example_runs():
    assert "docs/guides/custom-env.md" in README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    (example,) = [b for b in blocks if "class EchoEnv" in b]
    namespace: dict = {"llm_marl": llm_marl}
    try:
        exec(compile(example, str(GUIDE), "exec"), namespace)
        env = namespace["env"]
        obs, infos = env.reset(seed=0)
        _, rewards, terms, _, infos = env.step({"a": "cat", "b": " cat"})
        assert rewards == {"a": 1.0, "b": 1.0} and all(terms.values())
        assert infos["a"]["reward_components"] == {"match": 1.0}
    finally:
        llm_marl.registry.pop("acme/echo-v0", None)


def test_readme_names_the_ci_test_command():
    text = README.read_text()
    assert "bash .ci/run" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "python -m pytest -q" in ci and "python -m pytest -q" in text
