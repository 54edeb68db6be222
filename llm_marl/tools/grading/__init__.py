"""Math answer grading: extract the final answer of a completion and decide if it is correct.

>>> from llm_marl.tools.grading import grade, is_equivalent
>>> grade(r"... so the answer is $\\boxed{\\dfrac{1}{2}}$.", "0.5").correct
True
>>> is_equivalent("(1, 2)", "(2, 1)")
False

How a prediction is compared with a reference (the first tier that decides wins):

1. **Normalised strings** (:func:`normalize_answer`): equal strings are equivalent.
2. **In-process checks** (parser :mod:`.parse` on the bracket scanner :mod:`.brackets`,
   comparison :mod:`.compare`): structure
   (sets/lists order-insensitive, tuples/intervals ordered with brackets that must agree,
   equations, percentages, multiple choice, text) and values (exact rationals, floats with a
   tolerance, random-point identity tests for expressions in variables). Bounded by construction:
   every size-dependent operation gives up beyond a limit instead of running long.
3. **Worker process** (:mod:`.pool`, :mod:`.worker`), only when tier 2 cannot decide (numbers
   beyond its size guards, values that agree to ~12 digits in floats, unparsed notation): the
   same comparison with sympy (60-digit and exact arithmetic, ``simplify``); what that still
   leaves open goes to ``math-verify`` if it is installed (``\\sum``, ``\\int``, ratios), except
   a prediction that adds, outside braces, a relation or connective the reference lacks
   (``\\lor``, ``\\to``, ``\\equiv``, ``\\approx``, ``\\neq``, ``\\\\``...): math-verify reads one
   side of it, so ``1 \\lor 2`` would score for 2 and ``3 \\neq 5`` for 5. It
   runs under a hard timeout: on overrun the worker is killed (and replaced) and the answer is
   graded incorrect, ``reason`` saying "timed out". Safe to call from any thread.

Numeric tolerance: values that agree to a relative 1e-12 are equal. Numbers written out are
compared exactly (``0.333`` is not ``1/3``, ``3.01`` is not ``3``, ``0.45`` is not ``0.5``). An exact
expression is compared with a decimal reference at the reference's last written digit
(``\\frac{2}{3}`` matches ``0.667``, ``\\sqrt 2`` matches ``1.414``): nothing else could match it.

Text answers are compared case-insensitively; variables are case-sensitive. Expressions in
variables are equal when they agree at sample points (positive reals, plus negative ones where
both sides are real; small integers for factorials, binomials, floor and ceiling).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .compare import NumericBackend, compare_readings
from .extract import extract_answer, last_boxed
from .normalize import canonical_form, normalize_answer
from .parse import MAX_PARSE_LENGTH, parse_answer
from .pool import WorkerError, WorkerPool, default_pool, shutdown_default_pool

__all__ = [
    "DEFAULT_TIMEOUT",
    "GradeResult",
    "WorkerError",
    "WorkerPool",
    "default_pool",
    "extract_answer",
    "grade",
    "is_equivalent",
    "judge",
    "last_boxed",
    "normalize_answer",
    "shutdown_default_pool",
]

DEFAULT_TIMEOUT = 5.0
"""Seconds the symbolic fallback may spend on one comparison before it counts as incorrect."""

_NUMERIC = NumericBackend()
_MATH_VERIFY_INSTALLED: bool | None = None


def _math_verify_installed() -> bool:
    global _MATH_VERIFY_INSTALLED
    if _MATH_VERIFY_INSTALLED is None:
        _MATH_VERIFY_INSTALLED = importlib.util.find_spec("math_verify") is not None
    return _MATH_VERIFY_INSTALLED


@dataclass(frozen=True)
class GradeResult:
    """The verdict on one completion.

    Attributes:
        correct: whether the extracted answer is equivalent to the reference.
        extracted: the answer found in the completion (None if there was none).
        reason: a short human-readable explanation (which check decided, or why it failed).
    """

    correct: bool
    extracted: str | None
    reason: str

    @property
    def score(self) -> float:
        """1.0 if correct else 0.0 (the binary correctness reward)."""
        return 1.0 if self.correct else 0.0


def judge(
    prediction: str | float | int | None,
    reference: str | float | int,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    symbolic: bool = True,
    use_math_verify: bool | None = None,
    pool: WorkerPool | None = None,
) -> tuple[bool, str]:
    """:func:`is_equivalent` that also says why: ``(equivalent, reason)``."""
    if timeout <= 0:
        raise ValueError(f"timeout must be positive (seconds), got {timeout}")
    if reference is None:
        raise ValueError("reference is None: every graded problem needs a reference answer")
    if prediction is None:
        return False, "no answer"
    norm_pred = normalize_answer(prediction)
    norm_ref = normalize_answer(reference)
    if not norm_pred:
        return False, "empty answer"
    if not norm_ref:
        raise ValueError(f"reference {reference!r} is empty after normalisation")
    if norm_pred == norm_ref:
        return True, "equal after normalisation"
    if max(len(norm_pred), len(norm_ref)) > MAX_PARSE_LENGTH:
        return False, "not equivalent (too long to compare beyond string equality)"
    verdict = compare_readings(
        parse_answer(canonical_form(prediction)), parse_answer(canonical_form(reference)), _NUMERIC
    )
    if verdict is True:
        return True, "equivalent"
    if verdict is False:
        return False, "not equivalent"
    if not symbolic:
        return False, "not equivalent (undecided without the symbolic check)"
    mv = _math_verify_installed() if use_math_verify is None else use_math_verify
    answer = (pool or default_pool()).run(
        {"pred": str(prediction), "ref": str(reference), "mv": mv}, timeout
    )
    if answer is None:
        return False, f"not equivalent (symbolic check timed out after {timeout:g} s)"
    return bool(answer["correct"]), str(answer["reason"])


def is_equivalent(
    prediction: str | float | int | None,
    reference: str | float | int,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    symbolic: bool = True,
    use_math_verify: bool | None = None,
) -> bool:
    """Whether answer ``prediction`` is mathematically the same as ``reference``.

    Both are final answers (not whole completions); see :func:`grade` for completions.

    Args:
        prediction: the model's answer (None counts as wrong).
        reference: the gold answer.
        timeout: seconds the symbolic fallback may take; past it the worker is killed and the
            answer counts as not equivalent. The in-process checks before it are always fast.
        symbolic: allow the sympy/math-verify fallback (False: in-process checks only, and
            undecided comparisons count as not equivalent).
        use_math_verify: consult ``math-verify`` in the fallback (None: if it is installed).
    """
    return judge(
        prediction,
        reference,
        timeout=timeout,
        symbolic=symbolic,
        use_math_verify=use_math_verify,
    )[0]


def grade(
    completion: str,
    reference: str | float | int,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    fallback: bool = True,
    symbolic: bool = True,
    use_math_verify: bool | None = None,
) -> GradeResult:
    """Extract the final answer of ``completion`` and compare it with ``reference``.

    Args:
        completion: the model's full output.
        reference: the gold final answer (a ``\\boxed{}`` in it is unwrapped).
        timeout, symbolic, use_math_verify: see :func:`is_equivalent`.
        fallback: without a box or an answer marker, grade the last number in the completion
            (True) or count the completion as unanswered (False). See :func:`extract_answer`.
    """
    extracted = extract_answer(completion, fallback=fallback)
    if extracted is None:
        return GradeResult(False, None, "no answer found in the completion")
    correct, reason = judge(
        extracted,
        reference,
        timeout=timeout,
        symbolic=symbolic,
        use_math_verify=use_math_verify,
    )
    return GradeResult(correct, extracted, reason)
