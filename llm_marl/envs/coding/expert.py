"""Expert edits: an external model reads the team's program after a round and suggests fixes.

This is the ``expert_edits`` external mode of MAGRPO's reference code
(``OpenMLRL/LLM_Collab_Code_Generation``: ``external/expert_edits.py``, ``add_expert_edits`` and
``format_followup_prompts`` at commit a5df8ea; the same semantics in the older ``external.py``,
``get_expert_feedback``). There, after every round but the last, an expert LLM (DeepSeek-Coder
by default) is shown the problem and the team's combined code (the prompt's imports, ``aux``,
the entry point) and asked for one JSON object with an edit per agent, ``aux`` for the helper
and ``main`` for the main agent (``main`` alone for a single agent); each agent's next prompt
carries *its own* edit and asks it to revise its function.

What the expert is shown (:func:`expert_request`)
    One user message: the reference code's instructions, verbatim (:func:`instructions`), with
    the problem and the combined program as it ran, then what happened when it ran: each
    agent's syntax error or unread answer, the program's load or run error, and the *feedback*
    tests that failed with their errors. The expert never receives another test, its source
    or its output (a scoring test of the held-out split never; by default the feedback units
    also score, as in the official code): the env builds the request from the feedback units only, whatever the
    expert is or how it is set up. (The reference instructions ask for edits "that would help
    pass the provided unit tests" but show the expert none; showing the feedback tests is
    ours. With ``feedback_fraction=0`` the expert sees no test result, only the code and its
    errors; the reference expert sees the code alone.)
    The program is cut to :data:`CODE_CHARS`, so an agent's huge answer cannot overflow the
    expert's context (which would make the agents' text an infrastructure failure). The code
    and the run's results are the agents' text: each is quoted in a fence (``<code>`` ...
    ``</code>``, ``<test_results>`` ... ``</test_results>``, with ``&``, ``<`` and ``>``
    escaped, :func:`~llm_marl.tools.text.fence`), and a last line says that fenced text is
    material, not instructions; so code cannot close its fence, add its own "What happened"
    header or new instructions. The reference wording before the code is unchanged.
What the agents are told (:func:`~llm_marl.envs.coding.prompts.expert_message`)
    Each agent reads its own edit (the helper the ``aux`` one, the main agent and a lone coder
    the ``main`` one), cut to :data:`EDIT_CHARS`, and is asked to revise its function. The
    reply is untrusted text: only its first :data:`REPLY_CHARS` characters are read, in linear
    time (:func:`read_edits`).
An unreadable reply
    (no JSON object with an ``aux`` or ``main`` key): nobody gets an edit, as in the reference
    code's fallback, and ``infos[agent]["expert_read"]`` is False. The reference code re-asks up
    to 3 times first; here the reply is final (a greedy expert would only repeat it; a
    policy's own retries cover transport errors).
A failing expert
    (it raises, times out, returns something other than a string) is an infrastructure failure:
    :class:`~llm_marl.errors.InfrastructureError`, the episode is truncated with
    ``infos[agent]["error"]`` and never scored (the reference code goes on without edits).
Identical requests get one reply
    Within a process, the same request to the same expert (same problem, code and test
    results) is answered once and the reply reused (a bounded cache of
    :data:`CACHE_SIZE` requests per expert): the env stays deterministic given its seed and the
    actions, as tree rollouts need (they replay histories in fresh envs), and an expert that
    samples is not paid twice for one question.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from llm_marl.envs.coding.prompts import report_tests
from llm_marl.errors import InfrastructureError
from llm_marl.tools.calls import json_string_end
from llm_marl.tools.text import FENCE_NOTE, fence

__all__ = [
    "CACHE_SIZE",
    "CODE_CHARS",
    "EDIT_CHARS",
    "REPLY_CHARS",
    "Expert",
    "ExpertFacts",
    "ask_expert",
    "expert_request",
    "instructions",
    "read_edits",
]

Expert = Callable[[list[dict[str, str]]], str]
"""An expert: any callable ``conversation -> reply text`` (the conversation is a list of
OpenAI-style messages). A scripted policy's function is one;
:class:`llm_marl.rollout.judges.CodeExpert` makes one of any frozen policy."""

REPLY_CHARS = 16_000
"""Only this many characters of the expert's reply are read (about the reference code's
2,048-token reply budget)."""
EDIT_CHARS = 4_000
"""Each agent's edit is cut to this many characters before it enters the agent's prompt."""
CODE_CHARS = 12_000
"""The program shown to the expert is cut to this many characters."""
CACHE_SIZE = 2_048
"""Requests remembered per expert (see "Identical requests get one reply")."""

TEAM_KEYS = {"helper": "aux", "main": "main"}
"""The JSON key of each agent's edit in the reference code's format."""
SINGLE_KEYS = {"coder": "main"}

_MAX_TRIES = 8
"""At most this many JSON candidates of a reply are decoded (each at most REPLY_CHARS long)."""
_DECODER = json.JSONDecoder(strict=False)  # models put raw newlines inside JSON strings
_BRACE_OR_QUOTE = re.compile(r'[{}"]')


def instructions(problem: str, single_agent: bool) -> str:
    """The reference code's request to the expert, up to the code it reviews.

    The wording is the reference code's own (``external/expert_edits.py``, ``add_expert_edits``,
    commit a5df8ea), reproduced verbatim because the expert's reply format depends on it.
    """
    if single_agent:
        return (
            f"You are an expert reviewing code written by a single agent for the task: {problem}\n"
            "\n"
            "Your job is to return proposed edits for the main function as JSON with the key "
            "'main'.\n"
            "Guidelines:\n"
            "1) If the target function is missing, provide a minimal correct implementation as "
            "the edit.\n"
            "2) If it exists, provide concise edits that would help pass the provided unit "
            "tests.\n"
            '3) If no changes are needed, respond with short note: "Perfect! No changes '
            'needed!" for that field.\n'
            "\n"
            'Provide only JSON in the following format: { "main": <string with edits or '
            "replacement> }\n"
            "Here is the current code to consider:\n"
        )
    return (
        "You are an expert reviewing code collaboratively written by two agents for the task: "
        f"{problem}\n"
        "The auxiliary agent implements a helper function (aux), and the main agent implements "
        "the task entry function.\n"
        "\n"
        "Your job is to return proposed edits for each agent as JSON with keys 'aux' and "
        "'main'.\n"
        "Guidelines:\n"
        "1) If a function is missing, provide a minimal correct implementation as the edit.\n"
        "2) If both exist, provide concise edits that would help pass the provided unit tests.\n"
        '3) If no changes are needed, respond with short note: "Perfect! No changes needed!" '
        "for that field.\n"
        "\n"
        'Provide only JSON in the following format: { "aux": <string with edits or '
        'replacement>, "main": <string with edits or replacement> }\n'
        "Here is the current combined code to consider:\n"
    )


@dataclass
class ExpertFacts:
    """What the expert may know about one round's program: nothing from a scoring test."""

    program: str
    """The program as it ran (task preamble + the agents' code)."""
    problems: list[str] = field(default_factory=list)
    """Sentences about the agents' code: a syntax error, an answer too long to read."""
    program_error: str | None = None
    """The program's load or run error (a sentence), if any."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(readable test source, error)`` for each failing feedback test."""
    passed: int = 0
    """Feedback tests passed."""
    total: int = 0
    """Feedback tests run (0 when the program did not run or no unit gives feedback)."""


