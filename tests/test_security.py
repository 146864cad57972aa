"""The audit's findings, each a case: secrets never leak, untrusted text is never replayed raw.

1. credentials in URLs (an LLM ``base_url``, ``agent.url``, ``store.url``, ``tracking.uri``) never reach MLflow
   params, tags or artifacts, the run summary, or the terminal: real ``doceval eval`` runs, tracked to a temp
   sqlite store, then every place read back;
2. report.md escapes golden-set text (HTML, Markdown, table pipes, newlines);
3. entries.csv neutralises spreadsheet formulas (a plain negative number stays a number);
4. ``doceval compare`` shows escape sequences in questions instead of replaying them;
5. a copied project logs into its own ``mlruns/artifacts``, never the original's; ``dvc exp`` workspaces keep
   logging to the project they came from; an artifact folder that cannot be written stops before a run exists.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import socket
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_agent import FakeAgent, running_agent
from mlflow.tracking import MlflowClient
from openai_server import FakeOpenAI
from tiny_project import make_tiny_project

from doceval import tracking
from doceval.cli.main import main
from doceval.common.redact import known_secrets, redact_url, redact_urls, scrub, secret_values
from doceval.common.text import md_text, printable
from doceval.config.compose import compose, llm_settings
from doceval.errors import UsageError
from doceval.index.store import VectorStore
from doceval.llm.chat import ChatClient
from doceval.results.markdown import render_report
from doceval.tracking.shaping import ENTRY_COLUMNS, build_params, entries_csv

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-doceval-audit-3b9e1c7d5a"  # the password in every credential URL below
SCRIPT = "<script>alert(1)</script>"
ANSI = "\x1b[2J\x1b[31m"  # clear the screen, then red
FORMULA = "=cmd|' /C calc'!A0"

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nGenerate a dictionary of the model."),
        ("pydantic.fields.Field", "def Field(default)\n\nCreate a field with a default value and metadata."),
    ],
    "click@8.1.7": [
        ("click.decorators.option", "def option(*param_decls)\n\nAttach an option to the command."),
    ],
}
GOLDEN = [
    {"id": "a1", "question": "dictionary of the model", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": False, "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"],
     "expected_apis": ["model_dump"], "forbidden_apis": [], "split": "test", "kind": "lookup"},
    {"id": "a2", "question": "attach an option to the command", "library": "click", "version": "8.1.7",
     "out_of_scope": False, "relevant_ids": ["click@8.1.7:click.decorators.option"],
     "expected_apis": ["option"], "forbidden_apis": [], "split": "test", "kind": "lookup"},
    # Out of scope, but its words match a passage: it gets sources, so report.md and compare list it.
    {"id": "u1", "question": f"field default {SCRIPT} | **bold** {ANSI}value\nmetadata", "library": "pydantic",
     "version": "2.8.2", "out_of_scope": True, "relevant_ids": [], "expected_apis": [],
     "forbidden_apis": ["Field.magic_default"], "split": "test", "kind": "nonexistent_api"},
]  # fmt: skip


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "QDRANT_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty, migrated MLflow sqlite db (creating one costs seconds): every store here starts as a copy."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def seed_store(project: Path, template_db: Path) -> str:
    (project / "mlruns").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db, project / "mlruns" / "mlflow.db")
    return tracking.tracking_uri(None, project)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template_db: Path) -> Path:
    make_tiny_project(
        tmp_path, DOCS, "".join(json.dumps({**e, "reference_answer": "ref"}) + "\n" for e in GOLDEN)
    )
    seed_store(tmp_path, template_db)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def agent() -> Iterator[FakeAgent]:
    with running_agent() as srv:
        yield srv


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_secret(url: str) -> str:
    """``url`` with ``user:SECRET@`` in front of its host."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"user:{SECRET}@{parts.netloc}"))


def eval_args(*overrides: str) -> list[str]:
    return ["eval", "--quiet", "--split", "test", "--output", "out.json", "retriever=bm25", "floors=zero",
            *overrides]  # fmt: skip


# ----------------------------------------------------------------------------- 1. credentials inside URLs

# (case, overrides with {llm}/{agent}/{closed} placeholders, exit code, the parameter that holds the URL)
LEAKS = [
    ("answerer.base_url", ["answerer=openai", "answerer.model=m", "answerer.max_retries=0",
                           "answerer.base_url={llm}"], 0, "answerer.base_url"),
    ("judge.base_url", ["judge=openai", "judge.model=j", "judge.max_retries=0", "judge.base_url={llm}"], 0,
     "judge.base_url"),
    ("agent.url", ["agent=http", "agent.url={agent}"], 0, "agent.url"),
    ("store.url", ["store=qdrant_server", "store.url=http://user:" + SECRET + "@127.0.0.1:{closed}"], 0,
     "store.url"),
    ("tracking.uri unreachable", ["tracking.uri=http://user:" + SECRET + "@127.0.0.1:{closed}"], 2, None),
    ("agent.url unreachable", ["agent=http", "agent.url=http://user:" + SECRET + "@127.0.0.1:{closed}/ask"], 2,
     None),
]  # fmt: skip


