"""`LLMParallelEnv`: the one base class of every llm_marl environment.

An episode is a cooperative Dec-POMDP played by LLM roles. The contract (see
``docs/architecture.md``):

* ``possible_agents`` are role names; every agent stays in ``env.agents`` until the episode ends.
* The observation of an agent is its own chat conversation (a list of OpenAI-style messages).
  An agent sees only what its role is shown.
* An action is the completion string. Any string is legal: malformed output is scored through
  the reward and flagged in ``infos[agent]``; it never raises. A thinking model's reasoning is
  removed from it first (:func:`~llm_marl.tools.text.strip_thinking`: up to the last
  ``</think>``, and from an unclosed ``<think>`` on), in :meth:`~LLMParallelEnv.step` and
  nowhere else: no reward, grader, judge or other agent ever reads ``<think>`` text, and the
  agent's own conversation keeps only its answer.
* Sequential topologies are *phases*: ``infos[agent]["active"]`` says who acts now; actions of
  inactive agents are ignored (and flagged ``infos[agent]["ignored_action"]``).
* The joint (team) reward goes to every agent; its parts go to ``infos[agent]["reward_components"]``.
* An infrastructure failure (sandbox down, search API error) is raised inside the env as
  :class:`InfrastructureError`; the episode is then truncated with ``infos[agent]["error"]`` set,
  and never scored as a bad answer.
* ``infos[agent]`` carries ``task_id``, ``step_count`` and, where the agent may call tools,
  ``tools``; on the final step of an env with a binary notion of success, ``success``.
* Randomness comes only from ``reset(seed=...)`` through ``self.np_random``.

Vocabulary
----------
These words mean one thing each, everywhere in llm_marl (other pages link here).

episode
    From :meth:`~LLMParallelEnv.reset` to the step after which ``env.agents`` is empty.
step
    One call of ``env.step(actions)``: every *active* agent acts once, all at the same time.
    ``env.step_count`` is the number of steps taken in the current episode (0 after ``reset``;
    also ``infos[agent]["step_count"]``).
max_steps
    The cap on steps per episode: the step that reaches it truncates the episode
    (``truncations[agent] = True``) unless that step terminated it. An env class states its own
    cap as the class attribute ``max_steps`` (a safety net at or above the natural length of its
    episodes; default 64), an instance may be given ``max_steps=`` at construction, and a user
    imposes a cap from outside with ``make(env_id, max_steps=N)`` or ``register(...,
    max_steps=N)``, which wrap the env in :class:`~llm_marl.envs.wrappers.StepLimit`.
phase
    Which agents act in a step (``infos[agent]["active"]``). Sequential topologies
    (hint -> actor, draft -> critique -> revision) are successive phases, one step each.
turn
    One agent's action in one step, as a rollout records it (:class:`llm_marl.rollout.Turn`):
    a step has one turn per active agent, and ``Turn.step`` is the ``step_count`` before it.
round
    A unit of an env's own protocol, named by the env that has one: the coding envs play
    ``num_rounds`` write -> feedback rounds (one step each). Envs without such a protocol have no
    rounds.
terminated / truncated
    Terminated: the task is over (``Transition.done``). Truncated: the episode was cut short
    (``max_steps`` reached, :meth:`~LLMParallelEnv.end_episode` called by a wrapper, or an
    infrastructure failure); a truncated episode carries no success flag.

Writing an environment
----------------------
Subclass, set ``possible_agents`` and ``metadata["name"]`` (the registered id, e.g.
``"my_task-v0"``), and implement the two public hooks:

:meth:`~LLMParallelEnv.setup_episode` ``(task)``
    Start an episode: post the first messages with :meth:`~LLMParallelEnv.say` and choose who acts
    first with :meth:`~LLMParallelEnv.set_active`.
:meth:`~LLMParallelEnv.transition` ``(actions) -> Transition``
    Called with the actions of the active agents (each already appended to its author's
    conversation as an assistant message). Post what the agents see next, pick the next active
    agents, and return the joint reward of this step and whether the episode is over.

A concrete subclass that lacks a hook fails when the class is created (``TypeError``), not when an
episode first needs it. A base class meant to be subclassed further says so:
``class MyFamilyEnv(LLMParallelEnv, abstract=True)``; it may leave the hooks to its subclasses
and cannot be instantiated.

Tasks are plain dicts with a unique ``"task_id"`` (a ``str`` or an ``int``); pass them as
``tasks=`` or override :meth:`~LLMParallelEnv.default_tasks`. ``reset(options=...)`` picks one
with exactly one of ``{"task": task_dict}``, ``{"task_id": id}`` or ``{"task_index": i}``; without
options a task is drawn with the seeded RNG.
"""

