"""Evaluate parsed expressions in-process, exactly or in floating point, with hard size guards.

Nothing here can hang: every operation whose cost grows with its operands (integer powers,
factorials, binomials, roots) checks the size first and gives up (returns None) beyond a bound,
and floating-point overflow is caught. Giving up is safe: the caller then falls back to the
sympy worker, which runs under a hard timeout (see :mod:`.pool`).

* :func:`exact` gives a ``Fraction`` for rational constants (``\\frac{3}{4}``, ``2^{10}``,
  ``0.25``, ``5!``, ``\\sqrt{16/9}``), else None.
* :func:`approx` gives a ``complex`` for any constant expression, or for an expression with
  symbols given values for them, else None.
"""

from __future__ import annotations

import cmath
import math
from fractions import Fraction

__all__ = ["exact", "approx", "free_symbols", "log10_magnitude", "needs_integer_points"]

_MAX_POW_BITS = 100_000
_MAX_FACTORIAL = 3000
_MAX_BINOM = 20_000
INF = complex(math.inf, 0)


def _children(node: tuple) -> tuple:
    """The sub-expressions of one node (none for leaves: ``num``, ``const``, ``sym``, ...)."""
    tag = node[0]
    if tag in ("add", "mul"):
        return tuple(node[1])
    if tag in ("neg", "fact", "pct"):
        return (node[1],)
    if tag in ("div", "pow", "root", "binom"):
        return (node[1], node[2])
    if tag == "fn":
        return tuple(node[2])
    return ()