def _runs(uri: str) -> list[Any]:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments() if e.name.startswith("doceval-")]
    return list(client.search_runs(ids)) if ids else []


@pytest.mark.slow
@pytest.mark.parametrize(("case", "overrides", "code", "param"), LEAKS, ids=[c[0] for c in LEAKS])
def test_url_credentials_never_leak(
    case: str, overrides: list[str], code: int, param: str | None, project: Path, llm: FakeOpenAI,
    agent: FakeAgent, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    fill = {"llm": with_secret(llm.base_url), "agent": with_secret(agent.url), "closed": str(closed_port())}
    assert main(eval_args(*(o.format(**fill) for o in overrides))) == code
    out, err = capfd.readouterr()
    assert SECRET not in out and SECRET not in err  # terminal: progress, headline, messages
    uri = tracking.tracking_uri(None, project)
    runs = _runs(uri)
    files = [p for p in (project / "mlruns").rglob("*") if p.is_file()]
    for path in files:  # the sqlite store (params, tags, run names) and every artifact
        assert SECRET.encode() not in path.read_bytes(), path
    if code != 0:
        assert "***@127.0.0.1" in err and not runs  # the message names the URL, redacted; nothing logged
        return
    assert "user:" + SECRET not in (project / "out.json").read_text()
    summary = json.loads((project / "out.json").read_text())
    assert SECRET not in json.dumps(summary)  # the summary eval wrote (its config block)
    (run,) = runs
    params, tags = run.data.params, run.data.tags
    assert param is not None and params[param].startswith("http://***@127.0.0.1:")  # kept, credentials masked
    assert not any(SECRET in v for v in [*params.values(), *tags.values(), run.info.run_name or ""])
    client = MlflowClient(uri)
    dl = project / "dl"
    logged = {name: Path(client.download_artifacts(run.info.run_id, name, str(dl))).read_text()
              for name in ("summary.json", "config.yaml", "entries.csv")}  # fmt: skip
    assert not any(SECRET in text for text in logged.values())
    config = yaml.safe_load(logged["config.yaml"])
    if case.endswith("base_url"):
        block = config[case.split(".")[0]]
        assert (
            block["base_url"].startswith("http://***@127.0.0.1:") and block["api_key_env"] == "OPENAI_API_KEY"
        )
    if case == "agent.url":
        assert config["system"]["agent"]["url"] == redact_url(with_secret(agent.url))
        assert agent.auth[-1] is not None and agent.auth[-1].startswith("Basic ")  # the credentials were used


def test_llm_client_reprs_and_records_hide_url_credentials() -> None:
    url = f"http://user:{SECRET}@127.0.0.1:9/v1?api_key={SECRET}x&mode=1"
    cfg = llm_settings("answerer", model="m", base_url=url, cache_path=None)
    client = ChatClient(cfg, "answerer")
    for text in (repr(cfg), repr(client), json.dumps(cfg.public_dict())):
        assert SECRET not in text and "***@127.0.0.1:9" in text and "api_key=***&mode=1" in text
    # Registered with the scrubber when the client was made: redacted from its error messages.
    assert SECRET in known_secrets() and SECRET + "x" in known_secrets()


def test_store_url_credentials_stay_out_of_messages() -> None:
    server = compose(["store=qdrant_server"]).store
    store = VectorStore(replace(server, url=f"http://user:{SECRET}@127.0.0.1:{closed_port()}"))
    assert SECRET not in store.location and store.location.startswith("http://***@127.0.0.1:")
    store.close()


def test_the_one_scrubber(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "env-secret-0123456789")
    cfg: dict[str, Any] = {
        "answerer": {"base_url": f"https://user:{SECRET}@llm.example/v1", "api_key_env": "MY_KEY",
                     "api_key": "literal", "note": "key is env-secret-0123456789"},
        "tracking": {"uri": f"https://mlflow.example/?token={SECRET}&x=1"},
        "elsewhere": f"the password was {SECRET}",
    }  # fmt: skip
    secrets = secret_values(cfg)
    assert SECRET in secrets and "env-secret-0123456789" in secrets
    clean = scrub(cfg, secrets, drop_secret_keys=False)
    assert SECRET not in json.dumps(clean) and "env-secret" not in json.dumps(clean)
    assert clean["answerer"]["base_url"] == "https://***@llm.example/v1"
    assert clean["answerer"]["api_key"] == "<redacted>" and clean["answerer"]["api_key_env"] == "MY_KEY"
    assert clean["tracking"]["uri"] == "https://mlflow.example/?token=***&x=1"
    assert clean["elsewhere"] == "the password was <redacted>"
    assert "api_key" not in scrub(cfg, secrets)["answerer"]  # tracking drops secret-named keys
    # params: a value holding a key variable's content is dropped; a credential URL is kept, masked
    flat = {"answerer.base_url": cfg["answerer"]["base_url"], "answerer.note": cfg["answerer"]["note"],
            "tracking.uri": cfg["tracking"]["uri"], "store.url": f"http://{SECRET}@qdrant:6333"}  # fmt: skip
    params = build_params({}, flat, ["env-secret-0123456789"])
    assert params == {"answerer.base_url": "https://***@llm.example/v1",
                      "tracking.uri": "https://mlflow.example/?token=***&x=1", "store.url": "http://***@qdrant:6333"}  # fmt: skip
    # in free text: a sentence's closing punctuation stays outside the URL
    assert (
        redact_urls(f"failed (see http://u:{SECRET}@h:1/x?sig=abc&a=b).")
        == "failed (see http://***@h:1/x?sig=***&a=b)."
    )
    assert redact_url("http://127.0.0.1:8000/v1?a=b%20c") == "http://127.0.0.1:8000/v1?a=b%20c"  # untouched


# ----------------------------------------------------------------------------- 2. report.md, 4. compare


@pytest.fixture
def summaries(project: Path) -> tuple[Path, Path]:
    """Two real summaries of the golden set above (its out-of-scope question holds HTML, Markdown, a pipe, a
    newline and an escape sequence, and gets sources)."""
    assert main(["eval", "--no-track", "--quiet", "--split", "test", "--output", "base.json", "retriever=bm25",
                 "floors=zero"]) == 0  # fmt: skip
    assert main(["eval", "--no-track", "--quiet", "--split", "test", "--output", "new.json",
                 "retriever=overlap", "floors=zero"]) == 0  # fmt: skip
    return project / "base.json", project / "new.json"


@pytest.mark.slow
def test_report_escapes_golden_set_text(summaries: tuple[Path, Path]) -> None:
    summary = json.loads(summaries[0].read_text())
    (u1,) = [e for e in summary["entries"] if e["id"] == "u1"]
    assert u1["retrieved"], "the out-of-scope question must get sources to be listed"
    md = render_report(summary)
    assert SCRIPT not in md and "<script" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "\x1b" not in md and "**bold**" not in md
    (row,) = [line for line in md.splitlines() if line.startswith("| u1 |")]  # one line: the newline is gone
    cells = [c for c in row.split(" | ")]
    assert len(cells) == 4  # id, question, sources, refused: the question's "|" did not split the row
    assert "\\|" in cells[1] and "\\*\\*bold\\*\\*" in cells[1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (SCRIPT, "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a | b\nc", "a \\| b c"),
        ("[click](javascript:alert(1))", "\\[click\\](javascript:alert(1))"),
        ("`code` & *em* _x_ ~~s~~ $x$", "\\`code\\` &amp; \\*em\\* \\_x\\_ \\~\\~s\\~\\~ \\$x\\$"),
        ("pydantic.magic_validate()", "pydantic.magic_validate()"),  # intraword "_" is no emphasis
        ("\x1b[31mred\x07", "\\\\x1b\\[31mred\\\\x07"),
    ],
)
def test_markdown_cells_are_inert(value: str, expected: str) -> None:
    assert md_text(value) == expected


