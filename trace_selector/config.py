"""Typed configs: dataclass defaults < YAML recipe < ``key=value`` overrides from the command line.

Every config is a dataclass whose fields carry a docstring and whose ``__post_init__`` rejects bad
values. `load_config` resolves the three layers; `dump_config` writes the resolved config next to an
output so a run can be reproduced from its folder alone. `config_keys` lists every settable key with
its type, default and docstring (read from the class source), which each command's ``--help`` shows
(`describe_keys`).

    cfg = load_config(TrainConfig, "training/wikileads.yaml", ["optim.lr=3e-4", "seed=1"])
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from trace_selector.errors import InputError

C = TypeVar("C")


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def from_dict(cls: type[C], data: dict[str, Any], where: str = "config") -> C:
    """Build dataclass `cls` from a (nested) dict; unknown keys are an `InputError` naming them."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(_suggest(k, cls) for k in unknown)}; "
                         f"known: {', '.join(sorted(names))}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        tp = hints[name]
        if _is_dataclass_type(tp) and isinstance(value, dict):
            value = from_dict(tp, value, f"{where}.{name}")
        else:
            value = _coerce(value, tp, f"{where}.{name}")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: {err}") from err


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Convert YAML/CLI scalars to the annotated type (YAML reads ``3e-4`` as a string)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where) if len(inner) == 1 else value
    try:
        if tp is float and isinstance(value, (int, str)) and not isinstance(value, bool):
            return float(value)
        if tp is int and isinstance(value, str):
            return int(value)
        if tp is bool and isinstance(value, str):
            if value.lower() in ("true", "yes", "1"):
                return True
            if value.lower() in ("false", "no", "0"):
                return False
            raise ValueError(value)
        if tp is Path and isinstance(value, str):
            return Path(value)
        if typing.get_origin(tp) is tuple and isinstance(value, list):
            return tuple(value)
    except ValueError as err:
        raise InputError(f"{where}: cannot read {value!r} as {getattr(tp, '__name__', tp)}") from err
    return value


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict of a dataclass config (paths become strings), ready for YAML or JSON."""

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return plain(cfg)


def _parse_override(item: str) -> tuple[list[str], Any]:
    import yaml

    if "=" not in item:
        raise InputError(f"override '{item}': expected key=value (e.g. optim.lr=3e-4)")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def merge_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b=value`` overrides (values parsed as YAML scalars) to a nested dict, in place."""
    for item in overrides:
        keys, value = _parse_override(item)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise InputError(f"override '{item}': '{k}' is not a section")
        node[keys[-1]] = value
    return data


def load_config(cls: type[C], path: str | Path | None = None, overrides: list[str] | None = None,
                flags: dict[str, Any] | None = None) -> C:
    """Resolve defaults < YAML file at `path` < command-line `flags` (None values = not given) <
    ``key=value`` `overrides` into an instance of `cls`."""
    data = read_yaml(path) if path is not None else {}
    data.update({k: v for k, v in (flags or {}).items() if v is not None})
    merge_overrides(data, list(overrides or []))
    return from_dict(cls, data, str(path) if path else "config")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; every problem is one `InputError` naming the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: config file not found")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from err
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InputError(f"{path}: expected a mapping at the top level")
    return loaded


def dump_config(cfg: Any, path: str | Path) -> None:
    """Write the resolved config as YAML (atomically) so the output folder documents its run."""
    import yaml

    from trace_selector.atomic import atomic_write

    with atomic_write(path) as fh:
        yaml.safe_dump(to_dict(cfg), fh, sort_keys=False)


def _suggest(key: str, cls: type) -> str:
    """`key` with the closest known key of `cls`, dotted ones included, so ``temperature=0.8`` on a
    rollout points at ``agent.temperature``."""
    dotted = [k.key for k in config_keys(cls)]
    close = [k for k in dotted if k.rsplit(".", 1)[-1] == key] or difflib.get_close_matches(
        key, dict.fromkeys([f.name for f in dataclasses.fields(cls) if f.init] + dotted), n=1)
    return f"{key} (did you mean {close[0]}?)" if close else key


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigKey:
    """One settable leaf of a config dataclass, as the command line names it."""

    key: str
    """Dotted path from the top config (``agent.temperature``)."""
    type: str
    """The field's annotation, as text."""
    default: Any
    """Its default (`dataclasses.MISSING` when it has none)."""
    doc: str
    """The docstring under the field ('' when it has none)."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass `cls` and its dataclass bases, read from the source
    (Python keeps attribute docstrings nowhere at run time). A class without source has none."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _type_text(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return re.sub(r"\b(typing|pathlib|collections\.abc)\.", "", str(tp))


@functools.cache
def config_keys(cls: type) -> tuple[ConfigKey, ...]:
    """Every leaf key of config dataclass `cls`, nested dataclasses flattened to dotted keys, in field
    order; defaults of a nested section come from the section's own default instance."""

    def walk(klass: type, prefix: str, instance: Any) -> list[ConfigKey]:
        hints, docs, out = _field_types(klass), field_docs(klass), []
        for f in dataclasses.fields(klass):
            if not f.init:
                continue
            value = getattr(instance, f.name) if instance is not None else _default(f)
            tp = hints[f.name]
            if _is_dataclass_type(tp):
                out += walk(tp, f"{prefix}{f.name}.", value if dataclasses.is_dataclass(value) else None)
            else:
                out.append(ConfigKey(prefix + f.name, _type_text(tp), value, docs.get(f.name, "")))
        return out

    return tuple(walk(cls, "", None))


def _first_sentence(doc: str) -> str:
    """The doc's first sentence (its first paragraph if no sentence ends before a capital letter)."""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])\s+(?=[A-Z])", paragraph)
    return match.group(1) if match else paragraph


def _value_text(value: Any) -> str:
    import yaml

    if value is dataclasses.MISSING:
        return "(required)"
    plain = to_dict(value) if dataclasses.is_dataclass(value) else str(value) if isinstance(value, Path) else value
    # As a KEY=VALUE override would spell it: overrides are parsed as YAML.
    return yaml.safe_dump(plain, default_flow_style=True, width=10**6).strip().removesuffix("\n...").strip()


def describe_keys(cls: type, width: int = 100) -> str:
    """Help text listing each key of config `cls`: ``key: type = default`` and its doc's first sentence."""
    lines = ["configuration keys (give KEY=VALUE after the flags, e.g. a.b=1; a --config YAML nests the same keys):"]
    for k in config_keys(cls):
        lines.append(f"  {k.key}: {k.type} = {_value_text(k.default)}")
        lines += textwrap.wrap(_first_sentence(k.doc), width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)
