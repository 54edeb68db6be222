"""math_critic-v0 — an actor drafts, a critic critiques, the actor revises (AgentPO, feedback).

Paper
    AgentPO (ICLR 2026) freezes a strong actor and trains a small collaborator with GRPO on a
    binary correctness reward. In the feedback topology the collaborator reads the actor's
    solution and writes a critique (errors, gaps; no rewrite), and the actor revises. By default
    (``drafts="episode"``) the actor writes its draft live in the episode; with the AgentPO
    presets' greedy actor the ``G`` episodes of a group then draft the same text, so the group
    baseline compares critiques of one draft. With a sampling actor, training rollouts that
    name it in ``share_frozen`` (``collect(..., share_frozen=("actor",))``,
    ``TrainerConfig.share_frozen``; the ``agentpo-math-critic`` preset sets it) draft once per
    task and give the group that one live draft. ``drafts="task"`` reads each task's fixed
    ``draft`` instead, as AgentPO's code reads offline drafts (the first of a record's
    ``solutions``): phase 1 is skipped and every episode of the task critiques that draft.
Roles
    ``actor`` (usually frozen) and ``critic`` (the collaborator, usually trained), in three
    sequential phases: actor drafts, critic critiques, actor revises.
    ``MathCriticEnv.collaborator == "critic"``.
Observation
    Phase 1 (``actor``): ``actor_system`` + ``actor_user``, as in ``math_single-v0``. Defaults:
    system "Please reason step by step, and put your final answer within \\boxed{}.", user
    "<problem> Let's think step by step and output the final answer within \\boxed{}."
    Phase 2 (``critic``): ``critic_system`` + ``critic_user`` with the problem and the draft.
    Defaults (AgentPO's): system "Given a question and its current solution, analyze the
    solution and provide concise, specific feedback identifying any errors, logical gaps, or
    missing justifications. Do not rewrite the solution, only highlight issues.", user
    "Question: <problem>\\n\\nCurrent Solution: <draft>".
    Phase 3 (``actor``): a *new* chat, as in AgentPO: ``revise_system`` + ``revise_user`` with
    problem, draft and critique. Defaults: system "You have an opportunity to improve your
    solution. Please review Current Solution and Comment carefully. Correct errors and fill
    justification gaps if any.", user "Problem: <problem>\\n\\nCurrent Solution:
    <draft>\\n\\nComment: <critique> Let's think step by step and output the final answer
    within \\boxed{}."
Action
    Any text. The final answer is the last ``\\boxed{...}`` of the actor's *revision* (see
    :func:`llm_marl.tools.grading.extract_answer`).
Reward (joint, both agents, after phase 3; earlier phases give 0)
    ``correct`` in {0, 1} for the revised answer. Optional shaping ``format_weight = w`` gives
    ``(1 - w) * correct + w * format`` (off by default). Components: ``correct``, ``format``,
    and ``draft_correct`` (the draft's correctness: not part of the reward, it tells whether
    the critique fixed a wrong draft or broke a right one). Final infos of the actor:
    ``answer``, ``reference``, ``correct``, ``malformed``, ``draft_answer``.
    ``require_boxed=True`` scores an answer without ``\\boxed{}`` 0 (default: the grader's
    fallbacks apply); ``grading_timeout`` bounds the symbolic check (see
    :mod:`llm_marl.envs.math.env`).
Datasets
    ``dataset=`` ``math500``, ``aime24``, ``amc23``, ``minerva_math``, ``olympiadbench``,
    ``gsm8k``, ``math_level3to5`` (training), a local file or a Hugging Face id; default: the
    bundled offline sample of 30 problems. ``split=``, ``limit=`` (first N). See
    :mod:`llm_marl.envs.math.datasets`. Or ``tasks=[{"task_id", "problem", "answer"}, ...]``.
Prompts
    ``prompts={...}`` with any of ``actor_system``, ``actor_user`` (``{problem}``),
    ``critic_system``, ``critic_user`` (``{problem}``, ``{draft}``), ``revise_system``,
    ``revise_user`` (``{problem}``, ``{draft}``, ``{critique}``) overrides
    :data:`llm_marl.envs.math.prompts.CRITIC_PROMPTS`. An empty system prompt sends none.

Training: ``llm-marl train --algo agentpo --preset agentpo-math-critic`` (critic trainable, actor frozen).
Evaluation: :func:`llm_marl.eval.math.math_eval` with ``critic_policy=``.

>>> import llm_marl
>>> env = llm_marl.make("math_critic-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/1"})
>>> obs, _, _, _, infos = env.step({"actor": "3x = 4, so $x = \\\\boxed{4/3}$."})
>>> [a for a in env.agents if infos[a]["active"]]
['critic']
>>> obs, _, _, _, infos = env.step({"critic": "3x - 7 = 11 gives 3x = 18, not 4."})
>>> obs["actor"][0]["content"][:35]
'You have an opportunity to improve '
>>> _, rewards, _, _, infos = env.step({"actor": "3x = 18, so $x = \\\\boxed{6}$."})
>>> rewards["critic"], infos["critic"]["reward_components"]["draft_correct"]
(1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.math.env import Graded, MathEnv, check_math_task
from llm_marl.envs.math.prompts import CRITIC_PROMPTS
from llm_marl.errors import DataError

DRAFT_SOURCES = ("episode", "task")
"""Where the critiqued draft comes from (``math_critic-v0``'s ``drafts=``)."""


class MathCriticEnv(MathEnv):
    """Actor draft, critic critique, actor revision (see the module docstring)."""

    metadata = {"name": "math_critic-v0"}
    possible_agents = ["actor", "critic"]
    turn_order = "`actor` drafts, `critic` critiques, `actor` revises (three phases)"
    chance_note = "none to guess: an empty critique leaves the frozen actor's own accuracy"
    collaborator = "critic"
    default_prompts = CRITIC_PROMPTS
    prompt_fields = {
        "actor_user": frozenset({"problem"}),
        "critic_user": frozenset({"problem", "draft"}),
        "revise_user": frozenset({"problem", "draft", "critique"}),
    }
    max_steps = 3

    def __init__(
        self, tasks: Iterable[Task] | None = None, *, drafts: str = "episode", **kwargs: Any
    ) -> None:
        """``drafts``: ``"episode"`` (the actor drafts in each episode) or ``"task"`` (each
        task's own ``draft``, as AgentPO's code does). The other arguments are
        :class:`~llm_marl.envs.math.env.MathEnv`'s."""
        if drafts not in DRAFT_SOURCES:
            raise ValueError(
                f"math_critic-v0: drafts must be one of {list(DRAFT_SOURCES)}, got {drafts!r}"
            )
        self.drafts = drafts
        super().__init__(tasks, **kwargs)

    _draft: str | None = None
    """The actor's draft (phase 1) of the current episode."""
    _draft_grade: Graded | None = None
    """The draft's grade: the final step reports whether the critique changed the outcome."""

    def setup_episode(self, task: Task) -> None:
        check_math_task(task, type(self).__name__)
        self._draft = None
        self._draft_grade = None
        if self.drafts == "task":
            draft = task.get("draft")
            if not isinstance(draft, str) or not draft.strip():
                raise DataError(
                    f"math_critic-v0 (drafts='task'): task {task['task_id']!r} has no 'draft' "
                    "text; give each task a 'draft' (or load records with a 'draft' or "
                    "'solutions' field), or use drafts='episode'"
                )
            # The whole group critiques this one draft: the group baseline compares critiques.
            self._draft = draft.strip()
            self._draft_grade = self._grade(draft)
            self._ask("critic", "critic", problem=task["problem"], draft=self._draft)
            self.set_active(["critic"])
            return
        self._ask("actor", "actor", problem=task["problem"])
        self.set_active(["actor"])

    def transition(self, actions: dict[str, str]) -> Transition:
        problem = self.task["problem"]
        if "critic" in actions:
            self.restart_conversation("actor")
            self._ask(
                "actor",
                "revise",
                problem=problem,
                draft=self._draft or "",
                critique=actions["critic"].strip(),
            )
            self.set_active(["actor"])
            return Transition()
        if self._draft is None:
            self._draft = actions["actor"].strip()
            # Graded now so the final step reports whether the critique changed the outcome.
            self._draft_grade = self._grade(actions["actor"])
            self._ask("critic", "critic", problem=problem, draft=self._draft)
            self.set_active(["critic"])
            return Transition()
        draft = self._draft_grade
        assert draft is not None  # graded when the draft came in
        transition = self._grade_final(
            actions["actor"], extra={"draft_correct": float(self._counts(draft))}
        )
        transition.infos[self.actor]["draft_answer"] = draft.answer
        return transition
