"""The one validator: a mapping checked against a block of the typed schema (:mod:`doceval.config.schema`), every
key declared, typed and in range, then built into the frozen block. The composed configuration (``compose()``,
``load_params()``), a hand-written gate file (doceval.results.gate_config) and a ``--llm`` file of LLM settings
all pass through it."""

from __future__ import annotations

import json
import math
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from doceval.config import schema
from doceval.config.objects import build_block, build_config, yaml_key
from doceval.errors import UsageError

T = TypeVar("T")
# Valid keys named in an error (a gate's thresholds take ~130 names, the conversation figures included).
MAX_LISTED = 24


def validate_config(cfg: Mapping[str, Any], where: str = "") -> schema.Config:
    """``cfg`` checked against :class:`~doceval.config.schema.Config` and built into it (frozen, typed).

    A UsageError names the dotted key, the bad value, what is expected and an example fix; ``where`` (a file
    name) prefixes it.
    """
    check_config(cfg, where)
    return build_config(cfg)


def validate_block(cls: type[T], data: Any, where: str, path: str) -> T:
    """``data`` checked complete against the schema block ``cls`` (e.g. schema.Gate) as the block at ``path``
    (e.g. "gate") and built into it; a UsageError names ``where`` (a file, a flag) and the dotted key."""
    try:
        _check_block(data, cls, path, True)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return build_block(cls, data, path)


def check_config(cfg: Mapping[str, Any], where: str = "", complete: bool = True) -> None:
    """The checks of ``validate_config`` alone. ``complete=False`` lets keys be absent (checking a fragment,
    e.g. one block a user wrote); the types, ranges and unknown keys of what is there are checked the same."""
    try:
        _check_block(cfg, schema.Config, "", complete)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}" if where else str(exc)) from None


@cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a schema dataclass (``from __future__ import annotations`` leaves strings)."""
    return get_type_hints(cls)


@cache
def _declared(cls: type) -> dict[str, tuple[Field[Any], Any]]:
    """A block's keys as YAML spells them -> (field, resolved type), the fields of schema.EXTENDED_BY included."""
    pairs = [(f, _hints(cls)[f.name]) for f in fields(cls) if not f.metadata.get("flat")]
    if cls in schema.EXTENDED_BY:
        base = schema.EXTENDED_BY[cls]
        pairs += [(f, _hints(base)[f.name]) for f in fields(base)]
    return {yaml_key(f): (f, hint) for f, hint in pairs}


def _required(f: Field[Any]) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _split_optional(hint: Any) -> tuple[list[Any], bool]:
    if get_origin(hint) in (Union, types.UnionType):
        args = get_args(hint)
        return [a for a in args if a is not type(None)], type(None) in args
    return [hint], False


def _choices(meta: Mapping[str, Any], name: str) -> tuple[Any, ...] | None:
    found = meta.get(name)
    if found is None:
        return None
    return tuple(found() if callable(found) else found)


def _in_range(value: Any, meta: Mapping[str, Any]) -> bool:
    """``value`` (a number) within the ``ge``/``gt``/``le`` bounds of ``meta``."""
    if "ge" in meta and not value >= meta["ge"]:
        return False
    if "gt" in meta and not value > meta["gt"]:
        return False
    return not ("le" in meta and not value <= meta["le"])


def _range_text(meta: Mapping[str, Any]) -> str:
    parts = [f"{op} {meta[key]}" for key, op in (("ge", ">="), ("gt", ">"), ("le", "<=")) if key in meta]
    return " and ".join(parts)


