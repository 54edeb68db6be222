"""The environment registry: ids ``[namespace/]name-vN`` mapped to frozen :class:`EnvSpec` s.

>>> import llm_marl
>>> env = llm_marl.make("coordination-v0")
>>> llm_marl.spec("coordination-v0").entry_point
'llm_marl.envs.toy.coordination:CoordinationEnv'

Third-party packages register the same way (``entry_point="pkg.module:Class"``), either by
calling :func:`register` on import or through the ``llm_marl.envs`` entry-point group in their
``pyproject.toml``; the registry loads that group on first use.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, overload

from llm_marl.envs.arguments import accepted_arguments, construct
from llm_marl.envs.base import LLMParallelEnv, check_step_cap
from llm_marl.envs.vector import VectorEnv
from llm_marl.envs.wrappers import AnyEnv, ParallelEnvWrapper, StepLimit
from llm_marl.errors import ConfigError, UnknownEnvError

ENV_ID_RE = re.compile(
    r"^(?:(?P<namespace>[\w.-]+)/)?(?P<name>[\w.]+(?:-[\w.]+)*?)-v(?P<version>\d+)$"
)

EntryPoint = str | Callable[..., AnyEnv]
"""``"package.module:ClassName"`` or a callable that returns the env."""


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to build an environment. Immutable: use :func:`dataclasses.replace`."""

    id: str
    """``[namespace/]name-vN``."""
    entry_point: EntryPoint
    """``"package.module:ClassName"`` or a callable returning the env."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Default constructor arguments; ``make(id, **overrides)`` updates them."""
    max_steps: int | None = None
    """If set, ``make`` wraps the env in :class:`~llm_marl.envs.wrappers.StepLimit` with this
    cap on steps per episode (the vocabulary is in :mod:`llm_marl.envs.base`)."""
    description: str = ""
    """One line for ``pprint_registry`` and ``llm-marl list``."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not ENV_ID_RE.match(self.id):
            raise ValueError(
                f"malformed env id {self.id!r}: expected '[namespace/]name-vN', e.g. 'my_task-v0'"
            )
        if not (callable(self.entry_point) or isinstance(self.entry_point, str)):
            raise TypeError(
                f"{self.id}: entry_point must be 'module:Class' or a callable, "
                f"got {type(self.entry_point).__name__}"
            )
        if self.max_steps is not None:
            object.__setattr__(self, "max_steps", check_step_cap(self.max_steps, "max_steps"))
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    @property
    def namespace(self) -> str | None:
        return self._match().group("namespace")

    @property
    def name(self) -> str:
        return self._match().group("name")

    @property
    def version(self) -> int:
        return int(self._match().group("version"))

    def make(self, **kwargs: Any) -> AnyEnv:
        """Build the env with ``self.kwargs`` updated by ``kwargs`` (see :func:`make`)."""
        return make(self, **kwargs)

    def _match(self) -> re.Match[str]:
        match = ENV_ID_RE.match(self.id)
        assert match is not None  # checked in __post_init__
        return match


registry: dict[str, EnvSpec] = {}
"""All registered specs, by id."""

_plugins_loaded = False


def register(
    id: str,
    entry_point: EntryPoint,
    *,
    kwargs: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    description: str = "",
) -> EnvSpec:
    """Register an environment under ``id``. Re-registering an id replaces it with a warning.

    Args:
        id: ``[namespace/]name-vN``.
        entry_point: ``"package.module:ClassName"`` or a callable that returns the env.
        kwargs: default constructor arguments.
        max_steps: a cap on steps per episode imposed by ``make`` (a
            :class:`~llm_marl.envs.wrappers.StepLimit`); None leaves the env's own cap.
        description: one line for ``pprint_registry`` and ``llm-marl list``.
    """
    spec_ = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=kwargs or {},
        max_steps=max_steps,
        description=description,
    )
    if id in registry:
        warnings.warn(f"overriding the registered environment {id!r}", stacklevel=2)
    registry[id] = spec_
    return spec_


def register_teams(
    module: str,
    teams: Mapping[str, tuple[str, str, str]],
    *,
    description: str,
    baseline: str,
) -> None:
    """Register team envs of ``module`` with their single-agent baselines.

    ``teams`` maps a name to ``(title, team class, single-agent class)``: ``<name>-v0`` is the
    team env and ``<name>_single-v0`` its single-agent baseline, the naming of every family that
    has such baselines. ``description`` and ``baseline`` describe them, with ``{title}`` filled
    in.
    """
    for name, (title, team, single) in teams.items():
        register(f"{name}-v0", f"{module}:{team}", description=description.format(title=title))
        register(
            f"{name}_single-v0", f"{module}:{single}", description=baseline.format(title=title)
        )


def spec(env_id: str) -> EnvSpec:
    """The :class:`EnvSpec` of ``env_id``; an unknown id raises with the closest registered ids."""
    _load_plugins()
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    if env_id in registry:
        return registry[env_id]
    raise _unknown_id_error(env_id)


@overload
def make(env_id: str | EnvSpec, *, max_steps: int, **kwargs: Any) -> StepLimit: ...
@overload
def make(env_id: str | EnvSpec, **kwargs: Any) -> AnyEnv: ...
def make(env_id: str | EnvSpec, *, max_steps: int | None = None, **kwargs: Any) -> AnyEnv:
    """Build a registered environment: ``make("coop_humaneval-v0", dataset=..., num_rounds=2)``.

    Args:
        env_id: a registered id (or an :class:`EnvSpec`).
        max_steps: a cap on steps per episode: the env comes wrapped in
            :class:`~llm_marl.envs.wrappers.StepLimit`. Default: the spec's ``max_steps`` (none
            for the built-in ids, whose envs end their episodes themselves).
        **kwargs: constructor arguments, overriding the spec's ``kwargs``. Checked
            (:func:`~llm_marl.envs.arguments.construct`): unknown names raise with the list of
            accepted ones before the env is built; a value that does not match a plainly typed
            parameter (a bool for a number, a non-finite float, ...) raises
            :class:`~llm_marl.errors.EnvArgumentError` naming it.

    Returns:
        An :class:`~llm_marl.envs.base.LLMParallelEnv`, or a wrapper of one (always a
        :class:`~llm_marl.envs.wrappers.StepLimit` when a cap is given); ``env.unwrapped`` is
        the env itself and ``env.spec`` the spec it was built from.
    """
    spec_ = env_id if isinstance(env_id, EnvSpec) else spec(env_id)
    factory = _load_entry_point(spec_.entry_point, spec_.id)
    merged = {**spec_.kwargs, **kwargs}
    cap = check_step_cap(max_steps, "max_steps") if max_steps is not None else spec_.max_steps
    env = construct(factory, merged, spec_.id)
    if not isinstance(env, LLMParallelEnv | ParallelEnvWrapper):
        raise TypeError(
            f"{spec_.id}: the entry point returned a {type(env).__name__}; an llm_marl env is an "
            "LLMParallelEnv subclass (or a wrapper of one, see llm_marl.envs.wrappers)"
        )
    env.spec = replace(spec_, kwargs=merged, max_steps=cap)
    if cap is not None:
        return StepLimit(env, cap)
    return env


def make_vec(
    env_id: str | EnvSpec, num_envs: int, *, max_workers: int | None = None, **kwargs: Any
) -> VectorEnv:
    """``num_envs`` independent copies of one env, stepped concurrently (see :class:`VectorEnv`)."""
    num_envs = check_step_cap(num_envs, "num_envs")
    return VectorEnv([make(env_id, **kwargs) for _ in range(num_envs)], max_workers=max_workers)


def pprint_registry(*, print_output: bool = True) -> str | None:
    """A table of registered ids and their descriptions."""
    _load_plugins()
    width = max((len(i) for i in registry), default=0)
    lines = [f"{i:<{width}}  {s.description}".rstrip() for i, s in sorted(registry.items())]
    text = "\n".join(lines)
    if print_output:
        print(text)
        return None
    return text


# ---------------------------------------------------------------------- internals
def _unknown_id_error(env_id: str) -> UnknownEnvError:
    close = difflib.get_close_matches(env_id, list(registry), n=3, cutoff=0.5)
    match = ENV_ID_RE.match(env_id)
    if match is None:
        # "coop_humaneval" without a version: suggest the versions of that name.
        close = [i for i in registry if registry[i].name == env_id] or close
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownEnvError(
        f"no environment registered as {env_id!r}.{hint} "
        f"See llm_marl.pprint_registry() for the {len(registry)} registered ids."
    )


def accepted_kwargs(env: str | EnvSpec | Callable[..., Any]) -> list[str] | None:
    """The keyword arguments an env (a registered id, a spec or a factory) accepts, or None
    where that cannot be told (a factory taking ``**kwargs``)."""
    if isinstance(env, (str, EnvSpec)):
        found = env if isinstance(env, EnvSpec) else spec(env)
        env = _load_entry_point(found.entry_point, found.id)
    return accepted_arguments(env)


def parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """``--env-arg`` values as keyword arguments of :func:`make`:
    ``["num_rounds=1", "sandbox=process"]`` -> ``{"num_rounds": 1, "sandbox": "process"}``.

    Values are Python literals where they parse as one (numbers, booleans, lists), else floats
    (``nan``, ``inf``), else strings.
    The one parser of ``llm-marl play``, ``eval`` and ``bench``.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"--env-arg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            try:
                out[key] = float(value)  # nan, inf: a number, so that make() can say what is wrong
            except ValueError:
                out[key] = value  # a plain string
    return out


def _load_entry_point(entry_point: EntryPoint, env_id: str) -> Callable[..., AnyEnv]:
    if callable(entry_point):
        return entry_point
    module_name, _, attr = entry_point.partition(":")
    if not attr:
        raise ValueError(f"{env_id}: entry_point {entry_point!r} must look like 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(f"{env_id}: cannot import {module_name!r} ({err})") from err
    try:
        return getattr(module, attr)
    except AttributeError as err:
        raise ImportError(f"{env_id}: module {module_name!r} has no {attr!r}") from err


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group="llm_marl.envs"):
        try:
            ep.load()()  # a plugin's entry point is a function that calls register(...)
        except Exception as err:  # a broken plugin must not break the library
            warnings.warn(f"llm_marl: could not load env plugin {ep.name!r}: {err}", stacklevel=2)
