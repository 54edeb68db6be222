"""The sympy backend: exact and symbolic comparison of parsed expressions.

Meant to run in the grading worker process (:mod:`.worker`), where a hard timeout can kill it:
building a sympy expression evaluates eagerly (``10^{10^{10^{10}}}`` tries to compute the
integer), and ``simplify`` has no time bound. Nothing in the parent process imports this module
unless it is used explicitly.

The parsed tree comes from our own parser (:mod:`.parse`), not ``sympy.parsing.latex``: that one
needs ``antlr4-python3-runtime`` pinned to the exact version sympy was built against (4.11 for
sympy 1.12-1.14), which conflicts with what ``math-verify`` installs (4.13), and it rejects much of
what models write (``\\frac12``, ``2\\frac{1}{2}``, ``\\sin^2 x``).
"""

from __future__ import annotations

import sympy

from .compare import NumericBackend, sample_points
from .numeric import needs_integer_points

__all__ = ["SympyBackend", "to_sympy"]

_FUNCS = {
    "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
    "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan,
    "arccot": sympy.acot, "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh,
    "exp": sympy.exp, "ln": sympy.log, "abs": sympy.Abs, "floor": sympy.floor,
    "ceil": sympy.ceiling, "max": sympy.Max, "min": sympy.Min, "gcd": sympy.gcd, "lcm": sympy.lcm,
}  # fmt: skip
_CONSTS = {"pi": sympy.pi, "e": sympy.E, "i": sympy.I, "inf": sympy.oo}


def to_sympy(node: tuple) -> sympy.Expr:
    """Convert an expression tree from :mod:`.parse` to a sympy expression."""
    tag = node[0]
    if tag == "num":
        return sympy.Rational(node[1].numerator, node[1].denominator)
    if tag == "sym":
        return sympy.Symbol(node[1])
    if tag == "const":
        return _CONSTS[node[1]]
    if tag == "add":
        return sympy.Add(*[to_sympy(t) for t in node[1]])
    if tag == "mul":
        return sympy.Mul(*[to_sympy(t) for t in node[1]])
    if tag == "neg":
        return -to_sympy(node[1])
    if tag == "pct":
        return to_sympy(node[1]) / 100
    if tag == "div":
        return to_sympy(node[1]) / to_sympy(node[2])
    if tag == "pow":
        return sympy.Pow(to_sympy(node[1]), to_sympy(node[2]))
    if tag == "root":
        x, n = to_sympy(node[1]), to_sympy(node[2])
        if n.is_Integer and int(n) % 2 == 1 and x.is_negative:
            return sympy.real_root(x, n)
        return sympy.root(x, n)
    if tag == "fact":
        return sympy.factorial(to_sympy(node[1]))
    if tag == "binom":
        return sympy.binomial(to_sympy(node[1]), to_sympy(node[2]))
    if tag == "fn":
        name, args = node[1], [to_sympy(a) for a in node[2]]
        if name == "log":
            return sympy.log(args[0], args[1]) if len(args) == 2 else sympy.log(args[0])
        return _FUNCS[name](*args)
    raise ValueError(f"not an expression node: {tag}")


def _is_zero(expr: sympy.Expr, scale: sympy.Expr) -> bool | None:
    """Decide ``expr == 0`` for a constant expression with 60-digit arithmetic."""
    value = sympy.N(expr, 60)
    size = sympy.N(scale, 60)
    if value.free_symbols or size.free_symbols:
        return None
    if not (value.is_number and size.is_number) or value.has(sympy.zoo, sympy.nan):
        return None
    try:
        mag = abs(complex(value))
        ref = max(1.0, abs(complex(size)))
    except (TypeError, ValueError, OverflowError):
        return None
    if mag <= 1e-40 * ref:
        return True
    if mag > 1e-25 * ref:
        return False
    return None


def _points_test(diff: sympy.Expr, scale: sympy.Expr, integers: bool) -> bool | None:
    """Evaluate ``diff`` at fixed points with 40-digit arithmetic (no float overflow).

    False if it is clearly non-zero somewhere; True if it vanishes at every point where it is
    defined (at least three); None otherwise.
    """
    names = sorted(str(x) for x in diff.free_symbols)
    by_name = {str(x): x for x in diff.free_symbols}
    zeros = 0
    for env in sample_points(names, integers):
        subs = {
            by_name[k]: (sympy.Integer(int(v.real)) if integers else sympy.Float(v.real, 40))
            for k, v in env.items()
        }
        verdict = _is_zero(diff.evalf(40, subs=subs), scale.evalf(40, subs=subs))
        if verdict is False:
            return False
        if verdict is True:
            zeros += 1
    return True if zeros >= 3 else None


class SympyBackend:
    """Leaf comparison with sympy, after the cheap numeric backend has had its say."""

    def __init__(self) -> None:
        self.numeric = NumericBackend()

    def equal(self, p: tuple, r: tuple) -> bool | None:
        quick = self.numeric.equal(p, r)
        if quick is not None:
            return quick
        sp, sr = to_sympy(p), to_sympy(r)
        return self._sympy_equal(sp, sr, needs_integer_points(p) or needs_integer_points(r))

    def _sympy_equal(self, sp: sympy.Expr, sr: sympy.Expr, integers: bool) -> bool | None:
        if sp == sr:
            return True
        if sp.has(sympy.oo, -sympy.oo, sympy.zoo) or sr.has(sympy.oo, -sympy.oo, sympy.zoo):
            return bool(sp == sr)
        diff = sp - sr
        if diff.is_Rational:
            return bool(diff == 0)  # exact numbers: no tolerance, however large they are
        if not diff.free_symbols:
            verdict = _is_zero(diff, abs(sp) + abs(sr))
            if verdict is not None:
                return verdict
        else:
            verdict = _points_test(diff, abs(sp) + abs(sr), integers)
            if verdict is not None:
                return verdict
        simplified = sympy.simplify(diff)
        if simplified == 0:
            return True
        if not simplified.free_symbols:
            verdict = _is_zero(simplified, abs(sp) + abs(sr))
            if verdict is not None:
                return verdict
        # sympy's own randomised numerical test (None when it cannot decide)
        same = diff.equals(0)
        return None if same is None else bool(same)

    def proportional(self, p: tuple, r: tuple, positive: bool) -> bool | None:
        quick = self.numeric.proportional(p, r, positive)
        if quick is not None:
            return quick
        sp, sr = to_sympy(p), to_sympy(r)
        if sr == 0:
            return False
        ratio = sympy.simplify(sp / sr)
        if ratio.free_symbols or ratio == 0 or ratio.has(sympy.zoo, sympy.nan):
            return False
        if positive:
            return bool(ratio.is_positive)
        return True