@pytest.mark.slow
def test_compare_does_not_replay_escape_sequences(
    summaries: tuple[Path, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(summaries[0]), str(summaries[1]), "--no-gate"]) == 0
    out, err = capfd.readouterr()
    assert "\x1b" not in out and "\x1b" not in err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("unanswerable:")]
    assert "\\x1b[2J\\x1b[31m" in line and SCRIPT in line  # shown, not executed (a terminal has no HTML)


def test_printable() -> None:
    assert printable("plain text, accents é and emoji ✓") == "plain text, accents é and emoji ✓"
    assert printable("a\x1b]0;title\x07b\x9bc\u202ed\r\n") == "a\\x1b]0;title\\x07b\\x9bc\\u202ed\\x0d\\x0a"


# ----------------------------------------------------------------------------- 3. entries.csv


def test_entries_csv_neutralises_formulas() -> None:
    entries: list[Mapping[str, Any]] = [
        {"id": FORMULA, "library": "+SUM(A1:A9)", "version": "-2+3", "kind": "@cmd", "split": "\tx",
         "out_of_scope": False, "refused": "\rx", "scores": {"hit_rate": -0.5, "mrr": 1.0}},
        {"id": "-1", "library": "pydantic", "version": "2.8.2", "kind": "lookup", "split": "test",
         "out_of_scope": True, "refused": True, "scores": {"hit_rate": None, "mrr": -3}},
    ]  # fmt: skip
    rows = list(csv.reader(io.StringIO(entries_csv(entries))))
    assert rows[0] == [*ENTRY_COLUMNS, "hit_rate", "mrr"]
    # id, split, kind, pin, question, out_of_scope, refused (a carriage return becomes a quoted newline), stage,
    # top_ids, answer, system_error, duration_s
    assert rows[1] == ["'" + FORMULA, "'\tx", "'@cmd", "'+SUM(A1:A9)@-2+3", "", "False", "'\nx", "", "", "",
                       "", "", "-0.5", "1.0"]  # fmt: skip
    assert rows[2] == ["-1", "test", "lookup", "pydantic@2.8.2", "", "True", "True", "", "", "", "", "", "", "-3"]  # fmt: skip


