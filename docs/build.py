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
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from docstring_md import markdown
from docstrings import Resolver

import llm_marl
from llm_marl.envs.base import LLMParallelEnv
from llm_marl.envs.registration import _load_entry_point

OUT = Path(__file__).parent / "envs"
API_PAGE = "api.md"
REASONING = (
    "`<think>...</think>` text is cut from each completion in `step`, before any reward, "
    f"grader, judge or other agent reads it ([api.md]({API_PAGE}))"
)
"""The summary row every env page shares: the contract of :mod:`llm_marl.envs.base`, which
every env inherits with ``LLMParallelEnv.step``."""
API_MEMBERS = ("setup_episode", "transition", "reset", "step", "end_episode", "say", "set_active")
"""The members of LLMParallelEnv an env author or user reads first, in this order."""


def page(env_id: str) -> str:
    """An env's page: a summary table from its spec and class, then its module docstring."""
    spec = llm_marl.spec(env_id)
    factory = _load_entry_point(spec.entry_point, env_id)
    module = importlib.import_module(factory.__module__)
    doc = inspect.cleandoc(module.__doc__ or factory.__doc__ or "(undocumented)")
    return (
        f"# `{env_id}`\n\n{spec.description}\n\n{summary_table(env_id)}\n"
        f"{markdown(doc, _module_resolver(module))}\n"
        f"The env API and its vocabulary (step, max_steps, phase, turn): [api.md]({API_PAGE}).\n"
    )


def api_page() -> str:
    """The env API: the base module's docstring (contract, vocabulary) and the main members."""
    from llm_marl.envs import base

    resolve = _module_resolver(base, base.LLMParallelEnv)
    parts = [
        "# The env API (`llm_marl.envs.base`)\n",
        markdown(inspect.cleandoc(base.__doc__ or ""), resolve),
        "## The main members of `LLMParallelEnv`\n",
    ]
    for name in API_MEMBERS:
        member = getattr(base.LLMParallelEnv, name)
        doc = inspect.getdoc(member) or ""
        parts.append(
            f"### `{name}`\n\n```python\n{_signature(name, member)}\n```\n\n"
            + markdown(doc, resolve, level=4)
        )
    return "\n".join(parts)


def _module_resolver(module: ModuleType, scope: type | None = None) -> Resolver:
    """Resolve a role's name as Python would inside ``module`` (and class ``scope``): the full
    dotted path of what the name refers to there, or None when it is not defined there."""

    def resolve(name: str) -> str | None:
        head, _, rest = name.partition(".")
        if scope is not None and head in vars(scope):
            path = f"{scope.__module__}.{scope.__qualname__}.{head}"
        elif head in vars(module):
            obj = vars(module)[head]
            if isinstance(obj, ModuleType):
                path = obj.__name__
            elif getattr(obj, "__qualname__", None) and getattr(obj, "__module__", None):
                path = f"{obj.__module__}.{obj.__qualname__}"
            else:
                path = f"{module.__name__}.{head}"
        else:
            return None
        return f"{path}.{rest}" if rest else path

    return resolve


def summary(env_id: str) -> dict[str, str]:
    """The rows of an env's summary table, each a Markdown cell, read from the registry spec and
    from the env ``make(env_id)`` builds (so the table says what the code does)."""
    spec = llm_marl.spec(env_id)
    with warnings.catch_warnings():  # a missing data set falls back to a sample: same table
        warnings.simplefilter("ignore")
        env = llm_marl.make(env_id)
    try:
        base = env.unwrapped
        agents = base.possible_agents
        low, high = base.reward_range
        versions = sorted(
            (
                s
                for s in llm_marl.registry.values()
                if (s.namespace, s.name) == (spec.namespace, spec.name)
            ),
            key=lambda s: s.version,
        )
        return {
            "Import": f'`llm_marl.make("{env_id}")`',
            "Agents": f"{len(agents)}: " + ", ".join(f"`{a}`" for a in agents),
            "Who acts when": base.turn_order or "(not stated)",
            "Action": f"the completion, any text: `{_same(env.action_space, agents)}`",
            "Observation": f"the agent's own chat: `{_same(env.observation_space, agents)}`",
            "Reasoning": REASONING,
            "Reward": f"joint (every agent gets it), per step in [{low:g}, {high:g}]",
            "Chance level": _chance(base),
            "Max steps": str(base.max_steps),
            "Version": f"v{spec.version}; registered: " + ", ".join(f"`{s.id}`" for s in versions),
            "Entry point": f"`{spec.entry_point}`",
            "Registered defaults": ", ".join(f"`{k}={v!r}`" for k, v in spec.kwargs.items())
            or "none",
        }
    finally:
        env.close()


def _chance(env: LLMParallelEnv) -> str:
    """The computed chance level (``chance_level()``, per episode) where the env has one, and
    its one-line note."""
    computed = getattr(env, "chance_level", None)
    if callable(computed):
        return f"{computed():.3g} per episode (`chance_level()`): {env.chance_note}"
    return env.chance_note or "(not stated)"


def summary_table(env_id: str) -> str:
    """The summary table (PettingZoo's layout: one row per property, the first as the header)."""
    rows = [f"| {key} | {value} |" for key, value in summary(env_id).items()]
    return "\n".join([rows[0], "|---|---|", *rows[1:]]) + "\n"


def _same(space: Callable[[str], object], agents: list[str]) -> str:
    """The space every agent shares (our envs give all agents one space)."""
    shown = {repr(space(a)) for a in agents}
    if len(shown) != 1:
        raise ValueError(f"agents have different spaces: {sorted(shown)}")
    return shown.pop()


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


def _signature(name: str, member: Callable[..., object]) -> str:
    """``LLMParallelEnv.name(...)``, one parameter a line when it is long (as a formatter would
    write it), so that no line runs past the page's text column."""
    signature = _unquoted(inspect.signature(member))
    line = f"LLMParallelEnv.{name}{signature}"
    if len(line) <= 72:
        return line
    params = "".join(f"    {p},\n" for p in signature.parameters.values())
    returns = signature.replace(parameters=[]).__str__().removeprefix("()")
    return f"LLMParallelEnv.{name}(\n{params}){returns}"


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
