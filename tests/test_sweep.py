"""`doceval sweep` (doceval.app.sweep): points that differ only in a secret stay apart (issue 39, H8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_project import make_tiny_project

from doceval.app.sweep import shown_points
from doceval.cli.main import main
from doceval.common.redact import forget_secrets, register_secret

TOKENS = ("tkA-0123456789-first", "tkB-9876543210-second")
DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nA dictionary of the model."),
        ("pydantic.fields.Field", "def Field(default)\n\nA field with a default value."),
    ]
}
GOLDEN = [
    {"id": "a1", "question": "dictionary of the model", "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"]},
    {"id": "a2", "question": "field with a default", "relevant_ids": ["pydantic@2.8.2:pydantic.fields.Field"]},
]  # fmt: skip
# A retriever whose ranking depends on the token it is built with: the two points really differ.
RETRIEVER = f"""
def make(token):
    ids = ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump", "pydantic@2.8.2:pydantic.fields.Field"]
    def retrieve(question, k, library=None, version=None):
        return ids[:k] if token == {TOKENS[0]!r} else ids[1:][:k]
    return retrieve
"""


def test_points_that_differ_in_a_secret_get_ordinal_labels() -> None:
    forget_secrets()
    register_secret("https://user:pw-0123456789@svc/x")
    points = [["k=1", f"+retriever.kwargs.token={TOKENS[0]}"], ["k=1", f"+retriever.kwargs.token={TOKENS[1]}"],
              ["k=2", f"+retriever.kwargs.token={TOKENS[0]}"], ["k=2", "agent.url=https://user:pw-0123456789@svc/x"]]  # fmt: skip
    assert shown_points(points) == [
        ["k=1", "+retriever.kwargs.token=<redacted#1>"],
        ["k=1", "+retriever.kwargs.token=<redacted#2>"],
        ["k=2", "+retriever.kwargs.token=<redacted#1>"],  # the same value, the same label: never a digest
        ["k=2", "agent.url=<redacted#1>"],  # numbered per key
    ]
    forget_secrets()


@pytest.mark.slow
def test_a_sweep_over_a_secret_kwarg_tells_its_points_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every point showed as (base), with identical points.csv rows: the secret, scrubbed to <redacted>, was
    all that told them apart."""
    base = {"library": "pydantic", "version": "2.8.2", "split": "test", "kind": "lookup", "out_of_scope": False,
            "reference_answer": "use it", "expected_apis": [], "forbidden_apis": []}  # fmt: skip
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps({**base, **e}) + "\n" for e in GOLDEN))
    (tmp_path / "token_retriever.py").write_text(RETRIEVER)
    monkeypatch.chdir(tmp_path)
    forget_secrets()
    code = main(["sweep", "-m", "retriever=function", "retriever.target=token_retriever:make",
                 f"+retriever.kwargs.token={','.join(TOKENS)}", "floors=zero", "split.name=test", "--jobs", "1",
                 "--quiet", "--no-track"])  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "(base)" not in out
    assert "+retriever.kwargs.token=<redacted#1>" in out and "+retriever.kwargs.token=<redacted#2>" in out
    (folder,) = (tmp_path / "eval" / "sweeps").iterdir()
    rows = (folder / "points.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and rows[0].split(",", 1)[1] != rows[1].split(",", 1)[1]
    assert "<redacted#1>" in rows[0] and "<redacted#2>" in rows[1]
    points = [json.loads((folder / "points" / f"{job}.json").read_text()) for job in (0, 1)]
    assert points[0]["metrics"]["mrr"] != points[1]["metrics"]["mrr"]  # the two tokens ranked differently
    kept = "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    assert not any(token in kept + out + err for token in TOKENS)