# ----------------------------------------------------------------------------- 5. artifacts follow the store


def tiny_summary(split: str = "test") -> dict[str, Any]:
    return {
        "metrics": {"hit_rate": 1.0, "counts": {"n_entries": 1}},
        "config": {"split": split, "k": 5, "golden": {"path": "golden.jsonl", "md5": "0" * 32}},
        "entries": [{"id": "q1", "split": split, "scores": {"hit_rate": 1.0}}],
    }


def artifact_files(project: Path) -> set[Path]:
    return {p for p in (project / "mlruns" / "artifacts").rglob("*") if p.is_file()}


@pytest.mark.slow
def test_a_copied_project_logs_into_its_own_artifacts(
    tmp_path: Path, template_db: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    original = tmp_path / "original"
    uri_a = seed_store(original, template_db)
    first = tracking.log_run(tiny_summary(), uri=uri_a, root=original)
    before = artifact_files(original)
    assert before and all((original / "mlruns" / "artifacts") in p.parents for p in before)

    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    uri_b = tracking.tracking_uri(None, copy)
    second = tracking.log_run(tiny_summary(), uri=uri_b, root=copy)
    assert "copied or moved" in capfd.readouterr().err  # said once, on stderr

    assert artifact_files(original) == before  # nothing new in the original project
    client = MlflowClient(uri_b)
    own = (copy / "mlruns" / "artifacts").resolve()
    for run_id in (first, second):  # the new run, and the copied one (its artifacts were copied along)
        where = Path(
            urllib.parse.unquote(urllib.parse.urlsplit(client.get_run(run_id).info.artifact_uri).path)
        )
        assert own in where.parents
    assert any(p.name == "summary.json" and second in p.parts for p in artifact_files(copy))
    for exp in client.search_experiments():
        if exp.name.startswith("doceval-"):
            assert exp.artifact_location == (own / exp.name).as_uri()
    # the original store is untouched: its runs still read their own artifacts
    assert str(original) in MlflowClient(uri_a).get_run(first).info.artifact_uri
    assert tracking.load_summary_from_run(first, uri_b, copy)["entries"][0]["id"] == "q1"


@pytest.mark.slow
def test_a_dvc_exp_workspace_logs_to_the_project_it_came_from(
    tmp_path: Path, template_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    seed_store(project, template_db)
    workspace = tmp_path / "dvc-tmp-exp"  # `dvc exp run --temp` runs in a copy, with DVC_ROOT = the project
    shutil.copytree(project, workspace)
    monkeypatch.setenv("DVC_ROOT", str(project))
    uri = tracking.tracking_uri(None, workspace)
    assert uri == tracking.tracking_uri(None, project)
    run_id = tracking.log_run(tiny_summary(), uri=uri, root=workspace)
    assert str(project / "mlruns" / "artifacts") in MlflowClient(uri).get_run(run_id).info.artifact_uri
    assert not artifact_files(workspace)


@pytest.mark.slow
def test_an_unwritable_artifact_location_stops_before_a_run_exists(tmp_path: Path, template_db: Path) -> None:
    uri = seed_store(tmp_path, template_db)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact folder should be\n")
    MlflowClient(uri).create_experiment("doceval-test", artifact_location=(blocker / "runs").as_uri())
    with pytest.raises(UsageError, match="artifact location .* cannot be written"):
        tracking.log_run(tiny_summary(), uri=uri, root=tmp_path)
    assert _runs(uri) == []  # no FAILED run left behind
