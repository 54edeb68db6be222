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

import difflib
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from llm_marl.errors import UnknownEnvError

ENV_ID_RE = re.compile(
    r"^(?:(?P<namespace>[\w.-]+)/)?(?P<name>[\w.]+(?:-[\w.]+)*?)-v(?P<version>\d+)$"
)


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to build an environment. Immutable: use :func:`dataclasses.replace`."""

    id: str
    """``[namespace/]name-vN``."""
    entry_point: str | Callable[..., Any]
    """``"package.module:ClassName"`` or a callable returning the env."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Default constructor arguments; ``make(id, **overrides)`` updates them."""
    max_episode_steps: int | None = None
    """If set, ``make`` wraps the env in :class:`~llm_marl.envs.wrappers.TurnLimit`."""
    description: str = ""
    """One line for ``pprint_registry`` and ``llm-marl list``."""

    def __post_init__(self) -> None:
        match = ENV_ID_RE.match(self.id)
        if not match:
            raise ValueError(
                f"malformed env id {self.id!r}: expected '[namespace/]name-vN', e.g. 'my_task-v0'"
            )
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    @property
    def namespace(self) -> str | None:
        return ENV_ID_RE.match(self.id).group("namespace")  # type: ignore[union-attr]

    @property
    def name(self) -> str:
        return ENV_ID_RE.match(self.id).group("name")  # type: ignore[union-attr]

    @property
    def version(self) -> int:
        return int(ENV_ID_RE.match(self.id).group("version"))  # type: ignore[union-attr]

    def make(self, **kwargs: Any) -> Any:
        """Build the env with ``self.kwargs`` updated by ``kwargs``."""
        return make(self, **kwargs)


registry: dict[str, EnvSpec] = {}
"""All registered specs, by id."""

_plugins_loaded = False


def register(
    id: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    description: str = "",
) -> EnvSpec:
    """Register an environment under ``id``. Re-registering an id replaces it with a warning."""
    spec_ = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=kwargs or {},
        max_episode_steps=max_episode_steps,
        description=description,
    )
    if id in registry:
        warnings.warn(f"overriding the registered environment {id!r}", stacklevel=2)
    registry[id] = spec_
    return spec_


def spec(env_id: str) -> EnvSpec:
    """The :class:`EnvSpec` of ``env_id``; an unknown id raises with the closest registered ids."""
    _load_plugins()
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    if env_id in registry:
        return registry[env_id]
    raise _unknown_id_error(env_id)


def make(env_id: str | EnvSpec, **kwargs: Any) -> Any:
    """Build a registered environment: ``make("coop_humaneval-v0", dataset=..., max_turns=2)``."""
    spec_ = env_id if isinstance(env_id, EnvSpec) else spec(env_id)
    factory = _load_entry_point(spec_.entry_point, spec_.id)
    merged = {**spec_.kwargs, **kwargs}
    max_steps = merged.pop("max_episode_steps", None) or spec_.max_episode_steps
    _check_kwargs(factory, merged, spec_.id)
    env = factory(**merged)
    env.spec = replace(spec_, kwargs=merged)
    if max_steps is not None:
        from llm_marl.envs.wrappers import TurnLimit

        env = TurnLimit(env, max_steps)
    return env


def make_vec(
    env_id: str | EnvSpec, num_envs: int, *, max_workers: int | None = None, **kwargs: Any
):
    """``num_envs`` independent copies of one env, stepped concurrently (see :class:`VectorEnv`)."""
    from llm_marl.envs.vector import VectorEnv

    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
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


def _load_entry_point(entry_point: str | Callable[..., Any], env_id: str) -> Callable[..., Any]:
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


def _check_kwargs(factory: Callable[..., Any], kwargs: Mapping[str, Any], env_id: str) -> None:
    """Reject unknown keyword overrides with the list of accepted ones (a typo is not ignored)."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        raise TypeError(f"make({env_id!r}) got unknown arguments {unknown}; accepted: {accepted}")


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