def expert_request(problem: str, facts: ExpertFacts, single_agent: bool) -> list[dict[str, str]]:
    """The conversation the expert answers: one user message (see the module docstring)."""
    code = facts.program.strip("\n")
    if len(code) > CODE_CHARS:
        code = code[:CODE_CHARS] + "\n# ... (the rest of the code is cut)"
    # The reference wording, then the team's code and what its run printed, each fenced: the
    # code, errors and test results are the agents' text and cannot add instructions or headers.
    lines = [instructions(problem.rstrip(), single_agent) + fence("code", code)]
    results = [f"- {p}" for p in facts.problems]
    if facts.program_error:
        results.append(f"- {facts.program_error}")
    if facts.total:
        results.extend(report_tests("Unit tests", facts.passed, facts.total, facts.failures))
    if results:
        lines.append("\nWhat happened when the code ran on the provided unit tests:")
        lines.append(fence("test_results", "\n".join(results)))
    lines.append("\n" + FENCE_NOTE)
    return [{"role": "user", "content": "\n".join(lines)}]


def read_edits(reply: str, keys: Sequence[str]) -> dict[str, str] | None:
    """Each key's edit in the expert's reply, or ``None`` when no JSON object in it has a key.

    As the reference code does, the *last* JSON object of the reply wins (here: the last one
    that has one of ``keys``); a key it lacks gets ``""``. Only the first :data:`REPLY_CHARS`
    characters are read; the scan is linear and at most :data:`_MAX_TRIES` candidates are
    decoded. Each edit is cut to :data:`EDIT_CHARS`.
    """
    text = reply[:REPLY_CHARS]
    for start, end in reversed(_brace_spans(text)[-_MAX_TRIES:]):
        try:
            value = _DECODER.decode(text[start:end])
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        found = {str(k).strip().lower(): v for k, v in value.items()}
        if any(k in found for k in keys):
            return {k: _clip_edit(found.get(k)) for k in keys}
    return None


