"""Host-side cost of reading untrusted completions and test code (issue 9, item 8).

For each parser and each adversarial input family, times the parser on an input of size n and
on one of size 2n, side by side in one run, and prints the throughput and the ratio
``time(2n) / time(n)``: about 2 for linear work, about 4 for quadratic work. Timings on a shared
CPU are noisy; the ratio is what to read. The sizes stay under the parsers' caps
(``MAX_COMPLETION_CHARS``, ``MAX_CODE_CHARS``, ``MAX_TEST_SOURCE_CHARS``).

Also reports a 10 MB action passed to ``env.step`` (over the cap: not read, scored as no code).

    python benchmarks/coding_parsers.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from llm_marl.envs.coding import code_utils as cu
from llm_marl.tools.sandbox import TestSuite


def _time(fn: Callable[[], object], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def _check(n_units: int) -> str:
    return "def check(candidate):\n" + "".join(
        f"    assert candidate({i}) == {2 * i}\n" for i in range(n_units)
    )


# name -> (parser, input of "size" k)
CASES: dict[str, tuple[Callable[[str], object], Callable[[int], str]]] = {
    "extract_code: backticks on one line": (cu.extract_code, lambda k: "`" * (250_000 * k)),
    "extract_code: one fence per line": (cu.extract_code, lambda k: "```\n" * (60_000 * k)),
    "extract_code: unclosed fence": (
        cu.extract_code,
        lambda k: "```python\n" + "x = 1\n" * (40_000 * k),
    ),
    "split_blocks: prose lines": (cu.split_blocks, lambda k: "Some prose here.\n" * (1_400 * k)),
    "split_blocks: broken defs": (cu.split_blocks, lambda k: "def f:\n" * (3_500 * k)),
    "split_blocks: assigns + 1 bad": (
        cu.split_blocks,
        lambda k: "a = 1\n" * (4_000 * k) + "def g(:\n",
    ),
    "TestSuite.from_check: asserts": (
        lambda src: TestSuite.from_check(src, "f"),
        lambda k: _check(2_500 * k),
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'parser: input':42s} {'chars n':>10s} {'t(n) ms':>9s} {'t(2n) ms':>9s} "
        f"{'ratio':>6s} {'MB/s':>7s}"
    )
    for name, (fn, make) in CASES.items():
        small, large = make(1), make(2)
        t1 = _time(lambda s=small, f=fn: f(s), args.repeats)
        t2 = _time(lambda s=large, f=fn: f(s), args.repeats)
        print(
            f"{name:42s} {len(small):>10,d} {t1 * 1e3:>9.1f} {t2 * 1e3:>9.1f} "
            f"{t2 / t1:>6.2f} {len(large) / t2 / 1e6:>7.2f}"
        )
    action = "```python\n" + "def f(:\n" * 1_250_000
    t = _time(lambda: cu.Submission.from_completion(action), args.repeats)
    print(
        f"\nSubmission.from_completion on a {len(action) / 1e6:.0f} MB action: {t * 1e3:.1f} ms "
        f"(over the cap: oversized={cu.Submission.from_completion(action).oversized})"
    )


if __name__ == "__main__":
    main()
