"""Parse a normalised answer into a small tree: the common subset of LaTeX and plain math.

The tree is made of tuples (immutable, hashable, cheap to share between threads and to cache):

Expressions
    ``("num", value: Fraction, step: Fraction | None)`` -- a literal; ``step`` is the unit of its
    last written decimal digit (``1.6`` -> 1/10, ``4.5e33`` -> 10**32), None for integers;
    ``("sym", name)``, ``("const", "pi" | "e" | "i" | "inf")``, ``("add", terms)``,
    ``("neg", x)``, ``("mul", factors)``, ``("div", a, b)``, ``("pow", a, b)``,
    ``("root", x, n)``, ``("fn", name, args)`` (sin, log, floor, abs, ...), ``("fact", x)``,
    ``("binom", n, k)``, ``("pct", x)`` (x percent).
Answers
    ``("list", items)`` -- unordered (``1, 2``, ``\\{1, 2\\}``, a ``\\pm`` expansion);
    ``("seq", open, close, items)`` -- ordered: tuples ``(1, 2)`` and intervals ``[0, 1)``;
    ``("union", parts)``, ``("rel", ops, sides)`` (``=``, ``<``, ``\\le`` ...),
    ``("assign", name, value)`` (``x = 3``, ``f(x) = 2x``), ``("matrix", rows)``,
    ``("mc", letter, text)`` (multiple choice, with the option's text if given), ``("text", words)`` (a text answer), and
    ``("raw", string)`` for anything the parser does not understand (compared as a string).

:func:`parse_answer` returns a tuple of alternative readings (usually one): ``(B) Paris`` may
be the multiple-choice letter B or the text answer.

Parsing is linear in the input and depth-limited, so it is safe on hostile strings; nothing
here evaluates anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction
from functools import lru_cache

from .brackets import matching_close, split_at_top_level, split_top_level
from .normalize import is_label

__all__ = ["ParseError", "parse_answer", "parse_expression", "MAX_PARSE_LENGTH"]

MAX_PARSE_LENGTH = 2000
"""Longer answers are not parsed (compared as strings): no benchmark answer comes close."""

_MAX_DEPTH = 120


class ParseError(ValueError):
    """The string is not in the supported subset of math notation."""


FUNCTIONS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "arccot",
    "sinh", "cosh", "tanh", "ln", "log", "exp", "lg",
}  # fmt: skip
MULTI_ARG_FUNCTIONS = {"max", "min", "gcd", "lcm"}
GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
    "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon",
    "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi",
    "Sigma", "Phi", "Psi", "Omega", "hbar", "ell", "varrho", "mho", "odot",
}  # fmt: skip
_PLAIN_WORDS = {"sqrt", "pi", "infty", "inf"} | FUNCTIONS | MULTI_ARG_FUNCTIONS
_RELATIONS = {
    "=": "=", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "!=": "!=",
    "\\le": "<=", "\\leq": "<=", "\\leqslant": "<=", "\\ge": ">=", "\\geq": ">=",
    "\\geqslant": ">=", "\\neq": "!=", "\\ne": "!=", "\\lt": "<", "\\gt": ">",
}  # fmt: skip
_MULT_CMDS = {"cdot", "times", "ast"}
_IGNORED_CMDS = {"limits", "nolimits", "displaystyle", "mathrm", "operatorname*"}

# --- tokenizer ---------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+(?![\d.]))?|\.\d+)
  | (?P<begin>\\begin\s*\{\s*[a-zA-Z*]+\s*\})
  | (?P<end>\\end\s*\{\s*[a-zA-Z*]+\s*\})
  | (?P<cmd>\\[A-Za-z]+|\\[{}|,;!:\\ ])
  | (?P<word>[A-Za-z]+)
  | (?P<op><=|>=|!=|\*\*|[-+*/^_()\[\]{}|!,=<>'&;%.:])
  | (?P<space>\s+)
    """,
    re.VERBOSE,
)


