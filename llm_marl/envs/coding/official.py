"""The coding prompts in the layout of the MAGRPO reference code (``prompt_style="official"``).

Turn 1 follows ``aux_function_formatter`` / ``main_function_formatter`` in
``LLM_Collab_Code_Generation/train_magrpo.py`` (OpenMLRL, commit dc12acb): a fixed instruction
block around the raw problem text, with the main agent's ``def <entry>(<params>):`` header built
from the first ``def`` of the problem. Later turns follow ``format_followup_prompts`` in
``LLM_Collab_Code_Generation/external/level_feedback.py`` (commit 3618829), the ``level_feedback``
external transition of the paper configs: the agent's previous prompts and responses ("History"),
static diagnostics (definitions, syntax), ``- Tests: k/n passed`` with each failing case, for the
main agent how it uses ``aux``, and a closing "Revise ..." line. That text is the agent's whole
next prompt (the env restarts its conversation), as CoMLRL feeds it.

What our facts stand in for: definitions and syntax come from the env's own code reader (the
reference uses regexes), the tests are the env's feedback units run in the sandbox, and a failing
case shows the assert with ``candidate`` replaced by the entry point and the last line of its
error (the reference prints ``<ExceptionType>: <message>``, which is that line for a raised
exception). When the program could not run (main missing, a syntax error) no test ran, and the
report says ``- Tests: no test cases found`` as the reference does for a syntax error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

AUX_NAME = "aux"
_PARAMS = re.compile(r"def\s+\w+\s*\(([^)]+)\)")
_NO_INFO = "Error: Could not extract function information from prompt."
_RULES = (
    "IMPORTANT INSTRUCTIONS:\n"
    "- Output ONLY the function code, no explanations or examples\n"
    "- Do NOT include markdown code blocks (```python)\n"
    "- Do NOT include any text before or after the function\n"
    "- Do NOT include test cases or example usage\n"
)


def prompt_params(problem: str) -> list[str]:
    """The parameters of the problem's first ``def`` (what the reference's header is built from)."""
    match = _PARAMS.search(problem)
    if not match:
        return []
    return [p.strip() for p in match.group(1).split(",") if p.strip()]


def helper_prompt(problem: str, entry_point: str) -> str:
    """The helper's turn-1 prompt (``aux_function_formatter``)."""
    if not prompt_params(problem) or not entry_point:
        return _NO_INFO
    return (
        "Create a helper function for this coding problem.\n\n"
        f"Problem:\n{problem}\n\n"
        f"{_RULES}"
        f"- Create a helper function named '{AUX_NAME}' that can assist the main function\n"
        "- The function should return useful data for solving the problem\n\n"
        "Your output should follow this format:\n\n"
        f"def {AUX_NAME}(...):\n # your function code here\nreturn result\n"
    )


def main_prompt(problem: str, entry_point: str) -> str:
    """The main agent's turn-1 prompt (``main_function_formatter``)."""
    params = prompt_params(problem)
    if not params or not entry_point:
        return _NO_INFO
    return (
        "Solve this coding problem by implementing the required function.\n\n"
        f"Problem:\n{problem}\n\n"
        f"You have access to a helper function: {AUX_NAME}(...)\n\n"
        f"{_RULES}"
        f"- Do NOT redefine the {AUX_NAME}() function\n"
        f"- Implement ONLY the '{entry_point}' function as specified\n"
        f"- You can call {AUX_NAME}() to assign value to a variable within your function if "
        "helpful\n\n"
        "Your output should follow this format:\n\n"
        f"def {entry_point}({', '.join(params)}):\n # your function code here\nreturn result\n"
    )


