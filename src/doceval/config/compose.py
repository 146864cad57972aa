"""Configuration: Hydra composition of conf/ (for `doceval ... overrides`) and params.yaml (for DVC stages), both
validated against the typed schema (:mod:`doceval.config.schema`) before anything else runs."""

from __future__ import annotations

import json
import math
import os
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from doceval.common.hints import params_command
from doceval.common.redact import register_config, register_overrides, scrub_message
from doceval.common.secret_rule import secret_name
from doceval.config import schema
from doceval.config.engine_choice import drop_other_engine_keys, engine_block, engine_overrides
from doceval.config.objects import build_config, config_dict, yaml_key
from doceval.config.project import OVERRIDES_MARK, merge_overrides, project_overrides, with_project
from doceval.errors import UsageError

CONF_DIR = Path("conf")
PARAMS = Path("params.yaml")
CONF_ENV = "DOCEVAL_CONF"
# Valid keys named in an error (a gate's thresholds take ~130 names, the conversation figures included).
MAX_LISTED = 24
# The conf/ shipped inside the package (src/doceval/conf, a link to the repository's conf/ in a checkout; its
# files in a wheel), so an installed doceval composes without a clone.
SOURCE_CONF = Path(__file__).resolve().parents[1] / "conf"


def find_conf_dir() -> Path:
    """Where the Hydra configuration is: ./conf (this repository), else $DOCEVAL_CONF, else the conf/ shipped in
    the installed package, so a user's own project needs no copy of conf/ (its differences live in doceval.yaml;
    paths in the config stay relative to the working directory: the user's golden set, eval/ and mlruns/). A
    $DOCEVAL_CONF without a config.yaml is an error, never skipped: the user asked for that folder."""
    local = CONF_DIR / "config.yaml"
    if (local.exists() or local.is_symlink()) and not local.is_file():
        raise UsageError(f"{local}: is not a file (a directory or a dangling link); make it the Hydra config "
                         f"file, or remove {CONF_DIR}/ to use doceval's shipped conf/")  # fmt: skip
    named = os.environ.get(CONF_ENV)
    if named and not (Path(named) / "config.yaml").is_file():
        what = "is not a folder" if not Path(named).is_dir() else "has no config.yaml"
        raise UsageError(f"{CONF_ENV}={named}: {what}; point it at a conf/ folder (one with config.yaml), or "
                         "unset it to use ./conf or the conf/ shipped with doceval")  # fmt: skip
    for candidate in (CONF_DIR, Path(named) if named else None, SOURCE_CONF):
        if candidate is not None and (candidate / "config.yaml").is_file():
            return candidate
    raise UsageError(
        f"{CONF_DIR}/config.yaml not found: run doceval from a project with a conf/ folder, or set "
        f"{CONF_ENV}=PATH/TO/conf"
    )


