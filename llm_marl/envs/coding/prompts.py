"""What each coding agent is told: first prompts and multi-turn feedback (tests or expert).

The semantics follow the MAGRPO code setting: the helper writes ``aux`` for the problem, the main
agent writes the entry point and may call ``aux`` but does not see it and must not redefine it;
neither sees the other's code. Feedback (multi-turn) reports on the *joint* program — syntax,
the feedback tests and runtime errors — but never shows the partner's code or another test.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

AUX_NAME = "aux"
MAX_ERROR_CHARS = 300
"""Error messages in feedback are cut to this length (a traceback can be huge)."""


def helper_prompt(problem: str, entry_point: str) -> str:
    return (
        f"You are the helper in a team of two Python programmers. Your partner will write the "
        f"function `{entry_point}` for the problem below and can call one helper function "
        f"that you write, named `{AUX_NAME}`. Your partner cannot see your code.\n\n"
        f"Problem:\n{problem.rstrip()}\n\n"
        "Instructions:\n"
        f"- Write only the function `{AUX_NAME}(...)` (choose its parameters) and the imports "
        "it needs.\n"
        f"- `{AUX_NAME}` must return a value that helps to solve the problem.\n"
        f"- Do not write `{entry_point}`, tests, example calls or explanations.\n"
        "- Reply with Python code only."
    )


def main_prompt(problem: str, entry_point: str, signature: str | None) -> str:
    header = signature or f"def {entry_point}(...):"
    return (
        f"You are the main programmer in a team of two Python programmers. Your partner is "
        f"writing a helper function `{AUX_NAME}(...)` for the problem below; you cannot see it, "
        f"but you may call it.\n\n"
        f"Problem:\n{problem.rstrip()}\n\n"
        "Instructions:\n"
        f"- Write the function `{header}` and the imports it needs.\n"
        f"- You may call `{AUX_NAME}(...)` and use its return value. Do not define "
        f"`{AUX_NAME}` yourself: your definition would be ignored.\n"
        "- Do not write tests, example calls or explanations.\n"
        "- Reply with Python code only."
    )


def coder_prompt(problem: str, entry_point: str, signature: str | None) -> str:
    header = signature or f"def {entry_point}(...):"
    return (
        f"Solve the following problem in Python.\n\nProblem:\n{problem.rstrip()}\n\n"
        "Instructions:\n"
        f"- Write the function `{header}`, with any helper functions and imports it needs.\n"
        "- Do not write tests, example calls or explanations.\n"
        "- Reply with Python code only."
    )


@dataclass
class FeedbackReport:
    """Facts about one turn's joint program, as some agent may be told them."""

    entry_point: str
    turn: int
    max_turns: int
    own_role: str
    """``helper``, ``main`` or ``coder``."""
    own_defined: bool
    own_syntax_error: str | None = None
    partner_defined: bool | None = None
    """``None`` in the single-agent env."""
    partner_syntax_error: bool = False
    redefinition_ignored: str | None = None
    """Name of a function this agent defined that was left out of the program."""
    program_error: str | None = None
    """A program-level failure, as a sentence: loading raised, or a limit stopped the run."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(test source, error)`` for each failing feedback test."""
    passed: int = 0
    total: int = 0
    aux_called: bool | None = None
    """For ``main``: whether it calls ``aux``."""
    own_oversized: bool = False
    """This agent's answer was longer than the code reader's caps and was not read."""


def feedback_message(report: FeedbackReport) -> str:
    """The feedback an agent reads before revising its code."""
    r = report
    own = {"helper": f"`{AUX_NAME}`", "main": f"`{r.entry_point}`", "coder": f"`{r.entry_point}`"}[
        r.own_role
    ]
    lines = [f"Feedback on the team's program after turn {r.turn} of {r.max_turns}:"]
    if r.own_role == "coder":
        lines[0] = f"Feedback on your program after turn {r.turn} of {r.max_turns}:"
    lines.append(
        f"- Your function {own}: "
        + (
            "defined."
            if r.own_defined
            else "MISSING (not defined, does not parse, or returns no value)."
        )
    )
    if r.own_oversized:
        lines.append("- Your answer was not read: it is far longer than any solution needs.")
    if r.redefinition_ignored:
        lines.append(
            f"- Your definition of `{r.redefinition_ignored}` was ignored: that function is "
            "your partner's job."
        )
    if r.partner_defined is not None:
        partner = f"`{AUX_NAME}`" if r.own_role == "main" else f"`{r.entry_point}`"
        status = "defined" if r.partner_defined else "MISSING"
        if r.partner_syntax_error:
            status += ", but it has a syntax error"
        lines.append(f"- Your partner's function {partner}: {status}.")
    if r.own_syntax_error:
        lines.append(f"- Your code has a syntax error: {clip_error(r.own_syntax_error)}")
    if r.program_error:
        lines.append(f"- {clip_error(r.program_error)}")
    if r.aux_called is False and r.own_role == "main":
        lines.append(f"- `{r.entry_point}` does not call `{AUX_NAME}`.")
    if r.total:
        failures = [(readable_test(s, r.entry_point), clip_error(e)) for s, e in r.failures]
        lines.extend(report_tests("Feedback tests", r.passed, r.total, failures))
    elif not r.own_syntax_error and not r.program_error:
        lines.append("- No feedback tests were run for this problem.")
    lines.append(f"Revise your {own} and reply with the complete code only.")
    return "\n".join(lines)


def expert_message(
    entry_point: str, own_role: str, turn: int, max_turns: int, edit: str | None
) -> str:
    """What an agent reads in ``feedback="expert"`` mode: its own edit from the expert.

    ``edit`` is the expert's suggestion for this agent (already cut to length by
    :mod:`~llm_marl.envs.coding.expert`), ``""`` when the expert's reply had none for it and
    ``None`` when the reply could not be read. As in the reference code's follow-up prompt
    (``format_followup_prompts`` in ``external/expert_edits.py``), the agent is shown the edit and
    asked to revise its function; its first prompt and previous answer are already in its
    conversation.
    """
    own = f"`{AUX_NAME}`" if own_role == "helper" else f"`{entry_point}`"
    head = f"After turn {turn} of {max_turns}, an expert reviewed the team's program."
    if own_role == "coder":
        head = f"After turn {turn} of {max_turns}, an expert reviewed your program."
    if edit:
        body = f"The expert's suggested edit for your {own}:\n{edit}"
    elif edit is None:
        body = "The expert's reply could not be read: there is no suggestion this time."
    else:
        body = f"The expert suggested no edit for your {own}."
    return f"{head}\n{body}\nRevise your {own} accordingly and reply with the complete code only."


def report_tests(
    label: str, passed: int, total: int, failures: Sequence[tuple[str, str]]
) -> list[str]:
    """Test results as a model reads them, in the agents' feedback and the expert's request
    alike: ``- <label> passed: <passed>/<total>.``, then each failing test and its error.

    ``failures`` are ``(test, error)`` as shown: already made readable and cut to length
    (:func:`readable_test`, :func:`clip_error`).
    """
    lines = [f"- {label} passed: {passed}/{total}."]
    for test, error in failures:
        lines.append(f"  FAILED: {test}")
        lines.append(f"    -> {error}")
    return lines


def readable_test(source: str, entry_point: str) -> str:
    """A test unit as an agent (or the expert) reads it: the entry point's name, cut to length."""
    text = re.sub(r"\bcandidate\b", entry_point, source)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def clip_error(text: str) -> str:
    """An error message on one line, cut to :data:`MAX_ERROR_CHARS`."""
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
