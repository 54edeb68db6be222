"""parse_python: host-side parses of completions are safe from several threads at once."""

from __future__ import annotations

import gc
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from llm_marl.tools.pyparse import parse_python

_SOURCE = "def f(x):\n" + "".join(
    f"    y{i} = [(a, b) for a in range({i}) for b in ((x + 1) * 2, {{'k': [1, (3, 4)]}})]\n"
    for i in range(100)
)


class _Yielder:
    """Cyclic garbage whose finaliser releases the GIL: a collection that starts while the AST
    constructor allocates hands the interpreter to another thread mid-parse, which is how
    CPython 3.11's shared recursion counter got corrupted in the coding envs' threads."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)
        _Yielder()


def test_concurrent_parses_never_raise_system_error():
    old = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    errors: list[BaseException] = []

    def work(_: int) -> None:
        for _ in range(10):
            _Yielder()
            try:
                parse_python(_SOURCE)
            except SystemError as e:
                errors.append(e)

    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(work, range(4)))
    finally:
        gc.set_threshold(*old)
        gc.collect()
    assert errors == []


def test_parse_python_is_ast_parse():
    tree = parse_python("x = (1 + 2)")
    assert type(tree).__name__ == "Module"
    assert parse_python("1 + 2", mode="eval").body.op.__class__.__name__ == "Add"
    with pytest.raises(SyntaxError):
        parse_python("x = 1 +", filename="<completion>")