from __future__ import annotations

import copy
import difflib
import functools
import math
import warnings
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

import numpy as np
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from llm_marl.checks import is_int
from llm_marl.errors import DataError, InfrastructureError
from llm_marl.spaces import Chat, Text
from llm_marl.tools.text import scrub_surrogates, strip_thinking

if TYPE_CHECKING:
    from llm_marl.envs.registration import EnvSpec

Task: TypeAlias = dict[str, Any]
"""A task: a plain dict with a unique ``"task_id"``; the other keys belong to the env."""
Message: TypeAlias = dict[str, Any]
"""One OpenAI-style chat message: ``{"role": ..., "content": ...}`` (plus optional keys)."""
ObsDict: TypeAlias = dict[str, list[Message]]
"""Observations by agent: each agent's own conversation."""
ActionDict: TypeAlias = Mapping[str, str]
"""Actions by agent: the completion strings of the active agents."""
RewardDict: TypeAlias = dict[str, float]
"""Rewards by agent (the joint reward, the same for every agent)."""
FlagDict: TypeAlias = dict[str, bool]
"""Terminations or truncations by agent."""
InfoDict: TypeAlias = dict[str, dict[str, Any]]
"""Infos by agent (``active``, ``task_id``, ``step_count``, ``reward_components``, ``error``...)."""
ResetResult: TypeAlias = tuple[ObsDict, InfoDict]
"""What :meth:`LLMParallelEnv.reset` returns: ``(observations, infos)``."""
StepResult: TypeAlias = tuple[ObsDict, RewardDict, FlagDict, FlagDict, InfoDict]
"""What :meth:`LLMParallelEnv.step` returns: ``(obs, rewards, terminations, truncations, infos)``."""

HOOKS = ("setup_episode", "transition")
"""The abstract methods a concrete env implements."""
TASK_OPTIONS = ("task", "task_id", "task_index")
"""The keys ``reset(options=...)`` understands (at most one of them per call)."""


