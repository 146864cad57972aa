"""The typed configuration schema: every shipped option validates, every bad value or unknown key is a usage
error (exit 2) that names the dotted key before any work is done, and the LLM settings are validated by it."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any, cast, get_args, get_type_hints

import pytest
import yaml
from openai_server import FakeOpenAI
from test_eval_cli import DOCS, GOLDEN

from doceval.cli.main import main
from doceval.common.llm_settings import LLMConfig
from doceval.config import schema
from doceval.config.compose import check_config, compose, load_params, validate_config
from doceval.config.objects import config_dict
from doceval.config.validate import validate_block
from doceval.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
OPTIONS = [
    (g.name, p.stem)
    for g in sorted(CONF.iterdir())
    if g.is_dir() and g.name != "experiment"
    for p in sorted(g.glob("*.yaml"))
]
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def _set(cfg: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(cfg)
    *head, last = dotted.split(".")
    block = out
    for key in head:
        block = block[key]
    block[last] = value
    return out


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    return composed([])


def composed(overrides: list[str]) -> dict[str, Any]:
    """The composed config as the mapping it records (the schema's checks take mappings)."""
    data = config_dict(compose(overrides, conf_dir=CONF))
    assert isinstance(data, dict)
    return data


# ------------------------------------------------------------------------------------ shipped files validate


@pytest.mark.parametrize("group,option", OPTIONS)
def test_every_group_option_composes_and_validates(group: str, option: str) -> None:
    cfg = composed([f"{group}={option}"])  # compose() validates, complete
    assert config_dict(validate_config(cfg)) == cfg
    option_file = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    option_file.pop("defaults", None)
    assert {k: cfg[group][k] for k in option_file} == option_file  # returned unchanged, nothing added


MODEL_GROUPS = ("answerer", "judge", "embedder", "gate")


@pytest.mark.parametrize(
    "group,option",  # building a minilm embedder loads the model: slow
    [pytest.param(*o, marks=[pytest.mark.slow] if o[1].startswith("minilm") else []) for o in OPTIONS
     if o[0] in MODEL_GROUPS],
)  # fmt: skip
def test_every_model_option_builds_its_object_from_the_shipped_file(
    group: str, option: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Composing is not enough (a hand-built dict once hid a failing answerer=openai): build the object."""
    from doceval.index.embed import judge_encoder, make_embedder
    from doceval.results.gating import check_gate_config
    from doceval.scoring.judge import make_judge
    from doceval.system.docchat.answerers import make_answerer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.chdir(tmp_path)  # the shipped LLM cache_path is relative: never the checkout's data/cache
    block = getattr(compose([f"{group}={option}"], conf_dir=CONF), group)
    if group == "answerer":
        built: Any = make_answerer(block)
        assert built is not None
    elif group == "judge":
        built = make_judge(block, {}, judge_encoder)
        assert (built is None) == (option == "none")
    elif group == "embedder":
        built = make_embedder(block, None)
        assert built.fingerprint
    else:
        assert check_gate_config(block).thresholds


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_validates(experiment: str) -> None:
    cfg = composed([f"experiment={experiment}"])
    assert config_dict(validate_config(cfg)) == cfg


def test_shipped_config_has_the_run_block_and_no_role_budget(shipped: dict[str, Any]) -> None:
    assert shipped["run"] == {"budget_usd": None, "max_concurrency": 8, "max_abandoned": 3}
    assert "budget_usd" not in composed(["answerer=openai"])["answerer"]
    # params.yaml holds everything but the engine, an execution choice (design 6.3).
    assert yaml.safe_load((ROOT / "params.yaml").read_text()) == {
        k: v for k, v in shipped.items() if k != "engine"
    }


@pytest.mark.parametrize("role", ["answerer", "judge"])
def test_shipped_openai_blocks_validate_and_build_an_llm_config(role: str) -> None:
    built = getattr(compose([f"{role}=openai"], conf_dir=CONF), role)
    block = config_dict(built)
    assert block == yaml.safe_load((CONF / role / "openai.yaml").read_text())
    own = {"name", "template", "max_passages"}
    cfg = validate_block(LLMConfig, {k: v for k, v in block.items() if k not in own}, role, path=role)
    assert cfg.model == "gpt-4o-mini" and cfg.timeout_s == 60.0 and isinstance(cfg.timeout_s, float)
    assert built.llm == cfg


def test_schema_names_match_the_code() -> None:
    # (The variants' names against each plug-in registry: tests/test_plugins.py.)
    # The openai blocks' own keys (the flat field holds the LLMConfig keys, at the block's level in YAML).
    own = {f.name for f in fields(schema.JudgeOpenAI) if not f.metadata.get("flat")}
    assert own == {"name", "template"} and not own & {f.name for f in fields(LLMConfig)}
    answerer = {f.name for f in fields(schema.AnswererOpenAI) if not f.metadata.get("flat")}
    assert own <= answerer and not answerer & {f.name for f in fields(LLMConfig)}
    assert {schema.AnswererOpenAI: LLMConfig, schema.JudgeOpenAI: LLMConfig} == schema.EXTENDED_BY


# ----------------------------------------------------------------------------------------- type rules


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("k", True, "k=true: expected an integer >= 1 (e.g. k=5)"),  # bool is not an int
        ("k", 5.0, "k=5.0: expected an integer"),  # no silent truncation, even of a whole float
        ("k", "5", "k='5'"),
        ("seed", -1, "seed=-1: expected an integer >= 0"),
        ("memory.isolate", 1, "memory.isolate=1: expected true or false"),
        ("tracking.uri", 5, "tracking.uri=5: expected a string or null"),
        ("floors.global", math.nan, "floors.global=nan: expected a number"),
        ("retriever.name", "bm25", "retriever.k1: missing"),
        ("retriever.name", "nope", "retriever.name=nope: expected one of overlap, bm25, dense, hybrid"),
        ("floors.source", "config", None),  # path may stay with source=config
        ("floors.source", "cli", "floors.source=cli: expected one of calibrated, config"),
        (
            "gate.thresholds",
            {"hit_rat": 0.5},
            "gate.thresholds.hit_rat: unknown metric; valid metrics: hit_rate",
        ),
        (
            "gate.thresholds",
            {"hit_rate": 1.5},
            "gate.thresholds.hit_rate=1.5: expected a number >= 0 and <= 1",
        ),
        ("gate.non_regression.metrics", ["mrr", "x"], "gate.non_regression.metrics[1]=x: expected one of"),
        (
            "calibration.objective",
            "f1",
            "calibration.objective=f1: expected one of max_refusal_at_overrefusal",
        ),
        ("calibration.grid_points", 1, "calibration.grid_points=1: expected an integer >= 2"),
        (
            "docs.libraries",
            [{"name": "a", "version": 3.0}],
            "docs.libraries[0].version=3.0: expected a string",
        ),
        ("docs.libraries", [{"name": "a", "version": "1", "sha256": "ab"}], "docs.libraries[0].sha256=ab"),
        ("docs.libraries", [{"name": "a", "version": "1", "url": "x"}], "docs.libraries[0].url: unknown key"),
        ("paths.runs", "", "paths.runs='': expected a non-empty string"),
        ("run.budget_usd", -1, "run.budget_usd=-1: expected a number >= 0 or null"),
        ("run.budget_usd", 5, None),  # an int is a float
        ("run.max_concurrency", 0, "run.max_concurrency=0: expected an integer >= 1"),
        ("judge.name", "openai", "judge.template: missing"),
    ],
)
def test_values_are_checked_by_type_and_range(
    shipped: dict[str, Any], key: str, value: Any, needle: str | None
) -> None:
    cfg = _set(shipped, key, value)
    if needle is None:
        assert config_dict(validate_config(cfg)) == cfg
        return
    with pytest.raises(UsageError) as err:
        validate_config(cfg)
    assert needle in str(err.value)


def test_missing_keys_are_errors_when_composed_only(shipped: dict[str, Any]) -> None:
    partial = {"docs": shipped["docs"], "paths": {"docs": "data/docs"}}
    with pytest.raises(UsageError, match=r"^k: missing; expected an integer >= 1 \(e.g. k=5\)$"):
        validate_config({k: v for k, v in shipped.items() if k != "k"})
    with pytest.raises(UsageError, match=r"^paths\.index: missing"):
        validate_config(_set(shipped, "paths", {"docs": "d"}))
    check_config(partial, "params.yaml", complete=False)  # a fragment: what is there is checked


def test_open_mappings_are_the_only_free_form_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # An open mapping is open only where a block declares it: kwargs belong to retriever=function.
    with pytest.raises(UsageError, match=r"retriever\.kwargs: unknown key; valid keys: name"):
        compose(["+retriever.kwargs={alpha: 1}"], conf_dir=CONF)
    with pytest.raises(UsageError, match=r"retriever\.kwargs: unknown key"):
        compose(["retriever=bm25", "+retriever.kwargs.x=1"], conf_dir=CONF)
    cfg = composed(["retriever=function", "retriever.target=m:f", "+retriever.kwargs={alpha: 1, beta: [x]}"])
    assert cfg["retriever"] == {
        "name": "function",
        "target": "m:f",
        "kwargs": {"alpha": 1, "beta": ["x"]},
        "timeout_s": 120,
    }
    cfg = composed(["answerer=openai", "answerer.response_format={type: json_object, x: {y: true}}"])
    assert cfg["answerer"]["response_format"] == {"type": "json_object", "x": {"y": True}}
    # A free-form field the hook does not list is a bug in the schema, not a user error.
    monkeypatch.setattr(schema, "OPEN_MAPPINGS", frozenset())
    with pytest.raises(TypeError, match="OPEN_MAPPINGS"):
        validate_config(cfg)


# ------------------------------------------------------------------- the LLM settings, validated by the schema


def _llm_bounds() -> list[tuple[str, str, float]]:
    out = []
    for f in fields(LLMConfig):
        for rule in ("ge", "gt", "le"):
            if rule in f.metadata:
                out.append((f.name, rule, f.metadata[rule]))
    return out


@pytest.mark.parametrize("name,rule,bound", _llm_bounds())
def test_the_schema_checks_the_llm_settings_ranges(name: str, rule: str, bound: float) -> None:
    hint = get_type_hints(LLMConfig)[name]
    is_int = hint is int or int in get_args(hint)
    step = 1 if is_int else 0.5
    outside = bound - step if rule in ("ge", "gt") else bound + step
    inside = bound + step if rule == "gt" else bound
    cfg = composed(["judge=openai"])
    for value, ok in ((inside, True), (outside, False)):
        value = int(value) if is_int else float(value)
        if ok:
            validate_config(_set(cfg, f"judge.{name}", value))
            continue
        with pytest.raises(UsageError, match=rf"judge\.{name}={value}: expected"):
            validate_config(_set(cfg, f"judge.{name}", value))


@pytest.mark.parametrize("name,value", [("max_tokens", True), ("max_tokens", 2.5), ("temperature", "0.5")])
def test_the_schema_checks_the_llm_settings_types(name: str, value: Any) -> None:
    cfg = composed(["answerer=openai"])
    with pytest.raises(UsageError, match=rf"answerer\.{name}=.*: expected"):
        validate_config(_set(cfg, f"answerer.{name}", value))


@pytest.mark.parametrize("part", ["prompt", "completion"])
def test_a_price_per_1k_and_per_1m_together_is_refused_by_the_schema(part: str) -> None:
    cfg = composed(["judge=openai", f"judge.price_per_1k_{part}=0.15"])
    validate_config(cfg)  # per 1k alone
    both = _set(cfg, f"judge.price_per_1m_{part}", 0.15)
    with pytest.raises(
        UsageError, match=rf"judge\.price_per_1m_{part}=0.15 and judge\.price_per_1k_{part}=0.15: set one"
    ):
        validate_config(both)
    validate_config(_set(both, f"judge.price_per_1k_{part}", 0.0))  # per 1m, with the shipped per-1k 0


# ------------------------------------------------------------------------- the CLI: exit 2 before any work


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """conf/ only: no corpus, golden set or index, so anything past validation fails differently."""
    (tmp_path / "conf").symlink_to(CONF)
    monkeypatch.chdir(tmp_path)

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("evaluate() ran although the config is invalid")

    # Patch every name it is bound under; importing the stage module first keeps the stub from being bound
    # into it at import time (and leaking into later tests).
    import doceval.stages.evaluate

    monkeypatch.setattr("doceval.harness.evaluate.evaluate", no_work)
    monkeypatch.setattr(doceval.stages.evaluate, "evaluate", no_work)
    return tmp_path


@pytest.mark.parametrize(
    "override,needle",
    [
        ("k=2.5", "k=2.5: expected an integer >= 1 (e.g. k=5)"),
        ("k=true", "k=true: expected an integer >= 1"),
        ("k=abc", "k=abc: expected an integer >= 1"),
        ("k=0", "k=0: expected an integer >= 1"),
        ("limit=abc", "limit=abc: expected an integer >= 1 or null"),
        ("seed=abc", "seed=abc: expected an integer >= 0"),
        ("bootstrap=0", "bootstrap=0: expected an integer >= 1 (e.g. bootstrap=1000)"),
        ("bootstrap=-5", "bootstrap=-5: expected an integer >= 1"),
        ("candidates_k=1.5", "candidates_k=1.5: expected an integer >= 1"),
        ("+retriever._target_=x", "retriever._target_: unknown key; valid keys: name"),
        ("+answerer.foo=1", "answerer.foo: unknown key; valid keys: name, max_passages"),
        ("run.max_concurrency=0", "run.max_concurrency=0: expected an integer >= 1"),
        ("tracking.enabled=maybe", "tracking.enabled=maybe: expected true or false"),
    ],
)
def test_bad_override_exits_2_naming_the_key(
    bare: Path, capsys: pytest.CaptureFixture[str], override: str, needle: str
) -> None:
    assert main(["eval", "--no-track", "--quiet", "--output", "out.json", override]) == 2
    err = capsys.readouterr().err
    assert f"doceval eval: error: {needle}" in err and "Traceback" not in err
    assert not (bare / "out.json").exists()


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("k", 2.5, "k=2.5: expected an integer >= 1"),
        ("retriever", {"name": "dense", "_target_": "x"}, "retriever._target_: unknown key"),
        ("docs.libraries", [{"name": "click", "version": 8.1}], "docs.libraries[0].version=8.1"),
    ],
)
def test_bad_params_yaml_exits_2_naming_the_key(
    bare: Path, capsys: pytest.CaptureFixture[str], shipped: dict[str, Any], key: str, value: Any, needle: str
) -> None:
    params = bare / "params.yaml"
    params.write_text(yaml.safe_dump(_set(shipped, key, value)))
    with pytest.raises(UsageError, match="rerun `doceval params`"):
        load_params(params)
    assert main(["evaluate", "--params", str(params), "--quiet"]) == 2
    assert f"{params}: {needle}" in capsys.readouterr().err


# ------------------------------------------------------------------ end to end: the shipped openai blocks run


def test_eval_with_the_shipped_openai_answerer_and_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAI
) -> None:
    from doceval.inputs.docs import Document, write_corpus

    (tmp_path / "conf").symlink_to(CONF)
    docs = {}
    for pin, items in DOCS.items():
        lib, version = pin.split("@")
        docs[pin] = [Document(f"{pin}:{p}", lib, version, p, "function", text) for p, text in items]
    write_corpus(docs, tmp_path / "data" / "docs", 1500, {})
    golden = tmp_path / "data" / "golden" / "v2.1.jsonl"
    golden.parent.mkdir(parents=True)
    # The fake server's judge marks an answer correct when it names every `name()` of the reference.
    lines = [
        {**e, "reference_answer": " ".join(f"{a}()" for a in cast(list[str], e["expected_apis"]))}
        for e in GOLDEN
    ]
    golden.write_text("".join(json.dumps(e) + "\n" for e in lines))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    url = openai_server.base_url
    args = ["eval", "--no-track", "--quiet", "--output", "out.json", "--limit", "3", "retriever=bm25",
            "floors=zero", "answerer=openai", "judge=openai", f"answerer.base_url={url}", f"judge.base_url={url}"]  # fmt: skip
    assert main(args) == 0
    metrics = json.loads((tmp_path / "out.json").read_text())["metrics"]
    assert metrics["answer_accuracy"] is not None and metrics["not_judged"] is False
    assert openai_server.chat_requests > 0
