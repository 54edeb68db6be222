"""Answers graded per second: llm_marl's grader vs math-verify alone, on MATH-500 references.

Three sets of (completion, reference) pairs, all built from the 500 MATH-500 reference answers:

* ``boxed reference``  -- the completion boxes the reference itself (should be correct);
* ``rewritten``        -- it boxes an equivalent answer written differently (``\\frac{3}{4}`` ->
  ``0.75``, ``(1, 2)`` -> ``\\left( 1, 2 \\right)``, ``x^2+2x+1`` -> ``1 + x^2 + 2x``, units,
  ``x =`` prefixes, reordered lists, ...); pairs whose rewrite rule does not apply are left out;
* ``sympy-printed``    -- it boxes sympy's LaTeX of the expanded reference (expressions only:
  ``(a+5)(b+2)`` -> ``a b + 2 a + 5 b + 10``, ``\\frac{\\sqrt{3}}{3}`` -> ``\\frac{\\sqrt{3}}{3}``);
* ``wrong``            -- it boxes a different answer (reference + 1, or another problem's
  reference), which should be incorrect.

For each set: the fraction graded correct and the throughput of each grader, and how often the
two agree. Our grader runs warm (worker pool started, caches cleared before each set); math-verify
runs with its defaults (``parse`` + ``verify``, signal-based timeouts, main thread).

    python benchmarks/grading.py [--data PATH] [--show N]

math-verify is optional (``pip install math-verify``); without it only our figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from llm_marl.tools.grading import default_pool, grade, normalize_answer
from llm_marl.tools.grading.normalize import canonical_form
from llm_marl.tools.grading.numeric import exact
from llm_marl.tools.grading.parse import parse_answer

ROOT = Path(__file__).resolve().parents[1]


def _data_path(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = os.environ.get("LLM_MARL_DATA_DIR") or str(ROOT.parent / "shared" / "data")
    return Path(base) / "math500" / "test.jsonl"


def _fmt(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def _terminating(v: Fraction) -> bool:
    d = v.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal(v: Fraction) -> str:
    """Exact decimal expansion of a terminating fraction."""
    sign = "-" if v < 0 else ""
    v = abs(v)
    digits = 0
    while (v * 10**digits).denominator != 1:
        digits += 1
    scaled = int(v * 10**digits)
    if digits == 0:
        return sign + str(scaled)
    s = str(scaled).rjust(digits + 1, "0")
    return f"{sign}{s[:-digits]}.{s[-digits:]}"


# Each rule maps a reference to an equivalent rewrite, or None when it does not apply.
def _numeric_rewrite(ref: str) -> str | None:
    node = parse_answer(canonical_form(ref))[0]
    if node[0] not in ("num", "neg", "div"):
        return None
    v = exact(node)
    if v is None:
        return None
    style = (len(ref) + v.numerator) % 4  # vary the rewrite deterministically
    if v.denominator == 1:
        n = int(v)
        if abs(n) >= 10000:
            return f"{n:,}"
        return [f"\\frac{{{2 * n}}}{{2}}", f"{n}.0", f"x = {n}", f"{n} \\text{{ units}}"][style]
    if _terminating(v):
        return _decimal(v) if style % 2 else f"{_decimal(v * 100)}\\%"
    return [
        f"{v.numerator}/{v.denominator}",
        f"\\dfrac{{{2 * v.numerator}}}{{{2 * v.denominator}}}",
    ][style % 2]


def _structural_rewrite(ref: str) -> str | None:
    s = ref.strip()
    if "\\text{(" in s:
        return re.sub(r"\\text\{\((\w)\)\}", r"\1", s)
    m = re.fullmatch(r"\\text\{\s*([A-Za-z ]+)\}", s)
    if m:
        return m.group(1).upper()
    if "^\\circ" in s:
        return s.replace("^\\circ", " degrees")
    if re.fullmatch(r"\([^()]*\)", s) and "," in s:
        return "\\left" + s[:-1] + "\\right)"
    if s.startswith("\\left(") or s.startswith("\\left["):
        return s.replace("\\left", "").replace("\\right", "")
    if "\\dfrac" in s:
        return s.replace("\\dfrac", "\\frac")
    if "\\frac" in s and not re.search(
        r"[a-zA-Z]\s*\}", s.replace("\\frac", "").replace("\\sqrt", "").replace("\\pi", "")
    ):
        return s.replace("\\frac", "\\dfrac")
    if (
        re.fullmatch(r"[^,()\[\]{}]+(,[^,()\[\]{}]+)+", s)
        and parse_answer(canonical_form(s))[0][0] == "list"
    ):
        return ", ".join(reversed([p.strip() for p in s.split(",")]))
    if re.fullmatch(r"[0-9\\sqrt{}+\- ]+", s) and "\\sqrt{" in s:
        return re.sub(r"\\sqrt\{(\d+)\}", r"(\1)^{1/2}", s)
    return None


def _expression_rewrite(ref: str) -> str | None:
    """Terms of a polynomial-like sum in reverse order, or a prefixed variable name."""
    s = ref.strip()
    if any(t in s for t in ("\\begin", "\\frac", "}{")):
        return None
    if re.fullmatch(r"[-+]?[0-9a-z^{}\\ ]+(?:\s*[-+]\s*[0-9a-z^{}\\ ]+)+", s) and "=" not in s:
        terms = re.findall(r"[-+]?\s*[^-+]+", s)
        terms = [t.strip() for t in terms]
        first, rest = terms[0], terms[1:]
        if not first.startswith("-"):
            first = "+ " + first
        out = " ".join(
            [rest[-1].lstrip("+ ").strip()]
            + [t if t[0] in "+-" else "+ " + t for t in reversed(rest[:-1])]
            + [first]
        )
        return out
    if re.fullmatch(r"[a-z]\s*=.*", s):
        return s.split("=", 1)[1].strip()
    return None


def equivalent_rewrite(ref: str) -> str | None:
    """A differently written equivalent of a MATH-500 reference (None if no rule applies)."""
    for rule in (_numeric_rewrite, _structural_rewrite, _expression_rewrite):
        out = rule(ref)
        if out is not None and out.strip() != ref.strip():
            return out
    return None


_EXPR_TAGS = {"add", "mul", "div", "pow", "root", "fn", "neg", "sym"}


def sympy_rewrite(ref: str) -> str | None:
    """The reference as sympy prints it once expanded (``(a+5)(b+2)`` -> ``a b + 2 a + 5 b + 10``),
    for non-integer expressions only; None when sympy's form is the same string."""
    import sympy

    from llm_marl.tools.grading.symbolic import to_sympy

    node = parse_answer(canonical_form(ref))[0]
    if node[0] not in _EXPR_TAGS or exact(node) is not None:
        return None
    try:
        out = sympy.latex(sympy.expand(to_sympy(node)))
    except Exception:  # noqa: BLE001 - a reference sympy cannot handle is simply skipped
        return None
    return None if out.replace(" ", "") == ref.replace(" ", "") else out