@dataclass
class Transition:
    """What a step did, returned by :meth:`LLMParallelEnv.transition`."""

    reward: float = 0.0
    """Joint team reward of this step (given to every agent)."""
    components: dict[str, float] = field(default_factory=dict)
    """Named parts of the reward, reported in ``infos[agent]["reward_components"]``."""
    done: bool = False
    """True when the episode is over (every agent terminates)."""
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra per-agent info (e.g. ``{"helper": {"malformed": True}}``)."""
    success: bool | None = None
    """Whether the team solved the task (math: the answer is right; coding: every scoring test
    passes). Envs with a binary notion of success set it on the final step; it is reported as
    ``infos[agent]["success"]`` and is what pass@k counts (:mod:`llm_marl.eval`)."""


class LLMParallelEnv(ParallelEnv):
    """Base class of all llm_marl environments (a :class:`pettingzoo.ParallelEnv`).

    Subclasses implement :meth:`setup_episode` and :meth:`transition` (see the module docstring
    for the contract and the vocabulary: step, ``max_steps``, phase, turn, round). A subclass
    whose ``__init__`` takes ``**kwargs`` forwards them to its base class's ``__init__``:
    :func:`~llm_marl.make` then accepts the names along the bases and rejects any other.

    Args:
        tasks: the task dicts (each with a unique ``"task_id"``); ``None`` uses
            :meth:`default_tasks`.
        max_steps: the cap on steps per episode (default: the class attribute ``max_steps``).
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or ``"human"`` (prints it
            after every step).
    """

    metadata: dict[str, Any] = {
        "name": "llm_parallel_env",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    possible_agents: list[str]
    max_steps: int = 64
    """The cap on steps per episode (see the module's vocabulary). Subclasses set their own."""
    spec: EnvSpec | None = None
    """The registry spec this env was made from (set by :func:`llm_marl.make`)."""
    turn_order: ClassVar[str] = ""
    """Who acts when, in one line (the summary table at the top of the env's docs page)."""
    reward_range: tuple[float, float] = (-math.inf, math.inf)
    """The bounds of one step's joint reward under this env's arguments (an env whose bounds
    depend on its arguments sets them in ``__init__``); the docs page's summary table shows it."""
    chance_note: ClassVar[str] = ""
    """What random play earns, in one line (the docs page's summary table; an env that computes
    its chance level has a ``chance_level()`` method, which the Trainer logs and the page shows)."""
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass states only what differs (usually just {"name": ...}); the rest of the
        # PettingZoo metadata (render modes, parallelizable) is inherited, not copied.
        own = cls.__dict__.get("metadata")
        if own is not None:
            parent = next(b.metadata for b in cls.__mro__[1:] if hasattr(b, "metadata"))
            cls.metadata = {**parent, **own}
        cls._abstract = abstract
        if abstract:
            return
        # Fail here, where the author is looking, not at the first reset of a training run.
        missing = [h for h in HOOKS if getattr(getattr(cls, h), "__isabstractmethod__", False)]
        if missing:
            raise TypeError(
                f"{cls.__qualname__} does not implement {' and '.join(m + '()' for m in missing)}, "
                "the hooks every LLMParallelEnv defines (see llm_marl.envs.base). If it is a base "
                f"class for other envs, declare it with `class {cls.__name__}(..., abstract=True)`."
            )

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if type(self)._abstract:
            raise TypeError(
                f"{type(self).__name__} is an abstract env base class; instantiate one of its "
                "concrete subclasses (or llm_marl.make(env_id))"
            )
        if not getattr(self, "possible_agents", None):
            raise TypeError(f"{type(self).__name__} must define possible_agents")
        self.possible_agents = list(self.possible_agents)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; "
                f"choose one of {self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        self.tasks: list[Task] = _validate_tasks(
            list(tasks) if tasks is not None else self.default_tasks(), type(self).__name__
        )
        self._task_index = {str(t["task_id"]): i for i, t in enumerate(self.tasks)}
        self.max_steps = check_step_cap(
            max_steps if max_steps is not None else type(self).max_steps, "max_steps"
        )
        self.agents: list[str] = []
        self.step_count = 0
        self._task: Task | None = None
        self._conversations: dict[str, list[Message]] = {}
        self._active: set[str] = set()
        self._transcript: list[tuple[str, str, str]] = []
        self._pending_error: str | None = None
        self._np_random: np.random.Generator | None = None
        self._np_random_seed: int | None = None

    # ------------------------------------------------------------------ hooks for subclasses
    @abstractmethod
    def setup_episode(self, task: Task) -> None:
        """Start an episode on ``task``: post the first messages and choose who acts first.

        Called by :meth:`reset` after the previous episode's state is cleared, with
        :attr:`task` already set to ``task``. Post each agent's first messages with :meth:`say`
        and choose the agents of the first step with :meth:`set_active`. Validate the task here
        (raise ``ValueError`` / :class:`~llm_marl.errors.DataError` naming what is wrong): tasks
        given through ``reset(options={"task": ...})`` reach this hook unchecked. Raising
        :class:`InfrastructureError` reports an episode that cannot start (its first step
        truncates it).
        """

    @abstractmethod
    def transition(self, actions: dict[str, str]) -> Transition:
        """Advance the episode by one step; return its joint reward and whether it is over.

        ``actions`` holds exactly the agents that were active, each action already appended to
        its author's conversation as an assistant message. Post what the agents see next with
        :meth:`say`, choose who acts next with :meth:`set_active` (nobody is active when this is
        called), and return a :class:`Transition`. Returning ``done=False`` with nobody active is
        an error. Raise :class:`InfrastructureError` when something outside the agents' control
        fails (the episode is truncated and not scored); never raise on what an agent wrote.
        """

    def default_tasks(self) -> list[Task]:
        """Tasks used when none are passed. Override to load the env's bundled data."""
        raise ValueError(f"{type(self).__name__} needs tasks=[...] (it has no default tasks)")

    def tools(self, agent: str) -> list[dict[str, Any]]:
        """OpenAI tool schemas the agent may call (reported in ``infos[agent]["tools"]``)."""
        return []

    # ------------------------------------------------------------------ helpers for subclasses
    def say(self, agent: str, content: str, role: str = "user", **extra: Any) -> None:
        """Append a message to ``agent``'s conversation (what that agent observes); its text is
        made UTF-8-safe (lone surrogates become U+FFFD)."""
        if agent not in self._conversations:
            raise KeyError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        # Every message an agent reads passes here (prompts, tool results, partners' replies):
        # made UTF-8-safe once, so that no tokenizer or writer downstream meets a lone surrogate.
        if isinstance(content, str):
            content = scrub_surrogates(content)
        message = {"role": role, "content": content, **extra}
        self._conversations[agent].append(message)
        self._transcript.append((agent, role, content))

    def set_active(self, agents: Iterable[str]) -> None:
        """Choose the agents that act in the next step."""
        chosen = set(agents)
        unknown = chosen - set(self.possible_agents)
        if unknown:
            raise KeyError(f"unknown agents {sorted(unknown)}; agents are {self.possible_agents}")
        self._active = chosen

    def restart_conversation(self, agent: str) -> None:
        """Give ``agent`` a fresh, empty conversation: its next prompt is a new chat.

        For protocols that re-prompt an agent from scratch (e.g. AgentPO's revision request).
        The rollout notices that the history no longer extends the agent's token stream and
        renders the next prompt afresh (a new trajectory segment).
        """
        if agent not in self._conversations:
            raise KeyError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        self._conversations[agent] = []

    def conversation(self, agent: str) -> list[Message]:
        """The live conversation of ``agent`` (do not mutate; use :meth:`say`)."""
        return self._conversations[agent]

    @property
    def task(self) -> Task:
        """The task of the current (or last) episode. ``RuntimeError`` before the first reset."""
        if self._task is None:
            raise RuntimeError(f"{type(self).__name__} has no current task: call env.reset() first")
        return self._task

    @property
    def unwrapped(self) -> LLMParallelEnv:
        """The env itself (wrappers return the env they wrap)."""
        return self

    @property
    def active_agents(self) -> list[str]:
        """The agents that act in the next step (``infos[agent]["active"]``)."""
        return [a for a in self.possible_agents if a in self._active]

    @property
    def np_random(self) -> np.random.Generator:
        """The env's RNG, seeded by ``reset(seed=...)``."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random()
        return self._np_random

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019 - PettingZoo requires the same object per agent
    def observation_space(self, agent: str) -> Chat:
        return Chat()

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> Text:
        return Text()

    # ------------------------------------------------------------------ ParallelEnv API
    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> ResetResult:
        """Start an episode; return ``(observations, infos)``.

        Args:
            seed: seeds the env's RNG (a non-negative ``int``; numpy integers are accepted).
            options: at most one of ``{"task": task_dict}``, ``{"task_id": id}`` (one of
                ``env.tasks``) or ``{"task_index": i}`` (``0 <= i < len(env.tasks)``). Without
                one, a task is drawn with the seeded RNG. Other keys are ignored with a warning
                (PettingZoo lets callers pass options an env does not use), except a misspelt
                task option (``"taskid"``), which raises.

        Bad arguments raise ``TypeError`` / ``ValueError`` naming what is valid, before anything
        changes: the previous episode (if any) is left as it was. A task that
        :meth:`setup_episode` rejects (its own check of a task given as ``options["task"]``)
        raises too, and leaves no episode running.
        """
        seed = check_seed(seed)
        task = self._requested_task(options)  # validated before any state changes
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        if task is None:
            task = dict(self.tasks[int(self.np_random.integers(len(self.tasks)))])
        self._task = task
        self.agents = list(self.possible_agents)
        self.step_count = 0
        self._conversations = {a: [] for a in self.possible_agents}
        self._active = set()
        self._transcript = []
        self._pending_error = None
        try:
            self.setup_episode(task)
        except InfrastructureError as err:
            # Nobody can act: an episode that cannot start. Report it; the next step ends it.
            self._active = set()
            self._pending_error = str(err)
        except BaseException:
            # A rejected task leaves no half-started episode (and no current task) behind.
            self.end_episode()
            self._task = None
            raise
        return self._observations(), self._infos({}, error=self._pending_error)

    def step(self, actions: ActionDict) -> StepResult:
        """Act for the active agents; return ``(obs, rewards, terminations, truncations, infos)``.

        ``actions`` must hold a ``str`` for every active agent (``infos[agent]["active"]``);
        actions of inactive agents are ignored and flagged. A rejected call changes nothing.
        """
        if not self.agents:
            raise RuntimeError(
                "step() called on a finished episode (or before reset()); call env.reset() first"
            )
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict {{agent: str}}, got {type(actions).__name__}")
        for agent, action in actions.items():
            if agent not in self.possible_agents:
                raise ValueError(
                    f"action for unknown agent {agent!r}; this env's agents are "
                    f"{self.possible_agents}"
                )
            if not isinstance(action, str):
                raise TypeError(
                    f"action of agent {agent!r} must be a str (the completion), "
                    f"got {type(action).__name__}"
                )
        missing = [a for a in self.active_agents if a not in actions]
        if missing:
            raise ValueError(
                f"active agents {missing} gave no action (active now: {self.active_agents}); "
                "check infos[agent]['active'] before stepping"
            )

        extra_infos: dict[str, dict[str, Any]] = {
            a: {"ignored_action": True} for a in actions if a not in self._active
        }
        self.step_count += 1
        error = self._pending_error
        transition = Transition()
        if error is None:
            # Actions are untrusted text: the rewards (tokenizers, embedders) read them as given.
            # The one place a completion's reasoning is removed, before the conversation, the
            # env's transition (rewards, graders, judges) or any other agent reads it.
            acting = {a: strip_thinking(scrub_surrogates(actions[a])) for a in self.active_agents}
            for agent, action in acting.items():
                self.say(agent, action, role="assistant")
            self._active = set()
            try:
                transition = self.transition(acting)
            except InfrastructureError as err:
                error = str(err)
                transition = Transition()
        for agent, extra in transition.infos.items():
            extra_infos.setdefault(agent, {}).update(extra)

        terminated = bool(transition.done) and error is None
        truncated = error is not None or (not terminated and self.step_count >= self.max_steps)
        if not terminated and not truncated and not self._active:
            raise RuntimeError(
                f"{type(self).__name__}.transition left no active agent but did not end the "
                "episode; call set_active(...) or return Transition(done=True)"
            )
        if terminated or truncated:
            self._active = set()

        reward = 0.0 if error is not None else self._checked_reward(transition.reward)
        agents = list(self.agents)
        observations = self._observations()
        rewards = dict.fromkeys(agents, reward)
        terminations = dict.fromkeys(agents, terminated)
        truncations = dict.fromkeys(agents, truncated)
        if transition.success is not None and error is None:
            for agent in agents:
                extra_infos.setdefault(agent, {})["success"] = bool(transition.success)
        infos = self._infos(extra_infos, error=error, components=transition.components)
        if terminated or truncated:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _checked_reward(self, reward: Any) -> float:
        """``reward`` as a finite float, else a one-line error naming the env.

        One NaN would stop training at the advantage and one inf would turn the whole step's
        loss into NaN for every agent; raised here, the rollout drops just this episode. A
        string is refused too: ``float("0.75")`` would hide a reward function's bug."""
        name = type(self).__name__
        if isinstance(reward, (str, bytes)):
            raise TypeError(f"{name}.transition returned the reward {reward!r}; expected a number")
        try:
            value = float(reward)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name}.transition returned the reward {reward!r} "
                f"({type(reward).__name__}); expected a number"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"{name}.transition returned a non-finite reward ({value})")
        return value

    def end_episode(self) -> None:
        """End the current episode now, between two steps.

        Every agent leaves ``env.agents`` and nobody is active, so the next :meth:`step` asks for
        :meth:`reset`. This is how a wrapper cuts an episode short
        (:class:`~llm_marl.envs.wrappers.StepLimit`); the wrapper reports the truncation in the
        step results it returns. A no-op when no episode is running.
        """
        self.agents = []
        self._active = set()
        self._pending_error = None

    def state(self) -> dict[str, Any]:
        """The full (centralised) state: the task, the step count and every conversation."""
        return {
            "task": copy.deepcopy(self._task),
            "step_count": self.step_count,
            "active": self.active_agents,
            "conversations": {a: _copy_messages(c) for a, c in self._conversations.items()},
        }

    def render(self) -> str | None:
        """The transcript so far, as text. ``render_mode="human"`` prints it."""
        if self.render_mode is None:
            return None
        lines = [f"=== {self.metadata['name']} | task {self._task_id()} | step {self.step_count}"]
        for agent, role, content in self._transcript:
            lines.append(f"[{agent} <{role}>] {content}")
        text = "\n".join(lines)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ internals
    def _task_id(self) -> str:
        return str(self._task["task_id"]) if self._task is not None else ""

    def _requested_task(self, options: Mapping[str, Any] | None) -> Task | None:
        """The task ``options`` ask for (a copy), or None to draw one. Raises on bad options."""
        if options is None:
            return None
        if not isinstance(options, Mapping):
            raise TypeError(
                f"reset options must be a dict (or None), got {type(options).__name__}; "
                f"e.g. options={{'task_id': ...}}"
            )
        unknown = [k for k in options if k not in TASK_OPTIONS]
        for key in unknown:
            # PettingZoo lets callers pass options an env does not use (its API test does), so
            # other keys are ignored, with a warning; a misspelt task option is an error, because
            # ignoring it would silently play a random task.
            close = difflib.get_close_matches(str(key), TASK_OPTIONS, n=1, cutoff=0.75)
            if close:
                raise ValueError(
                    f"unknown reset option {key!r}: did you mean {close[0]!r}? "
                    f"{type(self).__name__}.reset understands {list(TASK_OPTIONS)}"
                )
        if unknown:
            warnings.warn(
                f"{type(self).__name__}.reset ignores the option(s) {unknown}; it understands "
                f"{list(TASK_OPTIONS)}",
                stacklevel=3,
            )
        given = [k for k in TASK_OPTIONS if k in options]
        if len(given) > 1:
            raise ValueError(f"reset options {given} conflict: pass only one of them")
        if not given:
            return None
        n = len(self.tasks)
        if given[0] == "task":
            task = options["task"]
            if not isinstance(task, Mapping):
                raise TypeError(
                    f"options['task'] must be a task dict with a 'task_id', "
                    f"got {type(task).__name__}"
                )
            _validate_tasks([task], f"{type(self).__name__}: options['task']")
            return dict(task)
        if given[0] == "task_id":
            task_id = options["task_id"]
            if not is_int(task_id) and not isinstance(task_id, str):
                raise TypeError(
                    f"options['task_id'] must be a str or an int (one of env.tasks' ids), "
                    f"got {type(task_id).__name__}"
                )
            key = str(int(task_id) if is_int(task_id) else task_id)
            if key not in self._task_index:
                close = difflib.get_close_matches(key, list(self._task_index), n=3, cutoff=0.6)
                hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ValueError(
                    f"unknown task_id {task_id!r}: not among the {n} tasks of this "
                    f"{type(self).__name__} (see env.tasks).{hint}"
                )
            return dict(self.tasks[self._task_index[key]])
        index = options["task_index"]
        if not is_int(index):
            raise TypeError(
                f"options['task_index'] must be an int in 0..{n - 1}, got {type(index).__name__}"
                f" {index!r:.40}"
            )
        if not 0 <= int(index) < n:
            raise ValueError(
                f"options['task_index'] = {int(index)} is out of range: this env has {n} "
                f"task(s), valid indices are 0..{n - 1}"
            )
        return dict(self.tasks[int(index)])

    def _observations(self) -> ObsDict:
        return {a: _copy_messages(self._conversations[a]) for a in self.agents}

    def _infos(
        self,
        extra: Mapping[str, Mapping[str, Any]],
        *,
        error: str | None = None,
        components: Mapping[str, float] | None = None,
    ) -> InfoDict:
        infos = {}
        for agent in self.agents:
            info: dict[str, Any] = {
                "active": agent in self._active,
                "task_id": self._task_id(),
                "step_count": self.step_count,
                "reward_components": dict(components or {}),
                "error": error,
            }
            tools = self.tools(agent)
            if tools:
                info["tools"] = tools
            info.update(extra.get(agent, {}))
            infos[agent] = info
        return infos