def compose(
    overrides: Sequence[str] = (), conf_dir: str | Path | None = None, project: str | Path | None = None
) -> schema.Config:
    """Compose ``conf/config.yaml``, then the project file's overrides (``project``, default ./doceval.yaml when
    there is one; :mod:`doceval.config.project`), then ``overrides``, into the typed, frozen config.

    Unknown groups or options (Hydra), unknown keys, wrong types and out-of-range values (the schema) become a
    UsageError that names the key and lists the valid choices.
    """
    # lazy: start-up (Hydra and OmegaConf, ~0.35 s): DVC stages read params.yaml and never compose
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    # Before Hydra parses them (its errors quote the override as written); a str is refused just below.
    register_overrides(overrides if not isinstance(overrides, str) else ())
    conf_dir = find_conf_dir() if conf_dir is None else _path_arg(conf_dir, "compose", "conf_dir", "conf")
    if not (conf_dir / "config.yaml").is_file():
        raise UsageError(f"{conf_dir}/config.yaml not found: run doceval from the project root")
    command = check_override_syntax(overrides)
    found, from_project = project_overrides(project)
    register_overrides(from_project)  # before its syntax is checked: a message may quote one
    before = merge_overrides(check_override_syntax(from_project, where=found), engine_overrides())
    overrides = drop_other_engine_keys(merge_overrides(before, command))
    register_overrides(overrides)
    try:
        with initialize_config_dir(config_dir=str(conf_dir.resolve()), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
        data = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(data, dict)
        register_config(data)
        return validate_config({str(k): v for k, v in data.items()})
    except yaml.YAMLError as exc:  # a conf/ file that is not YAML (Hydra lets the parser's error through)
        raise UsageError(_yaml_error(exc, conf_dir)) from None
    except MissingConfigException as exc:
        raise UsageError(scrub_message(f"config override: {_first_line(exc)}")) from None
    except (ConfigCompositionException, OmegaConfBaseException, HydraException) as exc:
        text = f"config override: {_first_line(exc)} (see conf/ for the groups and keys)"
        raise UsageError(scrub_message(text)) from None
    except (OSError, UnicodeDecodeError) as exc:  # after Hydra's: MissingConfigException is an OSError
        where = getattr(exc, "filename", None) or _undecodable(conf_dir) or f"a file under {conf_dir}/"
        why = (
            f"not UTF-8 text: {exc.reason}"
            if isinstance(exc, UnicodeDecodeError)
            else exc.strerror or str(exc)
        )
        raise UsageError(f"{where}: cannot read the Hydra config ({why}); fix or restore it") from None
    except UsageError as exc:  # the schema's message quotes the value: a URL's password, a token
        raise UsageError(scrub_message(str(exc))) from None


def _undecodable(conf_dir: Path) -> str | None:
    """The first YAML file under ``conf_dir`` that is not UTF-8 (Hydra's decode error does not name it)."""
    for path in sorted(conf_dir.rglob("*.yaml")):
        try:
            path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return str(path)
    return None


def _yaml_error(exc: yaml.YAMLError, conf_dir: Path) -> str:
    """A YAML error in a conf/ file as ``file:line: not valid YAML (what)``, with the fix."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{mark.name}:{mark.line + 1}" if mark is not None else f"a file under {conf_dir}/"
    what = " ".join(str(getattr(exc, "problem", None) or exc).split())
    return f"{where}: not valid YAML ({what}); fix that line of the Hydra config (or restore it from git)"


GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"
# A key is dotted words; `+`/`++` add, `~` deletes (Hydra's override grammar).
_KEY = re.compile(r"(?:\+\+|\+|~)?[\w./@-]+(?:\[[^\]]*\])?")


def check_override_syntax(overrides: Sequence[str] | str, where: Path | None = None) -> list[str]:
    """Every override parsed on its own before composing, so a syntax error names the override that has it
    (Hydra's own message shows a fragment of the input) and how to write it, and ``where`` it is written (the
    project file and the item); values of secret-looking keys and URL credentials are never shown."""
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        # The type only: the value could be an override holding a secret.
        what = "a str" if isinstance(overrides, str) else "a list with an item that is not a str"
        raise UsageError(f"overrides={what}: expected a list of KEY=VALUE strings (e.g. overrides=['k=3'])")
    # lazy: start-up (Hydra, ~0.35 s), as in compose()
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for i, override in enumerate(overrides):
        try:
            parser.parse_override(override)
        except HydraException as exc:
            message = _syntax_error(override, exc)
            raise UsageError(f"{where}: overrides[{i}]: {message}" if where else message) from None
    return list(overrides)


def _syntax_error(override: str, exc: BaseException) -> str:
    key, sep, _ = override.partition("=")
    shown = f"{key}=<redacted>" if sep and _secret_key(key) else scrub_message(override)
    holds_secret = shown != override  # registered by compose() before any parsing
    if not sep and not override.startswith("~"):
        fix = "an override is KEY=VALUE (e.g. k=5), +KEY=VALUE to add a key, ~KEY to delete one"
    elif not _KEY.fullmatch(key.strip()):
        example = "+agent.headers_env.My-Header=MY_VAR" if "headers_env" in key else "retriever.k1=1.2"
        fix = f"a key is dotted words of letters, digits, _ and - (e.g. {example}): no spaces, no '?'"
    else:
        fix = f"quote the value: {key}='VALUE' (in a shell, quote it twice: \"{key}='VALUE'\")"
    # Hydra's words quote part of the input: left out when that part could be a secret.
    detail = "" if holds_secret else f" ({_hydra_detail(exc)})"
    return f"config override {shown}: not valid override syntax{detail}; {fix} (Hydra override grammar: {GRAMMAR})"


def _hydra_detail(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [
        line for line in lines if line and not line.startswith(("See https://", "Error parsing override"))
    ]
    return scrub_message(" ".join(kept[:1]) or "syntax error")


def _secret_key(key: str) -> bool:
    return secret_name(key.strip().lstrip("+~"))


def _path_arg(value: Any, function: str, name: str, example: str) -> Path:
    """A path argument of the Python API (str or Path), or a UsageError naming it."""
    if not isinstance(value, str | Path) or not str(value).strip():
        raise UsageError(f"{function}({name}={value!r:.60}): expected a path, str or pathlib.Path "
                         f"(e.g. {function}({name}='{example}'))")  # fmt: skip
    return Path(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        text = f"{text} {str(cause).strip()}"
    text = text.split("Config search path")[0]  # Hydra appends its search path; noise for a user
    return " ".join(text.split())


def load_params(path: str | Path = PARAMS) -> schema.Config:
    """params.yaml, the composed configuration DVC stages read, as the typed, frozen config, with the engine
    chosen where engines are chosen (conf/, doceval.yaml, ``$DOCEVAL_ENGINE``: params.yaml holds none).

    Every other key must be there, declared, typed and in range: params.yaml is composed whole from conf/.
    """
    path = _path_arg(path, "load_params", "path", "params.yaml")
    if not path.is_file():
        raise UsageError(f"{path} not found: run from the project root, or {params_command()} to compose it")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    register_config(data)
    # The engine is an execution choice, not a parameter: conf/, doceval.yaml and $DOCEVAL_ENGINE choose it.
    data["engine"] = engine_block(find_conf_dir(), with_project([]))
    try:
        return validate_config(data, str(path))
    except UsageError as exc:
        hint = f"{path} is composed from conf/: fix conf/, then rerun `doceval params`"
        raise UsageError(f"{exc} ({hint})") from None


def dump_params(cfg: schema.Config, overrides: Sequence[str] = ()) -> str:
    """params.yaml's text: the composed config, after a header recording the command ``overrides`` it was
    composed with (the stages recompose them to tell a stale params.yaml, doceval.config.drift)."""
    header = (
        "# Composed from conf/ by `doceval params` (Hydra). Do not edit by hand: edit conf/ or doceval.yaml, "
        "then recompose.\n"
        f"{OVERRIDES_MARK}{json.dumps(list(overrides))}\n"
    )
    data = config_dict(cfg)
    data.pop("engine", None)  # an execution choice ($DOCEVAL_ENGINE), not a parameter: engine_choice
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and empty mappings stay values (MLflow params are flat).
    A config object is flattened as the mapping it records (``config_dict``)."""
    if not prefix and not isinstance(cfg, Mapping):
        cfg = config_dict(cfg)
    if not isinstance(cfg, Mapping):
        return {prefix: cfg}
    flat: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, Mapping) and value else {name: value})
    return flat


# ------------------------------------------------------------------------ validation against the schema


def validate_config(cfg: Mapping[str, Any], where: str = "") -> schema.Config:
    """``cfg`` checked against :class:`~doceval.config.schema.Config` and built into it (frozen, typed).

    A UsageError names the dotted key, the bad value, what is expected and an example fix; ``where`` (a file
    name) prefixes it.
    """
    check_config(cfg, where)
    return build_config(cfg)


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
            if allowed is not None and key not in allowed:
                shown = ", ".join(allowed[:MAX_LISTED]) + (f" and {len(allowed) - MAX_LISTED} more"
                                                           if len(allowed) > MAX_LISTED else "")  # fmt: skip
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
