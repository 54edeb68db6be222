"""math_single-v0 — the actor solves a math problem alone (the baseline of every AgentPO result).

Paper
    AgentPO (ICLR 2026): a frozen strong *actor* and a small trainable *collaborator*. This env is
    the actor without a collaborator, the "base" row every comparison needs.
Roles
    ``actor`` only (one step).
Observation
    ``actor_system`` as a system message, then ``actor_user`` with ``{problem}`` filled in.
    Defaults (AgentPO's): system "Please reason step by step, and put your final answer within
    \\boxed{}.", user "<problem> Let's think step by step and output the final answer within
    \\boxed{}."
Action
    The solution text; its final answer is the last ``\\boxed{...}`` (fallbacks: answer markers,
    then the last number; see :func:`llm_marl.tools.grading.extract_answer`).
Reward (joint)
    ``correct`` in {0, 1}: the extracted answer is equivalent to the reference. Optional
    shaping ``format_weight = w`` gives ``(1 - w) * correct + w * format`` (off by default).
    Components: ``correct``, ``format``. Final infos of the actor: ``answer``, ``reference``,
    ``correct``, ``malformed`` (no ``\\boxed{}``).
    ``require_boxed=True`` scores an answer without ``\\boxed{}`` 0 (default: the grader's
    fallbacks apply); ``grading_timeout`` bounds the symbolic check (see
    :mod:`llm_marl.envs.math.env`).
Datasets
    ``dataset=`` a benchmark name (``math500``, ``aime24``, ``amc23``, ``minerva_math``,
    ``olympiadbench``, ``gsm8k``, ``math_level3to5``), a local file or a Hugging Face id;
    default: the bundled offline sample of 30 problems. ``split=``, ``limit=`` (first N). See
    :mod:`llm_marl.envs.math.datasets`. Or ``tasks=[{"task_id", "problem", "answer"}, ...]``.
Prompts
    ``prompts={"actor_system": ..., "actor_user": ...}`` overrides the defaults
    (:data:`llm_marl.envs.math.prompts.SINGLE_PROMPTS`); an empty system prompt sends none.

>>> import llm_marl
>>> env = llm_marl.make("math_single-v0")
>>> obs, infos = env.reset(seed=0, options={"task_id": "sample/1"})
>>> obs["actor"][-1]["content"]
"Solve for $x$: $3x - 7 = 11$. Let's think step by step and output the final answer within \\\\boxed{}."
>>> _, rewards, *_ = env.step({"actor": "3x = 18, so $x = \\\\boxed{6}$."})
>>> rewards["actor"]
1.0
"""

from __future__ import annotations

from llm_marl.envs.base import Task, Transition
from llm_marl.envs.math.env import MathEnv, check_math_task
from llm_marl.envs.math.prompts import SINGLE_PROMPTS


class MathSingleEnv(MathEnv):
    """The actor alone (see the module docstring)."""

    metadata = {"name": "math_single-v0"}
    possible_agents = ["actor"]
    turn_order = "`actor` alone, one step"
    chance_note = "about 0: a math answer is not guessed"
    collaborator = None
    default_prompts = SINGLE_PROMPTS
    prompt_fields = {"actor_user": frozenset({"problem"})}
    max_steps = 1

    def setup_episode(self, task: Task) -> None:
        check_math_task(task, type(self).__name__)
        self._ask("actor", "actor", problem=task["problem"])
        self.set_active(["actor"])

    def transition(self, actions: dict[str, str]) -> Transition:
        return self._grade_final(actions["actor"])
