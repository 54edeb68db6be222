"""parse_python: host-side parses of completions are safe from several threads at once."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
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

    breeding = True  # each one finalised makes the next: the chain stops with the test

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)
        if _Yielder.breeding:
            _Yielder()


def _system_errors_in_racing_threads(parse: Callable[[int], object]) -> list[SystemError]:
    """Run ``parse(thread index)`` 10 times in each of 4 threads while garbage collections hand
    the interpreter to another thread mid-parse; return the SystemErrors raised."""
    old = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    _Yielder.breeding = True
    errors: list[SystemError] = []

    def work(i: int) -> None:
        for _ in range(10):
            _Yielder()
            try:
                parse(i)
            except SystemError as e:
                errors.append(e)

    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(work, range(4)))
    finally:
        gc.set_threshold(*old)
        _Yielder.breeding = False
        gc.collect()
    return errors


@pytest.mark.slow  # 64 s in the fast loop at load 17 (#22)
def test_concurrent_parses_never_raise_system_error():
    assert _system_errors_in_racing_threads(lambda _: parse_python(_SOURCE)) == []


@pytest.mark.slow  # 21 s in the fast loop at load 17 (#22)
def test_literal_examples_are_parsed_under_the_lock_while_other_threads_parse():
    """The coding envs' test suites read prompt examples with literal_eval; unlocked, its parse
    raced parse_python in another env thread (SystemError on CPython 3.11)."""
    from llm_marl.envs.coding.testsuite import _eval_text

    literal = str([[(k, {"a": [k]}) for k in range(50)]])

    def parse(i: int) -> object:
        return parse_python(_SOURCE) if i % 2 else _eval_text(literal)

    assert _system_errors_in_racing_threads(parse) == []


def test_parse_python_is_ast_parse():
    tree = parse_python("x = (1 + 2)")
    assert type(tree).__name__ == "Module"
    assert parse_python("1 + 2", mode="eval").body.op.__class__.__name__ == "Add"
    with pytest.raises(SyntaxError):
        parse_python("x = 1 +", filename="<completion>")
