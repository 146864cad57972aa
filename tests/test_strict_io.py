"""Hardening of what doceval reads and writes (issue 27): every JSON it writes is strict (no NaN or Infinity; an
older file that holds them still reads), a lone surrogate from an assistant is escaped wherever text is written
or printed, bad input exits 2 with a message that names it and the fix (never a traceback, never a secret), and
splits and byte-order marks follow one rule for every file.

Each list of cases is (input, expected exit code, words the message must contain)."""

from __future__ import annotations

import codecs
import copy
import hashlib
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent, running_agent
from test_eval_cli import GOLDEN, eval_args, overrides
from test_eval_cli import project as project  # noqa: F401 - the tiny project fixture

import doceval
from doceval import api
from doceval.cli.main import main
from doceval.common.io import write_text_atomic
from doceval.common.text import printable
from doceval.config.compose import compose, load_params
from doceval.errors import UsageError
from doceval.inputs.golden import parse_golden
from doceval.inputs.judge_labels import read_labels
from doceval.results.markdown import render_report

SRC = Path(__file__).resolve().parents[1] / "src"
DUMP = "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as inf in Python: no strict reader takes it as a number
        raise ValueError(f"not strict JSON: {text} is out of range")
    return value


def strict(text: str) -> Any:
    """JSON as a strict reader (JavaScript's JSON.parse) reads it: NaN, Infinity, 1e400 refused."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def strict_lines(path: Path) -> list[Any]:
    text = path.read_bytes().decode("utf-8")  # strict UTF-8 too
    return [strict(line) for line in text.splitlines() if line.strip()]


def journals(project: Path) -> list[Path]:
    return sorted((project / "data" / "runs" / "eval").rglob("*.jsonl"))


def write_agent(project: Path, module: str, body: str) -> str:
    """The user's assistant as ``module.answer``; ``body`` is the reply's Python expression (``question``
    in scope). Every test names its own module: an imported module stays in sys.modules."""
    (project / f"{module}.py").write_text(
        f"def answer(question, library, version, session_id):\n    return {body}\n", encoding="utf-8"
    )
    return f"agent.target={module}:answer"


def agent_args(target: str, *extra: str) -> list[str]:
    return eval_args("--split", "all", "agent=function", target, *extra)


# --------------------------------------------------------------------------------------- 1. strict JSON

OK_REPLY = f'{{"answer": "model_dump", "sources": [{{"id": "{DUMP}", "score": 0.9}}], "refused": False}}'


def test_an_assistant_run_writes_strict_json_and_says_why_it_has_no_floor(project: Path) -> None:
    assert main(agent_args(write_agent(project, "agent_plain", OK_REPLY))) == 0
    text = (project / "out.json").read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text
    floors = strict(text)["config"]["floors"]
    assert floors["global"] is None and floors["source"] == "none: the assistant applies its own floors"
    assert floors["global_reason"] == "no floor: the assistant applies its own floors"
    assert journals(project) and all(strict_lines(p) for p in journals(project))


FUNCTION_SCORES = [  # the score an assistant (a Python callable) returns, exit code, words of its entry's error
    ("float('nan')", 0, ["invalid response: sources[0] (", "expected a finite number", "nan"]),
    ("float('inf')", 0, ["invalid response: sources[0] (", "expected a finite number", "inf"]),
    ("-float('inf')", 0, ["invalid response: sources[0] (", "expected a finite number", "-inf"]),
    ("10**400", 0, ["invalid response: sources[0] (", "expected a finite number", "too large for a float"]),
]


@pytest.mark.parametrize("score,code,words", FUNCTION_SCORES)
def test_a_non_finite_score_from_a_function_assistant_is_its_entrys_system_error(
    project: Path, score: str, code: int, words: list[str]
) -> None:
    module = "agent_score_" + hashlib.sha256(score.encode()).hexdigest()[:8]
    reply = f'{{"answer": "a", "sources": [{{"id": "{DUMP}", "score": {score}}}], "refused": False}}'
    assert main(agent_args(write_agent(project, module, reply))) == code
    summary = strict((project / "out.json").read_text(encoding="utf-8"))
    assert summary["metrics"]["counts"]["system_errors"] == len(GOLDEN)
    for entry in summary["entries"]:
        assert all(w in entry["system_error"] for w in words), entry["system_error"]
    assert all(strict_lines(p) for p in journals(project))


HTTP_SCORES = [  # the score as raw JSON text in an HTTP assistant's reply, exit code, words of the error
    ("NaN", 0, ["invalid response: sources[0] (", "expected a finite number", "nan"]),
    ("Infinity", 0, ["invalid response: sources[0] (", "expected a finite number", "inf"]),
    ("-Infinity", 0, ["invalid response: sources[0] (", "expected a finite number", "-inf"]),
    ("1e400", 0, ["invalid response: sources[0] (", "expected a finite number", "inf"]),
]


@pytest.fixture
def server() -> Iterator[FakeAgent]:
    with running_agent() as srv:
        yield srv


@pytest.mark.parametrize("raw,code,words", HTTP_SCORES)
def test_a_non_finite_score_from_an_http_assistant_is_its_entrys_system_error(
    project: Path, server: FakeAgent, raw: str, code: int, words: list[str]
) -> None:
    server.always = {e["question"]: f"score={raw}" for e in GOLDEN}
    args = eval_args("--split", "all", "agent=http", f"agent.url={server.url}", "agent.max_retries=0")
    assert main(args) == code
    summary = strict((project / "out.json").read_text(encoding="utf-8"))
    errors = [e["system_error"] for e in summary["entries"]]
    assert len(errors) == len(GOLDEN) and all(all(w in e for w in words) for e in errors), errors
    assert all(strict_lines(p) for p in journals(project))


def test_a_journaled_reply_with_nan_from_an_older_doceval_is_asked_again(tmp_path: Path) -> None:
    from doceval.harness.agents import load_journal, run_external
    from doceval.seam import Probe
    from doceval.system.external.agents import function_agent

    journal = tmp_path / "journal.jsonl"
    old = {"id": "e1", "answer": "a", "sources": [{"id": "d1", "score": float("nan")}], "refused": False,
           "reason": None, "usage": {}, "extra": {}, "session_id": "s", "error": None}  # fmt: skip
    journal.write_text(json.dumps(old) + "\n")  # NaN, as an older doceval journaled it
    assert load_journal(journal)["e1"].error == "invalid response: sources[0].score must be a finite number"
    calls: list[str] = []

    def assistant(question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        calls.append(question)
        return {"answer": "b", "sources": [{"id": "d1", "score": 0.5}], "refused": False}

    out = run_external([Probe("e1", "q1", "docs", "1")], function_agent(assistant, compose(["agent=function"]).agent), journal_path=journal,
                       progress=False)  # fmt: skip
    assert calls == ["q1"] and out.responses["e1"].error is None and out.resumed == 0
    strict(journal.read_text().splitlines()[-1])


def _old_style(summary: dict[str, Any]) -> str:
    """``summary`` as an older doceval wrote it: -Infinity for an assistant's floor, NaN where a score was."""
    old = copy.deepcopy(summary)
    old["config"]["floors"]["global"] = float("-inf")
    old["config"]["floors"].pop("global_reason", None)
    old["entries"][0]["sources"][0][1] = float("nan")
    text = json.dumps(old, indent=2)
    assert "-Infinity" in text and "NaN" in text
    return text


