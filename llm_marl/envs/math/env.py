"""`MathEnv`: what the math envs share (tasks, prompts, grading of the actor's final answer).

The concrete envs are :mod:`~llm_marl.envs.math.single` (``math_single-v0``),
:mod:`~llm_marl.envs.math.hint` (``math_hint-v0``) and :mod:`~llm_marl.envs.math.critic`
(``math_critic-v0``); their module docstrings are their documentation.

Reward (joint, every agent, on the actor's final turn)
    ``correct = 1`` if the answer extracted from the actor's final completion is equivalent to
    the reference (:func:`llm_marl.tools.grading.grade`), else ``0``. The reward is
    ``correct`` (binary, as in AgentPO) unless ``format_weight = w > 0`` is passed, which gives
    ``(1 - w) * correct + w * format``; off by default. Components: ``correct``, ``format``
    (1 if the final completion's last complete ``\\boxed{...}`` holds an answer: an empty box,
    or one of spaces, ``\\,`` or ``\\text{}``, is no answer and earns no format reward; ours,
    AgentPO has no format term). Without a box the grader
    falls back to an answer marker ("The answer is ...") or the last number, as math evaluation
    harnesses do; ``require_boxed=True`` scores such answers 0 instead.
Infos of the actor on the final step
    ``answer`` (the extracted answer, or None), ``reference``, ``correct``, ``malformed`` (no
    ``\\boxed{}`` holding an answer: the answer came from a fallback such as the last number, or
    is missing).
Errors
    A grader crash is an infrastructure error: the episode is truncated with
    ``infos[agent]["error"]`` set and no reward (never scored as a wrong answer). A grader
    *timeout* on a pathological answer is scored as incorrect, as the grader reports it
    (``grading_timeout`` seconds, default the grader's own).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from llm_marl.envs.base import InfrastructureError, LLMParallelEnv, Task, Transition
from llm_marl.envs.math.prompts import fill, resolve_prompts
from llm_marl.errors import DataError


class MathEnv(LLMParallelEnv, abstract=True):
    """Base of the math envs: tasks, prompts and grading.

    Subclasses set the class attributes (``metadata``, ``possible_agents``, ``collaborator``,
    ``default_prompts``, ``prompt_fields`` and ``max_steps``, the number of phases) and implement
    the two hooks; their ``setup_episode`` checks the task with :func:`check_math_task`.
    """

    # Every math env pays the graded answer (0 or 1), or with format_weight w the mix
    # (1 - w) * correct + w * format: one range for the whole family.
    reward_range = (0.0, 1.0)
    actor: ClassVar[str] = "actor"
    """The agent whose final answer is graded."""
    collaborator: ClassVar[str | None] = None
    """The agent that helps the actor (``"hint"``, ``"critic"``), or None for the actor alone."""
    default_prompts: ClassVar[Mapping[str, str]] = {}
    """Prompt key -> default template (see :mod:`llm_marl.envs.math.prompts`)."""
    prompt_fields: ClassVar[Mapping[str, frozenset[str]]] = {}
    """Prompt key -> the placeholders the env can fill in it (a key not listed, such as a system
    prompt, takes none)."""

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        dataset: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        split: str | None = None,
        limit: int | None = None,
        prompts: Mapping[str, str | None] | None = None,
        format_weight: float = 0.0,
        require_boxed: bool = False,
        grading_timeout: float | None = None,
        render_mode: str | None = None,
    ) -> None:
        if tasks is not None and (dataset is not None or split is not None):
            raise ValueError(
                f"{type(self).__name__}: pass either tasks=[...] or dataset=/split=, not both"
            )
        if not 0.0 <= format_weight < 1.0:
            raise ValueError(f"format_weight must be in [0, 1), got {format_weight}")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive int or None, got {limit!r}")
        self.dataset = dataset
        self.split = split
        self.limit = limit
        self.format_weight = float(format_weight)
        self.require_boxed = bool(require_boxed)
        if grading_timeout is not None and grading_timeout <= 0:
            raise ValueError(f"grading_timeout must be > 0 seconds, got {grading_timeout}")
        self.grading_timeout = grading_timeout
        self.prompts = resolve_prompts(
            self.default_prompts, prompts, self.prompt_fields, self.metadata["name"]
        )
        if tasks is not None:
            tasks = [check_math_task(t, type(self).__name__, i) for i, t in enumerate(tasks)]
            if limit is not None:
                tasks = tasks[:limit]
        super().__init__(tasks, render_mode=render_mode)

    def default_tasks(self) -> list[Task]:
        """The tasks of ``dataset``/``split``/``limit`` (default: the bundled offline sample)."""
        from llm_marl.envs.math.datasets import load_math_tasks

        return load_math_tasks(self.dataset, self.split, self.limit)

    # ------------------------------------------------------------------ helpers for subclasses
    def _ask(self, agent: str, prompt: str, **values: str) -> None:
        """Post the ``<prompt>_system`` message (unless empty) and the filled ``<prompt>_user``."""
        system = self.prompts[f"{prompt}_system"]
        if system:
            self.say(agent, fill(system, **values), role="system")
        self.say(agent, fill(self.prompts[f"{prompt}_user"], **values))

    def _grade_final(self, completion: str, extra: Mapping[str, float] | None = None) -> Transition:
        """Score the actor's final completion and end the episode."""
        result = self._grade(completion)
        fmt = float(result.boxed)
        correct = float(self._counts(result))
        w = self.format_weight
        components = {"correct": correct, "format": fmt, **(extra or {})}
        return Transition(
            reward=correct if w == 0.0 else (1.0 - w) * correct + w * fmt,
            components=components,
            done=True,
            success=bool(correct),
            infos={
                self.actor: {
                    "answer": result.answer,
                    "reference": str(self.task["answer"]),
                    "correct": bool(correct),
                    "grade_reason": result.reason,
                    "malformed": not result.boxed,
                }
            },
        )

    def _counts(self, result: Graded) -> bool:
        """Whether a graded completion counts as correct (``require_boxed`` applied)."""
        return result.correct and (result.boxed or not self.require_boxed)

    def _grade(self, completion: str) -> Graded:
        from llm_marl.tools.grading import grade, normalize_answer
        from llm_marl.tools.grading.extract import last_boxed

        reference = str(self.task["answer"])
        try:
            if self.grading_timeout is None:
                result = grade(completion, reference)
            else:
                result = grade(completion, reference, timeout=self.grading_timeout)
        except Exception as err:  # a grader bug must not be learned from as a wrong answer
            raise InfrastructureError(f"math grader failed: {type(err).__name__}: {err}") from err
        # A box counts only when it holds an answer: "\\boxed{}" (or spaces, "\\,", "\\text{}")
        # is no answer, and must not earn the format reward nor pass as well-formed.
        box = last_boxed(completion)
        return Graded(
            correct=bool(result.correct),
            answer=result.extracted,
            reason=result.reason,
            boxed=box is not None and bool(normalize_answer(box)),
        )


