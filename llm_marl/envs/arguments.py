"""The edge of :func:`~llm_marl.make`: keyword arguments checked against the env's constructor.

:func:`construct` builds the env of every ``make`` call, so that a bad argument fails there in
one line that names it, not deep inside the env (``'<=' not supported between 'float' and
'str'``) or, worse, an episode later. Two checks:

* **Names.** An unknown name raises with the list of accepted ones (a typo is not ignored).
* **Types**, where the parameter's annotation is made of plain types only (``bool``, ``int``,
  ``float``, ``str``, ``None``, ``Literal``, path-likes, config dataclasses, and lists, tuples,
  sequences and mappings of those, or of ``Any``): the value must match it (typeguard's ``check_type``, every
  item of a collection). On top of what the annotation says: a ``bool`` is not accepted as an
  ``int`` or a ``float`` (``num_rounds=True`` is a mistake, not 1), and a float must be finite
  (a NaN weight poisons every reward; an infinite timeout lets a program run forever).
  A value the constructor refuses with a ``ValueError`` of its own keeps that message too.

Annotations that name protocols, callables, ``Any`` or types that cannot be resolved at run
time (imported for type checking only) are left to the constructor, which checks values and
ranges itself (``format_weight`` in ``[0, 1)``, ...).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import typeguard

from llm_marl.checks import is_int, is_number
from llm_marl.envs.base import LLMParallelEnv
from llm_marl.errors import EnvArgumentError

__all__ = ["accepted_arguments", "construct"]

_SCALARS = (bool, int, float, str, type(None))
_CONTAINERS = (list, tuple, dict, Sequence, Mapping, Iterable)
_EVERY_ITEM = typeguard.CollectionCheckStrategy.ALL_ITEMS


def construct(factory: Callable[..., Any], kwargs: Mapping[str, Any], env_id: str) -> Any:
    """``factory(**kwargs)``, with ``kwargs`` (the spec's and the caller's, merged) checked.

    Unknown names raise before the constructor runs. A value of the wrong type raises
    :class:`~llm_marl.errors.EnvArgumentError` naming the parameter: where the constructor
    accepted the value (a NaN weight, ``isolate_main="no"``) or failed on it with an internal
    error (``'<=' not supported between 'float' and 'str'``). The constructor runs first
    because its own ``ValueError`` says what the value means (``num_debaters=True``: "number of
    solvers must be an int in [1, 8]"); that message is kept, after the parameter's.
    """
    params = _parameters(factory)
    if params is None:
        return factory(**kwargs)
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        raise TypeError(
            f"make({env_id!r}) got unknown arguments {unknown}; accepted: {list(params)} "
            "(and max_steps, which make applies itself)"
        )
    problem = next(
        (
            err
            for name, value in kwargs.items()
            if (err := _problem(env_id, name, value, *params[name])) is not None
        ),
        None,
    )
    try:
        env = factory(**kwargs)
    except Exception as exc:
        if problem is None:
            raise
        if isinstance(exc, ValueError):  # the constructor's own words say what the value means
            raise EnvArgumentError(f"{problem} ({exc})") from exc
        raise problem from exc
    if problem is not None:
        env.close()
        raise problem
    return env


def accepted_arguments(factory: Callable[..., Any]) -> list[str] | None:
    """The keyword names ``factory`` accepts, or None where that cannot be told."""
    params = _parameters(factory)
    return None if params is None else list(params)


def _parameters(factory: Callable[..., Any]) -> dict[str, tuple[inspect.Parameter, str]] | None:
    """Each accepted keyword's parameter and the module its annotation is written in.

    An env class whose ``__init__`` takes ``**kwargs`` forwards them to its base class (the
    convention of :class:`~llm_marl.envs.base.LLMParallelEnv` subclasses), so its names are its
    own followed by those of its bases, up to the first ``__init__`` without ``**kwargs``. Any
    other callable with ``**kwargs`` accepts anything as far as this check knows (None).
    """
    if isinstance(factory, type) and issubclass(factory, LLMParallelEnv):
        inits = [c.__dict__["__init__"] for c in factory.__mro__ if "__init__" in c.__dict__]
    else:
        inits = [factory]
    accepted: dict[str, tuple[inspect.Parameter, str]] = {}
    for init in inits:
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):  # builtins without a signature: let the call decide
            return None
        for name, p in params.items():
            named = p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            if named and name != "self" and name not in accepted:
                accepted[name] = (p, getattr(init, "__module__", "") or "")
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return accepted
    return None


def _plain_hint(annotation: Any, module: str) -> Any | None:
    """The resolved annotation when it is made of plain types only, else None (not checked)."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        namespace = vars(sys.modules[module]) if module in sys.modules else {}
        try:
            # Our own source's annotation text, evaluated in its module, as typing does.
            annotation = eval(annotation, dict(namespace))  # noqa: S307
        except Exception:  # a name imported for type checking only: leave it to the env
            return None
    return annotation if _is_plain(annotation) else None


def _is_plain(hint: Any, *, item: bool = False) -> bool:
    """Plain: scalars, path-likes, dataclasses, Literals, and unions and containers of them.

    ``item``: ``hint`` is a container's key or item type, where ``Any`` is plain too (a task
    is a ``dict[str, Any]``: the container is checked, not what it holds).
    """
    origin = get_origin(hint)
    if origin is None:
        return (
            hint in _SCALARS
            or hint is os.PathLike
            or dataclasses.is_dataclass(hint)
            or (item and hint is Any)
        )
    if origin is Literal:
        return True
    if origin in (Union, types.UnionType):
        return all(_is_plain(a, item=item) for a in get_args(hint))
    if origin in _CONTAINERS or origin is os.PathLike:
        return all(_is_plain(a, item=True) for a in get_args(hint) if a is not Ellipsis)
    return False


def _problem(
    env_id: str, name: str, value: Any, param: inspect.Parameter, module: str
) -> EnvArgumentError | None:
    """The error for ``name=value`` when its plainly typed annotation refuses it, else None."""
    hint = _plain_hint(param.annotation, module)
    if hint is None:
        return None
    expected = param.annotation if isinstance(param.annotation, str) else repr(hint)
    wrong = EnvArgumentError(
        f"make({env_id!r}): {name} must be {expected}, got {value!r} ({type(value).__name__})"
    )
    if isinstance(value, bool) and not _allows(hint, bool):
        return wrong
    # An int and a number as llm_marl.checks defines them: a numpy one (a sweep's value)
    # counts, as it does to the env.
    number = (is_int(value) and _allows(hint, int)) or (is_number(value) and _allows(hint, float))
    if not number:
        try:
            typeguard.check_type(value, hint, collection_check_strategy=_EVERY_ITEM)
        except typeguard.TypeCheckError:
            return wrong
    if is_number(value) and not math.isfinite(value):
        return EnvArgumentError(f"make({env_id!r}): {name} must be a finite number, got {value!r}")
    return None


def _allows(hint: Any, kind: type) -> bool:
    """Whether ``hint`` names ``kind`` itself (not only a base class of it, as int is of bool)."""
    if hint is kind:
        return True
    if get_origin(hint) in (Union, types.UnionType):
        return any(_allows(a, kind) for a in get_args(hint))
    return get_origin(hint) is Literal and any(isinstance(a, kind) for a in get_args(hint))
