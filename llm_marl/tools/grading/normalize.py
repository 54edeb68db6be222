"""String-level normalisation of a final answer (before any parsing).

:func:`normalize_answer` maps the many ways of writing the same answer onto one string, so that
most correct answers are recognised by plain string equality, and the parser downstream sees a
small, regular subset of LaTeX. It removes presentation only and never changes a value:

* math delimiters (``$``, ``\\(``, ``\\[``), ``\\displaystyle``, an enclosing ``\\boxed{}``;
* ``\\left``/``\\right``/``\\big`` sizing, spacing commands (``\\!``, ``\\,``, ``\\;``, ``~``,
  ``\\quad``), thousands separators (``10,\\!080``, ``10{,}080``, ``58,500``);
* ``\\dfrac``/``\\tfrac`` -> ``\\frac`` and TeX's unbraced arguments, ``\\frac12`` ->
  ``\\frac{1}{2}``, ``\\sqrt2`` -> ``\\sqrt{2}``;
* units and decorations: ``\\text{ cm}``, ``\\mbox{ inches}^2``, trailing unit words
  ("5 cents", "45 minutes", "12 square units"), degree signs (``^\\circ``, ``°``), currency
  (``\\$``);
* repeating decimals -> the exact fraction they denote: ``0.\\overline{3}`` -> ``\\frac{1}{3}``,
  ``1.1\\overline{6}`` -> ``\\frac{7}{6}`` (``\\bar`` as well; at most 40 digits, or the text stays);
* ``\\text{...}`` wrappers (the words are kept), ``\\%`` -> ``%``, ``.5`` -> ``0.5``,
  ``27.0`` -> ``27``, trailing full stops, a leading ``x \\in``;
* vector brackets ``\\langle 1, 2 \\rangle`` -> ``(1, 2)``; the whole answer ``\\mathbb{R}`` or
  "all real numbers" -> ``(-\\infty, \\infty)``;
* a single ``name = value`` (``x = 3``, ``f(x) = 2x``, ``f^{-1}(x) = x/2``, ``k=n+1``) -> ``value``.

Whitespace is removed except between two letters or after a command word, where it separates
tokens (``a b`` stays a product, ``\\pi r`` stays ``\\pi`` times ``r``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from .brackets import split_top_level

__all__ = [
    "LABEL_RE",
    "MAX_ANSWER_LENGTH",
    "canonical_form",
    "is_label",
    "normalize_answer",
    "split_top_level",
]

MAX_ANSWER_LENGTH = 5000
"""Longer answers are only whitespace-normalised (and never parsed): a bound on the work per call."""

_UNICODE = {
    "\u2212": "-",  # minus sign
    "\u2013": "-",  # en dash
    "\u2014": "-",
    "\u00d7": "\\times ",
    "\u22c5": "\\cdot ",
    "\u00b7": "\\cdot ",
    "\u03c0": "\\pi ",
    "\u221e": "\\infty ",
    "\u221a": "\\sqrt ",
    "\u2264": "\\le ",
    "\u2265": "\\ge ",
    "\u2260": "\\neq ",
    "\u00b1": "\\pm ",
    "\u222a": "\\cup ",
    "\u00a0": " ",
    "\u00b0": "^\\circ",
}

_SIZING_RE = re.compile(
    r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|Biggl|Biggr|big|Big|bigg|Bigg)(?![A-Za-z])"
)
_DEGREE_RE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree(?![A-Za-z])")
_TEXT_WRAPPERS = ("text", "textbf", "textit", "textrm", "mbox", "mathrm", "rm", "textnormal")
_WRAPPER_RE = re.compile(r"\\(?:" + "|".join(_TEXT_WRAPPERS) + r")\s*\{([^{}]*)\}")
_FONT_RE = re.compile(r"\\(?:mathbf|mathit|boldsymbol|mathsf|mathnormal|bm)\s*\{([^{}]*)\}")
# A trailing unit group: "\text{ cm}^2", "/\mathrm{s}", "\mbox{ inches}^2".
_TRAILING_TEXT_UNIT_RE = re.compile(
    r"\s*(?:/|\\cdot)?\s*\\(?:" + "|".join(_TEXT_WRAPPERS) + r")\s*\{\s*([^{}]*?)\s*\}"
    r"(?:\s*\^\s*(?:\{\s*-?\d+\s*\}|-?\d))?\s*$"
)
# fmt: off
_UNIT_WORDS = sorted([
    "cm", "mm", "km", "nm", "um", "meter", "meters", "metre", "metres", "centimeter",
    "centimeters", "millimeter", "millimeters", "kilometer", "kilometers", "inch", "inches",
    "foot", "feet", "ft", "yard", "yards", "yd", "mile", "miles", "mph", "kph", "sq", "square",
    "cubic", "unit", "units", "degree", "degrees", "deg", "radian", "radians", "second",
    "seconds", "sec", "secs", "minute", "minutes", "min", "mins", "hour", "hours", "hr", "hrs",
    "day", "days", "week", "weeks", "month", "months", "year", "years", "yr", "yrs", "dollar",
    "dollars", "cent", "cents", "gram", "grams", "kilogram", "kilograms", "kg", "lb", "lbs",
    "pound", "pounds", "ounce", "ounces", "oz", "liter", "liters", "litre", "litres", "ml",
    "gallon", "gallons", "cup", "cups", "ways", "people", "persons", "students", "times", "hz",
    "ev", "amu", "km/h", "km/hr", "mi/h", "mi/hr", "m/s", "cm/s", "km/s", "ft/s", "m/min",
], key=len, reverse=True)  # longest first: "inches" before "inch"
# fmt: on
_TRAILING_WORD_UNIT_RE = re.compile(
    r"(?<=[\d}\)\s])\s*(?:" + "|".join(_UNIT_WORDS) + r")(?:\s*\^\s*(?:\{\s*\d+\s*\}|\d))?\s*$",
    re.IGNORECASE,
)
_THOUSANDS_FULL_RE = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_IN_PREFIX_RE = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*\\in\s*")
_SPACE_RE = re.compile(r"\s+")
# The whole answer "all real numbers": the interval (-\infty, \infty).
_REAL_LINE_RE = re.compile(
    r"\\mathbb\s*\{?\s*R\s*\}?|\\R|(?i:(?:the\s+)?(?:set\s+of\s+)?all\s+real\s+numbers)"
)
# "0.\overline{3}", "1.1\bar{6}", ".\overline{45}": integer part, the digits after the point
# that do not repeat, then the repeating block.
_REPEATING_RE = re.compile(
    r"(?<![\d.])(\d*)\.(\d*)\s*\\(?:overline|bar)\s*(?:\{\s*(\d+)\s*\}|(\d))"
)
_MAX_REPEATING_DIGITS = 40
"""Longer repeating decimals are left as written (the fraction's size grows with the digits)."""

# The left-hand side of "name = value": a letter or command (\alpha, \angle ABC), with an
# optional subscript, an optional prime and an optional argument list: x, a_1, m_{\max}, f(x),
# \angle BEA_{1}, N(n).
LABEL_RE = re.compile(
    r"^(?:[A-Za-z]|\\[A-Za-z]+)(?:\s*[A-Za-z])*"
    r"(?:_\{[^{}]*\}|_[A-Za-z0-9])?(?:'+|\^\{?\\prime\}?|\^\{-1\}|\^-1)?"
    r"(?:\([^()]*\))?$"
)
_MATH_WORDS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "sqrt", "pi", "max", "min",
    "gcd", "lcm", "mod", "det", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "infty",
}  # fmt: skip


