"""Issue 27, part 1, and issue 39 (H5-H8): no secret in any output. Secrets are planted in every form doceval
knows (a header value with its scheme, the same token without it, a URL's userinfo and the Basic token derived
from it, credential-like query values, ?jwt= included, retriever kwargs named by the one rule: token, hf_token,
refresh_token, api-key, pwd, and one a `secrets:` list adds; credentials in MLFLOW_TRACKING_URI), an assistant
echoes every one of them back, encoded too (base64 of the token, of "Bearer <token>" and of user:pass, standard
and URL-safe, with and without padding; quote_plus; JSON \\/ escapes; repr), the user's retriever prints their
repr, and every command that writes runs on a tiny project: a run, a local sweep over two secret values,
`doceval params`. Then every file the project holds (the MLflow sqlite database's bytes and artifacts included)
and everything printed is searched for every form of every secret.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from fake_agent import JsonHandler, send_json, serving
from mlflow.tracking import MlflowClient
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.common.redact import forget_secrets

# sent as "Bearer TOKEN" from agent.headers_env; its / + ' and \\ make every encoding differ from it
TOKEN = "tok/H3ader'S3cret+9f8e\\7d6c"
PASSWORD = "pa55w0rd-Us3rinfo-77aa"  # in agent.url's userinfo: doceval sends it as Basic auth
QUERY = "qk-Qu3ryS3cret-44559911"  # ?api_key= in agent.url
JWT = "eyJhbGciOiJIUzI1NiJ9.jwtS3cret.Zm9vYmFy"  # ?jwt= in agent.url (the old query rule missed it)
KWARG = "fk-Kw4rgS3cret-12345678"  # +retriever.kwargs.token=
# Kwargs the old config-key rule missed (H5), and one a `secrets:` list names.
NAMED = {"hf_token": "hf-HuggingS3cret-0001", "refresh_token": "rt-RefreshS3cret-0002",
         "api-key": "ak-DashedS3cret-0003", "pwd": "pw-ShortNameS3cret-0004"}  # fmt: skip
LISTED = "tn-ListedS3cret-0005"  # +retriever.kwargs.tenant=, secret through +secrets=[tenant]
SWEPT = ("sw-SweptS3cretOne-0006", "sw-SweptS3cretTwo-0007")  # one sweep point each
MLFLOW_PASSWORD = "ml-Tr4ckingS3cret-0008"  # in MLFLOW_TRACKING_URI's userinfo
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def _encoded(text: str) -> dict[str, str]:
    """base64 of ``text``, standard and URL-safe, with and without padding, and each with JSON's \\/ escape."""
    raw = text.encode()
    out = {}
    for name, b64 in (
        ("base64", base64.b64encode(raw).decode()),
        ("urlsafe", base64.urlsafe_b64encode(raw).decode()),
    ):
        out.update({name: b64, f"{name} unpadded": b64.rstrip("="), f"{name} \\/": b64.replace("/", "\\/")})
    return out