@pytest.fixture
def old_and_new(project: Path) -> Path:
    """out.json (an assistant's run as written now) and old.json (the same as an older doceval wrote it)."""
    assert main(agent_args(write_agent(project, "agent_old", OK_REPLY))) == 0
    (project / "old.json").write_text(_old_style(json.loads((project / "out.json").read_text())))
    (project / "gate.yaml").write_text("thresholds: {hit_rate: 0.0}\nnon_regression: {enabled: false}\n")
    return project


OLD_SUMMARY_COMMANDS = [  # a command reading old.json, exit code, words of its output
    (["compare", "old.json", "out.json", "--no-gate"], 0, ["hit_rate"]),
    (["compare", "out.json", "old.json", "--gate", "gate.yaml", "--plot", "c.png"], 0, ["PASS"]),
    (["gate", "old.json", "--config", "gate.yaml", "--junit", "j.xml"], 0, ["PASS"]),
    (["golden", "pool", "old.json", "--golden", "data/golden/v2.1.jsonl", "--out", "pool.jsonl"], 0, []),
]


@pytest.mark.parametrize("args,code,words", OLD_SUMMARY_COMMANDS)
def test_older_summaries_holding_infinity_and_nan_still_read(
    old_and_new: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, words: list[str]
) -> None:
    capsys.readouterr()
    assert main(args) == code
    out = capsys.readouterr().out
    assert all(w in out for w in words), out
    if (old_and_new / "pool.jsonl").exists():
        strict_lines(old_and_new / "pool.jsonl")
    loaded = api.load_summary(old_and_new / "old.json")
    assert loaded["config"]["floors"]["global"] is None
    assert loaded["entries"][0]["sources"][0][1] is None
    from doceval.common.io import json_text

    json_text(loaded)  # what doceval reads back, it can write


