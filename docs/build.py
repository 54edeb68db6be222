"""Write one Markdown page per registered env from its module docstring (docs/envs/<id>.md).

The env's docstring *is* its documentation; this script only copies it out, so the pages can
never drift from the code. Run: ``python docs/build.py`` (``--check`` fails if a page is stale).
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


def page(env_id: str) -> str:
    spec = llm_marl.spec(env_id)
    factory = _load_entry_point(spec.entry_point, env_id)
    module = importlib.import_module(factory.__module__)
    doc = inspect.cleandoc(module.__doc__ or factory.__doc__ or "(undocumented)")
    kwargs = ", ".join(f"{k}={v!r}" for k, v in spec.kwargs.items()) or "none"
    return (
        f"# `{env_id}`\n\n{spec.description}\n\n"
        f"Entry point: `{spec.entry_point}` · registered defaults: {kwargs}\n\n"
        f"```text\n{doc}\n```\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a page is out of date")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    stale = []
    for env_id in sorted(llm_marl.registry):
        path = OUT / f"{env_id.replace('/', '__')}.md"
        text = page(env_id)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    index = (
        "# Environments\n\n"
        + "\n".join(
            f"- [`{i}`]({i.replace('/', '__')}.md) — {llm_marl.spec(i).description}"
            for i in sorted(llm_marl.registry)
        )
        + "\n"
    )
    if args.check:
        if stale:
            print(f"stale pages (run python docs/build.py): {stale}")
            return 1
        return 0
    (OUT / "README.md").write_text(index)
    print(f"wrote {len(llm_marl.registry)} pages to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
