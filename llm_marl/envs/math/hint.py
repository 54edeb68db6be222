"""math_hint-v0 — a hint agent helps an actor solve a math problem (AgentPO, feedforward).

Paper
    AgentPO (ICLR 2026) freezes a strong actor and trains a small collaborator with GRPO on a
    binary correctness reward. In the feedforward topology the collaborator writes a hint that
    the actor reads before it solves the problem.
Roles
    ``hint`` (the collaborator, usually trained) then ``actor`` (usually frozen): two sequential
    phases of one episode. ``MathHintEnv.collaborator == "hint"``.
Observation
    Phase 1 (``hint`` acts): ``hint_system`` + ``hint_user`` (the bare problem). Defaults
    (AgentPO's released ones): system "Rewrite the question below to make it easier to
    understand.", user "<problem>". ``hint_prompt="hint"`` uses AgentPO's backup system prompt
    "Provide hint to solve the below problem." instead (see
    :data:`llm_marl.envs.math.prompts.HINT_SYSTEMS`).
    Phase 2 (``actor`` acts): ``actor_system`` + ``actor_user`` with the problem and the hint.
    Defaults: system "Please reason step by step, and put your final answer within \\boxed{}.",
    user "Problem: <problem> (Hint: <hint>) Let's think step by step and output the final
    answer within \\boxed{}." The actor never sees the reference; the hint agent never sees
    the actor's solution.
Action
    ``hint``: any text (the hint, passed verbatim). ``actor``: the solution; its final answer is
    the last ``\\boxed{...}`` (see :func:`llm_marl.tools.grading.extract_answer`).
Reward (joint, both agents, after phase 2; phase 1 gives 0)
    ``correct`` in {0, 1}: the actor's answer is equivalent to the reference. Optional shaping
    ``format_weight = w`` gives ``(1 - w) * correct + w * format`` (off by default). Components:
    ``correct``, ``format``. Final infos of the actor: ``answer``, ``reference``, ``correct``,
    ``malformed`` (no ``\\boxed{}``).
    ``require_boxed=True`` scores an answer without ``\\boxed{}`` 0 (default: the grader's
    fallbacks apply); ``grading_timeout`` bounds the symbolic check (see
    :mod:`llm_marl.envs.math.env`).
Datasets
    ``dataset=`` ``math500``, ``aime24``, ``amc23``, ``minerva_math``, ``olympiadbench``,
    ``gsm8k``, ``math_level3to5`` (training), a local file or a Hugging Face id; default: the
    bundled offline sample of 30 problems. ``split=``, ``limit=`` (first N). See
    :mod:`llm_marl.envs.math.datasets`. Or ``tasks=[{"task_id", "problem", "answer"}, ...]``.
Prompts
    ``prompts={"hint_system", "hint_user", "actor_system", "actor_user"}`` (any subset)
    overrides :data:`llm_marl.envs.math.prompts.HINT_PROMPTS`. ``hint_user`` may use
    ``{problem}``; ``actor_user`` ``{problem}`` and ``{hint}``. An empty system prompt sends none.

Training: ``llm-marl train --algo agentpo --preset agentpo-math-hint`` (hint trainable, actor frozen: a local
model, ``OpenAIPolicy`` or vLLM). Evaluation: :func:`llm_marl.eval.math.math_eval`.

>>> import llm_marl
>>> env = llm_marl.make("math_hint-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/1"})
>>> [a for a in env.agents if infos[a]["active"]]
['hint']
>>> obs, _, _, _, infos = env.step({"hint": "Add 7 to both sides first."})
>>> obs["actor"][-1]["content"][:59]
'Problem: Solve for $x$: $3x - 7 = 11$. (Hint: Add 7 to both'
>>> _, rewards, *_ = env.step({"actor": "3x = 18, so $x = \\\\boxed{6}$."})
>>> rewards["hint"], rewards["actor"]
(1.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.math.env import MathEnv, check_math_task
from llm_marl.envs.math.prompts import HINT_PROMPTS, HINT_SYSTEMS


class MathHintEnv(MathEnv):
    """Hint agent, then actor (see the module docstring)."""

    metadata = {"name": "math_hint-v0"}
    possible_agents = ["hint", "actor"]
    turn_order = "`hint`, then `actor` (two phases, one step each)"
    chance_note = "none to guess: an empty hint leaves the frozen actor's own accuracy"
    collaborator = "hint"
    default_prompts = HINT_PROMPTS
    prompt_fields = {
        "hint_user": frozenset({"problem"}),
        "actor_user": frozenset({"problem", "hint"}),
    }
    max_steps = 2

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        hint_prompt: str = "rewrite",
        prompts: Mapping[str, str | None] | None = None,
        **kwargs: Any,
    ) -> None:
        """``hint_prompt``: ``"rewrite"`` (AgentPO's released prompt, the default) or
        ``"hint"`` (its backup); an explicit ``prompts["hint_system"]`` wins over it. The other
        arguments are :class:`~llm_marl.envs.math.env.MathEnv`'s."""
        if hint_prompt not in HINT_SYSTEMS:
            raise ValueError(
                f"math_hint-v0: hint_prompt must be one of {sorted(HINT_SYSTEMS)}, got "
                f"{hint_prompt!r}"
            )
        self.hint_prompt = hint_prompt
        prompts = {"hint_system": HINT_SYSTEMS[hint_prompt], **(prompts or {})}
        super().__init__(tasks, prompts=prompts, **kwargs)

    def setup_episode(self, task: Task) -> None:
        check_math_task(task, type(self).__name__)
        self._ask("hint", "hint", problem=task["problem"])
        self.set_active(["hint"])

    def transition(self, actions: dict[str, str]) -> Transition:
        if "hint" in actions:
            self._ask("actor", "actor", problem=self.task["problem"], hint=actions["hint"].strip())
            self.set_active(["actor"])
            return Transition()
        return self._grade_final(actions["actor"])
