"""What our docstrings need before the site renders them: links for Sphinx roles, fences for
doctests.

The docstrings write references the Sphinx way (``:class:`~llm_marl.envs.base.LLMParallelEnv```,
``:meth:`step```), which Markdown shows as literal text. :func:`convert` rewrites each role into
an *optional* mkdocs-autorefs reference: a link where the target is rendered somewhere on the
site, the name as code where it is not (an object we do not document, or another project's),
so a reference never breaks the strict build. Markdown also reads a doctest's ``>>>`` as nested
quotes; :func:`fence_doctests` puts each doctest in a ``pycon`` code block.

:class:`ReadableDocstrings` applies both to every docstring mkdocstrings renders (a Griffe
extension, named in ``mkdocs.yml``); ``docs/build.py`` applies :func:`convert` to the env pages
it writes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

try:  # only the site build needs Griffe; docs/build.py runs without the docs extra
    import griffe
except ImportError:  # pragma: no cover - the docs extra is not installed
    griffe = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import griffe

ROLE_RE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|mod|data|exc|obj|const|type):`(?P<body>[^`]+)`"
)
"""A Sphinx Python role: ``:role:`target```, ``:role:`~target``` or ``:role:`title <target>```."""

Resolver = Callable[[str], str | None]
"""Maps a name as written (``LLMParallelEnv.step``) to its full dotted path, or None."""


def convert(text: str, resolve: Resolver) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs reference.

    ``~a.b.c`` shows ``c``, ``title <a.b.c>`` shows ``title``, ``!a.b`` shows ``a.b`` and links
    nowhere, anything else shows as written. ``resolve`` gives the target's full path; a name it
    cannot place is kept as written, which autorefs then tries as an absolute path.
    """

    def replace(match: re.Match[str]) -> str:
        body = match["body"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", body)
        if explicit:
            title, target = explicit["title"], explicit["target"]
        else:
            target = body
            title = target.lstrip("~!")
            if target.startswith("~"):
                title = title.rsplit(".", 1)[-1]
        code = f"<code>{html.escape(title)}</code>"
        if target.startswith("!"):
            return code
        name = target.lstrip("~")
        identifier = resolve(name) or name
        return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'

    return ROLE_RE.sub(replace, text)


def count_roles(text: str) -> int:
    """How many Sphinx roles ``text`` still holds."""
    return len(ROLE_RE.findall(text))


def fence_doctests(text: str) -> str:
    """``text`` with each doctest (a ``>>>`` line up to the next blank line) in a fenced
    ``pycon`` block at its own indentation; text already in a fence is left alone."""
    lines = text.splitlines()
    out: list[str] = []
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced = not fenced
        if fenced or not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        j = i
        while j < len(lines) and lines[j].strip():
            j += 1
        out += [f"{indent}```pycon", *lines[i:j], f"{indent}```"]
        i = j
    return "\n".join(out)


if griffe is not None:

    class ReadableDocstrings(griffe.Extension):
        """Once a package is loaded, rewrite every docstring in it: roles resolved in the scope of
        the object whose docstring holds them (as Sphinx does), doctests fenced."""

        def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
            for obj in _objects(pkg):
                if obj.docstring is not None:
                    text = convert(obj.docstring.value, _resolver(obj))
                    obj.docstring.value = fence_doctests(text)

    def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
        yield obj
        for member in obj.members.values():
            if not member.is_alias:
                yield from _objects(member)  # type: ignore[arg-type]

    def _resolver(obj: griffe.Object) -> Resolver:
        def resolve(name: str) -> str | None:
            head, _, rest = name.partition(".")
            try:
                path = obj.resolve(head)
            except griffe.NameResolutionError:
                return None
            return f"{path}.{rest}" if rest else path

        return resolve
