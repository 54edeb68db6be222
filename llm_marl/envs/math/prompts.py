"""Default prompts of the math envs (AgentPO's) and the small template language that fills them.

Every env role has a *system* prompt and a *user* template. Templates hold placeholders in braces,
``{problem}``, ``{hint}``, ``{draft}``, ``{critique}`` (and, in the team envs, ``{guide}``,
``{persona}``, ``{previous}``, ``{peers}``, ``{round}``, ``{role}``, ``{solvers}``: see
:data:`PLACEHOLDERS`); any other brace is literal text, so
``\\boxed{}`` needs no escaping. Filling is a single pass: a problem that itself contains
``{hint}`` is never expanded twice. An empty system prompt means "send no system message" (for
chat templates that have no system role).

The defaults follow the prompts of the AgentPO code (``dreaming-madao/agentpo``:
``agentpo/rl_dataset.py`` for the collaborators, ``agentpo/reward_manager_agentpo.py`` and
``agentpo/evaluation/math_eval_promptpo.py`` for the actor). Differences, on purpose:

* none for the hint collaborator: its default system prompt is the released one,
  :data:`HINT_SYSTEM` ("Rewrite the question below to make it easier to understand.",
  ``prompt_system`` in ``agentpo/rl_dataset.py`` of the initial release, commit 8987a7e). The
  same file keeps "Provide hint to solve the below problem." as ``prompt_system_backup``
  (:data:`HINT_SYSTEM_HINT`), an option: ``prompts={"hint_system": HINT_SYSTEM_HINT}`` or
  ``hint_prompt="hint"`` on ``math_hint-v0``;
* AgentPO writes ``\\boxed{{}}`` in plain (non-f) strings, so its models literally read
  ``\\boxed{{}}``; ours read ``\\boxed{}``;
* AgentPO's critic reads offline drafts; here the actor writes the draft in the episode with
  the same prompts as the single-actor baseline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType

PLACEHOLDERS = (
    "problem",
    "hint",
    "draft",
    "critique",
    # the team envs (math_debate-v0, math_roles-v0)
    "guide",
    "persona",
    "previous",
    "peers",
    "round",
    "role",
    "solvers",
)
"""Names that templates may use (each env says which of them each of its prompts may use)."""

_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")

STEP_BY_STEP = "Let's think step by step and output the final answer within \\boxed{}."
"""The instruction AgentPO appends to every actor request."""

ACTOR_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
"""The actor's system prompt when it solves (alone, with a hint, or drafting)."""

ACTOR_USER = "{problem} " + STEP_BY_STEP
"""The actor alone (``math_single-v0``, and the draft of ``math_critic-v0``)."""

HINT_SYSTEM = "Rewrite the question below to make it easier to understand."
"""The hint collaborator's default system prompt: AgentPO's released one (``prompt_system`` in
``agentpo/rl_dataset.py``), verbatim."""

HINT_SYSTEM_HINT = "Provide hint to solve the below problem."
"""The alternative hint prompt: AgentPO's ``prompt_system_backup`` (same file), verbatim."""

HINT_SYSTEMS: Mapping[str, str] = MappingProxyType(
    {"rewrite": HINT_SYSTEM, "hint": HINT_SYSTEM_HINT}
)
"""``math_hint-v0``'s ``hint_prompt=`` choices: the released default and the backup."""

HINT_USER = "{problem}"
"""The hint collaborator sees the bare problem."""

ACTOR_HINT_USER = "Problem: {problem} (Hint: {hint}) " + STEP_BY_STEP
"""The actor's request in ``math_hint-v0``: the problem with the hint in brackets."""

CRITIC_SYSTEM = (
    "Given a question and its current solution, analyze the solution and provide concise, "
    "specific feedback identifying any errors, logical gaps, or missing justifications. "
    "Do not rewrite the solution, only highlight issues."
)
"""The critic's system prompt (AgentPO, verbatim)."""

CRITIC_USER = "Question: {problem}\n\nCurrent Solution: {draft}"
"""The critic sees the problem and the actor's draft."""

REVISE_SYSTEM = (
    "You have an opportunity to improve your solution. Please review Current Solution and "
    "Comment carefully. Correct errors and fill justification gaps if any."
)
"""The actor's system prompt when it revises its draft (AgentPO, verbatim)."""

REVISE_USER = (
    "Problem: {problem}\n\nCurrent Solution: {draft}\n\nComment: {critique} " + STEP_BY_STEP
)
"""The actor's revision request: problem, its own draft and the critique."""


def _frozen(d: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(d)


SINGLE_PROMPTS: Mapping[str, str] = _frozen(
    {"actor_system": ACTOR_SYSTEM, "actor_user": ACTOR_USER}
)
"""Defaults of ``math_single-v0``."""

HINT_PROMPTS: Mapping[str, str] = _frozen(
    {
        "hint_system": HINT_SYSTEM,
        "hint_user": HINT_USER,
        "actor_system": ACTOR_SYSTEM,
        "actor_user": ACTOR_HINT_USER,
    }
)
"""Defaults of ``math_hint-v0``."""

CRITIC_PROMPTS: Mapping[str, str] = _frozen(
    {
        "actor_system": ACTOR_SYSTEM,
        "actor_user": ACTOR_USER,
        "critic_system": CRITIC_SYSTEM,
        "critic_user": CRITIC_USER,
        "revise_system": REVISE_SYSTEM,
        "revise_user": REVISE_USER,
    }
)
"""Defaults of ``math_critic-v0``."""


def template_fields(template: str) -> set[str]:
    """The placeholder names a template uses."""
    return set(_PLACEHOLDER_RE.findall(template))


def fill(template: str, **values: str) -> str:
    """Replace each ``{name}`` placeholder by ``values[name]`` in one pass (values not rescanned)."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template needs {{{name}}} but no value was given: {template!r:.80}")
        return values[name]

    return _PLACEHOLDER_RE.sub(sub, template)


def resolve_prompts(
    defaults: Mapping[str, str],
    overrides: Mapping[str, str | None] | None,
    allowed_fields: Mapping[str, AbstractSet[str]],
    env_name: str,
) -> dict[str, str]:
    """Merge user ``overrides`` into ``defaults`` and check them.

    Args:
        defaults: the env's default prompts (one of the ``*_PROMPTS`` mappings).
        overrides: user-given prompts by key; ``None`` (for a system prompt) means "no system
            message", like ``""``.
        allowed_fields: for each key, the placeholders its template may use (what the env knows
            when it fills it).
        env_name: named in error messages.

    Raises:
        ValueError: an unknown key, a non-string prompt, or a placeholder the env cannot fill
            at that point (e.g. ``{hint}`` in the hint agent's own prompt).
    """
    prompts = dict(defaults)
    for key, value in (overrides or {}).items():
        if key not in defaults:
            raise ValueError(
                f"{env_name}: unknown prompt {key!r}; this env's prompts are {sorted(defaults)}"
            )
        if value is None and key.endswith("_system"):
            value = ""
        if not isinstance(value, str):
            raise ValueError(
                f"{env_name}: prompt {key!r} must be a str, got {type(value).__name__}"
            )
        prompts[key] = value
    for key, template in prompts.items():
        extra = template_fields(template) - allowed_fields.get(key, set())
        if extra:
            allowed = sorted(allowed_fields.get(key, set()))
            raise ValueError(
                f"{env_name}: prompt {key!r} uses {sorted('{' + e + '}' for e in extra)}, which "
                f"is not known at that point; it may use {['{' + a + '}' for a in allowed]}"
            )
    return prompts
