"""Programs written by a team: which author's code the tests must call.

When several authors write one program (MAGRPO's helper writes ``aux``, the main agent writes the
entry point), running the joined source in one interpreter lets one author's code change what the
other's means at run time: a thread started by the helper can rebind the entry point after the
main agent's ``def``, a finalizer can swap its ``__code__``, an import hook or a patched builtin can
change what it calls. Checks on the source text cannot see any of that.

A :class:`TeamProgram` tells the sandbox who wrote what. The sandbox then loads the whole program
as usual in one process, and the *shared* code plus the entry point's author's own part in a
second process that no other author's code ever runs in; the other authors' functions are bound
there as proxies that call into the first process, so what crosses is only the plain data their
explicit calls return (the same codec as between the tests and the program). The tests call the
entry point in the second process. See ``harness._owner_main``.

What it costs in fidelity: a call from the entry point's author to another author's function
passes copies, so in-place changes to arguments are not seen by the caller, and arguments or
results that are not plain data (functions, class instances) raise ``TypeError``; another
author's globals that shadow a Python builtin, and its values holding more than 10,000 items, are
not visible to the entry point's author. A name defined by the shared code keeps the shared
definition in the entry point's author's process even if another author redefines it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def join_parts(parts: Sequence[str]) -> str:
    """Join program parts into one module: each part without surrounding blank lines, two blank
    lines between parts, empty parts skipped, one final newline."""
    return "\n\n\n".join(p.strip("\n") for p in parts if p and p.strip()) + "\n"


@dataclass(frozen=True)
class TeamProgram:
    """A program made of a trusted shared part and parts written by different authors.

    Args:
        shared: code every part may use and that no author wrote (a task's imports and given
            functions); it runs first, in both processes.
        parts: each author's code, in program order.
        entry_part: index in ``parts`` of the author whose definition of the entry point the
            tests call.
    """

    shared: str
    parts: tuple[str, ...]
    entry_part: int

    def __post_init__(self) -> None:
        if not isinstance(self.shared, str) or not all(isinstance(p, str) for p in self.parts):
            raise TypeError("TeamProgram.shared and every part must be str")
        if not 0 <= self.entry_part < len(self.parts):
            raise ValueError(
                f"entry_part={self.entry_part} is not the index of one of the "
                f"{len(self.parts)} parts"
            )

    @property
    def source(self) -> str:
        """The whole program, as a single-process run would execute it."""
        return join_parts([self.shared, *self.parts])

    def to_wire(self) -> dict[str, object]:
        """The ``owner`` field of a sandbox job (see ``harness._owner_main``): the shared code and
        the entry point's author's part, with the line of the whole program each starts on."""
        pieces = [self.shared, *self.parts]
        kept = [i for i, p in enumerate(pieces) if p and p.strip()]
        line = 1
        starts: dict[int, int] = {}
        for i in kept:
            starts[i] = line
            line += pieces[i].strip("\n").count("\n") + 3  # the part, then two blank lines
        owner_index = self.entry_part + 1
        return {
            "shared": self.shared.strip("\n") if 0 in starts else "",
            "shared_line": starts.get(0, 1),
            "code": pieces[owner_index].strip("\n") if owner_index in starts else "",
            "code_line": starts.get(owner_index, 1),
        }
