"""Write the env docs from the code: one page per registered env from its module docstring
(docs/envs/<id>.md), and the env API page (docs/envs/api.md) from :mod:`llm_marl.envs.base`.

The docstrings *are* the documentation; this script only copies them out, so the pages can never
drift from the code. Run: ``python docs/build.py`` (``--check`` fails if a page is stale).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path

import llm_marl
from llm_marl.envs.registration import _load_entry_point

OUT = Path(__file__).parent / "envs"
API_PAGE = "api.md"
API_MEMBERS = ("setup_episode", "transition", "reset", "step", "end_episode", "say", "set_active")
"""The members of LLMParallelEnv an env author or user reads first, in this order."""


def page(env_id: str) -> str:
    spec = llm_marl.spec(env_id)
    factory = _load_entry_point(spec.entry_point, env_id)
    module = importlib.import_module(factory.__module__)
    doc = inspect.cleandoc(module.__doc__ or factory.__doc__ or "(undocumented)")
    kwargs = ", ".join(f"{k}={v!r}" for k, v in spec.kwargs.items()) or "none"
    agents = ", ".join(f"`{a}`" for a in getattr(factory, "possible_agents", []))
    return (
        f"# `{env_id}`\n\n{spec.description}\n\n"
        f"Entry point: `{spec.entry_point}` · registered defaults: {kwargs} · agents: {agents}\n\n"
        f"```text\n{doc}\n```\n\n"
        f"The env API and its vocabulary (step, max_steps, phase, turn): [api.md]({API_PAGE}).\n"
    )


def api_page() -> str:
    """The env API: the base module's docstring (contract, vocabulary) and the main members."""
    from llm_marl.envs import base

    parts = [
        "# The env API (`llm_marl.envs.base`)\n",
        f"```text\n{inspect.cleandoc(base.__doc__ or '')}\n```\n",
    ]
    for name in API_MEMBERS:
        member = getattr(base.LLMParallelEnv, name)
        signature = _unquoted(inspect.signature(member))
        doc = inspect.getdoc(member) or ""
        parts.append(f"## `LLMParallelEnv.{name}{signature}`\n\n```text\n{doc}\n```\n")
    return "\n".join(parts)


def pages() -> dict[Path, str]:
    """Every generated page, by path: one per env id, the API page, and the index."""
    ids = sorted(llm_marl.registry)
    out = {OUT / f"{i.replace('/', '__')}.md": page(i) for i in ids}
    out[OUT / API_PAGE] = api_page()
    out[OUT / "README.md"] = (
        "# Environments\n\n"
        f"The env API, its contract and vocabulary: [api.md]({API_PAGE}).\n\n"
        + "\n".join(
            f"- [`{i}`]({i.replace('/', '__')}.md) — {llm_marl.spec(i).description}" for i in ids
        )
        + "\n"
    )
    return out


class _Annotation(str):
    """An annotation string that prints without quotes."""

    def __repr__(self) -> str:
        return str(self)


def _unquoted(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` with its string annotations (``from __future__ import annotations``) unquoted."""

    def fix(annotation: object) -> object:
        return _Annotation(annotation) if isinstance(annotation, str) else annotation

    params = [p.replace(annotation=fix(p.annotation)) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=fix(sig.return_annotation))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is out of date")
    args = parser.parse_args()
    generated = pages()
    if args.check:
        stale = [p.name for p, text in generated.items() if not p.exists() or p.read_text() != text]
        if stale:
            print(f"stale pages (run python docs/build.py): {stale}")
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for path, text in generated.items():
        path.write_text(text)
    print(f"wrote {len(generated)} pages to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
