"""One generic config parser: dataclass configs from presets, YAML/JSON files and the command line.

A config is a tree of dataclasses whose fields are documented by attribute docstrings (TRL
style)::

    @dataclass
    class TrainerConfig:
        steps: int = 100
        '''Training steps.'''   # (written with triple double quotes)

This module knows nothing of training; it walks any such tree.

* :func:`config_from_dict` builds a typed config from plain data (a parsed YAML/JSON file, a
  preset), checking every key and every type; :func:`config_to_dict` is its inverse.
* :func:`merge` layers plain data (later layers win; see its docstring).
* :class:`CommandLine` turns flags into overrides; :meth:`CommandLine.help` documents them.
* :func:`read_config_file` / :func:`write_config_file` read and write YAML or JSON.

Every problem (unknown key, wrong type, a value a config's ``__post_init__`` rejects) raises
:class:`~llm_marl.errors.ConfigError` naming the field and what it accepts.

Command line
    ``--trainer.steps 5`` sets a field by its dotted path (``-`` and ``_`` are interchangeable in
    field names). ``--steps 5`` is the same when the name is unambiguous: a short name sets every
    field so named at the shallowest level where the name occurs if that is a top-level section
    (``--seed`` sets ``trainer.seed`` and ``algorithm.seed``); deeper, it must name exactly one
    field outside optional values (``--temperature`` is ``--trainer.sampling.temperature``, not
    the optional ``trainer.eval_sampling``). :meth:`CommandLine.help` lists every short name.
    ``--lora`` alone sets a bool to true, ``--no-lora`` to false. ``none`` / ``null`` clear an
    optional field. Lists and tuples take ``a,b,c`` or a YAML/JSON list; mappings and nested
    configs take YAML/JSON (``'{"num_symbols": 5}'``), or one key at a time
    (``--trainer.env_kwargs.num_symbols 5``, ``--policies.frozen.actor tiny``).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import functools
import inspect
import json
import math
import os
import re
import textwrap
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from llm_marl.errors import ConfigError

__all__ = [
    "CommandLine",
    "Override",
    "config_from_dict",
    "config_to_dict",
    "field_docs",
    "merge",
    "read_config_file",
    "set_path",
    "write_config_file",
]

Path_ = tuple[str, ...]
"""A dotted path into a config, as its segments: ``("trainer", "sampling", "temperature")``."""

_NONE_WORDS = ("none", "null")
_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")


# ---------------------------------------------------------------------------------------- types


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The fields a config file may set (``init=True``), in declaration order."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


def _is_config_class(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; ``A | B | None`` -> ``(A | B, True)``; ``X`` -> ``(X, False)``."""
    if get_origin(tp) in (Union, types.UnionType):
        args = get_args(tp)
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) < len(args):
            return (rest[0] if len(rest) == 1 else Union[rest]), True  # noqa: UP007
    return tp, False


def _members(tp: Any) -> tuple[Any, ...]:
    """The options of a union (``None`` excluded), or ``(tp,)``."""
    inner, _ = _split_optional(tp)
    if get_origin(inner) in (Union, types.UnionType):
        return get_args(inner)
    return (inner,)


def _is_mapping_type(tp: Any) -> bool:
    return tp is dict or get_origin(tp) in (dict, Mapping)


def _is_sequence_type(tp: Any) -> bool:
    return tp in (list, tuple) or get_origin(tp) in (list, tuple, Sequence)


def _mapping_value_type(tp: Any) -> Any:
    args = get_args(tp)
    return args[1] if len(args) == 2 else Any


def _config_member(tp: Any) -> type | None:
    """The dataclass option of ``tp`` (``SamplingParams | dict[...] | None`` -> SamplingParams)."""
    return next((m for m in _members(tp) if _is_config_class(m)), None)


def _mapping_member(tp: Any) -> Any:
    """The mapping option of ``tp`` (``dict[str, X]``), or None."""
    return next((m for m in _members(tp) if _is_mapping_type(m)), None)


def _in_config_form(value: Any, cls: type) -> bool:
    """A mapping that can only mean ``cls`` (all its keys are fields of it)."""
    return isinstance(value, Mapping) and set(value) <= set(_fields(cls))