@pytest.mark.slow
def test_mlflow_runs_with_infinity_still_read_by_compare_and_history(
    old_and_new: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow import MlflowClient

    from doceval.tracking import log_run

    uri = f"sqlite:///{old_and_new / 'mlruns.db'}"
    old = json.loads((old_and_new / "old.json").read_text())  # -inf and NaN in memory, as before
    old["config"]["provenance"]["git_commit"] = "0" * 40  # history lists committed runs only
    run_id = log_run(old, uri=uri, root=old_and_new, run_name="old")
    # The artifact as an older doceval logged it: -Infinity and NaN in summary.json.
    staged = old_and_new / "staged" / "summary.json"
    staged.parent.mkdir()
    staged.write_text(_old_style(json.loads((old_and_new / "out.json").read_text())))
    MlflowClient(uri).log_artifact(run_id, str(staged))
    capsys.readouterr()
    assert main(["compare", run_id, "out.json", "--no-gate", "--tracking-uri", uri]) == 0
    assert "hit_rate" in capsys.readouterr().out
    assert main(["history", "--tracking-uri", uri, "--split", "all", "--plot", "h.png"]) == 0
    assert capsys.readouterr().out.startswith("1 run")


# ----------------------------------------------------------------------------------- 2. lone surrogates

SURROGATE_REPLY = (
    '{"answer": "model_dump \\ud800 tail", "reason": None, "refused": False, "extra_note": "\\udfff", '
    f'"sources": [{{"id": "{DUMP}", "score": 1.0}}, "junk\\udfff"]}}'
)


@pytest.mark.slow
def test_a_lone_surrogate_in_a_reply_is_escaped_in_every_output(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{project / 'mlruns.db'}"
    target = write_agent(project, "agent_surrogate", SURROGATE_REPLY)
    args = ["eval", "--quiet", "--output", "out.json", "--split", "all", "agent=function", target,
            f"tracking.uri={uri}", "judge=reference"]  # fmt: skip
    assert main(args) == 0  # the journal, the judge, the summary, MLflow (params, traces, artifacts)
    logged = "".join(capsys.readouterr())
    text = (project / "out.json").read_bytes().decode("utf-8")
    assert "\\ud800" in text and "\\udfff" in text
    summary = strict(text)
    assert summary["entries"][0]["answer"] == "model_dump \ud800 tail"  # the escape reads back as it was
    assert summary["entries"][0]["extra"] == {"extra_note": "\udfff"}
    assert all(e["system_error"] is None for e in summary["entries"])
    # out-of-scope answers are never judged (issue 42 A11)
    assert all(e["verdict"] is not None for e in summary["entries"] if not e["out_of_scope"])
    assert any("\\ud800" in p.read_text(encoding="utf-8") for p in journals(project))
    assert all(strict_lines(p) for p in journals(project))
    # JUnit XML, report.md, the terminal, a run read back from MLflow.
    assert main(["gate", "out.json", "--junit", "j.xml"]) in (0, 3)
    ET.parse(project / "j.xml")
    write_text_atomic(project / "report.md", render_report(summary))
    assert "\\udfff" in (project / "report.md").read_bytes().decode("utf-8")
    run_id = logged.split("mlflow: logged run ")[1][:32]
    assert main(["compare", run_id, "out.json", "--no-gate", "--tracking-uri", uri]) == 0
    assert printable("a\ud800") == "a\\ud800"
    from doceval.common.io import TERMINAL_ERRORS

    assert "a\ud800\udcff".encode("utf-8", TERMINAL_ERRORS) == b"a\\ud800\xff"


WRITERS: list[tuple[str, dict[str, Any]]] = [  # the shared writer of common.io, its keyword arguments
    ("json_text", {}),
    ("jsonl_line", {}),
    ("json_text", {"indent": 2}),
]


@pytest.mark.parametrize("name,kwargs", WRITERS)
def test_strict_writers_escape_surrogates_and_refuse_non_finite_numbers(
    name: str, kwargs: dict[str, Any]
) -> None:
    from doceval.common import io

    def write(value: Any) -> str:
        text: str = getattr(io, name)(value, **kwargs)
        return text

    data = {"a\ud800": ["x\udfff", 1.5, None]}
    text = write(data)
    text.encode("utf-8")
    assert strict(text) == data
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError, match=r"\$\.config\.floors\.global"):
            write({"config": {"floors": {"global": bad}}})


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_printed_not_fatal(tmp_path: Path) -> None:
    rows = [{"id": f"e{i}", "question": "q", "library": "docs", "version": "1", "out_of_scope": False,
             "relevant_ids": ["docs@1:D1"], "reference_answer": "a", "expected_apis": [], "forbidden_apis": [],
             "split": None, "kind": "lookup"} for i in range(3)]  # fmt: skip
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONIOENCODING": "utf-8:strict"}  # a strict terminal
    argv = [sys.executable.encode(), b"-m", b"doceval.cli.main", b"golden", b"audit", b"g.jsonl", b"--sample",
            b"2", b"--out", b"w\xff.jsonl"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"w\xff.jsonl: 2 entries to audit" in done.stdout
    assert (tmp_path / os.fsdecode(b"w\xff.jsonl")).is_file()


# ------------------------------------------------------------------------------ 3. exit 2, not a traceback

EVAL_CASES = [  # eval arguments, exit code, words the message must contain, words it must not
    (["k=[1,"], 2, ["config override k=[1,", "quote the value", "override grammar"], []),
    (["foo"], 2, ["config override foo", "KEY=VALUE"], []),
    (["?a=b"], 2, ["config override ?a=b", "a key is dotted words", "no '?'"], []),
    (["agent=http", "+agent.headers_env.My Header=X"], 2,
     ["+agent.headers_env.My Header=X", "no spaces", "My-Header"], []),
    (["k=3]"], 2, ["config override k=3]", "quote the value: k='VALUE'"], []),
    (["agent=http", "agent.url=http://alice:pa55w0rd@127.0.0.1:18080/x]"], 2,
     ["agent.url=http://***@127.0.0.1:18080/x]", "quote the value"], ["pa55w0rd"]),
    (["retriever=function", "+retriever.kwargs.token=sk-abcdef1234567890]"], 2,
     ["+retriever.kwargs.token=<redacted>", "quote the value"], ["sk-abcdef", "1234567890"]),
    (["agent=http", "agent.url=ftp://alice:pa55w0rd@127.0.0.1/x"], 2,
     ["agent.url=ftp://***@127.0.0.1/x", "http://"], ["pa55w0rd"]),
    (["--score-floor", "nan"], 2, ["--score-floor nan", "finite number"], []),
    (["--score-floor", "inf"], 2, ["--score-floor inf", "finite number"], []),
    (["--floor", "pydantic=nan"], 2, ["--floor 'pydantic=nan'", "finite number"], []),
    (["--floor", "click=-inf"], 2, ["--floor 'click=-inf'", "finite number"], []),
    (["floors.global=inf"], 2, ["floors.global=inf", "expected a number"], []),
    (["relevance.threshold=5"], 2, ["relevance.threshold=5", "1 or 2"], []),
    (["relevance.threshold=0"], 2, ["relevance.threshold=0", "1 or 2"], []),
]  # fmt: skip


@pytest.mark.parametrize("args,code,words,hidden", EVAL_CASES)
def test_bad_eval_input_exits_2_naming_it_and_the_fix(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, words: list[str],
    hidden: list[str],
) -> None:  # fmt: skip
    assert main(eval_args("--split", "test", *overrides(), *args)) == code
    out, err = capsys.readouterr()
    assert all(w in err for w in words), err
    assert not any(h in out + err for h in hidden), err
    assert "Traceback" not in err and not (project / "out.json").exists()


OTHER_COMMANDS = [  # other commands that compose overrides
    (["params", "k=[1,"], 2, ["config override k=[1,", "quote the value"], []),
    (["sweep", "-m", "+retriever.kwargs.token=sk-abcdef1234567890]", "k=1,2"], 2,
     ["+retriever.kwargs.token=<redacted>"], ["sk-abcdef"]),
]  # fmt: skip


@pytest.mark.parametrize("args,code,words,hidden", OTHER_COMMANDS)
def test_other_commands_name_the_bad_override(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, words: list[str],
    hidden: list[str],
) -> None:  # fmt: skip
    assert main(args) == code
    out, err = capsys.readouterr()
    assert all(w in err for w in words), err
    assert not any(h in out + err for h in hidden) and "Traceback" not in err


API_CASES: list[tuple[str, Callable[[], Any], int, list[str]]] = [
    ("evaluate(5)", lambda: doceval.evaluate(5), 2, ["evaluate(golden=5)", "path of a golden set"]),  # type: ignore[arg-type]
    ("evaluate(None)", lambda: doceval.evaluate(None), 2, ["evaluate(golden=None)", "golden.jsonl"]),  # type: ignore[arg-type]
    ("evaluate(rows)", lambda: doceval.evaluate([{"a": 1}]), 2, ["golden=a list of rows", "JSONL"]),  # type: ignore[arg-type]
    ("overrides str", lambda: doceval.evaluate("g.jsonl", overrides="k=3"), 2,
     ["evaluate(overrides=a str)", "overrides=['k=3']"]),
    ("max_errors str", lambda: doceval.evaluate("g.jsonl", max_errors="2"), 2,  # type: ignore[arg-type]
     ["evaluate(max_errors='2')", "max_errors=2"]),
    ("k str", lambda: doceval.evaluate("g.jsonl", k="5"), 2, ["evaluate(k='5')", "k=5"]),  # type: ignore[arg-type]
    ("retriever not callable", lambda: doceval.evaluate("g.jsonl", retriever=5), 2,  # type: ignore[arg-type]
     ["evaluate(retriever=5)", "a function"]),
    ("judge str", lambda: doceval.evaluate("g.jsonl", judge="yes"), 2, ["evaluate(judge='yes')", "True or False"]),  # type: ignore[arg-type]
    ("compare(5, ...)", lambda: doceval.compare(5, "x.json"), 2, ["compare(base=5)", "summary"]),  # type: ignore[arg-type]
    ("compare option", lambda: doceval.compare({}, {}, n_bot=10), 2, ["compare(n_bot=...)", "n_boot"]),
    ("gate(5)", lambda: doceval.gate(5), 2, ["gate(summary=5)", "summary"]),  # type: ignore[arg-type]
    ("gate thresholds", lambda: doceval.gate({}, [0.5]), 2, ["gate(thresholds=a list)", "hit_rate"]),  # type: ignore[arg-type]
    ("load_summary(5)", lambda: api.load_summary(5), 2, ["load_summary(5)", "summary JSON path"]),  # type: ignore[arg-type]
    ("compose(str)", lambda: compose("k=3"), 2, ["overrides=a str", "overrides=['k=3']"]),
    ("compose(conf_dir=5)", lambda: compose([], conf_dir=5), 2, ["compose(conf_dir=5)", "path"]),  # type: ignore[arg-type]
    ("load_params(5)", lambda: load_params(5), 2, ["load_params(path=5)", "params.yaml"]),  # type: ignore[arg-type]
]  # fmt: skip


@pytest.mark.parametrize("name,call,code,words", API_CASES, ids=[c[0] for c in API_CASES])
def test_python_api_arguments_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, call: Callable[[], Any], code: int,
    words: list[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        call()
    assert caught.value.exit_code == code
    assert all(w in str(caught.value) for w in words), str(caught.value)


# ------------------------------------------------------------------------ 4. one rule for splits and BOMs


def _golden_text(tagged: bool) -> str:
    rows = [{**e, "reference_answer": "ref " + " ".join(e["expected_apis"])} for e in GOLDEN]
    return "".join(json.dumps(r if tagged else {**r, "split": None}) + "\n" for r in rows)


SPLIT_CASES = [  # golden set tagged?, --split, exit code, words of the message
    (False, "nope", 2, ["--split nope", "known splits: none", "--split all", "doceval golden split"]),
    (True, "nope", 2, ["--split nope", "known splits: calibration, test", "--split all"]),
    (False, "test", 0, []),  # untagged entries belong to every split: the whole set
    (False, "all", 0, []),
]


@pytest.mark.parametrize("tagged,split,code,words", SPLIT_CASES)
def test_an_unknown_split_exits_2_whether_or_not_the_set_has_tags(
    project: Path, capsys: pytest.CaptureFixture[str], tagged: bool, split: str, code: int, words: list[str]
) -> None:
    (project / "data" / "golden" / "v2.1.jsonl").write_text(_golden_text(tagged))
    assert main(eval_args("--split", split, *overrides())) == code
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    if code == 0:
        assert len(json.loads((project / "out.json").read_text())["entries"]) == len(GOLDEN)


def _qrels_text() -> str:
    return "".join(
        json.dumps({"id": e["id"], "doc_id": d, "grade": 2, "judged_by": "test"}) + "\n"
        for e in GOLDEN
        for d in e["relevant_ids"]
    )


def _labels_text() -> str:
    row = {"id": "j1", "entry_id": "a1", "category": "correct", "candidate": "model_dump", "verdict": "correct",
           "reason": "names the api", "split": "test", "labelled_by": "test"}  # fmt: skip
    return json.dumps(row) + "\n"


BOM_CASES = [  # the file written with a UTF-8 BOM, exit code, words of the output
    ("data/golden/v2.1.jsonl", 0, ["entries"]),
    ("data/golden/v2.1.qrels.jsonl", 0, ["entries"]),
    ("labels.jsonl", 0, ["1 labelled rows"]),
]


@pytest.mark.parametrize("name,code,words", BOM_CASES)
def test_a_utf8_bom_is_accepted_in_every_input_file(
    project: Path, capsys: pytest.CaptureFixture[str], name: str, code: int, words: list[str]
) -> None:
    (project / "data" / "golden" / "v2.1.qrels.jsonl").write_text(_qrels_text())
    texts = {"data/golden/v2.1.jsonl": _golden_text(True), "data/golden/v2.1.qrels.jsonl": _qrels_text(),
             "labels.jsonl": _labels_text()}  # fmt: skip
    (project / name).write_bytes(codecs.BOM_UTF8 + texts[name].encode("utf-8"))
    if name == "labels.jsonl":
        golden = {e.id: e for e in parse_golden(project / "data" / "golden" / "v2.1.jsonl")}
        try:
            rows, got, printed = read_labels(project / name, golden), 0, ""
        except UsageError as exc:
            rows, got, printed = [], exc.exit_code, str(exc)
        assert got == code, printed
        printed = f"{len(rows)} labelled rows"
    else:
        got = main(["golden", "validate", "data/golden/v2.1.jsonl"])
        printed = capsys.readouterr().out
        assert got == code, capsys.readouterr().err
        assert main(eval_args("--split", "test", *overrides())) == code
    assert all(w in printed for w in words), printed