def wrong_answer(refs: list[str], i: int) -> str:
    node = parse_answer(canonical_form(refs[i]))[0]
    v = exact(node) if node[0] in ("num", "neg", "div", "add", "mul", "pow", "pct") else None
    if v is not None:
        return _fmt(v + 1)
    own = normalize_answer(refs[i])
    for k in range(1, len(refs)):
        other = refs[(i + k) % len(refs)]
        if normalize_answer(other) != own:
            return other
    raise ValueError("all references are equal")


def _box(answer: str) -> str:
    return "Reasoning ... so the final answer is $\\boxed{" + answer + "}$."


def _ours(completion: str, reference: str) -> bool:
    return grade(completion, reference).correct


def _math_verify() -> Callable[[str, str], bool] | None:
    try:
        import logging

        from math_verify import parse, verify
    except ImportError:
        return None
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    def mv(completion: str, reference: str) -> bool:
        gold = parse("$" + reference + "$")
        return bool(verify(gold, parse(completion)))

    return mv


def _run(fn: Callable[[str, str], bool], pairs: list[tuple[str, str]]) -> tuple[list[bool], float]:
    parse_answer.cache_clear()
    start = time.perf_counter()
    out = [fn(c, r) for c, r in pairs]
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="path of MATH-500 test.jsonl (default: shared/data)")
    ap.add_argument("--show", type=int, default=10, help="disagreements to print per set")
    args = ap.parse_args(argv)
    path = _data_path(args.data)
    if not path.is_file():
        print(
            f"MATH-500 file not found: {path} (pass --data or set LLM_MARL_DATA_DIR)",
            file=sys.stderr,
        )
        return 2
    refs = [
        json.loads(line)["answer"]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    rewrites = [(equivalent_rewrite(r), r) for r in refs]
    sets = {
        "boxed reference": [(_box(r), r) for r in refs],
        "rewritten": [(_box(w), r) for w, r in rewrites if w is not None],
        "sympy-printed": [(_box(w), r) for r in refs if (w := sympy_rewrite(r)) is not None],
        "wrong": [(_box(wrong_answer(refs, i)), r) for i, r in enumerate(refs)],
    }
    default_pool().warm_up()
    mv = _math_verify()
    if mv is None:
        print("math-verify is not installed: only our grader is measured (pip install math-verify)")
    header = f"{'set':16} {'n':>4} | {'ours correct':>12} {'ours ans/s':>10} | {'m-v correct':>11} {'m-v ans/s':>9} | {'agree':>6}"
    print(header)
    print("-" * len(header))
    details = []
    for name, pairs in sets.items():
        ours, t_ours = _run(_ours, pairs)
        line = f"{name:16} {len(pairs):4d} | {sum(ours) / len(pairs):12.1%} {len(pairs) / t_ours:10.0f} |"
        if mv is not None:
            theirs, t_mv = _run(mv, pairs)
            agree = sum(a == b for a, b in zip(ours, theirs)) / len(pairs)
            line += f" {sum(theirs) / len(pairs):11.1%} {len(pairs) / t_mv:9.0f} | {agree:6.1%}"
            details.append((name, [(p, o, t) for p, o, t in zip(pairs, ours, theirs) if o != t]))
        print(line)
    for name, diffs in details:
        if diffs and args.show:
            print(f"\n{name}: {len(diffs)} disagreements (ours, math-verify), first {args.show}:")
            for (completion, reference), o, t in diffs[: args.show]:
                answer = completion.split("\\boxed{", 1)[1].rsplit("}$", 1)[0]
                print(f"  ours={o!s:5} m-v={t!s:5}  answer {answer!r}  reference {reference!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