def type_name(tp: Any) -> str:
    """A short human name of a type: ``int``, ``float | None``, ``one of 'a', 'b'``."""
    inner, optional = _split_optional(tp)
    if get_origin(inner) is Literal:
        name = "one of " + ", ".join(repr(c) for c in get_args(inner))
    elif get_origin(inner) in (Union, types.UnionType):
        name = " | ".join(type_name(m) for m in get_args(inner))
    elif _is_config_class(inner):
        name = f"a mapping of {inner.__name__} fields"
    elif _is_mapping_type(inner):
        name = f"a mapping to {type_name(_mapping_value_type(inner))}"
    elif _is_sequence_type(inner):
        name = "a list"
    elif inner is Any:
        name = "any value"
    else:
        name = getattr(inner, "__name__", str(inner))
    return f"{name} | None" if optional else name


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unknown_key(path: str, key: str, cls: type) -> ConfigError:
    accepted = list(_fields(cls))
    close = difflib.get_close_matches(key, accepted, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f"{path} ({cls.__name__})" if path else cls.__name__
    return ConfigError(
        f"unknown key {_join(path, key)!r}{hint} {where} accepts: {', '.join(accepted)}"
    )


# ---------------------------------------------------------------------------------------- docs


def field_docs(cls: type) -> dict[str, str]:
    """``field -> docstring`` of a dataclass and its bases (the string literal after a field).

    Read from the source, so that the docs live once, next to the field; a class without
    source (built at run time) inherits the docs of its bases.
    """
    return dict(_cached_docs(cls))


@functools.cache
def _cached_docs(cls: type) -> tuple[tuple[str, str], ...]:
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        for node, after in zip(body.body, body.body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return tuple(docs.items())


# ---------------------------------------------------------------------------------------- plain data


def config_to_dict(config: Any) -> Any:
    """A config as plain data (dicts in field order, lists, numbers, strings, None)."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {name: config_to_dict(getattr(config, name)) for name in _fields(type(config))}
    if isinstance(config, Mapping):
        return {str(k): config_to_dict(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [config_to_dict(v) for v in config]
    if isinstance(config, os.PathLike):
        return os.fspath(config)
    return config


def config_from_dict(data: Any, cls: type, path: str = "") -> Any:
    """Build the config ``cls`` from plain data, checking every key and type.

    Fields the data leaves out keep their defaults. Raises :class:`ConfigError` for an unknown
    key (with the accepted names), a value of the wrong type, or a value ``cls`` rejects.
    """
    return _convert(data, cls, path)


def _convert(value: Any, tp: Any, path: str) -> Any:
    if tp is Any or tp is object:
        return value
    inner, optional = _split_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{path}: may not be null; expected {type_name(inner)}")
    if get_origin(inner) in (Union, types.UnionType):
        return _convert_union(value, get_args(inner), path)
    if _is_config_class(inner):
        return _convert_config(value, inner, path)
    if get_origin(inner) is Literal:
        choices = get_args(inner)
        if value not in choices:
            raise ConfigError(
                f"{path}: {value!r} is not one of {', '.join(repr(c) for c in choices)}"
            )
        return value
    if _is_mapping_type(inner):
        if not isinstance(value, Mapping):
            raise _wrong_type(path, inner, value)
        value_type = _mapping_value_type(inner)
        return {str(k): _convert(v, value_type, _join(path, str(k))) for k, v in value.items()}
    if _is_sequence_type(inner):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise _wrong_type(path, inner, value)
        items = [
            _convert(v, t, f"{path}[{i}]")
            for i, (v, t) in enumerate(zip(value, _item_types(inner, len(value), path)))
        ]
        return tuple(items) if inner is tuple or get_origin(inner) is tuple else items
    return _convert_scalar(value, inner, path)


def _convert_scalar(value: Any, tp: Any, path: str) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads "1e-6" (no dot) as a string
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is not None:
            # No setting of a run means anything at NaN or infinity ("--lr nan" trained with a
            # NaN step after minutes of warm-up): refused here, once, for every float field.
            if not math.isfinite(number):
                raise ConfigError(f"{path}: expected a finite number, got {value!r}")
            return number
    elif tp is str:
        if isinstance(value, str):
            return value
    elif isinstance(tp, type):
        if isinstance(value, tp):
            return value
    else:
        raise ConfigError(f"{path}: fields of type {tp!r} cannot be configured")
    raise _wrong_type(path, tp, value)


def _wrong_type(path: str, tp: Any, value: Any) -> ConfigError:
    return ConfigError(f"{path}: expected {type_name(tp)}, got {value!r} ({type(value).__name__})")


def _item_types(tp: Any, n: int, path: str) -> list[Any]:
    args = get_args(tp)
    if not args:
        return [Any] * n
    if get_origin(tp) is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        if n != len(args):
            raise ConfigError(f"{path}: expected {len(args)} items, got {n}")
        return list(args)
    return [args[0]] * n


def _convert_config(value: Any, cls: type, path: str) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise _wrong_type(path, cls, value)
    fields = _fields(cls)
    for key in value:
        if key not in fields:
            raise _unknown_key(path, str(key), cls)
    hints = _hints(cls)
    kwargs = {k: _convert(v, hints[k], _join(path, k)) for k, v in value.items()}
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path or cls.__name__}: {exc}") from exc


def _raise_misspelt(value: Mapping[str, Any], cls: type, path: str) -> None:
    """In a mapping with some of ``cls``'s fields, a key with a plain value is a typo."""
    for key, item in value.items():
        if key not in _fields(cls) and not isinstance(item, Mapping):
            raise _unknown_key(path, str(key), cls)


def _convert_union(value: Any, options: tuple[Any, ...], path: str) -> Any:
    configs = [m for m in options if _is_config_class(m)]
    mappings = [m for m in options if _is_mapping_type(m)]
    if isinstance(value, Mapping) and (configs or mappings):
        for cls in configs:
            if isinstance(value, cls) or _in_config_form(value, cls):
                return _convert_config(value, cls, path)
        if mappings:
            if configs and any(k in _fields(configs[0]) for k in value):
                cls = configs[0]
                _raise_misspelt(value, cls, path)
                raise ConfigError(
                    f"{path}: give either {cls.__name__} fields (one value for all), or one "
                    f"{cls.__name__} per key (e.g. per agent, given whole), not a mix of both; "
                    f"got keys {sorted(map(str, value))}"
                )
            return _convert(value, mappings[0], path)
        return _convert_config(value, configs[0], path)  # raises: names the unknown key
    for option in options:
        try:
            return _convert(value, option, path)
        except ConfigError:
            continue
    raise ConfigError(
        f"{path}: expected {' or '.join(type_name(o) for o in options)}, got {value!r}"
    )


# ---------------------------------------------------------------------------------------- layers


def merge(lower: Any, higher: Any, tp: Any, path: str = "") -> Any:
    """``higher`` layered over ``lower`` (both plain data of type ``tp``).

    Mappings of a config's fields merge field by field, recursively (a file that sets
    ``trainer.steps`` keeps every other trainer field of the preset); any other value — a
    number, a list, a free-form mapping such as ``env_kwargs`` — is replaced whole. A key that
    is not a field raises :class:`ConfigError`.
    """
    cls = _config_member(tp)
    if cls is None or not isinstance(higher, Mapping):
        return higher
    if not _in_config_form(higher, cls):
        if _mapping_member(tp) is not None:
            return higher  # the per-key form (e.g. per agent): replaced whole
        key = next(k for k in higher if k not in _fields(cls))
        raise _unknown_key(path, str(key), cls)
    if _per_key(lower, cls):
        raise _per_key_error(path, cls, lower)
    if not _in_config_form(lower, cls):
        lower = {}
    hints = _hints(cls)
    out = dict(lower)
    for key, value in higher.items():
        out[key] = merge(lower.get(key), value, hints[key], _join(path, key))
    return out


def _per_key(value: Any, cls: type) -> bool:
    """A non-empty mapping in the per-key form of a ``cls | dict[str, cls]`` field."""
    return isinstance(value, Mapping) and bool(value) and not _in_config_form(value, cls)


def _per_key_error(path: str, cls: type, value: Mapping[str, Any]) -> ConfigError:
    return ConfigError(
        f"{path} holds one {cls.__name__} per key here ({', '.join(map(str, value))}); set "
        f"its fields per key ({path}.KEY.FIELD), or give a whole new value"
    )


def set_path(data: Mapping[str, Any], path: Path_, value: Any, tp: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``value`` merged in at ``path`` (``tp``: the root's type)."""
    out = dict(data)
    node: dict[str, Any] = out
    node_type = tp
    for depth, key in enumerate(path):
        cls = _config_member(node_type)
        if cls is not None and key in _fields(cls) and _per_key(node, cls):
            raise _per_key_error(".".join(path[:depth]), cls, node)
        child_type = _child_type(node_type, key)
        if depth == len(path) - 1:
            node[key] = merge(node.get(key), value, child_type, ".".join(path))
            break
        child = node.get(key)
        node[key] = dict(child) if isinstance(child, Mapping) else {}
        node, node_type = node[key], child_type
    return out


def _child_type(tp: Any, key: str) -> Any:
    cls = _config_member(tp)
    if cls is not None and key in _fields(cls):
        return _hints(cls)[key]
    mapping = _mapping_member(tp)
    if mapping is not None:
        return _mapping_value_type(mapping)
    return Any


# ---------------------------------------------------------------------------------------- files


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The mapping in a ``.yaml`` / ``.yml`` / ``.json`` file."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {file} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError
        raise ConfigError(f"{file} is not valid JSON: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError (yaml is imported lazily)
        raise ConfigError(f"{file} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top, got {type(data).__name__}")
    return data


def write_config_file(config: Any, path: str | os.PathLike[str], header: str = "") -> Path:
    """Write a config (or plain data) as YAML (``.yaml``/``.yml``) or JSON, atomically."""
    file = Path(path)
    data = config_to_dict(config)
    if file.suffix == ".json":
        text = json.dumps(data, indent=2) + "\n"
    elif file.suffix in (".yaml", ".yml"):
        import yaml

        comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
        text = comment + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    else:
        raise ConfigError(f"{file}: a config file ends in .yaml, .yml or .json")
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, file)
    return file


# ---------------------------------------------------------------------------------------- flags


@dataclass(frozen=True)
class Leaf:
    """A field reachable from the root: its path, type, and whether an optional value holds it."""

    path: Path_
    type: Any
    under_optional: bool
    doc: str


@dataclass(frozen=True)
class Override:
    """One command-line setting: ``value`` (plain data) goes to every path in ``paths``."""

    flag: str
    paths: tuple[Path_, ...]
    value: Any


class CommandLine:
    """The flags of a config tree rooted at the dataclass ``root`` (see the module docstring)."""

    def __init__(self, root: type) -> None:
        if not _is_config_class(root):
            raise TypeError(f"root must be a dataclass, got {root!r}")
        self.root = root
        self.leaves = list(_walk_leaves(root, (), False))
        self.short = _short_names(self.leaves)

    # ------------------------------------------------------------------ resolving names

    def resolve(self, name: str) -> list[tuple[Path_, Any]]:
        """``(path, type)`` of every field a flag name (without ``--``) sets."""
        if "." not in name:
            key = name.replace("-", "_")
            if key in self.short:
                return [(leaf.path, leaf.type) for leaf in self.short[key]]
            if any(leaf.path[-1] == key for leaf in self.leaves):
                owners = sorted(".".join(leaf.path) for leaf in self.leaves if leaf.path[-1] == key)
                raise ConfigError(
                    f"--{name} is ambiguous: write the full name, one of "
                    + ", ".join(f"--{o}" for o in owners)
                )
        head, _, rest = name.partition(".")
        key = head.replace("-", "_")
        if key not in _fields(self.root) and len(self.short.get(key, [])) == 1:
            leaf = self.short[key][0]  # a short name, then keys: --sampling.left.temperature
            return [self._walk(rest.split("."), name, list(leaf.path), leaf.type)]
        return [self._walk(name.split("."), name, [], self.root)]

    def _walk(self, segments: list[str], name: str, path: list[str], tp: Any) -> tuple[Path_, Any]:
        for seg in segments:
            cls = _config_member(tp)
            field = None
            if cls is not None:
                fields = _fields(cls)
                field = seg if seg in fields else seg.replace("-", "_")
                field = field if field in fields else None
            if cls is not None and field is not None:
                path.append(field)
                tp = _hints(cls)[field]
            elif _mapping_member(tp) is not None:
                path.append(seg)
                tp = _mapping_value_type(_mapping_member(tp))
            elif tp is Any:
                path.append(seg)
            else:
                raise self._unknown(name, path, seg, cls)
        return tuple(path), tp

    def _unknown(self, name: str, at: list[str], seg: str, cls: type | None) -> ConfigError:
        where = ".".join(at)
        if cls is None:
            return ConfigError(f"--{name}: {where} is a single value; it has no {seg!r}")
        if not at:
            key = name.replace("-", "_")
            names = sorted({*self.short, *(".".join(leaf.path) for leaf in self.leaves)})
            close = difflib.get_close_matches(key, names, n=3)
            if not close:  # --out -> --output-dir
                close = [n for n in self.short if n.startswith(key) or key in n.split("_")][:3]
            hint = f" Did you mean {', '.join('--' + _dashed(c) for c in close)}?" if close else ""
            return ConfigError(f"unknown option --{name}.{hint} See --help for every option")
        error = _unknown_key(where, seg, cls)
        return ConfigError(f"--{name}: {error}")

    # ------------------------------------------------------------------ parsing

    def parse(self, argv: Sequence[str]) -> list[Override]:
        """The overrides of ``argv`` (flags only), in order. Raises :class:`ConfigError`."""
        out: list[Override] = []
        i = 0
        argv = list(argv)
        while i < len(argv):
            token = argv[i]
            i += 1
            if not token.startswith("--") or token == "--":
                raise ConfigError(
                    f"unexpected argument {token!r}: options look like --name VALUE (see --help)"
                )
            name, eq, text = token[2:].partition("=")
            targets, negated = self._targets(name)
            leaf_type = targets[0][1]
            flag = f"--{name}"
            is_bool = _split_optional(leaf_type)[0] is bool
            if negated:
                if eq:
                    raise ConfigError(f"{flag} takes no value")
                value: Any = False
            elif eq:
                value = parse_text(text, leaf_type, flag)
            elif is_bool:
                if i < len(argv) and argv[i].lower() in (*_TRUE_WORDS, *_FALSE_WORDS):
                    value = parse_text(argv[i], leaf_type, flag)
                    i += 1
                else:
                    value = True
            else:
                if i >= len(argv):
                    raise ConfigError(f"{flag} needs a value ({type_name(leaf_type)})")
                value = parse_text(argv[i], leaf_type, flag)
                i += 1
            out.append(Override(flag, tuple(path for path, _ in targets), value))
        return out

    def _targets(self, name: str) -> tuple[list[tuple[Path_, Any]], bool]:
        try:
            return self.resolve(name), False
        except ConfigError:
            for prefix in ("no-", "no_"):
                if name.startswith(prefix):
                    try:
                        targets = self.resolve(name[len(prefix) :])
                    except ConfigError:
                        break
                    if all(_split_optional(tp)[0] is bool for _, tp in targets):
                        return targets, True
            raise

    def apply(self, data: Mapping[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
        """``data`` with every override merged in (later ones win)."""
        out = dict(data)
        for override in overrides:
            for path in override.paths:
                out = set_path(out, path, override.value, self.root)
        return out

    # ------------------------------------------------------------------ help

    def help(self, data: Mapping[str, Any] | None = None, width: int = 96) -> str:
        """Every option, grouped by section, with its doc and (given ``data``) its value."""
        aliases: dict[Path_, list[str]] = {}
        for short, leaves in self.short.items():
            if len(leaves) > 1 or ".".join(leaves[0].path) != short:
                for leaf in leaves:
                    aliases.setdefault(leaf.path, []).append(short)
        shared = {short: leaves for short, leaves in self.short.items() if len(leaves) > 1}
        lines: list[str] = []
        section: Path_ | None = None
        docs = field_docs(self.root)
        for leaf in self.leaves:
            head = leaf.path[:1] if len(leaf.path) > 1 else ()
            if head != section:
                section = head
                if head:
                    cls = _config_member(_hints(self.root)[head[0]])
                    title = f"{head[0]} ({cls.__name__})" if cls else head[0]
                    lines += ["", f"{title}:"]
                    if docs.get(head[0]):
                        lines += textwrap.wrap(
                            _plain(docs[head[0]]),
                            width,
                            initial_indent="  ",
                            subsequent_indent="  ",
                        )
                else:
                    lines += ["", "run:"]
            label = "--" + ".".join(leaf.path)
            if _mapping_member(leaf.type) is not None and _config_member(leaf.type) is None:
                label += ".KEY"
            label += f" {_metavar(leaf.type)}"
            others = [f"--{_dashed(s)}" for s in aliases.get(leaf.path, [])]
            if others:
                label += f"  (or {', '.join(others)})"
            lines.append("  " + label)
            text = _plain(leaf.doc)
            if data is not None:
                value = _get(data, leaf.path)
                if value is not _MISSING:
                    text += f" [{_show(value)}]"
            lines += textwrap.wrap(text, width, initial_indent="      ", subsequent_indent="      ")
        if shared:
            lines += ["", "short names that set several fields:"]
            for short, leaves in sorted(shared.items()):
                targets = ", ".join(".".join(leaf.path) for leaf in leaves)
                lines.append(f"  --{_dashed(short)}: {targets}")
        lines += [
            "",
            "A bool option alone means true (--lora); --no-NAME means false (--no-plot). none / "
            "null clear an optional value.",
        ]
        return "\n".join(lines).lstrip("\n")


def _walk_leaves(cls: type, prefix: Path_, under_optional: bool) -> Iterator[Leaf]:
    hints = _hints(cls)
    docs = field_docs(cls)
    for name in _fields(cls):
        tp = hints[name]
        path = (*prefix, name)
        inner, optional = _split_optional(tp)
        sub = _config_member(tp)
        if sub is not None and _mapping_member(tp) is None and not optional:
            yield from _walk_leaves(sub, path, under_optional)  # a section: its fields are flags
            continue
        yield Leaf(path, tp, under_optional, docs.get(name, ""))
        if sub is not None:  # e.g. sampling: settable whole, or field by field
            yield from _walk_leaves(sub, path, under_optional or optional)


def _short_names(leaves: Sequence[Leaf]) -> dict[str, list[Leaf]]:
    by_name: dict[str, list[Leaf]] = {}
    for leaf in leaves:
        by_name.setdefault(leaf.path[-1], []).append(leaf)
    short: dict[str, list[Leaf]] = {}
    for name, candidates in by_name.items():
        depth = min(len(leaf.path) for leaf in candidates)
        if depth <= 2:
            short[name] = [leaf for leaf in candidates if len(leaf.path) == depth]
            continue
        plain = [leaf for leaf in candidates if not leaf.under_optional]
        if len(plain) == 1:
            short[name] = plain
    return short


def parse_text(text: str, tp: Any, flag: str) -> Any:
    """A command-line string as a value of type ``tp`` (plain data)."""
    inner, optional = _split_optional(tp)
    literal = get_args(inner) if get_origin(inner) is Literal else ()
    if optional and text.strip().lower() in _NONE_WORDS and text not in literal:
        return None
    try:
        if inner is bool:
            word = text.strip().lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
            raise ValueError
        if inner is int:
            return int(text)
        if inner is float:
            return float(text)
        if inner is str:
            return text
    except ValueError:
        raise ConfigError(f"{flag}: expected {type_name(inner)}, got {text!r}") from None
    if literal:
        for choice in literal:
            if text == str(choice):
                return choice
        raise ConfigError(f"{flag}: {text!r} is not one of {', '.join(repr(c) for c in literal)}")
    if _is_sequence_type(inner) and not text.lstrip().startswith(("[", "{")):
        parts = [p.strip() for p in text.split(",")] if text.strip() else []
        return [parse_text(p, t, flag) for p, t in zip(parts, _item_types(inner, len(parts), flag))]
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if inner is Any:
            return text
        raise ConfigError(f"{flag}: expected {type_name(inner)} as YAML/JSON: {exc}") from None


def _dashed(name: str) -> str:
    return name.replace("_", "-")


def _metavar(tp: Any) -> str:
    inner, _ = _split_optional(tp)
    if inner is bool:
        return "[BOOL]"
    if get_origin(inner) is Literal:
        return "{" + ",".join(str(c) for c in get_args(inner)) + "}"
    if inner in (int, float, str):
        return inner.__name__.upper()
    if _is_sequence_type(inner):
        return "A,B,..."
    return "YAML"


def _plain(doc: str) -> str:
    """A docstring as one line of plain text (reST roles and double backquotes removed)."""
    doc = re.sub(r":\w+:`~?([^`<]*?)(?: <[^>]*>)?`", lambda m: m.group(1).split(".")[-1], doc)
    return " ".join(doc.replace("``", "`").split())


_MISSING = object()


def _get(data: Any, path: Path_) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return _MISSING
        data = data[key]
    return data


def _show(value: Any) -> str:
    return json.dumps(value, default=str)