def is_label(lhs: str) -> bool:
    """Whether ``lhs`` names a quantity (``x``, ``a_1``, ``f(x)``) rather than being an expression."""
    lhs = lhs.strip()
    if not lhs or len(lhs) > 40 or not LABEL_RE.match(lhs):
        return False
    # "\sin x" or "\pi" are expressions, not names.
    word = re.match(r"\\([A-Za-z]+)", lhs)
    return not (word and word.group(1) in _MATH_WORDS and word.group(1) not in {"max", "min"})


def _read_tex_arg(s: str, i: int) -> tuple[str, int] | None:
    """Read one TeX argument at ``s[i:]``: a braced group or a single token. Returns (text, end)."""
    n = len(s)
    while i < n and s[i] == " ":
        i += 1
    if i >= n:
        return None
    if s[i] == "{":
        depth = 0
        j = i
        while j < n:
            if s[j] == "\\":
                j += 2
                continue
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1 : j], j + 1
            j += 1
        return None
    if s[i] == "\\":
        j = i + 1
        while j < n and s[j].isalpha():
            j += 1
        if j == i + 1:
            j += 1
        return s[i:j], j
    if s[i] in "}^_&":
        return None
    return s[i], i + 1


_ARG_CMD_RE = re.compile(r"\\(frac|sqrt|binom)(?![A-Za-z])")
_ANY_CMD_RE = re.compile(r"\\[A-Za-z]+|\\.")