def _type_ok(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the scalar type ``hint`` names; bool is not an int, an int is a float."""
    options, nullable = _split_optional(hint)
    if value is None:
        return nullable
    (one,) = options
    origin = get_origin(one)
    if origin is Literal:
        return value in get_args(one)
    if one is bool:
        return isinstance(value, bool)
    if one is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if one is float:
        # NaN and +-inf are no setting (and not JSON: summaries record the config), nor an int past float's range.
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return math.isfinite(value) if isinstance(value, float) else abs(value) <= sys.float_info.max
    if one is str:
        return isinstance(value, str)
    if origin in (list, tuple):  # a YAML list (built into a tuple)
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping) or is_dataclass(one):
        return isinstance(value, Mapping)
    raise TypeError(f"schema: unsupported type {one!r}")


def _describe(hint: Any, meta: Mapping[str, Any]) -> str:
    """What a value of ``hint`` looks like, in words: ``an integer >= 1``, ``one of a, b``, ``... or null``."""
    options, nullable = _split_optional(hint)
    text = meta.get("what") or _describe_one(options, meta)
    return f"{text} or null" if nullable else text


def _describe_one(options: list[Any], meta: Mapping[str, Any]) -> str:
    if len(options) > 1:
        return "a mapping"
    (one,) = options
    bounds = _range_text(meta)
    choices = _choices(meta, "choices")
    origin = get_origin(one)
    if origin is Literal or choices:
        return "one of " + ", ".join(str(c) for c in (choices or get_args(one)))
    if one is bool:
        return "true or false"
    if one in (int, float):
        return ("an integer" if one is int else "a number") + (f" {bounds}" if bounds else "")
    if one is str:
        return "a non-empty string" if meta.get("nonempty") else "a string"
    if origin in (list, tuple):
        return f"a list, each item {_describe(get_args(one)[0], meta)}"
    if origin in (dict, Mapping):
        item = get_args(one)[1]
        return "a mapping" if item is Any else f"a mapping, each value {_describe(item, meta)}"
    return "a mapping with keys " + ", ".join(_declared(one))


def _fmt(value: Any) -> str:
    """A value as the user typed it: true/false/null, bare strings, JSON for the rest."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        # Quoted when bare text would read as another type: params.yaml's k: '5' is a string, not 5.
        return repr(value) if not value or value.strip() != value or _reads_as_scalar(value) else value
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _reads_as_scalar(text: str) -> bool:
    if text.lower() in ("true", "false", "null", "none", "~", "yes", "no", "on", "off"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _bad(path: str, value: Any, hint: Any, meta: Mapping[str, Any]) -> UsageError:
    example = meta.get("example")
    fix = ""
    if example is not None and path.endswith("]"):  # an item of a list: the example is the whole list
        fix = f" (e.g. {path[: path.rindex('[')]}={example})"
    elif example is not None and "[" in path:  # a key of a list item, e.g. docs.libraries[1].version
        fix = f" (e.g. {path.rsplit('.', 1)[-1]}: {example})"
    elif example is not None:
        fix = f" (e.g. {path}={example})"
    return UsageError(f"{path}={_fmt(value)}: expected {_describe(hint, meta)}{fix}")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _check_block(value: Any, cls: type, path: str, complete: bool, note: str = "") -> None:
    if not isinstance(value, Mapping):
        raise UsageError(f"{path or 'config'}={_fmt(value)}: expected {_describe_one([cls], {})}")
    keys = _declared(cls)
    for key in value:
        sub = _join(path, key)
        if key not in keys:
            raise UsageError(f"{sub}: unknown key; valid keys: {', '.join(keys)}{note}")
    for key, (f, hint) in keys.items():
        sub = _join(path, key)
        if key in value:
            _check(value[key], hint, f.metadata, sub, complete)
        elif complete and _required(f):
            example = f.metadata.get("example")
            fix = f" (e.g. {sub}={example})" if example is not None else ""
            raise UsageError(f"{sub}: missing; expected {_describe(hint, f.metadata)}{fix}")
    for key, (f, _) in keys.items():
        other = f.metadata.get("not_with")  # two spellings of one setting: set one
        if other and value.get(key) is not None and value.get(other):
            raise UsageError(
                f"{_join(path, key)}={_fmt(value[key])} and {_join(path, other)}="
                f"{_fmt(value[other])}: set one ({f.metadata.get('why', 'not both')})"
            )


def _check(value: Any, hint: Any, meta: Mapping[str, Any], path: str, complete: bool) -> None:
    options, nullable = _split_optional(hint)
    if value is None and nullable:
        return
    if len(options) > 1:
        _check_variant(value, options, path, complete)
        return
    (one,) = options
    if not _type_ok(value, hint):
        raise _bad(path, value, hint, meta)
    origin = get_origin(one)
    if is_dataclass(one):
        assert isinstance(one, type)
        _check_block(value, one, path, complete)
    elif origin in (list, tuple):
        for i, item in enumerate(value):
            _check(item, get_args(one)[0], meta, f"{path}[{i}]", complete)
    elif origin in (dict, Mapping):
        item_hint = get_args(one)[1]
        if item_hint is Any:  # a free-form mapping: only where OPEN_MAPPINGS says so
            if path not in schema.OPEN_MAPPINGS:
                raise TypeError(f"schema: {path} is a free-form mapping; list it in OPEN_MAPPINGS")
            return
        allowed = _choices(meta, "keys")
        for key, item in value.items():
            if allowed is not None and key not in allowed and "unknown" in meta:
                raise UsageError(f"{_join(path, key)}: {meta['unknown']()}")
            if allowed is not None and key not in allowed:
                shown = ", ".join(allowed[:MAX_LISTED]) + (
                    f" and {len(allowed) - MAX_LISTED} more" if len(allowed) > MAX_LISTED else ""
                )
                raise UsageError(f"{_join(path, key)}: unknown key; valid keys: {shown}")
            _check(item, item_hint, meta, _join(path, key), complete)
    elif one in (int, float):
        choices = _choices(meta, "choices")
        if not _in_range(value, meta) or (choices is not None and value not in choices):
            raise _bad(path, value, hint, meta)
    elif one is str:
        choices = _choices(meta, "choices")
        pattern = meta.get("pattern")
        if (
            (meta.get("nonempty") and not value.strip())
            or (choices is not None and value not in choices)
            or (pattern and not re.fullmatch(pattern, value))
        ):
            raise _bad(path, value, hint, meta)
        broken = meta["rule"](value) if "rule" in meta else None
        if broken:
            raise UsageError(f"{path}={_fmt(value)}: {broken}")


def _check_variant(value: Any, variants: list[Any], path: str, complete: bool) -> None:
    """A block that is one of several dataclasses, chosen by the value of their first (Literal) field."""
    if not isinstance(value, Mapping):
        raise UsageError(f"{path}={_fmt(value)}: expected a mapping")
    disc = fields(variants[0])[0].name
    by_name: dict[Any, type] = {get_args(_hints(v)[disc])[0]: v for v in variants}
    names = ", ".join(str(n) for n in by_name)
    if disc not in value:
        raise UsageError(f"{path}.{disc}: missing; expected one of {names}")
    name = value[disc]
    if not isinstance(name, str) or name not in by_name:
        first = next(iter(by_name))
        raise UsageError(f"{path}.{disc}={_fmt(name)}: expected one of {names} (e.g. {path}.{disc}={first})")
    _check_block(value, by_name[name], path, complete, note=f" (with {path}.{disc}={name})")