@dataclass
class Diagnostics:
    """The facts of one turn's joint program that the ``level_feedback`` prompt reports."""

    entry_point: str
    main_defined: bool
    """The entry point is defined and returns a value."""
    main_present: bool
    """The entry point is defined at all (the reference's "not defined" vs "missing return")."""
    syntax_error: str | None
    """The joint program's syntax error, ``None`` when it parses."""
    aux_defined: bool | None = None
    """``None`` in the single-agent env."""
    aux_present: bool = False
    tests_ran: bool = False
    passed: int = 0
    total: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(assert as shown, error line)`` of each failing feedback test."""
    aux_called: bool = False
    aux_result_ignored: bool = False
    thin_wrapper: bool = False


def _definition(defined: bool, present: bool, description: str) -> str:
    if defined:
        return f"FOUND ({description} properly defined with return statement)"
    if present:
        return f"MISSING ({description} missing return statement)"
    return f"MISSING ({description} not defined)"


def _history(lines: list[str], prompts: Sequence[str], responses: Sequence[str], who: str) -> None:
    if prompts:
        lines.append("History: previous prompts:")
        lines.extend(f"- Turn {t} prompt:\n{p}" for t, p in enumerate(prompts, start=1))
        lines.append("")
    if responses:
        lines.append(f"History: your previous {who}responses:")
        lines.extend(f"- Turn {t} response:\n{r}" for t, r in enumerate(responses, start=1))
        lines.append("")


def followup_prompt(
    role: str, d: Diagnostics, prompts: Sequence[str], responses: Sequence[str]
) -> str:
    """The next-turn prompt of ``role`` (``helper``, ``main`` or ``coder``) in the layout of
    ``format_followup_prompts`` (``external/level_feedback.py``): history, diagnostics,
    ``- Tests: k/n passed`` and failing cases, aux usage (main only), the closing request."""
    who = {"helper": f"{AUX_NAME}(...) ", "main": "main ", "coder": ""}[role]
    lines: list[str] = []
    _history(lines, prompts, responses, who)
    main_line = "- Main definition: " + _definition(
        d.main_defined, d.main_present, f"Main function ({d.entry_point})"
    )
    aux_line = "- Aux definition: " + (
        _definition(bool(d.aux_defined), d.aux_present, "Aux function")
        if d.aux_defined is not None
        else "MISSING (Single-agent mode: aux not used)"
    )
    syntax = (
        "- Syntax: OK (Combined code syntax OK)"
        if d.syntax_error is None
        else f"- Syntax: ERROR (Combined code has syntax error: {d.syntax_error})"
    )
    lines.append("Static and execution diagnostics:")
    if role == "helper":
        lines.extend([aux_line, main_line])
    elif role == "main":
        lines.extend([main_line, aux_line])
    else:
        lines.append(main_line)
    lines.append(syntax)
    if d.tests_ran and d.total > 0:
        lines.append(f"- Tests: {d.passed}/{d.total} passed")
        lines.extend(f"  Failed case: {case} -> {error}" for case, error in d.failures)
    else:
        lines.append("- Tests: no test cases found")
    if role == "main" and d.main_defined:
        if not d.aux_called:
            lines.append(f"- Aux usage: main does NOT call {AUX_NAME}")
        elif d.aux_result_ignored:
            lines.append(f"- Aux usage: called but misused (the result of {AUX_NAME} is unused)")
        else:
            lines.append(f"- Aux usage: main calls {AUX_NAME} and uses its result")
        if d.thin_wrapper:
            lines.append(f"- Warning: main appears to be a thin wrapper over {AUX_NAME}")
    own = AUX_NAME if role == "helper" else d.entry_point
    lines.append(
        f"\nRevise your {own}(...) accordingly. Output ONLY the function code with no extra text."
    )
    return "\n".join(lines)


def failing_case(source: str, entry_point: str, error: str) -> tuple[str, str]:
    """A failing unit as the reference prints it: the assert with ``candidate`` replaced by the
    entry point (``extract_test_cases``), and the error's ``Type: message`` line."""
    case = " ".join(line.strip() for line in source.strip().splitlines())
    return case.replace("candidate", entry_point), error