def _brace_tex_args(s: str, depth: int = 0) -> str:
    """Rewrite ``\\frac12``, ``\\frac 34``, ``\\sqrt2``, ``\\binom nk`` with braced arguments."""
    if depth > 50 or "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        if s[i] == "\\":
            m = _ARG_CMD_RE.match(s, i)
            if m:
                name = m.group(1)
                j = m.end()
                root = ""
                if name == "sqrt":
                    k = j
                    while k < n and s[k] == " ":
                        k += 1
                    if k < n and s[k] == "[":
                        close = s.find("]", k)
                        if close > 0:
                            root = "[" + _brace_tex_args(s[k + 1 : close], depth + 1) + "]"
                            j = close + 1
                nargs = 1 if name == "sqrt" else 2
                args: list[str] = []
                for _ in range(nargs):
                    got = _read_tex_arg(s, j)
                    if got is None:
                        break
                    args.append(_brace_tex_args(got[0], depth + 1))
                    j = got[1]
                if len(args) == nargs:
                    out.append("\\" + name + root + "".join("{" + a + "}" for a in args))
                    i = j
                    continue
            # any other command: copy its name whole so that "\fracx" style names stay intact
            m2 = _ANY_CMD_RE.match(s, i)
            token = m2.group(0) if m2 else s[i]
            out.append(token)
            i += len(token)
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def _strip_units(s: str) -> str:
    """Remove trailing unit annotations when a value stands before them."""
    for _ in range(6):
        m = _TRAILING_TEXT_UNIT_RE.search(s)
        if (
            m
            and m.group(1) not in ("e", "i")  # \mathrm{e}, \mathrm{i} are constants, not units
            and s[: m.start()].strip()  # a text answer ("\text{Navin}") has nothing before it
            and not re.search(r"[+\-*/=,(]\s*$", s[: m.start()])
        ):
            s = s[: m.start()].rstrip()
            continue
        m = _TRAILING_WORD_UNIT_RE.search(s)
        if m and re.search(r"\d", s[: m.start()]):
            s = s[: m.start()].rstrip()
            continue
        break
    return s


def _repeating_to_fraction(match: re.Match[str]) -> str:
    """``I.A\\overline{R}`` -> the fraction it denotes, in lowest terms (``0.1\\overline{6}``:
    ``(16 - 1) / 90 = 1/6``)."""
    whole, fixed, block = match.group(1), match.group(2), match.group(3) or match.group(4)
    if len(whole) + len(fixed) + len(block) > _MAX_REPEATING_DIGITS:
        return match.group(0)
    # I.A(R) = I + (AR - A) / (10^len(A) * (10^len(R) - 1)), with "" read as 0.
    value = int(whole or "0") + Fraction(
        int(fixed + block) - int(fixed or "0"), 10 ** len(fixed) * (10 ** len(block) - 1)
    )
    if value.denominator == 1:
        return str(value.numerator)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _unwrap_text(s: str) -> str:
    """``\\text{(B)}`` -> ``(B)``; ``2\\text{ or }3`` -> ``2,3``; font commands dropped."""
    s = re.sub(r"\\(?:text|mbox|textrm|mathrm)\s*\{\s*(?:or|and)\s*\}", ",", s)
    for _ in range(3):
        new = _WRAPPER_RE.sub(lambda m: " " + m.group(1).strip() + " ", s)
        new = _FONT_RE.sub(lambda m: m.group(1), new)
        if new == s:
            break
        s = new
    return s


def _remove_spaces(s: str) -> str:
    """Drop whitespace except where it separates two letters or a command from a letter."""
    s = _SPACE_RE.sub(" ", s).strip()
    out: list[str] = []
    for i, ch in enumerate(s):
        if ch != " ":
            out.append(ch)
            continue
        prev = s[i - 1] if i > 0 else ""
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if prev.isalpha() and nxt.isalpha():
            out.append(" ")
        elif prev.isdigit() and nxt.isdigit():
            out.append(" ")  # "1 2" must not become the number 12
    return "".join(out)


def _strip_delimiters(s: str) -> str:
    s = s.strip()
    s = s.replace("\\(", "").replace("\\)", "")
    s = s.replace("\\[", "").replace("\\]", "")
    s = s.replace("$", "")
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle)(?![A-Za-z])", "", s)
    return s


def normalize_answer(s: str | float | int | None) -> str:
    """Return the canonical string form of an answer (see the module docstring for the rules).

    Numbers given as Python numbers are accepted (``27.0`` -> ``"27"``); ``None`` gives ``""``.

    >>> normalize_answer(r"$\\dfrac12$")
    '\\\\frac{1}{2}'
    >>> normalize_answer(r"x = 10,\\!080 \\text{ cm}")
    '10080'
    """
    s = canonical_form(s)
    # "x = 3" -> "3" when the left side only names the quantity.
    if s.count("=") == 1 and len(split_top_level(s)) == 1:
        lhs, rhs = s.split("=", 1)
        if rhs and "<" not in s and ">" not in s and is_label(lhs):
            s = rhs
    return s


