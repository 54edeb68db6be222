"""Compare two parsed answers: structure here, leaf expressions through a pluggable backend.

Verdicts are three-valued: True (equivalent), False (not), None (this backend cannot decide).
:class:`NumericBackend` runs in-process and is bounded by construction (see :mod:`.numeric`);
the sympy backend (:mod:`.symbolic`) runs in the worker process under a hard timeout.

Structure rules
---------------
* lists and sets (``1, 2``; ``\\{1, 2\\}``; a ``\\pm`` expansion) are multisets: order-insensitive,
  matched one-to-one;
* tuples and intervals (``(1, 2)``, ``[0, 1)``) are ordered, and their brackets must agree
  (``[0, 1)`` is not ``[0, 1]``; the point ``(1, 2)`` is not ``[1, 2]``); a matrix with one row or
  one column equals the tuple of its entries;
* unions of intervals are unordered;
* ``name = value`` equals ``value`` and any ``name = value'`` with an equivalent value, but not
  ``other = value``; a list of assignments is matched by name;
* assignments to consecutive letters are also the point they name, in alphabetical order:
  ``x = 2, y = 3`` is ``(2, 3)``, ``a = 1, b = 0, c = 4`` is ``(1, 0, 4)``;
* equations and inequalities are equivalent when the differences of their sides are proportional
  (``y = 2x + 3`` vs ``2x - y + 3 = 0``; ``k \\ge 2`` vs ``2 \\le k``);
* an inequality in one variable is also the interval it describes: ``x \\le 2`` is
  ``(-\\infty, 2]``, ``1 \\le x < 3`` is ``[1, 3)``, and ``x < 1`` or ``x > 2`` is
  ``(-\\infty, 1) \\cup (2, \\infty)`` (the bounds must not contain the variable);
* percentages are read both ways: ``50%`` matches ``50`` and ``0.5``;
* text is compared case-insensitively, multiple-choice letters by letter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Protocol

from .numeric import approx, exact, free_symbols, log10_magnitude, needs_integer_points
from .parse import ParseError, parse_expression

__all__ = ["Backend", "NumericBackend", "compare_answers", "compare_readings", "sample_points"]

# Two values whose relative difference is below _SAME are equal (they agree to ~12 significant
# digits: exact-looking answers that differ only beyond that are not told apart in floats);
# above _DIFFERENT they are
# different; in between, floating point cannot tell (the sympy backend recomputes exactly).
_SAME = 1e-12
_DIFFERENT = 1e-6
_MAX_ITEMS = 64


class Backend(Protocol):
    """How leaf expressions are compared."""

    def equal(self, p: tuple, r: tuple) -> bool | None:
        """Whether expression ``p`` (prediction) equals ``r`` (reference)."""

    def proportional(self, p: tuple, r: tuple, positive: bool) -> bool | None:
        """Whether ``p = c * r`` for a constant ``c`` (non-zero; positive if ``positive``)."""


def _rel_diff(a: complex, b: complex) -> float:
    if not (
        math.isfinite(a.real)
        and math.isfinite(a.imag)
        and math.isfinite(b.real)
        and math.isfinite(b.imag)
    ):
        return 0.0 if a == b else math.inf
    scale = max(1.0, abs(a), abs(b))
    return abs(a - b) / scale


def _is_literal(node: tuple) -> bool:
    """A number written out (``3``, ``-0.45``, ``4.48e33``), as opposed to an exact expression."""
    if node[0] in ("neg", "pct"):
        return _is_literal(node[1])
    return node[0] == "num"


def _within_stated_precision(pred: complex | Fraction, p: tuple, ref: tuple) -> bool:
    """An exact expression ``p`` (``2/3``, ``\\sqrt 2``) rounds to a decimal reference
    (``0.667``, ``1.414``, ``4.5e33``) at the reference's last written digit.

    A written-out number is never rounded: ``0.45`` or ``0.54`` is not ``0.5``, ``4.48e33`` is
    not ``4.5e33``.
    """
    if _is_literal(p):
        return False
    if ref[0] == "neg":
        inner = ref[1]
        if inner[0] != "num" or inner[2] is None:
            return False
        value, step = -inner[1], inner[2]
    elif ref[0] == "num" and ref[2] is not None:
        value, step = ref[1], ref[2]
    else:
        return False
    if isinstance(pred, Fraction):
        return abs(pred - value) <= step / 2
    if abs(pred.imag) > 0:
        return False
    return abs(pred.real - float(value)) <= float(step) / 2 * (1 + 1e-12)


def _magnitudes_differ(p: tuple, r: tuple, env: dict[str, complex]) -> bool:
    """Whether |p| and |r| clearly differ, judged on log scale (works beyond float range)."""
    lp, lr = log10_magnitude(p, env), log10_magnitude(r, env)
    if lp is None or lr is None or lp == lr:
        return False
    if math.isinf(lp) or math.isinf(lr):
        return True
    return abs(lp - lr) > 1e-6 * max(1.0, abs(lp), abs(lr))


def sample_points(names: Sequence[str], integers: bool, count: int = 6) -> list[dict[str, complex]]:
    """Deterministic, irregular evaluation points (positive reals, or small integers)."""
    points = []
    for k in range(count):
        env: dict[str, complex] = {}
        for j, name in enumerate(sorted(names)):
            if integers:
                env[name] = complex(3 + (k * 5 + j * 3) % 9)
            else:
                frac = ((k + 1) * 0.6180339887498949 + (j + 1) * 0.41421356237309515) % 1.0
                env[name] = complex(0.55 + 2.4 * frac)
        points.append(env)
    return points


class NumericBackend:
    """In-process leaf comparison: exact rationals, then floats, then random-point identity tests.

    Bounded by construction; never imports sympy.
    """

    def equal(self, p: tuple, r: tuple) -> bool | None:
        if p == r:
            return True
        syms = free_symbols(p) | free_symbols(r)
        if not syms:
            return self._constant_equal(p, r)
        return self._identity(p, r, syms)

    def _constant_equal(self, p: tuple, r: tuple) -> bool | None:
        ep, er = exact(p), exact(r)
        if ep is not None and er is not None:
            return ep == er or _within_stated_precision(ep, p, r)
        ap, ar = approx(p), approx(r)
        if ap is None or ar is None:
            return False if _magnitudes_differ(p, r, {}) else None
        d = _rel_diff(ap, ar)
        if d <= _SAME or _within_stated_precision(ap, p, r):
            return True
        if d > _DIFFERENT:
            return False
        return None

    def _identity(self, p: tuple, r: tuple, syms: frozenset[str]) -> bool | None:
        integers = needs_integer_points(p) or needs_integer_points(r)
        valid = 0
        worst = 0.0
        for env in sample_points(tuple(syms), integers):
            vp, vr = approx(p, env), approx(r, env)
            if vp is None or vr is None:
                if _magnitudes_differ(p, r, env):
                    return False  # e.g. one side overflows a float, the other does not
                continue
            valid += 1
            worst = max(worst, _rel_diff(vp, vr))
            if worst > 1e-3:
                return False  # clearly different at a point where both are defined
        if valid < 3:
            return None
        if not integers:
            # Negative values too, where both sides are real there: |x| is not x, nor
            # sqrt(x^2). Points where a side is complex (log x, sqrt x) say nothing.
            for env in sample_points(tuple(syms), False, count=3):
                neg = {k: -v for k, v in env.items()}
                vp, vr = approx(p, neg), approx(r, neg)
                if vp is None or vr is None or abs(vp.imag) > 1e-9 or abs(vr.imag) > 1e-9:
                    continue
                worst = max(worst, _rel_diff(vp, vr))
                if worst > 1e-3:
                    return False
        if worst <= _SAME:
            return True
        return None if worst <= 1e-3 else False

    def proportional(self, p: tuple, r: tuple, positive: bool) -> bool | None:
        syms = free_symbols(p) | free_symbols(r)
        integers = needs_integer_points(p) or needs_integer_points(r)
        ratios = []
        for env in sample_points(tuple(syms), integers) if syms else [{}]:
            vp, vr = approx(p, env), approx(r, env)
            if vp is None or vr is None:
                continue
            if vr == 0:
                if vp != 0 and abs(vp) > 1e-9:
                    return False
                continue
            ratios.append(vp / vr)
        if len(ratios) < (3 if syms else 1):
            return None
        first = ratios[0]
        if abs(first) < 1e-12:
            return False
        if any(_rel_diff(q, first) > 1e-6 for q in ratios):
            return False
        # an inequality keeps its direction only when scaled by a positive constant
        return not (positive and (abs(first.imag) > 1e-9 or first.real <= 0))


def _readings(node: tuple) -> list[tuple]:
    """A percentage is also read as the plain number: ``50%`` -> [0.5, 50]."""
    if node[0] == "pct":
        return [node, node[1]]
    return [node]


_EXPR_TAGS = {
    "num",
    "sym",
    "const",
    "add",
    "neg",
    "mul",
    "div",
    "pow",
    "root",
    "fn",
    "fact",
    "binom",
    "pct",
}


def _combine(verdicts: list[bool | None], decides: bool) -> bool | None:
    """Three-valued ``any`` (``decides=True``: one True decides) or ``all`` (``decides=False``):
    ``decides`` if a verdict is, the other value if every verdict is, else None (undecided)."""
    if any(v is decides for v in verdicts):
        return decides
    if all(v is (not decides) for v in verdicts):
        return not decides
    return None


def _perfect_matching(n: int, ok: Callable[[int, int], bool]) -> bool:
    """Whether an n x n bipartite graph has a perfect matching (augmenting paths)."""
    match_r: list[int] = [-1] * n

    def augment(i: int, seen: list[bool]) -> bool:
        for j in range(n):
            if not seen[j] and ok(i, j):
                seen[j] = True
                if match_r[j] < 0 or augment(match_r[j], seen):
                    match_r[j] = i
                    return True
        return False

    return all(augment(i, [False] * n) for i in range(n))


def _multiset(ps: Sequence[tuple], rs: Sequence[tuple], be: Backend, depth: int) -> bool | None:
    if len(ps) != len(rs):
        return False
    n = len(ps)
    if n == 0:
        return True
    if n > _MAX_ITEMS:
        return None
    matrix = [[compare_answers(p, r, be, depth + 1) for r in rs] for p in ps]
    if _perfect_matching(n, lambda i, j: matrix[i][j] is True):
        return True
    if _perfect_matching(n, lambda i, j: matrix[i][j] is not False):
        return None
    return False


def _ordered(ps: Sequence[tuple], rs: Sequence[tuple], be: Backend, depth: int) -> bool | None:
    if len(ps) != len(rs):
        return False
    verdicts: list[bool | None] = []
    for p, r in zip(ps, rs):
        v = compare_answers(p, r, be, depth + 1)
        if v is False:
            return False
        verdicts.append(v)
    return _combine(verdicts, decides=False)


def _flip(op: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)


def _compare_relations(p: tuple, r: tuple, be: Backend) -> bool | None:
    p_ops, p_sides = p[1], p[2]
    r_ops, r_sides = r[1], r[2]
    if len(p_ops) != len(r_ops):
        return False
    if len(p_ops) == 1:
        (po,), (ro,) = p_ops, r_ops
        if po == ro:
            candidates = [tuple(p_sides)]
            if ro in ("=", "!="):
                candidates.append(tuple(reversed(p_sides)))  # a = b is b = a
        elif po == _flip(ro):
            candidates = [tuple(reversed(p_sides))]
        else:
            return False
        for lhs_p, rhs_p in candidates:
            if _combine([be.equal(lhs_p, r_sides[0]), be.equal(rhs_p, r_sides[1])], False) is True:
                return True
        lhs_p, rhs_p = candidates[0]
        dp = ("add", (lhs_p, ("neg", rhs_p)))
        dr = ("add", (r_sides[0], ("neg", r_sides[1])))
        return be.proportional(dp, dr, positive=ro not in ("=", "!="))
    # chains such as 0 < x < 1: same operators (or all flipped), sides equal pairwise
    if tuple(p_ops) == tuple(r_ops):
        return _ordered(p_sides, r_sides, be, 0)
    if tuple(_flip(o) for o in reversed(p_ops)) == tuple(r_ops):
        return _ordered(tuple(reversed(p_sides)), r_sides, be, 0)
    return False


_INFINITY = ("const", "inf")
_OPEN = {"<": "(", "<=": "["}  # the bracket on the side of a bound, by the operator there


def _interval_of(ops: tuple[str, ...], sides: tuple[tuple, ...]) -> tuple | None:
    """The interval ``("seq", open, close, (low, high))`` a one-variable inequality describes
    (``x <= 2``, ``2 > x``, ``1 <= x < 3``, ``3 > x >= 1``), or None if it is not one."""
    if ops and all(o in (">", ">=") for o in ops):
        ops, sides = tuple(_flip(o) for o in reversed(ops)), tuple(reversed(sides))
    if not 1 <= len(ops) <= 2 or not all(o in _OPEN for o in ops):
        return None
    # Now every operator is "<" or "<=": "x < b", "a < x" or "a < x < b".
    if len(ops) == 2:
        low: tuple | None = sides[0]
        x, high = sides[1], sides[2]
    elif sides[0][0] == "sym":
        low, x, high = None, sides[0], sides[1]
    else:
        low, x, high = sides[0], sides[1], None
    if x[0] != "sym" or any(b is not None and x[1] in free_symbols(b) for b in (low, high)):
        return None
    opening = "(" if low is None else _OPEN[ops[0]]
    closing = ")" if high is None else ("]" if ops[-1] == "<=" else ")")
    return ("seq", opening, closing, (low or ("neg", _INFINITY), high or _INFINITY))


def _as_intervals(node: tuple) -> tuple | None:
    """An inequality (or a list of them, read as their union) as intervals; None otherwise."""
    if node[0] == "rel":
        return _interval_of(node[1], node[2])
    if node[0] == "list" and node[1] and all(item[0] == "rel" for item in node[1]):
        parts = [_interval_of(item[1], item[2]) for item in node[1]]
        if any(part is None for part in parts):
            return None
        return ("union", tuple(parts))
    return None


def _assignments_as_point(node: tuple) -> tuple | None:
    """``x = 2, y = 3`` as the point ``(2, 3)``: a list of assignments to distinct consecutive
    letters (``x, y``; ``a, b, c``), valued in alphabetical order; None otherwise."""
    if node[0] != "list" or len(node[1]) < 2 or any(item[0] != "assign" for item in node[1]):
        return None
    by_name = {item[1]: item[2] for item in node[1]}
    names = sorted(by_name)
    if len(names) != len(node[1]) or any(len(n) != 1 or not n.isalpha() for n in names):
        return None
    if any(ord(b) - ord(a) != 1 for a, b in zip(names, names[1:])):
        return None  # "x = 1, a = 2": no conventional order
    return ("seq", "(", ")", tuple(by_name[n] for n in names))


def _as_point_or_intervals(node: tuple) -> tuple | None:
    """The point a list of assignments names, or the intervals inequalities describe."""
    return _assignments_as_point(node) or _as_intervals(node)


def _assign_as_relation(node: tuple) -> tuple | None:
    """``y = 2x + 3`` as the equation it also is (None if the name is not an expression)."""
    if node[2][0] not in _EXPR_TAGS:
        return None
    try:
        lhs = parse_expression(node[1])
    except ParseError:
        return None
    return ("rel", ("=",), (lhs, node[2]))


def _as_vector(node: tuple) -> tuple | None:
    """Entries of a one-row or one-column matrix."""
    rows = node[1]
    if len(rows) == 1:
        return rows[0]
    if all(len(row) == 1 for row in rows):
        return tuple(row[0] for row in rows)
    return None


def compare_answers(p: tuple, r: tuple, be: Backend, depth: int = 0) -> bool | None:
    """Compare a parsed prediction ``p`` with a parsed reference ``r`` (see the module rules)."""
    if depth > 30:
        return None
    if p == r:
        return True
    tp, tr = p[0], r[0]
    # unwrap one-element containers: "{3}" and "3" answer the same question
    if tp == "list" and len(p[1]) == 1:
        return compare_answers(p[1][0], r, be, depth + 1)
    if tr == "list" and len(r[1]) == 1:
        return compare_answers(p, r[1][0], be, depth + 1)
    if tp == "union" and len(p[1]) == 1:
        return compare_answers(p[1][0], r, be, depth + 1)
    if tr == "union" and len(r[1]) == 1:
        return compare_answers(p, r[1][0], be, depth + 1)
    if tp == "assign" or tr == "assign":
        if tp == "assign" and tr == "assign":
            if p[1] != r[1]:
                return False
            return compare_answers(p[2], r[2], be, depth + 1)
        other = r if tp == "assign" else p
        if other[0] == "rel":
            as_rel = _assign_as_relation(p if tp == "assign" else r)
            if as_rel is None:
                return False
            return (
                compare_answers(as_rel, r, be, depth + 1)
                if tp == "assign"
                else compare_answers(p, as_rel, be, depth + 1)
            )
        if tp == "assign":
            return compare_answers(p[2], r, be, depth + 1)
        return compare_answers(p, r[2], be, depth + 1)
    if tp == "raw" or tr == "raw":
        return None  # unparsed: only another checker (math-verify) can say more
    if tp == "mc" and tr == "mc":
        return p[1] == r[1]  # the letter decides; the option text may be abbreviated
    if tp == "mc" or tr == "mc":
        mc, other = (p, r) if tp == "mc" else (r, p)
        if other[0] == "sym" and len(other[1]) == 1:
            return other[1].upper() == mc[1]  # "(B)" vs a bare "B"
        if other[0] == "text":
            # "(B) Paris" vs "Paris", or vs "b" written as a word
            return other[1] in (mc[1].casefold(), mc[2]) and bool(other[1])
        return False
    if tp == "text" or tr == "text":
        if tp == "text" and tr == "text":
            return p[1] == r[1]
        return False  # a word is not a number, a tuple or a formula
    if tp == "list" and tr == "list":
        return _multiset(p[1], r[1], be, depth)
    if tp == "union" and tr == "union":
        return _multiset(p[1], r[1], be, depth)
    if tp == "seq" and tr == "seq":
        if (p[1], p[2]) != (r[1], r[2]):
            return False
        return _ordered(p[3], r[3], be, depth)
    if tp == "matrix" or tr == "matrix":
        if tp == "matrix" and tr == "matrix":
            if len(p[1]) != len(r[1]) or any(len(a) != len(b) for a, b in zip(p[1], r[1])):
                return False
            return _ordered(
                [x for row in p[1] for x in row], [x for row in r[1] for x in row], be, depth
            )
        mat, other = (p, r) if tp == "matrix" else (r, p)
        vec = _as_vector(mat)
        if vec is None or other[0] != "seq" or other[1:3] != ("(", ")"):
            return False
        ps, rs = (vec, other[3]) if tp == "matrix" else (other[3], vec)
        return _ordered(ps, rs, be, depth)
    if tp == "rel" and tr == "rel":
        return _compare_relations(p, r, be)
    if {tp, tr} & {"seq", "union"} and {tp, tr} & {"rel", "list"}:
        # "x = 2, y = 3" against "(2, 3)", "x <= 2" against "(-\\infty, 2]": compare the point
        # or the intervals the assignments or inequalities name
        p_set = _as_point_or_intervals(p) if tp in ("rel", "list") else p
        r_set = _as_point_or_intervals(r) if tr in ("rel", "list") else r
        if p_set is not None and r_set is not None:
            return compare_answers(p_set, r_set, be, depth + 1)
    if tp in _EXPR_TAGS and tr in _EXPR_TAGS:
        return _combine([be.equal(a, b) for a in _readings(p) for b in _readings(r)], decides=True)
    return False  # different kinds of answer: a tuple is not a number, a set is not an equation


def compare_readings(ps: Sequence[tuple], rs: Sequence[tuple], be: Backend) -> bool | None:
    """Compare every reading of the prediction with every reading of the reference."""
    return _combine([compare_answers(p, r, be) for p in ps for r in rs], decides=True)
