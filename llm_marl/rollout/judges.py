"""Frozen policies as the envs' callables: the LLM judges and the coding expert.

The envs take a judge or an expert as a plain callable (they import no policy); these classes
turn a :class:`~llm_marl.policies.base.Policy` into one, the same idea as
:class:`~llm_marl.rollout.frozen.FrozenAgents` (a policy folded into an env's dynamics):

* :class:`PolicyJudge` — the writing envs' ``judge`` (a 1-10 score, :data:`JUDGE_RUBRIC`);
* :class:`AnswerJudge` — the web-search envs' ``judge`` (correct or not, :data:`ANSWER_RUBRIC`);
* :class:`CodeExpert` — the coding envs' ``expert``, which suggests edits instead of grading
  (the env writes its whole request, so it passes the conversation on through
  :meth:`FrozenJudge.reply`).

Each reads only the start of the reply, strictly: the reply must be exactly a verdict
(``CORRECT`` / ``INCORRECT``) or a score (``Score: N``), markup and a final full stop aside.
Anything else ("Not correct.", "Partially correct", two verdicts) cannot be read: it is counted
in ``unparsed`` and raises :class:`~llm_marl.errors.InfrastructureError`, so the episode is
truncated unscored. Every untrusted field of a judge's prompt (the question, the gold answers,
the prediction, the source, the parts) is quoted in a fence ``<name>`` ... ``</name>`` with
``&``, ``<`` and ``>`` escaped, so it cannot close its fence, open another or add headers
outside it. :func:`judge_for` picks the judge of an env id (a run config's ``policies.judge``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from llm_marl.envs.base import Task
from llm_marl.errors import ConfigError, InfrastructureError
from llm_marl.policies.base import Policy, SamplingParams
from llm_marl.tools.text import FENCE_NOTE, fence, strip_thinking

__all__ = [
    "ANSWER_RUBRIC",
    "EXPERT_SAMPLING",
    "JUDGE_RUBRIC",
    "AnswerJudge",
    "CodeExpert",
    "FrozenJudge",
    "PolicyJudge",
    "judge_for",
]


class FrozenJudge:
    """A frozen policy asked one question per call, with a rubric.

    Args:
        policy: any :class:`~llm_marl.policies.base.Policy` (it is never trained).
        rubric: the grading instructions (default: the subclass's :attr:`default_rubric`).
        sampling: the judge's sampling (default greedy, ``max_new_tokens`` of the subclass).
    """

    default_rubric: ClassVar[str | None] = None
    """The rubric of a judge built without one (each judge sets its own; the base has none)."""

    max_new_tokens = 16
    """Default reply budget (a verdict or a score is a few tokens)."""
    reply_chars = 400
    """Only this many characters of a reply are read."""

    def __init__(
        self, policy: Policy, *, rubric: str | None = None, sampling: SamplingParams | None = None
    ) -> None:
        if rubric is None:
            rubric = self.default_rubric
        if rubric is None:
            raise TypeError(f"{type(self).__name__} has no default rubric: pass rubric=")
        if not hasattr(policy, "generate"):
            raise TypeError(f"policy must be a Policy (with generate), got {type(policy).__name__}")
        if policy.trainable:
            raise ValueError("the judge must be a frozen policy (trainable=False)")
        self.policy = policy
        self.rubric = rubric
        self.sampling = sampling or SamplingParams(
            max_new_tokens=self.max_new_tokens, temperature=0.0
        )
        self.unparsed = 0
        """How many replies could not be read (each scored 0)."""

    def ask(self, prompt: str) -> str:
        """The start of the policy's reply to ``prompt``, as one user message."""
        return self.reply([{"role": "user", "content": prompt}])

    def reply(self, conversation: list[dict[str, str]]) -> str:
        """The start (:attr:`reply_chars`) of the policy's reply to a whole conversation."""
        completion = self.policy.generate([conversation], self.sampling)[0]
        return completion.text[: self.reply_chars]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.policy.name!r})"

    def unreadable(self, reply: str, expected: str) -> InfrastructureError:
        """Count an unreadable reply and the error that truncates its episode unscored."""
        self.unparsed += 1
        return InfrastructureError(
            f"the judge's reply could not be read as {expected}: {reply[:80]!r}"
        )


_CODE_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def _bare(reply: str) -> str:
    """What a verdict is read from: the reply after its reasoning (``<think>...</think>``: a
    verdict only there is no verdict), one code fence around the whole reply unwrapped, bold
    and code markup (``*``, backticks) removed anywhere ("**Verdict:** CORRECT"), surrounding
    space, underscores and quotes stripped, and one final full stop dropped. The words
    themselves are never rewritten: "Not correct", two verdicts or a hedge stay unreadable.
    """
    text = strip_thinking(reply).strip()
    fenced = _CODE_FENCE.fullmatch(text)
    if fenced is not None:
        text = fenced.group(1)
    text = text.replace("*", "").replace("`", "").strip().strip("_\"'").strip()
    return text[:-1].rstrip() if text.endswith(".") else text


