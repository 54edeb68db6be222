"""What every LLM judge of the library shares: a frozen policy, a rubric, one greedy reply.

The envs take a judge as a plain callable (they import no policy); the judges that turn a
:class:`~llm_marl.policies.base.Policy` into such a callable live here, in the evaluation layer:
:class:`~llm_marl.eval.writing.PolicyJudge` (co-writing, a 1-10 score) and
:class:`~llm_marl.eval.search.AnswerJudge` (web search, correct or not). Each reads only the
start of the reply, and a reply it cannot read scores 0 (counted in ``unparsed``): a judge that
cannot grade never rewards. :class:`~llm_marl.eval.coding.CodeExpert` (the coding envs' expert,
which suggests edits instead of grading) is one too: the env writes its whole request, so it
passes the conversation on through :meth:`FrozenJudge.reply`.
"""

from __future__ import annotations

from typing import ClassVar

from llm_marl.policies.base import Policy, SamplingParams

__all__ = ["FrozenJudge"]


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
        if getattr(policy, "trainable", False):
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
