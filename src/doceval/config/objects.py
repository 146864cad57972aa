"""The typed configuration objects: a validated mapping made into the frozen :class:`~doceval.config.schema.Config`
(``build_config``), and back into the plain mapping that params.yaml, MLflow params, summaries and cache keys
record (``config_dict``).

The two are inverse on every composition of conf/: ``config_dict(build_config(d)) == d`` (a test checks each
option), so a recorded config or a cache key does not change because the code reads attributes. A field whose
schema default is None and whose value is None ("unset", a key conf/ leaves out) is left out of the mapping.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from doceval.config import schema

T = TypeVar("T")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def yaml_key(f: Field[Any]) -> str:
    """The key a field has in YAML (``global_`` is ``global``)."""
    return str(f.metadata.get("key", f.name))


def _options(hint: Any) -> list[Any]:
    if get_origin(hint) in (Union, types.UnionType):
        return [a for a in get_args(hint) if a is not type(None)]
    return [hint]


def build_block(cls: type[T], data: Mapping[str, Any], section: str = "") -> T:
    """One schema dataclass from its validated mapping (nested blocks, variants, tuples and read-only maps)."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("flat"):
            values[f.name] = _build_flat(cls, data, section)
            continue
        key = yaml_key(f)
        if key in data:
            hint = _hints(cast(type, cls))[f.name]
            values[f.name] = _build_value(data[key], hint, f"{section}.{key}".strip("."))
        elif f.default is MISSING:
            raise ValueError(f"{section}.{key}: missing (validate the mapping before building it)")
    return cls(**values)


def _build_flat(cls: type, data: Mapping[str, Any], section: str) -> Any:
    base = schema.EXTENDED_BY[cls]
    own = {yaml_key(f) for f in fields(cls)}
    subset = {k: v for k, v in data.items() if k not in own}
    return build_block(base, subset, section)


def _build_value(value: Any, hint: Any, path: str) -> Any:
    if value is None:
        return None
    options = _options(hint)
    if len(options) > 1:  # a block chosen by its first, Literal-typed field (retriever.name, floors.source)
        disc = fields(options[0])[0].name
        chosen = next(o for o in options if get_args(_hints(o)[disc])[0] == value[disc])
        return build_block(chosen, value, path)
    (one,) = options
    origin = get_origin(one)
    if is_dataclass(one):
        return build_block(one, value, path)  # type: ignore[arg-type]
    if origin in (tuple, list):
        return tuple(_build_value(item, get_args(one)[0], path) for item in value)
    if origin in (dict, Mapping):
        return types.MappingProxyType(dict(value))
    return value  # an int where a float is declared stays an int: the recorded config keeps what was written


def build_config(data: Mapping[str, Any]) -> schema.Config:
    """The whole configuration, typed (``data`` validated complete by ``validate.validate_config``)."""
    return build_block(schema.Config, data)


def config_dict(obj: Any) -> Any:
    """A config object (or block) as the plain mapping it was built from: YAML keys, lists, dicts."""
    if is_dataclass(obj) and not isinstance(obj, type):
        if type(obj) in schema.EXTENDED_BY.values():  # the client config of an openai block: plain fields
            return {f.name: config_dict(getattr(obj, f.name)) for f in fields(obj)}
        out: dict[str, Any] = {}
        for f in fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("flat"):
                out.update(config_dict(value))
            elif not (value is None and f.default is None):
                out[yaml_key(f)] = config_dict(value)
        return out
    if isinstance(obj, Mapping):
        return {str(k): config_dict(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [config_dict(v) for v in obj]
    return obj