ECHOED = {  # what the assistant quotes back besides the raw values
    **{f"{k} of the token": v for k, v in _encoded(TOKEN).items()},
    **{f"{k} of Bearer token": v for k, v in _encoded(f"Bearer {TOKEN}").items()},
    **{f"{k} of user:pass": v for k, v in _encoded(f"alice:{PASSWORD}").items()},
    "quote_plus of the token": urllib.parse.quote_plus(TOKEN),
    "JSON-escaped token": json.dumps(TOKEN)[1:-1],
    "JSON \\/-escaped token": json.dumps(TOKEN)[1:-1].replace("/", "\\/"),
    "repr of the token": repr(TOKEN)[1:-1],
}
FORMS = {
    "header value": f"Bearer {TOKEN}",
    "token without its scheme": TOKEN,
    "userinfo password": PASSWORD,
    "userinfo pair": f"alice:{PASSWORD}",
    "derived Basic token": BASIC,
    "query credential": QUERY,
    "jwt query credential": JWT,
    "retriever kwarg": KWARG,
    "percent-encoded Basic token": urllib.parse.quote(BASIC, safe=""),
    **{f"kwarg {name}": value for name, value in NAMED.items()},
    "kwarg named by secrets:": LISTED,
    **{f"swept kwarg {i}": value for i, value in enumerate(SWEPT)},
    "MLFLOW_TRACKING_URI password": MLFLOW_PASSWORD,
    **ECHOED,
}

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nGenerate a dictionary of the model."),
        ("pydantic.fields.Field", "def Field(default)\n\nCreate a field with a default value and metadata."),
    ],
    "click@8.1.7": [
        ("click.decorators.option", "def option(*param_decls)\n\nAttach an option to the command.")
    ],
}
GOLDEN = [
    {"id": "a1", "question": "dictionary of the model", "library": "pydantic", "version": "2.8.2",
     "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"], "expected_apis": ["model_dump"]},
    {"id": "a2", "question": "attach an option to the command", "library": "click", "version": "8.1.7",
     "relevant_ids": ["click@8.1.7:click.decorators.option"], "expected_apis": ["option"]},
    {"id": "a3", "question": "field with a default", "library": "pydantic", "version": "2.8.2",
     "relevant_ids": ["pydantic@2.8.2:pydantic.fields.Field"], "expected_apis": ["Field"]},
    {"id": "u1", "question": "the magic default of a field", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": True, "relevant_ids": [], "forbidden_apis": ["Field.magic_default"]},
]  # fmt: skip
RETRIEVER = """
def make(token, **named):
    print("retriever built with", repr(token), repr(named))  # user code printing its secrets
    def retrieve(question, k, library=None, version=None):
        if "option" in question:
            raise RuntimeError("backend refused the token " + token)  # a system error quoting its secret
        return ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump", "pydantic@2.8.2:pydantic.fields.Field"][:k]
    return retrieve


def broken(token):
    raise ValueError("cannot log in with token " + token)
"""


class EchoAgent:
    """An assistant that quotes back every credential it was sent: in its answer, its extras, a 400 body."""

    def __init__(self) -> None:
        self.requests = 0
        self.port = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        agent = self

        class Handler(JsonHandler):
            def reply(self, body: dict[str, Any]) -> None:
                agent.requests += 1
                auth, bearer = self.headers.get("Authorization", ""), self.headers.get("X-Api-Token", "")
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("api_key", [""])[0]
                basic = auth.startswith("Basic")
                decoded = base64.b64decode(auth.split(" ", 1)[-1]).decode() if basic else ""
                token = bearer.split(" ", 1)[-1]
                echoed = f"{auth} | {bearer} | {token} | {decoded} | {query} | " + " | ".join(
                    _echo_encoded(token, decoded)
                )
                if "option" in body["question"]:
                    send_json(self, 400, {"error": f"token {token} rejected; basic {decoded}"})
                    return
                send_json(self, 200, {"answer": f"model_dump; you sent {echoed}", "refused": False, "reason": None,
                                      "sources": [{"id": "pydantic@2.8.2:pydantic.main.BaseModel.model_dump",
                                                   "score": 1.0}],
                                      "usage": {"total_tokens": 3},
                                      "debug": {"headers": echoed, "url": self.path}})  # fmt: skip

        return Handler


def _echo_encoded(token: str, pair: str) -> list[str]:
    """The encodings of what the assistant was sent, as an echoing assistant (or its framework) writes them."""
    forms = [*_encoded(token).values(), *_encoded(f"Bearer {token}").values(), *_encoded(pair).values()]
    escaped = json.dumps(token)[1:-1]
    return [*forms, urllib.parse.quote_plus(token), escaped, escaped.replace("/", "\\/"), repr(token)[1:-1]]


@pytest.fixture
def echo() -> Iterator[EchoAgent]:
    srv = EchoAgent()
    with serving(srv.handler()) as server:
        srv.port = server.server_address[1]
        yield srv


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    base = {"split": "test", "kind": "lookup", "reference_answer": "use it", "out_of_scope": False,
            "forbidden_apis": [], "expected_apis": []}  # fmt: skip
    golden = "".join(json.dumps({**base, **e}) + "\n"
                     for e in GOLDEN)  # fmt: skip
    make_tiny_project(tmp_path, DOCS, golden)
    (tmp_path / "secret_retriever.py").write_text(RETRIEVER)
    (tmp_path / "mlruns").mkdir()
    MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}").search_experiments()  # created once
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DOCEVAL_T_TOKEN", f"Bearer {TOKEN}")
    for name in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _leaks(text: str) -> list[str]:
    return [name for name, form in FORMS.items() if form in text]


