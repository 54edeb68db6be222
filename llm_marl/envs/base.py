"""`LLMParallelEnv`: the one base class of every llm_marl environment.

An episode is a cooperative Dec-POMDP played by LLM roles. The contract (see DESIGN.md):

* ``possible_agents`` are role names; every agent stays in ``env.agents`` until the episode ends.
* The observation of an agent is its own chat conversation (a list of OpenAI-style messages).
  An agent sees only what its role is shown.
* An action is the completion string. Any string is legal: malformed output is scored through
  the reward and flagged in ``infos[agent]``; it never raises.
* Sequential topologies are *phases*: ``infos[agent]["active"]`` says who acts now; actions of
  inactive agents are ignored (and flagged ``infos[agent]["ignored_action"]``).
* The joint (team) reward goes to every agent; its parts go to ``infos[agent]["reward_components"]``.
* An infrastructure failure (sandbox down, search API error) is raised inside the env as
  :class:`InfrastructureError`; the episode is then truncated with ``infos[agent]["error"]`` set,
  and never scored as a bad answer.
* ``infos[agent]`` carries ``task_id``, ``turn`` and, where the agent may call tools, ``tools``.
* Randomness comes only from ``reset(seed=...)`` through ``self.np_random``.

Writing an environment
----------------------
Subclass, set ``possible_agents`` and ``metadata["name"]``, and implement two hooks:

``setup_episode(task)``
    Start an episode: post the first messages with :meth:`say` and choose who acts first with
    :meth:`set_active`.
``transition(actions) -> Transition``
    Called with the actions of the active agents (each already appended to its author's
    conversation as an assistant message). Post what the agents see next, pick the next active
    agents, and return the joint reward of this step and whether the episode is over.

Tasks are plain dicts with a unique ``"task_id"``; pass them as ``tasks=`` or override
:meth:`default_tasks`. ``reset(options={"task": task})`` or ``{"task_id": ...}`` picks one; by
default a task is drawn with ``self.np_random``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from llm_marl.errors import InfrastructureError
from llm_marl.spaces import Chat, Text

Task = dict[str, Any]
Message = dict[str, Any]


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
    """Base class of all llm_marl environments (a :class:`pettingzoo.ParallelEnv`)."""

    metadata: dict[str, Any] = {
        "name": "llm_parallel_env",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    possible_agents: list[str]
    max_steps_default: int = 64
    """Safety cap on env steps per episode; reaching it truncates the episode."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A subclass states only what differs (usually just {"name": ...}); the rest of the
        # PettingZoo metadata (render modes, parallelizable) is inherited, not copied.
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("metadata")
        if own is not None:
            parent = next(b.metadata for b in cls.__mro__[1:] if hasattr(b, "metadata"))
            cls.metadata = {**parent, **own}

    def __init__(
        self,
        tasks: Iterable[Task] | None = None,
        *,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
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
        self._task_index = {t["task_id"]: i for i, t in enumerate(self.tasks)}
        self.max_steps = int(max_steps if max_steps is not None else self.max_steps_default)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        self.agents: list[str] = []
        self.task: Task | None = None
        self.turn = 0
        self._conversations: dict[str, list[Message]] = {}
        self._active: set[str] = set()
        self._transcript: list[tuple[str, str, str]] = []
        self._np_random = None
        self._np_random_seed: int | None = None

    # ------------------------------------------------------------------ hooks for subclasses
    def default_tasks(self) -> list[Task]:
        """Tasks used when none are passed. Override to load the env's bundled data."""
        raise ValueError(f"{type(self).__name__} needs tasks=[...] (it has no default tasks)")

    def setup_episode(self, task: Task) -> None:
        raise NotImplementedError

    def transition(self, actions: dict[str, str]) -> Transition:
        raise NotImplementedError

    def tools(self, agent: str) -> list[dict[str, Any]]:
        """OpenAI tool schemas the agent may call (reported in ``infos[agent]["tools"]``)."""
        return []

    # ------------------------------------------------------------------ helpers for subclasses
    def say(self, agent: str, content: str, role: str = "user", **extra: Any) -> None:
        """Append a message to ``agent``'s conversation (what that agent observes)."""
        if agent not in self._conversations:
            raise KeyError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
        message = {"role": role, "content": content, **extra}
        self._conversations[agent].append(message)
        self._transcript.append((agent, role, content))

    def set_active(self, agents: Iterable[str]) -> None:
        """Choose the agents that act in the next step."""
        agents = set(agents)
        unknown = agents - set(self.possible_agents)
        if unknown:
            raise KeyError(f"unknown agents {sorted(unknown)}; agents are {self.possible_agents}")
        self._active = agents

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
    def active_agents(self) -> list[str]:
        return [a for a in self.possible_agents if a in self._active]

    @property
    def np_random(self):
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
    ) -> tuple[dict[str, list[Message]], dict[str, dict[str, Any]]]:
        """Start an episode.

        ``options`` keys: ``"task"`` (a task dict), ``"task_id"`` (one of ``self.tasks``) or
        ``"task_index"``; other keys are ignored. Without them a task is drawn with the seeded RNG.
        """
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        self.task = self._choose_task(options or {})
        self.agents = list(self.possible_agents)
        self.turn = 0
        self._conversations = {a: [] for a in self.possible_agents}
        self._active = set()
        self._transcript = []
        try:
            self.setup_episode(self.task)
        except InfrastructureError as err:
            # Nobody can act: an episode that cannot start. Report it; the next step ends it.
            self._active = set()
            self._pending_error = str(err)
        else:
            self._pending_error = None
        return self._observations(), self._infos({}, error=self._pending_error)

    def step(self, actions: Mapping[str, str]):
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
        self.turn += 1
        error = self._pending_error
        transition = Transition()
        if error is None:
            acting = {a: actions[a] for a in self.active_agents}
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
        truncated = error is not None or (not terminated and self.turn >= self.max_steps)
        if not terminated and not truncated and not self._active:
            raise RuntimeError(
                f"{type(self).__name__}.transition left no active agent but did not end the "
                "episode; call set_active(...) or return Transition(done=True)"
            )
        if terminated or truncated:
            self._active = set()

        reward = 0.0 if error is not None else float(transition.reward)
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

    def state(self) -> dict[str, Any]:
        """The full (centralised) state: the task, the turn and every agent's conversation."""
        return {
            "task": copy.deepcopy(self.task),
            "turn": self.turn,
            "active": self.active_agents,
            "conversations": {a: _copy_messages(c) for a, c in self._conversations.items()},
        }

    def render(self) -> str | None:
        """The transcript so far, as text. ``render_mode="human"`` prints it."""
        if self.render_mode is None:
            return None
        lines = [f"=== {self.metadata['name']} | task {self._task_id()} | turn {self.turn}"]
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
        return str(self.task["task_id"]) if self.task is not None else ""

    def _choose_task(self, options: Mapping[str, Any]) -> Task:
        if "task" in options:
            task = options["task"]
            _validate_tasks([task], type(self).__name__)
            return dict(task)
        if "task_id" in options:
            task_id = options["task_id"]
            if task_id not in self._task_index:
                raise KeyError(f"unknown task_id {task_id!r} ({len(self.tasks)} tasks loaded)")
            return dict(self.tasks[self._task_index[task_id]])
        if "task_index" in options:
            return dict(self.tasks[int(options["task_index"])])
        return dict(self.tasks[int(self.np_random.integers(len(self.tasks)))])

    def _observations(self) -> dict[str, list[Message]]:
        return {a: _copy_messages(self._conversations[a]) for a in self.agents}

    def _infos(
        self,
        extra: Mapping[str, Mapping[str, Any]],
        *,
        error: str | None = None,
        components: Mapping[str, float] | None = None,
    ) -> dict[str, dict[str, Any]]:
        infos = {}
        for agent in self.agents:
            info: dict[str, Any] = {
                "active": agent in self._active,
                "task_id": self._task_id(),
                "turn": self.turn,
                "reward_components": dict(components or {}),
                "error": error,
            }
            tools = self.tools(agent)
            if tools:
                info["tools"] = tools
            info.update(extra.get(agent, {}))
            infos[agent] = info
        return infos


def _copy_messages(messages: Sequence[Message]) -> list[Message]:
    return [dict(m) for m in messages]


def _validate_tasks(tasks: list[Task], owner: str) -> list[Task]:
    if not tasks:
        raise ValueError(f"{owner}: the task list is empty; pass tasks=[...] or a dataset")
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if not isinstance(task, Mapping):
            raise TypeError(f"{owner}: task #{i} must be a dict, got {type(task).__name__}")
        if "task_id" not in task:
            raise ValueError(f"{owner}: task #{i} has no 'task_id' key (keys: {sorted(task)})")
        tid = str(task["task_id"])
        if tid in seen:
            raise ValueError(f"{owner}: duplicate task_id {tid!r}")
        seen.add(tid)
    return tasks
