"""The code-collaboration reward of MAGRPO (Liu et al. 2025), as a configurable weighted sum.

Source of the weights
    The code setting of the MAGRPO paper ("LLM Collaboration With Multi-Agent Reinforcement
    Learning") and its reference implementation, CoMLRL's ``LLM_Collab_Code_Generation``
    (``rewards/code_rewards.py``, the ``execution_reward_aux`` level scheme). We reproduce the
    semantics with our own code; the defaults of :class:`CodeRewardConfig` are those weights.

The levels (helper + main; every term is a component of the reward)
    1. Structure: ``aux_defined`` (+0.4) if the helper defines ``aux`` with a ``return <value>``;
       ``main_defined`` (+0.6) if the main agent defines the entry point with a
       ``return <value>``. A definition must parse to count. Without the entry point, scoring
       stops here.
    2. Syntax: ``syntax`` (+0.5) if the assembled program parses. Otherwise scoring stops here.
    3. Tests: ``tests`` (+1.0 x the fraction of scoring test units that pass).
    4. Cooperation, only when at least one test passes and the helper defined ``aux``:
       ``aux_used`` (+0.5) if the main function calls ``aux``; then ``not_wrapper`` (+1.0) if
       main is not a thin wrapper of ``aux``, and ``aux_result_ignored`` (-0.5) if main calls
       ``aux`` as a bare statement, discarding its value.

    Maximum 4.0 (0.4 + 0.6 + 0.5 + 1.0 + 0.5 + 1.0); minimum 0.0 (an empty, prose-only or
    otherwise function-less submission: the penalty can only apply after the +0.5 it depends on).
    The components reported are the *weighted* contributions, so they sum to the reward.

Single-agent variant (the paper's baseline)
    One ``coder`` writes everything: ``main_defined`` + ``syntax`` + ``tests``, maximum 2.1.
    There is no ``aux`` and no cooperation term.

``normalize=True`` divides the reward (and every component) by the maximum, giving [0, 1].

Where we differ from the reference code, and why
    * "Defined" needs the definition to parse (the reference matched ``def name(`` and
      ``return`` as text), so output that cannot run never earns a structure reward.
    * The cooperation checks read the AST (the reference used regular expressions, so an
      ``aux(`` inside a comment or string counted as a call); by default the env decides
      ``aux_used`` and ``not_wrapper`` from behaviour instead (main's results with ``aux``
      replaced by a stub, see ``cooperation=`` of :class:`~llm_marl.envs.coding.env.CodeCollabEnv`),
      and ``cooperation="static"`` keeps the paper's reading of the source.
    * Test units are every statement of ``check`` holding an ``assert`` that can fail (loops of
      random checks included; ``assert True`` and other asserts that never read the program are
      not units); the reference kept only one-line asserts mentioning ``candidate``.
    * The main agent's entry point is called in a process where the helper's code never ran
      (the reference ``exec``-ed the joined program once, so helper code could replace it).
    * Tests run in a sandbox process with a time limit per run (program + all tests), not with
      ``exec`` and ``SIGALRM`` in the trainer's process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from llm_marl.checks import is_number
from llm_marl.envs.settings import coerce_settings


@dataclass(frozen=True)
class CodeRewardConfig:
    """Weights of the code reward. Defaults: the MAGRPO code setting (see the module docstring)."""

    aux_defined: float = 0.4
    """Helper defines ``aux`` with a ``return <value>``."""
    main_defined: float = 0.6
    """The entry point is defined with a ``return <value>`` (by ``main``, or by ``coder``)."""
    syntax: float = 0.5
    """The assembled program (task preamble + helper code + main code) parses."""
    tests: float = 1.0
    """Multiplies the fraction of scoring test units passed."""
    aux_used: float = 0.5
    """Main calls ``aux`` (needs >= 1 test passed and ``aux`` defined)."""
    not_wrapper: float = 1.0
    """Main calls ``aux`` and is not a thin wrapper of it."""
    aux_result_ignored: float = -0.5
    """Main calls ``aux`` as a bare statement (its value thrown away). Usually negative."""
    normalize: bool = False
    """Divide by the maximum reward, so that the reward lies in [0, 1]."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "normalize":
                if not isinstance(value, bool):
                    raise TypeError(f"CodeRewardConfig.normalize must be a bool, got {value!r}")
            elif not is_number(value):
                raise TypeError(f"CodeRewardConfig.{f.name} must be a number, got {value!r}")
        if self.max_reward(single_agent=True) <= 0 or self.max_reward(single_agent=False) <= 0:
            raise ValueError("CodeRewardConfig: the maximum reward must be positive")

    @classmethod
    def coerce(cls, value: CodeRewardConfig | dict[str, Any] | None) -> CodeRewardConfig:
        """Accept a config, a dict of overrides (unknown keys are an error), or ``None``."""
        return coerce_settings(cls, value, "reward")

    def bounds(self, single_agent: bool) -> tuple[float, float]:
        """The lowest and the highest reward of one submission under these weights.

        Any weight may be negative; the cooperation terms are paid only together with
        ``main_defined``, ``syntax`` and ``aux_used`` (see :func:`code_reward`).
        """

        def negative(*weights: float) -> float:
            return sum(min(w, 0.0) for w in weights)

        low = negative(self.main_defined, self.syntax, self.tests)
        if not single_agent:
            cooperating = self.main_defined + self.syntax + self.aux_used
            cooperating += negative(
                self.tests, self.aux_defined, self.not_wrapper, self.aux_result_ignored
            )
            low = min(low + negative(self.aux_defined), cooperating)
        low, top = min(low, 0.0), self.max_reward(single_agent)
        return (low / top, 1.0) if self.normalize else (low, top)

    def max_reward(self, single_agent: bool) -> float:
        """The largest reward a submission can get under these weights."""
        base = max(self.main_defined, 0) + max(self.syntax, 0) + max(self.tests, 0)
        if single_agent:
            return base
        coop = max(self.aux_used, 0) + max(self.not_wrapper, 0) + max(self.aux_result_ignored, 0)
        return base + max(self.aux_defined, 0) + coop

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CodeFacts:
    """What the env found out about one joint submission; the reward is a function of it."""

    main_defined: bool
    syntax_ok: bool
    tests_passed: int
    tests_total: int
    aux_defined: bool = False
    aux_present: bool = False
    """``aux`` exists (with or without a return): the cooperation terms need it."""
    aux_called: bool = False
    thin_wrapper: bool = False
    aux_result_ignored: bool = False

    @property
    def pass_rate(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0


def code_reward(
    facts: CodeFacts, config: CodeRewardConfig, *, single_agent: bool = False
) -> tuple[float, dict[str, float]]:
    """``(reward, components)`` for a submission; the components sum to the reward."""
    names = ["main_defined", "syntax", "tests"]
    if not single_agent:
        names = ["aux_defined", *names, "aux_used", "not_wrapper", "aux_result_ignored"]
    parts = dict.fromkeys(names, 0.0)
    if not single_agent and facts.aux_defined:
        parts["aux_defined"] = config.aux_defined
    if facts.main_defined:
        parts["main_defined"] = config.main_defined
        if facts.syntax_ok:
            parts["syntax"] = config.syntax
            parts["tests"] = config.tests * facts.pass_rate
            cooperating = not single_agent and facts.tests_passed > 0 and facts.aux_present
            if cooperating and facts.aux_called:
                parts["aux_used"] = config.aux_used
                if not facts.thin_wrapper:
                    parts["not_wrapper"] = config.not_wrapper
                if facts.aux_result_ignored:
                    parts["aux_result_ignored"] = config.aux_result_ignored
    if config.normalize:
        top = config.max_reward(single_agent)
        parts = {k: v / top for k, v in parts.items()}
    return float(sum(parts.values())), {k: float(v) for k, v in parts.items()}