# ------------------------------------------------------------------------------------ writing

JUDGE_RUBRIC = """You grade a two-part answer written for the source text below.
Score it from 1 to 10:
- 9-10: both parts are faithful to the source, cover its main points, add no invented facts,
  and the second part adds detail instead of repeating the first.
- 6-8: faithful with minor omissions or some repetition.
- 3-5: partly off-topic, vague, or with a factual error.
- 1-2: unrelated to the source, copied from it wholesale, empty, or degenerate (repetition,
  lists of filler words).
Reply with one line: Score: <number>."""
"""The rubric :class:`PolicyJudge` shows the judge (the score maps to [0, 1] as (s - 1) / 9)."""

_SCORE_RE = re.compile(r"score\s*[:=]\s*(10|[1-9])(?:\s*/\s*10)?", re.IGNORECASE)


class PolicyJudge(FrozenJudge):
    """A frozen policy grading answers with :data:`JUDGE_RUBRIC`: a writing env's ``judge``.

    Args:
        policy: any :class:`~llm_marl.policies.base.Policy` (it is never trained).
        rubric: the grading instructions (default :data:`JUDGE_RUBRIC`).
        sampling: the judge's sampling (default greedy, 16 new tokens).

    The reply must be exactly ``Score: N`` (N from 1 to 10, ``/10`` allowed); anything else is
    counted in :attr:`unparsed` and raises :class:`~llm_marl.errors.InfrastructureError` (the
    episode is truncated unscored). Only the first 400 characters of the reply are read.
    """

    default_rubric = JUDGE_RUBRIC

    def prompt(self, task: Task, part1: str, part2: str) -> str:
        source = str(task.get("post") or task.get("abstract") or task.get("prompt") or "")
        return (
            f"{self.rubric}\n{FENCE_NOTE}\n\nSource:\n{fence('source', source[:20000])}\n\n"
            f"Part 1:\n{fence('part_1', part1[:4000])}\n\n"
            f"Part 2:\n{fence('part_2', part2[:8000])}\n"
        )

    def __call__(self, task: Task, part1: str, part2: str) -> float:
        reply = self.ask(self.prompt(task, part1, part2))
        match = _SCORE_RE.fullmatch(_bare(reply))
        if match is None:
            raise self.unreadable(reply, "'Score: N'")
        return (int(match.group(1)) - 1) / 9


# ------------------------------------------------------------------------------------- search

ANSWER_RUBRIC = """You check whether a predicted answer to a question is correct.
The prediction is correct if it names the same entity, number, date or fact as one of the gold
answers, allowing different wording, abbreviations, aliases and extra words that do not change
the answer. It is incorrect if it is wrong, contradicts the gold answers, hedges between
several candidates, or gives no answer.
Reply with one word: CORRECT or INCORRECT."""
"""The instructions :class:`AnswerJudge` gives its policy (ours; MATPO's release asks
gpt-4o-mini with a prompt of its own, not reproduced)."""

_VERDICT_RE = re.compile(r"(?:verdict\s*:\s*)?(INCORRECT|CORRECT)", re.IGNORECASE)
_MAX_QUESTION = 2000
_MAX_ANSWER = 1000