@dataclass(frozen=True)
class Graded:
    """A graded completion: whether it counts, the extracted answer, and whether it was boxed."""

    correct: bool
    answer: str | None
    reason: str
    boxed: bool


def check_math_task(task: Any, owner: str, index: int | None = None) -> Task:
    """``task`` checked as a math task, as a normalised copy (``answer`` as text).

    A math task is a dict with ``task_id``, ``problem`` (text) and ``answer`` (the reference:
    text or a number). Raises ``TypeError`` / :class:`~llm_marl.errors.DataError` (a
    ``ValueError``) naming what is wrong; ``owner`` and ``index`` say where the task came from.
    Every math env's ``setup_episode`` calls it: tasks given through
    ``reset(options={"task": ...})`` skip the constructor's check.
    """
    which = "the task" if index is None else f"task #{index}"
    if not isinstance(task, Mapping):
        raise TypeError(f"{owner}: {which} must be a dict, got {type(task).__name__}")
    missing = [k for k in ("task_id", "problem", "answer") if k not in task]
    if missing:
        raise DataError(
            f"{owner}: {which} lacks {missing} (keys: {sorted(map(str, task))}); a math task "
            "needs 'task_id', 'problem' and 'answer' (the reference, as text)"
        )
    if not isinstance(task["problem"], str):
        raise DataError(
            f"{owner}: {which} has a {type(task['problem']).__name__} 'problem'; it must be text"
        )
    answer = task["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise DataError(
            f"{owner}: {which} has a {type(answer).__name__} 'answer'; the reference answer must "
            "be text or a number"
        )
    if blank_reference(answer):
        raise DataError(
            f"{owner}: {which} has the reference answer {str(answer)[:80]!r}, which is empty once "
            "normalised (whitespace, punctuation, an empty \\boxed{}): no answer could be graded "
            "against it"
        )
    task = dict(task)
    task["answer"] = str(task["answer"])
    task.setdefault("dataset", "custom")
    return task


def blank_reference(answer: object) -> bool:
    """Whether a reference answer is empty once normalised as the grader reads it (``""``,
    whitespace, ``$$``, ``\\boxed{}``, ``\\text{}``...): the grader cannot compare anything
    with it, so such a task is refused where it is loaded, never played."""
    from llm_marl.tools.grading.normalize import normalize_answer

    return not normalize_answer(str(answer))