def _tokenize(s: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    n = len(s)
    while pos < n:
        m = _TOKEN_RE.match(s, pos)
        if m is None:
            raise ParseError(f"unexpected character {s[pos]!r}")
        kind = m.lastgroup or ""
        text = m.group(0)
        pos = m.end()
        if kind == "space":
            tokens.append(("space", " "))
        elif kind == "num":
            # "2e3" is scientific notation, but "2e" and "2e^{x}" are 2 times e.
            tokens.append(("num", text))
        elif kind in ("begin", "end"):
            env = re.sub(r"\s", "", text[text.index("{") + 1 : -1])
            tokens.append((kind, env))
        elif kind == "cmd":
            tokens.append(("cmd", text[1:]))
        elif kind == "word":
            if text in _PLAIN_WORDS:
                tokens.append(("cmd", "infty" if text == "inf" else text))
            else:
                # an unknown letter run is a product of single-letter symbols: "xy" = x*y
                tokens.extend(("id", ch) for ch in text)
        else:
            tokens.append(("op", "^" if text == "**" else text))
    return tokens


def _num_node(text: str) -> tuple:
    """A numeric literal with its value and the unit of its last written digit."""
    mantissa, _, exponent = text.lower().partition("e")
    exp = int(exponent) if exponent else 0
    if abs(exp) > 400:
        raise ParseError("exponent too large for a literal")
    step: Fraction | None
    if "." in mantissa:
        whole, frac = mantissa.split(".")
        digits = len(frac)
        value = Fraction(int((whole or "0") + (frac or "0")), 10**digits)
        step = Fraction(1, 10**digits) if digits else None
    else:
        value = Fraction(int(mantissa))
        step = None
    if exponent:
        scale = Fraction(10) ** exp
        value *= scale
        # "3e6" states one significant digit: its last digit is worth 10**6
        step = (step if step is not None else Fraction(1)) * scale
    return ("num", value, step)


# --- expression parser -----------------------------------------------------------------------


class _Parser:
    """Recursive descent over the token list; ``depth`` bounds recursion on hostile input."""

    def __init__(self, tokens: list[tuple[str, str]]):
        self.toks = [t for t in tokens]
        self.i = 0
        self.depth = 0
        self.abs_open = 0

    # token helpers
    def peek(self, skip_space: bool = True) -> tuple[str, str] | None:
        j = self.i
        while skip_space and j < len(self.toks) and self.toks[j][0] == "space":
            j += 1
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> tuple[str, str]:
        self.skip_space()
        if self.i >= len(self.toks):
            raise ParseError("unexpected end of input")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def skip_space(self) -> None:
        while self.i < len(self.toks) and self.toks[self.i][0] == "space":
            self.i += 1

    def accept(self, kind: str, value: str | None = None) -> bool:
        tok = self.peek()
        if tok and tok[0] == kind and (value is None or tok[1] == value):
            self.next()
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        if not self.accept(kind, value):
            raise ParseError(f"expected {value!r} at token {self.i}")

    def at_end(self) -> bool:
        return self.peek() is None

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise ParseError("expression nested too deeply")

    # grammar
    def expr(self) -> tuple:
        self.enter()
        terms = [self.term()]
        while True:
            tok = self.peek()
            if tok == ("op", "+"):
                self.next()
                terms.append(self.term())
            elif tok == ("op", "-"):
                self.next()
                terms.append(("neg", self.term()))
            else:
                break
        self.depth -= 1
        return terms[0] if len(terms) == 1 else ("add", tuple(terms))

    def term(self) -> tuple:
        factors = [self.unary()]
        while True:
            tok = self.peek()
            if tok is None:
                break
            if tok in (("op", "*"),) or (tok[0] == "cmd" and tok[1] in _MULT_CMDS):
                self.next()
                factors.append(self.unary())
            elif tok == ("op", "/") or tok == ("cmd", "div"):
                self.next()
                denom = self.unary()
                left = factors[0] if len(factors) == 1 else ("mul", tuple(factors))
                factors = [("div", left, denom)]
            elif self.starts_atom(tok):
                nxt = self.power()
                prev = factors[-1]
                negated = prev[0] == "neg" and prev[1][0] == "num"
                if negated:
                    prev = prev[1]
                # "137\frac{1}{2}" is a mixed number in MATH, not a product.
                if (
                    nxt[0] == "div"
                    and prev[0] == "num"
                    and prev[2] is None
                    and nxt[1][0] == "num"
                    and nxt[2][0] == "num"
                    and nxt[1][2] is None
                    and nxt[2][2] is None
                    and 0 < nxt[1][1] < nxt[2][1]
                    and self.last_was_frac
                ):
                    mixed = ("add", (prev, nxt))
                    factors[-1] = ("neg", mixed) if negated else mixed
                else:
                    factors.append(nxt)
            else:
                break
        return factors[0] if len(factors) == 1 else ("mul", tuple(factors))

    last_was_frac = False

    def starts_atom(self, tok: tuple[str, str]) -> bool:
        kind, val = tok
        if kind in ("num", "id", "begin"):
            return True
        if kind == "op":
            if val == "|":
                return self.abs_open == 0
            return val in ("(", "[", "{")
        if kind == "cmd":
            return not (
                val in _MULT_CMDS
                or val in ("div", "cup", "cap", "pm", "mp", "right", "rfloor", "rceil", "}", "\\")
                or ("\\" + val) in _RELATIONS
                or val in ("to", "in", "rangle", "rvert", "|")
            )
        return False

    def unary(self) -> tuple:
        tok = self.peek()
        if tok == ("op", "-") or tok == ("op", "+"):
            self.next()
            self.enter()
            inner = self.unary()
            self.depth -= 1
            return ("neg", inner) if tok[1] == "-" else inner
        return self.power()

    def power(self) -> tuple:
        self.last_was_frac = False
        base = self.postfix(self.atom())
        was_frac = self.last_was_frac
        if self.peek() == ("op", "^"):
            self.next()
            exponent = self.exponent()
            base = self.postfix(("pow", base, exponent), allow_sub=False)
            was_frac = False
        self.last_was_frac = was_frac
        return base

    def exponent(self) -> tuple:
        tok = self.peek()
        if tok == ("op", "{"):
            self.next()
            e = self.expr()
            self.expect("op", "}")
            return e
        if tok == ("op", "-"):
            self.next()
            self.enter()
            inner = self.exponent()
            self.depth -= 1
            return ("neg", inner)
        # plain "2^10" means 2**10 (TeX would read one digit); "x^2y" is x^2 * y
        return self.postfix(self.atom(), allow_sub=False)

    def postfix(self, node: tuple, allow_sub: bool = True) -> tuple:
        while True:
            tok = self.peek(skip_space=False)
            if tok == ("op", "!"):
                self.next()
                node = ("fact", node)
            elif tok == ("op", "%"):
                self.next()
                node = ("pct", node)
            elif tok == ("op", "_") and allow_sub:
                self.next()
                sub = self.raw_group()
                if node[0] == "sym" or (node[0] == "const" and node[1] in ("e", "i")):
                    node = ("sym", f"{node[1]}_{{{sub}}}")
                elif node[0] == "num" and re.fullmatch(r"\d+", sub):
                    pass  # a base subscript: 204_5 is compared by its digits
                else:
                    raise ParseError("subscript on an expression")
            elif tok == ("op", "'") and node[0] == "sym":
                self.next()
                node = ("sym", node[1] + "'")
            else:
                return node

    def raw_group(self) -> str:
        """The text of a ``{...}`` group or single token (used for subscripts)."""
        tok = self.next()
        if tok == ("op", "{"):
            depth = 1
            parts: list[str] = []
            while True:
                if self.i >= len(self.toks):
                    raise ParseError("unclosed subscript")
                t = self.toks[self.i]
                self.i += 1
                if t == ("op", "{"):
                    depth += 1
                elif t == ("op", "}"):
                    depth -= 1
                    if depth == 0:
                        break
                parts.append(("\\" + t[1]) if t[0] == "cmd" else t[1])
            return "".join(p for p in parts if p != " ")
        if tok[0] == "cmd":
            return "\\" + tok[1]
        if tok[0] == "num":
            # "x_12" in plain text; TeX would take one digit, but that reading is never meant
            return tok[1]
        return tok[1]

    def group_arg(self) -> tuple:
        """A TeX argument: ``{expr}`` or one atom."""
        if self.accept("op", "{"):
            e = self.expr()
            self.expect("op", "}")
            return e
        return self.atom()

    def paren(self, close: str) -> tuple:
        e = self.expr()
        self.expect("op", close)
        return e

    def atom(self) -> tuple:
        self.enter()
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> tuple:
        tok = self.next()
        kind, val = tok
        if kind == "num":
            return _num_node(val)
        if kind == "id":
            if val == "e":
                return ("const", "e")
            if val == "i":
                return ("const", "i")
            return ("sym", val)
        if kind == "op":
            if val == "(":
                return self.paren(")")
            if val == "[":
                return self.paren("]")
            if val == "{":
                return self.paren("}")
            if val == "|":
                self.abs_open += 1
                inner = self.expr()
                self.abs_open -= 1
                self.expect("op", "|")
                return ("fn", "abs", (inner,))
            raise ParseError(f"unexpected {val!r}")
        if kind == "begin":
            raise ParseError("environment inside an expression")
        if kind != "cmd":
            raise ParseError(f"unexpected token {tok}")
        return self.command(val)

    def command(self, name: str) -> tuple:
        if name == "frac" or name == "cfrac":
            num = self.group_arg()
            den = self.group_arg()
            node = ("div", num, den)
            self.last_was_frac = True
            return node
        if name == "sqrt":
            index: tuple = ("num", Fraction(2), None)
            if self.peek() == ("op", "["):
                self.next()
                index = self.paren("]")
            tok = self.peek()
            if tok == ("op", "("):
                self.next()
                return ("root", self.paren(")"), index)
            return ("root", self.group_arg(), index)
        if name in ("binom", "choose"):
            n = self.group_arg()
            k = self.group_arg()
            return ("binom", n, k)
        if name == "pi":
            return ("const", "pi")
        if name == "infty":
            return ("const", "inf")
        if name in ("e", "mathrm"):
            return ("const", "e")
        if name == "lfloor" or name == "lceil":
            inner = self.expr()
            self.expect("cmd", "rfloor" if name == "lfloor" else "rceil")
            return ("fn", "floor" if name == "lfloor" else "ceil", (inner,))
        if name in ("lvert", "vert", "|"):
            inner = self.expr()
            if not (
                self.accept("cmd", "rvert") or self.accept("cmd", "vert") or self.accept("cmd", "|")
            ):
                raise ParseError("unclosed absolute value")
            return ("fn", "abs", (inner,))
        if name == "operatorname":
            fname = self.raw_group()
            if fname not in FUNCTIONS and fname not in MULTI_ARG_FUNCTIONS:
                raise ParseError(f"unknown function {fname!r}")
            return self.function(fname)
        if name in FUNCTIONS or name in MULTI_ARG_FUNCTIONS:
            return self.function(name)
        if name in ("ldots", "cdots", "dots"):
            return ("sym", "...")
        if name in GREEK:
            return ("sym", name)
        if name in (
            "angle",
            "triangle",
            "overline",
            "overrightarrow",
            "widehat",
            "hat",
            "bar",
            "vec",
            "dot",
            "ddot",
            "tilde",
            "mathcal",
            "mathbb",
        ):
            # "\angle ABC", "\overline{AB}", "\hat{x}": a named quantity
            if self.peek() == ("op", "{"):
                return ("sym", f"\\{name}{{{self.raw_group()}}}")
            parts = []
            while (following := self.peek(skip_space=False)) is not None and following[0] == "id":
                parts.append(self.next()[1])
            return ("sym", f"\\{name}{''.join(parts)}")
        raise ParseError(f"unsupported command \\{name}")

    def function(self, name: str) -> tuple:
        power: tuple | None = None
        base: tuple | None = None
        for _ in range(2):
            if self.peek() == ("op", "^"):
                self.next()
                power = self.exponent()
            elif self.peek() == ("op", "_"):
                self.next()
                base = self.group_arg()
        if self.peek() == ("op", "("):
            self.next()
            args = [self.expr()]
            while self.accept("op", ","):
                args.append(self.expr())
            self.expect("op", ")")
        else:
            # "\sin 2x", "\ln 2": the argument is the product that follows, up to + - * /.
            factors = [self.power()]
            while True:
                tok = self.peek()
                if tok is None or not self.starts_atom(tok):
                    break
                if tok[0] == "cmd" and (tok[1] in FUNCTIONS or tok[1] in MULTI_ARG_FUNCTIONS):
                    break
                factors.append(self.power())
            args = [factors[0] if len(factors) == 1 else ("mul", tuple(factors))]
        if name in MULTI_ARG_FUNCTIONS:
            node: tuple = ("fn", name, tuple(args))
        else:
            if len(args) != 1:
                raise ParseError(f"{name} takes one argument")
            if name == "lg":
                base = ("num", Fraction(10), None)
                name = "log"
            if name == "log" and base is not None:
                node = ("fn", "log", (args[0], base))
            else:
                if power == ("neg", ("num", Fraction(1), None)) and name in ("sin", "cos", "tan"):
                    return ("fn", "arc" + name, tuple(args))
                node = ("fn", name, tuple(args))
        if power is not None:
            node = ("pow", node, power)
        return node


def parse_expression(s: str) -> tuple:
    """Parse one expression (no top-level commas or relations). Raises :class:`ParseError`."""
    if len(s) > MAX_PARSE_LENGTH:
        raise ParseError("answer too long to parse")
    p = _Parser(_tokenize(s))
    if p.at_end():
        raise ParseError("empty expression")
    try:
        node = p.expr()
    except RecursionError as exc:  # pragma: no cover - depth guard normally fires first
        raise ParseError("expression nested too deeply") from exc
    if not p.at_end():
        raise ParseError(f"unexpected {p.peek()} after the expression")
    return node


# --- answer structure -----------------------------------------------------------------------

_MC_RE = re.compile(r"^\(?([A-Ea-e])\)?$")
_MC_PAREN_RE = re.compile(r"^\(([A-Ea-e])\)")
_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_KNOWN_WORDS = _PLAIN_WORDS | {"np"}
_REL_SPLIT = ("<=", ">=", "!=", "\\leqslant", "\\geqslant", "\\leq", "\\geq", "\\neq", "\\le", "\\ge", "\\ne", "\\lt", "\\gt", "=", "<", ">")  # fmt: skip


def _is_text(s: str) -> bool:
    """A text answer: it has a word of 3+ letters that is not a math function name."""
    s = re.sub(r"\\(?:begin|end|operatorname)\{[^{}]*\}", "", s)
    return any(m.group(0).lower() not in _KNOWN_WORDS for m in _WORD_RE.finditer(s))


def _relation_at(s: str, i: int) -> str | None:
    """The relation symbol that starts at ``s[i]`` (``\\le`` but not the ``\\le`` of ``\\left``)."""
    for rel in _REL_SPLIT:
        if s.startswith(rel, i) and not (
            rel[0] == "\\" and s[i + len(rel) : i + len(rel) + 1].isalpha()
        ):
            if rel in ("<", ">") and i > 0 and s[i - 1] == "\\":
                continue
            return rel
    return None


def _split_relations(s: str) -> tuple[list[str], list[str]]:
    """Split ``s`` at top-level relation symbols: (sides, ops)."""
    sides, rels = split_at_top_level(s, _relation_at, escapes="")
    return sides, [_RELATIONS[rel] for rel in rels]


def _expand_pm(s: str) -> list[str]:
    """``1\\pm\\sqrt2`` -> ``["1+\\sqrt2", "1-\\sqrt2"]`` (``\\mp`` takes the opposite sign)."""
    pattern = re.compile(r"\\(pm|mp)(?![A-Za-z])|\+-|-\+")
    if not pattern.search(s):
        return [s]
    if len(pattern.findall(s)) > 3:
        raise ParseError("too many \\pm signs")
    out = []
    for sign in ("+", "-"):
        other = "-" if sign == "+" else "+"

        def choose(m: re.Match[str], a: str = sign, b: str = other) -> str:
            return b if m.group(0) in ("\\mp", "-+") else a

        out.append(pattern.sub(choose, s))
    return out


def _parse_item(s: str, depth: int) -> tuple:
    if depth > 20:
        raise ParseError("answer nested too deeply")
    s = s.strip()
    if not s:
        raise ParseError("empty item")
    if s in ("\\emptyset", "\\varnothing"):
        return ("list", ())
    if s.startswith("\\{") and s.endswith("\\}") and matching_close(s, 0) == len(s) - 2:
        inner = s[2:-2]
        if not inner.strip():
            return ("list", ())
        parts = split_top_level(inner, (",", ";"))
        return ("list", _flatten(_parse_item(p, depth + 1) for p in parts))
    if s[0] in "([" and s[-1] in ")]" and matching_close(s, 0) == len(s) - 1:
        parts = split_top_level(s[1:-1], (",", ";"))
        if len(parts) > 1:
            return ("seq", s[0], s[-1], tuple(_parse_item(p, depth + 1) for p in parts))
    m = re.fullmatch(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}", s, re.S)
    if m:
        rows = [r for r in m.group(2).split("\\\\") if r.strip()]
        return ("matrix", tuple(tuple(parse_expression(c) for c in r.split("&")) for r in rows))
    sides, ops = _split_relations(s)
    if ops:
        if len(ops) == 1 and ops[0] == "=" and is_label(sides[0]) and sides[1].strip():
            label = re.sub(r"\s", "", sides[0])
            return ("assign", label, _parse_struct(sides[1], depth + 1))
        if any(not side.strip() for side in sides):
            raise ParseError("relation with an empty side")
        return ("rel", tuple(ops), tuple(parse_expression(side) for side in sides))
    variants = _expand_pm(s)
    if len(variants) > 1:
        items = tuple(_parse_item(v, depth + 1) for v in dict.fromkeys(variants))
        return items[0] if len(items) == 1 else ("list", items)
    return parse_expression(s)


def _parse_struct(s: str, depth: int = 0) -> tuple:
    if depth > 20:
        raise ParseError("answer nested too deeply")
    parts = split_top_level(s, ("\\cup",))
    if len(parts) > 1:
        return ("union", tuple(_parse_struct(p, depth + 1) for p in parts))
    parts = split_top_level(s, (",", ";"))
    parts = [p for p in parts if p.strip()] if len(parts) > 1 else parts
    if len(parts) > 1:
        return ("list", _flatten(_parse_item(p, depth + 1) for p in parts))
    return _parse_item(s, depth)


def _flatten(items: Iterable[tuple]) -> tuple[tuple, ...]:
    """Splice nested unordered lists (a ``\\pm`` item of a list) into their parent."""
    out: list[tuple] = []
    for item in items:
        if item[0] == "list":
            out.extend(item[1])
        else:
            out.append(item)
    return tuple(out)


@lru_cache(maxsize=8192)
def parse_answer(normalized: str) -> tuple[tuple, ...]:
    """Parse a normalised answer (see :func:`normalize_answer`) into alternative readings.

    Never raises: what cannot be parsed comes back as ``("raw", normalized)``.
    """
    s = normalized.strip()
    if not s:
        return (("raw", ""),)
    m = _MC_RE.fullmatch(s)
    if m and s.startswith("("):
        return (("mc", m.group(1).upper(), ""),)
    if len(s) > MAX_PARSE_LENGTH:
        return (("raw", s),)
    if _is_text(s):
        mp = _MC_PAREN_RE.match(s)
        if mp:
            return (("mc", mp.group(1).upper(), _text_key(s[mp.end() :])),)
        return (("text", _text_key(s)),)
    readings: list[tuple] = []
    mp = re.match(r"\(([A-E])\)(?=.)", s)
    if mp:  # "(B) 5": the choice B, or an expression that happens to start with (B)
        readings.append(("mc", mp.group(1), _text_key(s[mp.end() :])))
    try:
        readings.append(_parse_struct(s))
    except (ParseError, RecursionError, ValueError, ZeroDivisionError):
        readings.append(("raw", s))
    return tuple(readings)


def _text_key(s: str) -> str:
    """Comparison key of a text answer: case-folded, spaces and punctuation removed."""
    s = s.casefold()
    s = re.sub(r"^(?:the|a|an)\s+", "", s)
    return re.sub(r"[\s.,;:!?'\"()\\{}]", "", s)