class AnswerJudge(FrozenJudge):
    """A frozen policy deciding whether an answer matches the gold ones (a search env's ``judge``).

    Exact match and token F1 miss paraphrases ("J. R. R. Tolkien" vs "Tolkien"); MATPO's
    official reward asks an LLM instead, and so does this judge, over any frozen policy::

        judge = AnswerJudge(OpenAIPolicy("gpt-4o-mini", base_url=...))
        env = llm_marl.make("websearch-v0", judge=judge, accuracy="judge")

    Args:
        policy: any :class:`~llm_marl.policies.base.Policy` (it is never trained).
        rubric: the grading instructions (default :data:`ANSWER_RUBRIC`).
        sampling: the judge's sampling (default greedy, 8 new tokens).

    Called as ``judge(question, prediction, golds) -> 1.0 | 0.0``. The question, the gold
    answers and the prediction are each cut to a bounded length, so a huge answer costs the
    judge nothing more. Only the first 200 characters of the reply are read, and they must be
    exactly ``CORRECT`` or ``INCORRECT`` (any case, after an optional ``Verdict:``, markup
    and a final full stop aside); any
    other reply ("Not correct.", "Partially correct") is counted in :attr:`unparsed` and raises
    :class:`~llm_marl.errors.InfrastructureError`: the episode is truncated unscored.
    """

    default_rubric = ANSWER_RUBRIC
    max_new_tokens = 8
    reply_chars = 200

    def prompt(self, question: str, prediction: str, golds: Sequence[str]) -> str:
        gold = "\n".join(f"- {g[:_MAX_ANSWER]}" for g in list(golds)[:16])
        return (
            f"{self.rubric}\n{FENCE_NOTE}\n\n"
            f"Question:\n{fence('question', question[:_MAX_QUESTION])}\n\n"
            f"Gold answers:\n{fence('gold_answers', gold)}\n\n"
            f"Predicted answer:\n{fence('prediction', prediction[:_MAX_ANSWER])}\n"
        )

    def __call__(self, question: str, prediction: str, golds: Sequence[str]) -> float:
        if not prediction.strip():
            return 0.0  # nothing to grade: never ask (nor pay) the judge
        reply = self.ask(self.prompt(question, prediction, golds))
        match = _VERDICT_RE.fullmatch(_bare(reply))
        if match is None:
            raise self.unreadable(reply, "CORRECT or INCORRECT")
        return 1.0 if match.group(1).upper() == "CORRECT" else 0.0


# ------------------------------------------------------------------------------------- coding

EXPERT_SAMPLING = SamplingParams(max_new_tokens=2048, temperature=0.3)
"""Default sampling of :class:`CodeExpert`: the reference code's expert call
(``external/expert_edits.py`` in LLM_Collab_Code_Generation: ``max_tokens=2048``,
``temperature=0.3``)."""


class CodeExpert(FrozenJudge):
    """Any frozen policy as the coding envs' ``expert`` (``feedback="expert"``).

    Args:
        policy: any :class:`~llm_marl.policies.base.Policy` (it is never trained): a local
            model, a vLLM engine, an OpenAI-compatible server, a scripted function.
        sampling: the expert's sampling (default :data:`EXPERT_SAMPLING`, the reference
            code's). Pass a greedy one for an expert that answers the same way in every run.

    Called as ``expert(conversation) -> reply text``: the env writes the whole request (the
    problem, the program, the failing feedback tests; never a scoring test, see
    :mod:`llm_marl.envs.coding.expert`) and reads the reply; this class only asks the policy
    and returns the start of its reply (16,000 characters, what the env reads). A policy error
    propagates, and the env turns it into an infrastructure failure (the episode is truncated,
    never scored). One line from a policy spec::

        expert = CodeExpert(build_policy("openai:deepseek-coder@https://api.deepseek.com,"
                                         "api_key_env=DEEPSEEK_API_KEY"))
        env = llm_marl.make("coop_humaneval-v0", num_rounds=2, feedback="expert", expert=expert)

    In training: ``--trainer.env_kwargs.feedback expert --policies.expert SPEC``; in
    ``llm-marl eval``: ``--env-arg feedback=expert --expert SPEC``.
    """

    max_new_tokens = EXPERT_SAMPLING.max_new_tokens
    reply_chars = 16_000

    def __init__(self, policy: Policy, *, sampling: SamplingParams | None = None) -> None:
        # No rubric of its own: the env's request carries the instructions.
        super().__init__(policy, rubric="", sampling=sampling or EXPERT_SAMPLING)

    def __call__(self, conversation: list[dict[str, str]]) -> str:
        return self.reply(list(conversation))


# -------------------------------------------------------------------------- judge of an env id

_JUDGES: dict[str, type[PolicyJudge] | type[AnswerJudge]] = {
    "llm_marl.envs.writing": PolicyJudge,
    "llm_marl.envs.search": AnswerJudge,
}
"""The judge of each env family that takes ``judge=``, by the package of its env class."""


def judge_for(env_id: str, policy: Policy) -> PolicyJudge | AnswerJudge:
    """The judge that ``env_id``'s env takes as ``judge=``, over the frozen ``policy``.

    :class:`PolicyJudge` for the writing envs, :class:`AnswerJudge` for the web-search envs;
    :class:`~llm_marl.errors.ConfigError` for an env that takes no judge.
    """
    from llm_marl.envs.registration import spec

    entry: Any = spec(env_id).entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    for package, judge in _JUDGES.items():
        if module == package or module.startswith(package + "."):
            return judge(policy)
    raise ConfigError(
        f"{env_id} takes no judge: policies.judge is for the writing envs (tldr-v0, "
        "arxiv_intro-v0, ...) and the web-search envs (websearch-v0, ...)"
    )