def check_seed(seed: Any) -> int | None:
    """``seed`` as a Python ``int`` (numpy integers accepted), or None; raise on anything else."""
    if seed is None:
        return None
    if not is_int(seed):
        raise TypeError(
            f"seed must be a non-negative int or None (numpy integers are accepted), "
            f"got {type(seed).__name__} {seed!r:.40}"
        )
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0, got {int(seed)}")
    return int(seed)


def check_step_cap(value: Any, name: str = "max_steps") -> int:
    """A step cap as a Python ``int >= 1`` (numpy integers accepted); raise on anything else."""
    if not is_int(value):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r:.40}")
    if int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {int(value)}")
    return int(value)


def _copy_messages(messages: Sequence[Message]) -> list[Message]:
    return [dict(m) for m in messages]


def _validate_tasks(tasks: list[Any], owner: str) -> list[Task]:
    if not tasks:
        raise DataError(f"{owner}: the task list is empty; pass tasks=[...] or a dataset")
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            raise TypeError(f"{owner}: task #{i} must be a dict, got {type(task).__name__}")
        if "task_id" not in task:
            raise DataError(f"{owner}: task #{i} has no 'task_id' key (keys: {sorted(task)})")
        tid = task["task_id"]
        if not (isinstance(tid, str) or is_int(tid)):
            raise DataError(
                f"{owner}: task #{i} has task_id {tid!r:.40} of type {type(tid).__name__}; "
                "a task_id is a str or an int"
            )
        key = str(int(tid) if is_int(tid) else tid)
        if key in seen:
            raise DataError(f"{owner}: duplicate task_id {key!r}")
        seen.add(key)
    return tasks