def canonical_form(s: str | float | int | None) -> str:
    """:func:`normalize_answer` without dropping a leading ``name =`` (the parser wants it)."""
    if s is None:
        return ""
    if isinstance(s, bool):
        raise TypeError("normalize_answer expects a string or a number, got a bool")
    if isinstance(s, (int, float)):
        s = repr(s)
    if not isinstance(s, str):
        raise TypeError(f"normalize_answer expects a string, got {type(s).__name__}")
    if len(s) > MAX_ANSWER_LENGTH:
        # no real answer is this long: keep it comparable as text, skip the rewriting rules
        return _SPACE_RE.sub(" ", s).strip()
    for bad, good in _UNICODE.items():
        if bad in s:
            s = s.replace(bad, good)
    s = s.replace("\\$", "")  # currency, before "$" delimiters are dropped
    s = _strip_delimiters(s)
    if "\\boxed" in s or "\\fbox" in s:
        from .extract import last_boxed  # local import: extract does not depend on us

        inner = last_boxed(s)
        if inner is not None:
            s = _strip_delimiters(inner)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\langle", "(").replace("\\rangle", ")")  # vectors: <1, 2> is (1, 2)
    s = s.replace("\\dbinom", "\\binom").replace("\\tbinom", "\\binom")
    s = re.sub(r"\\(?:left|right)\s*[.]", "", s)
    s = _SIZING_RE.sub("", s)
    s = s.replace("\\{", "\x00").replace("\\}", "\x01")  # protect set braces from {,} handling
    s = re.sub(r"(\d)\s*\{,\}\s*(?=\d)", r"\1", s)  # 10{,}000
    s = re.sub(r"(\d)\s*,\s*\\!\s*(?=\d)", r"\1", s)  # 10,\!000
    s = re.sub(r"(\d)\\[,;: ](?=\d{3}(?!\d))", r"\1", s)  # 10\,000 (thin-space groups)
    s = s.replace("\x00", "\\{").replace("\x01", "\\}")
    s = s.replace("\\\\", "\x02")  # protect row breaks "\\\\" from the spacing rules
    s = re.sub(r"\\[!,;: ]", " ", s)
    s = s.replace("\x02", "\\\\")
    s = re.sub(r"\\q?quad(?![A-Za-z])", " ", s)
    s = s.replace("~", " ")
    s = s.replace("\\%", "%")
    s = re.sub(r"\bpercent\b", "%", s)
    s = _DEGREE_RE.sub("", s)
    s = re.sub(r"\^\s*\{?\s*((?:\\prime\s*)+)\}?", lambda m: "'" * m.group(1).count("prime"), s)
    s = re.sub(r"\\phantom\s*(?:\{[^{}]*\}|\S)", "", s)
    s = re.sub(r"^\s*\\approx\s*", "", s)
    s = _strip_units(s)
    s = _unwrap_text(s)
    s = _strip_units(s)
    s = re.sub(r"\\(?:infinity|inf)(?![A-Za-z])|\binfinity\b", r"\\infty", s)
    s = re.sub(r"\bnp\.", "", s)  # numpy-style references: np.arcsin(...)
    s = _brace_tex_args(s)
    s = _REPEATING_RE.sub(_repeating_to_fraction, s)
    s = _IN_PREFIX_RE.sub("", s.strip())
    s = s.strip()
    if _REAL_LINE_RE.fullmatch(s):
        s = "(-\\infty, \\infty)"
    s = re.sub(r"\s+(?:and|or)\s+", ",", s)
    s = s.rstrip(" .;,")
    s = s.lstrip(" ")
    if _THOUSANDS_FULL_RE.fullmatch(s):
        # only an unspaced "58,500" is a number; "100, 200" is a list of two
        s = s.replace(",", "")
    s = _remove_spaces(s)
    # one canonical list separator; it also keeps "1, 000" (a list) from reading as 1000 when
    # normalised again
    s = s.replace(",", ", ")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)  # .5 -> 0.5
    s = re.sub(r"(\d)\.0+(?![\d.e])", r"\1", s)  # 27.0 -> 27
    s = re.sub(r"(\d)\.(?!\d|\\overline|\\bar)", r"\1", s)  # "3." -> "3"
    return s