def _files_leaking(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != "secret_retriever.py":
            hits = _leaks(path.read_bytes().decode("utf-8", "replace"))
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


def _run(argv: list[str], capfd: pytest.CaptureFixture[str], streams: list[str]) -> int:
    forget_secrets()  # every command is a new process in real life: nothing registered by an earlier one
    code = main(argv)
    out, err = capfd.readouterr()
    streams.append(f"$ doceval {' '.join(argv)}\n{out}\n{err}")
    return code


def _with_env(name: str, value: str, command: Callable[[], int]) -> int:
    """``command`` run with the environment variable ``name`` set to ``value`` (as a user's shell would)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        return command()
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _report(project: Path, capfd: pytest.CaptureFixture[str], streams: list[str]) -> int:
    """The report stage over the HTTP run's summary (what `dvc repro report` reads)."""
    (project / "eval").mkdir(exist_ok=True)
    shutil.copyfile(project / "http.json", project / "eval" / "summary.json")
    return _run(["report"], capfd, streams)


@pytest.mark.slow
def test_no_secret_reaches_any_file_or_stream(
    project: Path, echo: EchoAgent, capfd: pytest.CaptureFixture[str]
) -> None:
    url = f"http://alice:{PASSWORD}@127.0.0.1:{echo.port}/ask?api_key={QUERY}&jwt={JWT}"
    http = ["agent=http", f"agent.url='{url}'", "+agent.headers_env.X-Api-Token=DOCEVAL_T_TOKEN",
            "agent.max_retries=0"]  # fmt: skip
    named = [f"+retriever.kwargs.{name}={value}" for name, value in NAMED.items()]
    function = ["retriever=function", "retriever.target=secret_retriever:make", f"+retriever.kwargs.token={KWARG}",
                *named, "+secrets=[tenant]", f"+retriever.kwargs.tenant={LISTED}", "floors=zero", "k=2"]  # fmt: skip
    streams: list[str] = []
    codes = {
        "eval http": _run(
            ["eval", "--quiet", "--split", "test", "--output", "http.json", *http], capfd, streams
        ),
        "eval function": _run(["eval", "--quiet", "--output", "fn.json", *function], capfd, streams),
        "eval function rerun": _run(["eval", "--quiet", "--output", "fn2.json", *function], capfd, streams),
        "factory raising with its token": _run(
            [
                "eval",
                "--quiet",
                "--output",
                "broken.json",
                "retriever=function",
                "retriever.target=secret_retriever:broken",
                f"+retriever.kwargs.token={KWARG}",
            ],
            capfd,
            streams,
        ),  # fmt: skip
        "gate with JUnit": _run(["gate", "http.json", "--junit", "junit.xml"], capfd, streams),
        "params": _run(["params"], capfd, streams),
        "report": _report(project, capfd, streams),
        "compare": _run(["compare", "fn.json", "fn2.json"], capfd, streams),
        "judge rescore": _run(
            ["judge", "rescore", "http.json", "--output", "rescored.json", "judge=reference", "--quiet"],
            capfd,
            streams,
        ),  # fmt: skip
        "history": _run(["history", "--metric", "hit_rate"], capfd, streams),
        "sweep": _run(
            [
                "sweep",
                "-m",
                "k=1,2",
                *function[:-2],
                f"+retriever.kwargs.swept={','.join(SWEPT)}",
                "+secrets=[tenant,swept]",
                "floors=zero",
                "split.name=test",
                "--jobs",
                "1",
                "--quiet",
            ],
            capfd,
            streams,
        ),  # fmt: skip
        "history at MLFLOW_TRACKING_URI": _with_env(
            "MLFLOW_TRACKING_URI",
            f"http://ml:{MLFLOW_PASSWORD}@127.0.0.1:{echo.port}",
            lambda: _run(["history", "--metric", "hit_rate"], capfd, streams),
        ),
        "bad URL list": _run(
            ["eval", "--quiet", "agent=http", f"agent.url=http://alice:{PASSWORD}@127.0.0.1:9/x,y"],
            capfd,
            streams,
        ),  # fmt: skip
        "bad URL bracket": _run(
            ["eval", "--quiet", "agent=http", f"agent.url=http://alice:{PASSWORD}@127.0.0.1:9/x]"],
            capfd,
            streams,
        ),  # fmt: skip
        "bad kwarg bracket": _run(
            ["eval", "--quiet", *function[:2], f"+retriever.kwargs.token={KWARG}]"], capfd, streams
        ),  # fmt: skip
    }
    leaking_streams = {s.splitlines()[0][:90]: _leaks(s.split("\n", 1)[1]) for s in streams}
    assert {k: v for k, v in leaking_streams.items() if v} == {}
    assert _files_leaking(project) == {}
    assert echo.requests >= 4  # the assistant was asked, and quoted every credential back
    summary = json.loads((project / "http.json").read_text())
    assert any("<redacted>" in (e["answer"] or "") for e in summary["entries"])  # scrubbed, not dropped
    assert summary["metrics"]["counts"]["system_errors"] == 1  # the 400 quoting the token
    # compare gates NEW: its system error (the retriever quoting its token) fails the shipped gate
    assert codes["eval http"] == 0 and codes["eval function"] == 0 and codes["compare"] == 3
    assert codes["factory raising with its token"] == 2 and "<redacted>" in streams[3]
    assert codes["bad URL list"] == 2 and codes["bad URL bracket"] == 2 and codes["bad kwarg bracket"] == 2
    assert codes["judge rescore"] == 0 and codes["sweep"] == 0 and codes["params"] == 0
    # the echo server answers, but is no MLflow: exit 2, its URI named with the password masked
    history = [s for s in streams if s.startswith("$ doceval history --metric hit_rate\n")][-1]
    assert codes["history at MLFLOW_TRACKING_URI"] == 2 and "not as an MLflow tracking server" in history
    sweep_out = next(s for s in streams if s.startswith("$ doceval sweep"))
    assert (
        "swept=<redacted#1>" in sweep_out and "swept=<redacted#2>" in sweep_out
    )  # told apart, not by a digest
    assert (
        codes["history"] == 2
    )  # the project is no git repository: history says it needs a commit (test_history)
    assert (
        codes["gate with JUnit"] == 3 and codes["report"] == 0 and (project / "eval" / "report.md").is_file()
    )
    assert (project / "mlruns" / "mlflow.db").stat().st_size > 0 and list(
        (project / "data" / "runs").rglob("*.jsonl")
    )


OPENAI_KEY = "sk-live-0penAIKeyS3cret-0009"  # in OPENAI_API_KEY: registered from the environment


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [["agent.url=http://alice:pa55w0rd-Us3rinfo-77aa@127.0.0.1:9/ask"], [f"+retriever.kwargs.token={KWARG}"],
     [f"tracking.uri='http://127.0.0.1:9/?api_key={QUERY}'"],
     *([f"+retriever.kwargs.{name}={value}"] for name, value in NAMED.items()),
     [f"agent.url='http://127.0.0.1:9/ask?jwt={JWT}'"],
     ["+secrets=[tenant]", f"+retriever.kwargs.tenant={LISTED}"],
     [f"+retriever.kwargs.blob='{base64.b64encode(OPENAI_KEY.encode()).decode()}'"],
     [f"+retriever.kwargs.note='{urllib.parse.quote_plus('Bearer ' + OPENAI_KEY)}'"]],
)  # fmt: skip
def test_params_yaml_never_receives_a_credential(
    overrides: list[str], project: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """params.yaml is committed with the project: a credential there is a leak (and scrubbing it would break
    the stages that read it), so `doceval params` refuses it, naming the key and the fix: a secret-named key
    (the one rule, a `secrets:` list), URL credentials, or any form of a secret registered from the
    environment."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    system = (
        ["agent=http"]
        if overrides[0].startswith("agent.")
        else ["retriever=function"]
        if any("kwargs" in o for o in overrides)
        else []
    )
    forget_secrets()
    assert main(["params", *system, *overrides]) == 2
    err = capfd.readouterr().err
    assert "environment variables" in err and not _leaks(err) and OPENAI_KEY not in err
    assert not (project / "params.yaml").exists()