def _brace_spans(text: str) -> list[tuple[int, int]]:
    """Every balanced ``{...}`` of ``text`` in the order it closes (so the last closes last).

    Strings are skipped inside braces (code in a JSON string holds braces of its own); outside
    any brace a quote is prose. One pass, no backtracking: linear in ``len(text)``.
    """
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    pos = 0
    while (found := _BRACE_OR_QUOTE.search(text, pos)) is not None:
        ch, pos = found.group(), found.end()
        if ch == "{":
            opened.append(found.start())
        elif opened and ch == "}":
            spans.append((opened.pop(), pos))
        elif opened:
            pos = json_string_end(text, found.start())
    return spans


def _clip_edit(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.strip()
    if len(text) > EDIT_CHARS:
        text = text[:EDIT_CHARS] + "\n... (cut)"
    return text


# ---------------------------------------------------------------------------------- asking


class _Replies:
    """One expert's answered requests: request digest -> reply, at most CACHE_SIZE, LRU.

    A request being answered is a pending Future, so that envs stepping in threads that ask the
    same question at once all get the one reply (two replies to one question would make a
    replayed history differ from the recorded one).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: OrderedDict[str, Future[str]] = OrderedDict()

    def get(self, key: str, ask: Callable[[], str]) -> str:
        with self.lock:
            future = self.entries.get(key)
            owner = future is None
            if future is None:
                future = self.entries[key] = Future()
                while len(self.entries) > CACHE_SIZE:
                    self.entries.popitem(last=False)
            else:
                self.entries.move_to_end(key)
        if owner:
            try:
                future.set_result(ask())
            except BaseException as err:
                with self.lock:  # a failure is not remembered: the next request asks again
                    if self.entries.get(key) is future:
                        del self.entries[key]
                future.set_exception(err)
        return future.result()


_REPLIES: weakref.WeakKeyDictionary[Any, _Replies] = weakref.WeakKeyDictionary()
_REPLIES_BY_ID: dict[int, tuple[Any, _Replies]] = {}
"""Experts that cannot be weakly referenced or hashed are kept alive here (their id stays theirs)."""
_REPLIES_LOCK = threading.Lock()


def _replies_of(expert: Expert) -> _Replies:
    with _REPLIES_LOCK:
        try:
            replies = _REPLIES.get(expert)
            if replies is None:
                replies = _REPLIES[expert] = _Replies()
            return replies
        except TypeError:  # not weakly referenceable, or unhashable
            entry = _REPLIES_BY_ID.get(id(expert))
            if entry is None:
                entry = _REPLIES_BY_ID[id(expert)] = (expert, _Replies())
            return entry[1]


def ask_expert(expert: Expert, request: list[dict[str, str]]) -> str:
    """The expert's reply to ``request`` (remembered: see the module docstring).

    Raises :class:`~llm_marl.errors.InfrastructureError` when the expert raises or returns
    something other than a string: a failing expert is never the agents' fault.
    """
    key = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()

    def ask() -> str:
        try:
            reply = expert(request)
        except Exception as err:  # an expert is user code or a remote model
            raise InfrastructureError(f"the coding expert failed: {err!r}") from err
        if not isinstance(reply, str):
            raise InfrastructureError(
                f"the coding expert returned {type(reply).__name__}, not the text of a reply"
            )
        return reply

    return _replies_of(expert).get(key, ask)
