"""An LLM judge of short answers for the web-search envs (``websearch-v0``, ``websearch_single-v0``).

MATPO's official reward asks an LLM (gpt-4o-mini in the release) whether the agent's answer
matches the gold answer; exact match and token F1 miss paraphrases ("J. R. R. Tolkien" vs
"Tolkien") and accept nothing else. :class:`AnswerJudge` turns any frozen
:class:`~llm_marl.policies.base.Policy` — an OpenAI-compatible endpoint, a local model, a
function — into the env's ``judge``::

    judge = AnswerJudge(OpenAIPolicy("gpt-4o-mini", base_url=...))
    env = llm_marl.make("websearch-v0", judge=judge, accuracy="judge")

The rubric (:data:`ANSWER_RUBRIC`) is ours: the release's judge prompt is not reproduced. The
judge reads the question, the gold answers and the prediction (each cut to a bounded length, so
a huge answer costs the judge nothing more) and must reply ``CORRECT`` or ``INCORRECT``; any
other reply scores 0 and is counted in :attr:`AnswerJudge.unparsed` — a judge that cannot grade
never rewards.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llm_marl.eval.judge import FrozenJudge

__all__ = ["ANSWER_RUBRIC", "AnswerJudge"]

ANSWER_RUBRIC = """You check whether a predicted answer to a question is correct.
The prediction is correct if it names the same entity, number, date or fact as one of the gold
answers, allowing different wording, abbreviations, aliases and extra words that do not change
the answer. It is incorrect if it is wrong, contradicts the gold answers, hedges between
several candidates, or gives no answer.
Reply with one word: CORRECT or INCORRECT."""
"""The instructions :class:`AnswerJudge` gives its policy (ours)."""

_VERDICT_RE = re.compile(r"\b(INCORRECT|CORRECT)\b", re.IGNORECASE)
_MAX_QUESTION = 2000
_MAX_ANSWER = 1000


class AnswerJudge(FrozenJudge):
    """A frozen policy deciding whether an answer matches the gold ones (a search env's ``judge``).

    Args:
        policy: any :class:`~llm_marl.policies.base.Policy` (it is never trained).
        rubric: the grading instructions (default :data:`ANSWER_RUBRIC`).
        sampling: the judge's sampling (default greedy, 8 new tokens).

    Called as ``judge(question, prediction, golds) -> 1.0 | 0.0``. Only the first 200
    characters of the reply are read; the first ``CORRECT`` / ``INCORRECT`` in them decides.
    """

    default_rubric = ANSWER_RUBRIC
    max_new_tokens = 8
    reply_chars = 200

    def prompt(self, question: str, prediction: str, golds: Sequence[str]) -> str:
        gold = "\n".join(f"- {g[:_MAX_ANSWER]}" for g in list(golds)[:16])
        return (
            f"{self.rubric}\n\nQuestion:\n{question[:_MAX_QUESTION]}\n\nGold answers:\n{gold}\n\n"
            f"Predicted answer:\n{prediction[:_MAX_ANSWER]}\n"
        )

    def __call__(self, question: str, prediction: str, golds: Sequence[str]) -> float:
        if not prediction.strip():
            return 0.0  # nothing to grade: never ask (nor pay) the judge
        match = _VERDICT_RE.search(self.ask(self.prompt(question, prediction, golds)))
        if match is None:
            self.unparsed += 1
            return 0.0
        return 1.0 if match.group(1).upper() == "CORRECT" else 0.0
