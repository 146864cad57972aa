"""Configuration: Hydra composition of conf/ (for `doceval ... overrides`) and params.yaml (for DVC stages), both
validated against the typed schema (:mod:`doceval.config.schema`) before anything else runs."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from doceval.common.hints import params_command
from doceval.common.llm_settings import LLMConfig
from doceval.common.redact import register_config, register_overrides, scrub_message
from doceval.common.secret_rule import secret_name
from doceval.config import schema
from doceval.config.engine_choice import drop_other_engine_keys, engine_block, engine_overrides
from doceval.config.objects import config_dict
from doceval.config.project import OVERRIDES_MARK, merge_overrides, project_overrides, with_project
from doceval.config.validate import check_config, validate_block, validate_config
from doceval.errors import UsageError

CONF_DIR = Path("conf")
PARAMS = Path("params.yaml")
CONF_ENV = "DOCEVAL_CONF"
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
        raise UsageError(
            f"{local}: is not a file (a directory or a dangling link); make it the Hydra config "
            f"file, or remove {CONF_DIR}/ to use doceval's shipped conf/"
        )
    named = os.environ.get(CONF_ENV)
    if named and not (Path(named) / "config.yaml").is_file():
        what = "is not a folder" if not Path(named).is_dir() else "has no config.yaml"
        raise UsageError(
            f"{CONF_ENV}={named}: {what}; point it at a conf/ folder (one with config.yaml), or "
            "unset it to use ./conf or the conf/ shipped with doceval"
        )
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
        raise UsageError(
            f"{function}({name}={value!r:.60}): expected a path, str or pathlib.Path "
            f"(e.g. {function}({name}='{example}'))"
        )
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


def llm_settings(role: Literal["answerer", "judge"], **changes: Any) -> LLMConfig:
    """The LLM client settings of ``role`` as the configuration composes them (``{role}=openai`` from conf/ and
    the project file), with ``changes`` (field -> value), the whole block validated by the schema: for code that
    needs a client outside a run (tests, benchmarks). No setting has a default in code (docs/design.md 6.2)."""
    block = {**_openai_block(role, str(Path.cwd())), **changes}
    where = f"llm_settings({role!r})"
    if role == "answerer":
        return validate_block(schema.AnswererOpenAI, block, where, path=role).llm
    return validate_block(schema.JudgeOpenAI, block, where, path=role).llm


@cache
def _openai_block(role: str, cwd: str) -> dict[str, Any]:  # per working directory: ./conf, ./doceval.yaml
    block = config_dict(getattr(compose([f"{role}=openai"]), role))
    assert isinstance(block, dict)
    return block


__all__ = [
    "check_config",
    "compose",
    "dump_params",
    "find_conf_dir",
    "flatten",
    "llm_settings",
    "load_params",
    "validate_config",
]