def free_symbols(node: tuple) -> frozenset[str]:
    """Names of the ``sym`` leaves of an expression."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] == "sym":
            out.add(n[1])
        stack.extend(_children(n))
    return frozenset(out)


def needs_integer_points(node: tuple) -> bool:
    """Whether the expression uses factorial, binomial, floor or ceiling of a variable."""
    stack = [node]
    while stack:
        n = stack.pop()
        tag = n[0]
        integral = tag in ("fact", "binom") or (
            tag == "fn" and n[1] in ("floor", "ceil", "gcd", "lcm")
        )
        if integral and free_symbols(n):
            return True
        stack.extend(_children(n))
    return False


def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _int_root(n: int, k: int) -> int | None:
    """The exact k-th root of a non-negative integer, or None if it is not a perfect power."""
    if n < 0 or k <= 0:
        return None
    if n < 2:
        return n
    if n.bit_length() > 20_000:
        return None
    guess = int(round(math.exp(math.log(n) / k))) if n.bit_length() < 1000 else None
    if guess is None:
        # integer Newton iteration for big numbers
        x = 1 << ((n.bit_length() + k - 1) // k)
        while True:
            y = ((k - 1) * x + n // x ** (k - 1)) // k
            if y >= x:
                break
            x = y
        guess = x
    for cand in (guess - 1, guess, guess + 1):
        if cand >= 0 and cand**k == n:
            return cand
    return None


def _exact_pow(base: Fraction, exp: Fraction) -> Fraction | None:
    if exp.denominator == 1:
        n = exp.numerator
        if base == 0:
            return None if n < 0 else (Fraction(1) if n == 0 else Fraction(0))
        if base in (1, -1):
            return base**n
        if abs(n) * _bits(base) > _MAX_POW_BITS:
            return None
        return base**n
    # rational exponent: exact only for perfect powers (4^{1/2}, 8^{2/3}, (9/4)^{-1/2})
    q = exp.denominator
    if q > 64 or base < 0:
        return None
    num = _int_root(base.numerator, q)
    den = _int_root(base.denominator, q)
    if num is None or den is None:
        return None
    return _exact_pow(Fraction(num, den), Fraction(exp.numerator))


def exact(node: tuple) -> Fraction | None:
    """Exact rational value of a constant expression, or None (irrational, symbolic, too big)."""
    tag = node[0]
    if tag == "num":
        return node[1]
    if tag in ("add", "mul"):
        # Sum or product of the terms; every partial result is size-checked, so that a long
        # product of big numbers gives up before it costs more than the bound.
        acc = Fraction(0) if tag == "add" else Fraction(1)
        for t in node[1]:
            v = exact(t)
            if v is None:
                return None
            acc = acc + v if tag == "add" else acc * v
            if _bits(acc) > _MAX_POW_BITS:
                return None
        return acc
    if tag == "neg":
        v = exact(node[1])
        return None if v is None else -v
    if tag == "pct":
        v = exact(node[1])
        return None if v is None else v / 100
    if tag == "div":
        a, b = exact(node[1]), exact(node[2])
        if a is None or b is None or b == 0:
            return None
        q = a / b
        return None if _bits(q) > _MAX_POW_BITS else q
    if tag == "pow":
        a, b = exact(node[1]), exact(node[2])
        if a is None or b is None:
            return None
        return _exact_pow(a, b)
    if tag == "root":
        a, k = exact(node[1]), exact(node[2])
        if a is None or k is None or k.denominator != 1 or k.numerator <= 0:
            return None
        if a < 0 and k.numerator % 2 == 1:
            v = _exact_pow(-a, Fraction(1, k.numerator))
            return None if v is None else -v
        return _exact_pow(a, Fraction(1, k.numerator))
    if tag == "fact":
        a = exact(node[1])
        if a is None or a.denominator != 1 or not 0 <= a <= _MAX_FACTORIAL:
            return None
        return Fraction(math.factorial(int(a)))
    if tag == "binom":
        n, k = exact(node[1]), exact(node[2])
        if n is None or k is None or n.denominator != 1 or k.denominator != 1:
            return None
        if not 0 <= n <= _MAX_BINOM:
            return None
        return Fraction(math.comb(int(n), int(k))) if k >= 0 else Fraction(0)
    if tag == "fn":
        name, args = node[1], node[2]
        maybe = [exact(a) for a in args]
        vals = [v for v in maybe if v is not None]
        if len(vals) != len(maybe):
            return None
        if name == "abs":
            return abs(vals[0])
        if name == "floor":
            return Fraction(math.floor(vals[0]))
        if name == "ceil":
            return Fraction(math.ceil(vals[0]))
        if name == "max":
            return max(vals)
        if name == "min":
            return min(vals)
        if name in ("gcd", "lcm") and all(v.denominator == 1 for v in vals):
            ints = [int(v) for v in vals]
            return Fraction(math.gcd(*ints) if name == "gcd" else math.lcm(*ints))
        return None
    return None


_FUNCS = {
    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan,
    "arcsin": cmath.asin, "arccos": cmath.acos, "arctan": cmath.atan,
    "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh,
    "exp": cmath.exp, "ln": cmath.log,
}  # fmt: skip


def _finite(z: complex) -> bool:
    return math.isfinite(z.real) and math.isfinite(z.imag)


def _real(z: complex) -> float | None:
    if abs(z.imag) > 1e-12 * max(1.0, abs(z.real)):
        return None
    return z.real


def approx(node: tuple, env: dict[str, complex] | None = None) -> complex | None:
    """Floating-point value (complex) of an expression, or None if it cannot be computed.

    ``\\infty`` evaluates to ``inf``; a nan, an overflow or a domain error gives None.
    """
    try:
        v = _approx(node, env or {})
    except (OverflowError, ZeroDivisionError, ValueError, TypeError, RecursionError):
        return None
    if v is None:
        return None
    if math.isnan(v.real) or math.isnan(v.imag):
        return None
    return v


def _approx(node: tuple, env: dict[str, complex]) -> complex | None:
    tag = node[0]
    if tag == "num":
        return complex(node[1])
    if tag == "const":
        return {"pi": complex(math.pi), "e": complex(math.e), "i": 1j, "inf": INF}[node[1]]
    if tag == "sym":
        return env.get(node[1])
    if tag in ("add", "mul"):
        acc = 0j if tag == "add" else 1 + 0j
        for t in node[1]:
            v = _approx(t, env)
            if v is None:
                return None
            acc = acc + v if tag == "add" else _mul(acc, v)
        return acc
    if tag == "neg":
        v = _approx(node[1], env)
        return None if v is None else -v
    if tag == "pct":
        v = _approx(node[1], env)
        return None if v is None else v / 100
    if tag == "div":
        a, b = _approx(node[1], env), _approx(node[2], env)
        if a is None or b is None or b == 0:
            return None
        if not _finite(b):
            return 0j if _finite(a) else None
        if not _finite(a):
            return a if (b.real > 0 and b.imag == 0) else None
        return a / b
    if tag == "pow":
        return _pow(node, env)
    if tag == "root":
        a, k = _approx(node[1], env), _approx(node[2], env)
        if a is None or k is None or k == 0:
            return None
        kr = _real(k)
        ar = _real(a)
        if (
            ar is not None
            and kr is not None
            and ar < 0
            and float(kr).is_integer()
            and int(kr) % 2 == 1
        ):
            return complex(-((-ar) ** (1.0 / kr)))  # real odd root of a negative number
        return a ** (1 / k)
    if tag == "fact":
        a = _approx(node[1], env)
        x = None if a is None else _real(a)
        if x is None or x > 170 or (x < 0 and float(x).is_integer()):
            return None
        return complex(math.gamma(x + 1))
    if tag == "binom":
        n, k = _approx(node[1], env), _approx(node[2], env)
        nr = None if n is None else _real(n)
        kr = None if k is None else _real(k)
        if nr is None or kr is None or nr > 170 or nr < 0 or kr < 0 or kr > nr:
            return None
        if float(nr).is_integer() and float(kr).is_integer():
            return complex(math.comb(int(nr), int(kr)))
        return complex(math.gamma(nr + 1) / (math.gamma(kr + 1) * math.gamma(nr - kr + 1)))
    if tag == "fn":
        return _fn(node[1], [_approx(a, env) for a in node[2]])
    return None


def _mul(a: complex, b: complex) -> complex:
    if (a == 0 and not _finite(b)) or (b == 0 and not _finite(a)):
        raise ValueError("0 * inf")
    if not _finite(a) or not _finite(b):
        # keep the sign of an infinite real product (-1 * inf = -inf)
        ra, rb = _real(a), _real(b)
        if ra is None or rb is None:
            raise ValueError("complex infinity")
        return complex(math.copysign(math.inf, ra) * math.copysign(1.0, rb))
    return a * b


def _pow(node: tuple, env: dict[str, complex]) -> complex | None:
    base, exp = node[1], node[2]
    eb, ee = exact(base), exact(exp)
    if eb is not None and ee is not None:
        v = _exact_pow(eb, ee)
        if v is not None:
            return complex(v)
    a, b = _approx(base, env), _approx(exp, env)
    if a is None or b is None:
        return None
    if not _finite(a) or not _finite(b):
        return None
    br = _real(b)
    ar = _real(a)
    if br is not None and float(br).is_integer() and abs(br) <= 1e6 and ar is not None:
        return complex(ar ** int(br))  # real power: exact sign, OverflowError past 1e308
    if ar is not None and br is not None and ar > 0:
        return complex(ar**br)
    if a == 0:
        return 0j if (br is not None and br > 0) else None
    return cmath.exp(b * cmath.log(a))


def _fn(name: str, args: list[complex | None]) -> complex | None:
    if any(a is None for a in args):
        return None
    vals: list[complex] = [a for a in args if a is not None]
    if name in _FUNCS:
        return _FUNCS[name](vals[0])
    if name == "log":
        if len(vals) == 2:
            return cmath.log(vals[0]) / cmath.log(vals[1])
        return cmath.log(vals[0])
    if name in ("sec", "csc", "cot"):
        inner = {"sec": cmath.cos, "csc": cmath.sin, "cot": cmath.tan}[name](vals[0])
        return None if inner == 0 else 1 / inner
    if name == "arccot":
        return None if vals[0] == 0 else cmath.atan(1 / vals[0])
    if name == "abs":
        return complex(abs(vals[0]))
    reals = [_real(v) for v in vals]
    if any(r is None for r in reals):
        return None
    rs: list[float] = [r for r in reals if r is not None]
    if name == "floor":
        return complex(math.floor(rs[0]))
    if name == "ceil":
        return complex(math.ceil(rs[0]))
    if name == "max":
        return complex(max(rs))
    if name == "min":
        return complex(min(rs))
    if name in ("gcd", "lcm") and all(float(r).is_integer() and abs(r) < 1e15 for r in rs):
        ints = [int(r) for r in rs]
        return complex(math.gcd(*ints) if name == "gcd" else math.lcm(*ints))
    return None


def log10_magnitude(node: tuple, env: dict[str, complex] | None = None) -> float | None:
    """``log10 |value|``, also for values beyond float range (``10^{10^{10}}`` gives 1e10).

    Follows only products, quotients, powers, roots and factorials, where magnitudes compose
    without cancellation; ``inf`` means "astronomically large", ``-inf`` zero or vanishing.
    None if unknown.
    """
    try:
        return _log_mag(node, env or {}, 0)
    except (OverflowError, ZeroDivisionError, ValueError, TypeError, RecursionError):
        return None


def _log_mag(node: tuple, env: dict[str, complex], depth: int) -> float | None:
    if depth > 50:
        return None
    v = approx(node, env)
    if v is not None:
        if v == 0:
            return -math.inf
        return math.inf if not _finite(v) else math.log10(abs(v))
    tag = node[0]
    if tag in ("neg", "pct"):
        inner = _log_mag(node[1], env, depth + 1)
        return None if inner is None else inner - (2 if tag == "pct" else 0)
    if tag in ("mul", "div"):
        parts = node[1] if tag == "mul" else (node[1], node[2])
        mags = [_log_mag(t, env, depth + 1) for t in parts]
        if any(m is None for m in mags):
            return None
        if tag == "div":
            mags[1] = -mags[1]  # type: ignore[operator]
        if math.inf in mags and -math.inf in mags:
            return None
        return math.fsum(m for m in mags if m is not None)
    if tag == "root":
        k = approx(node[2], env)
        inner = _log_mag(node[1], env, depth + 1)
        kr = None if k is None else _real(k)
        if inner is None or not kr:
            return None
        return inner / kr
    if tag == "fact":
        n = approx(node[1], env)
        nr = None if n is None else _real(n)
        if nr is None or nr < 0:
            return None
        return math.lgamma(nr + 1) / math.log(10)
    if tag == "pow":
        base = approx(node[1], env)
        if base is None or base == 0 or not _finite(base):
            return None
        lb = math.log10(abs(base))
        if abs(base.imag) > 0 and abs(base.imag) > 1e-12 * abs(base.real):
            return None  # |z^w| is not |z|^w for complex z with a non-real power
        e = approx(node[2], env)
        if e is not None:
            er = _real(e)
            if er is None or not _finite(e):
                return None
            return er * lb
        # the exponent itself overflows: it is +-huge; only a positive-sign tower is handled
        if not _positive(node[2], env):
            return None
        le = _log_mag(node[2], env, depth + 1)
        if le is None or le < 300:
            return None
        if lb == 0:
            return 0.0
        return math.inf if lb > 0 else -math.inf
    return None


def _positive(node: tuple, env: dict[str, complex]) -> bool:
    """A cheap sufficient test that an expression is a positive real number."""
    tag = node[0]
    if tag == "num":
        return node[1] > 0
    if tag == "pow":
        b = approx(node[1], env)
        br = None if b is None else _real(b)
        return br is not None and br > 0
    if tag in ("mul", "add"):
        return all(_positive(t, env) for t in node[1])
    if tag == "div":
        return _positive(node[1], env) and _positive(node[2], env)
    return tag == "fact"
