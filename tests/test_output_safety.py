"""Issue 27, outputs: a file doceval writes at a path the user names never destroys what is there (a device, a
FIFO, a directory, a symlink), a failed run leaves no earlier summary at --output for a gate to take for its
own, and the gate counts system errors and refuses incomplete runs.

Every command runs in a user's own folder (no conf/; the shipped gate applies) with their own retriever, so a
run takes a fraction of a second."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_report import _entry, _summary

from doceval.cli.main import main
from doceval.common.io import check_writable, write_text_atomic
from doceval.config.compose import compose
from doceval.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

MODULE = """
DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days"}

def ids(question, k):
    words = set(question.split())
    return [d for d, t in DOCS.items() if len(words & set(t.split())) >= 2][:k]

def make(region="eu"):
    raise ValueError("index unavailable in " + region)

def interrupted(question, k):
    raise KeyboardInterrupt

def crashing(question, k):
    raise RuntimeError("retriever crashed")

def wrong_type(question, k):
    return "D1"

def broken(question, library, version, session_id):
    if "pizza" in question:
        raise RuntimeError("model offline")
    hits = ids(question, 3)
    return {"answer": "see " + " ".join(hits) if hits else None, "refused": not hits, "sources": hits}
"""
ROWS = [
    ("q1", "how much are late fees per day", ["D1"]),
    ("q2", "are returns accepted after thirty days", ["D2"]),
    ("q3", "do you sell pizza", []),
]
OLD = {"metrics": {"hit_rate": 1.0}, "entries": [], "note": "an earlier run"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "userout.py").write_text(MODULE, encoding="utf-8")
    rows = [{"id": i, "question": q, "out_of_scope": not rel, "relevant_ids": rel, "reference_answer": "ok",
             "expected_apis": [], "forbidden_apis": [], "split": None, "kind": "lookup" if rel else "off_topic"}
            for i, q, rel in ROWS]  # fmt: skip
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "passing.json").write_text(json.dumps(gated_summary(0)), encoding="utf-8")
    yield tmp_path
    sys.modules.pop("userout", None)


def eval_argv(output: str, *overrides: str) -> list[str]:
    system = overrides or ("retriever=function", "retriever.target=userout:ids")
    return ["eval", "--golden", "golden.jsonl", "--split", "all", "--no-track", "--quiet", "--output", output,
            *system]  # fmt: skip


def gated_summary(system_errors: int | None, complete: bool = True) -> dict[str, Any]:
    """Ten entries: four hits, two refused out-of-scope questions (the default gate passes those), and four
    entries whose system call failed (scored by no metric) counted as ``system_errors`` (None: no count, as an
    older summary has none)."""
    entries = [_entry(f"a{i}", 1, 1.0, None, 0, [[f"pydantic@2.8.2:a{i}", 0.9]], False) for i in range(1, 5)]
    entries += [_entry(u, None, None, 1, None, [], True) for u in ("u1", "u2")]
    for i in range(5, 9):
        errored = _entry(f"a{i}", None, None, None, None, [], False)
        errored["system_error"] = f"RuntimeError: model offline on a{i}"
        entries.append(errored)
    summary = _summary(entries)
    if system_errors is not None:
        summary["metrics"]["counts"]["system_errors"] = system_errors
    if not complete:
        summary["complete"] = False
        summary["incomplete"] = {"reason": "5 system errors > --max-errors 4", "entries_scored": 10,
                                 "entries_in_split": 20}  # fmt: skip
    return summary


# ------------------------------------------------------------------------ 1. outputs that never destroy


def _judge(command: str, output: str, first: str) -> list[str]:
    return ["judge", command, "--no-track", "--quiet", "--output", output, first]


# Every user-named output file, with a command line that reaches its check (inputs may not even exist: the
# check comes before any of them is read).
COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "--output": lambda p: eval_argv(p),
    "judge validate --output": lambda p: _judge("validate", p, "labels.jsonl"),
    "judge rescore --output": lambda p: _judge("rescore", p, "passing.json"),
    "--junit": lambda p: ["gate", "passing.json", "--junit", p],
    "compare --plot": lambda p: ["compare", "passing.json", "passing.json", "--no-gate", "--plot", p],
    "history --plot": lambda p: ["history", "--plot", p, "--tracking-uri", "sqlite:///nowhere/mlflow.db"],
    "golden audit --out": lambda p: ["golden", "audit", "golden.jsonl", "--sample", "2", "--out", p],
    "golden pool --out": lambda p: ["golden", "pool", "passing.json", "--golden", "golden.jsonl", "--out", p],
}


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "FIFO"


def _directory(path: Path) -> str:
    path.mkdir()
    return "is a directory"


def _dangling(path: Path) -> str:
    path.symlink_to(path.with_name("missing-target"))
    return "dangling"


def _link_to_fifo(path: Path) -> str:
    os.mkfifo(path.with_name("pipe"))
    path.symlink_to(path.with_name("pipe"))
    return "a FIFO (named pipe), not a regular file"


KINDS = {
    "fifo": _fifo,
    "directory": _directory,
    "dangling symlink": _dangling,
    "symlink to a fifo": _link_to_fifo,
}


def _kind_of(path: Path) -> tuple[bool, int | None]:
    """Whether ``path`` is a link, and the mode of what it is (or points at; None when nothing)."""
    try:
        mode: int | None = stat.S_IFMT(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    return path.is_symlink(), mode


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_that_is_not_a_regular_file_exits_2_before_any_work_and_is_left_alone(
    project: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    path = project / "out.x"
    needle = KINDS[kind](path)
    before = _kind_of(path)
    assert main(COMMANDS[command](str(path))) == 2
    err = capsys.readouterr().err
    flag = command.split()[-1]
    assert f"{flag} {path}" in err and needle in err and f"writable {flag}" in err, err
    assert _kind_of(path) == before
    assert not path.with_name("missing-target").exists()
    assert [p.name for p in project.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("command", ["--output", "--junit"])
def test_dev_null_stays_a_character_device(
    project: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # Refused by the check itself first: a doceval that would replace /dev/null (run as root) never runs here.
    with pytest.raises(UsageError, match="character device"):
        check_writable(Path(os.devnull), "--output /dev/null", "pass a writable --output PATH")
    assert main(COMMANDS[command](os.devnull)) == 2
    assert f"{command} {os.devnull}: is a character device, not a regular file" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize(
    ("command", "rc", "written"),
    [("--output", 0, '"entries"'), ("--junit", 0, "<testsuites"), ("compare --plot", 0, "PNG")],
)
def test_a_symlink_to_a_file_stays_a_link_and_its_target_is_replaced(
    project: Path, command: str, rc: int, written: str
) -> None:
    target = project / "kept" / "real.out"
    target.parent.mkdir()
    target.write_text("old contents\n", encoding="utf-8")
    link = project / "link.out"
    link.symlink_to(Path("kept") / "real.out")
    assert main(COMMANDS[command](str(link))) == rc
    assert link.is_symlink() and os.readlink(link) == str(Path("kept") / "real.out")
    text = target.read_bytes().decode("utf-8", errors="replace")
    assert written in text and "old contents" not in text
    assert sorted(p.name for p in target.parent.iterdir()) == ["real.out"]  # no temporary file left


def _docs(out: str) -> list[str]:
    params = str(ROOT / "params.yaml")
    return [
        "docs",
        "--params",
        params,
        "--quiet",
        "--folder",
        "md",
        "--library",
        "lib",
        "--version",
        "1",
        "--out",
        out,
    ]


FOLDER_COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "docs --out": _docs,
    "beir import --out": lambda p: ["beir", "import", "md", "--out", p],
}


def _regular_file(path: Path) -> str:
    path.write_text("someone's file\n", encoding="utf-8")
    return "is a regular file, not a folder"


FOLDER_KINDS = {"fifo": _fifo, "regular file": _regular_file, "dangling symlink": _dangling}


@pytest.mark.parametrize("kind", list(FOLDER_KINDS))
@pytest.mark.parametrize("command", list(FOLDER_COMMANDS))
def test_an_output_folder_that_is_not_a_folder_exits_2_and_is_left_alone(
    project: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    (project / "md").mkdir()
    (project / "md" / "a.md").write_text("# Fees\n\nLate fees are five dollars per day.\n", encoding="utf-8")
    path = project / "out.d"
    FOLDER_KINDS[kind](path)
    before = _kind_of(path), path.read_text() if kind == "regular file" else None
    assert main(FOLDER_COMMANDS[command](str(path))) == 2
    err = capsys.readouterr().err
    assert f"--out {path}: is a" in err and "not a folder; pass --out DIR naming a folder" in err, err
    assert (_kind_of(path), path.read_text() if kind == "regular file" else None) == before
    assert [p.name for p in project.iterdir() if p.name.startswith(".")] == []


def test_an_output_folder_behind_a_symlink_is_replaced_and_the_link_stays(project: Path) -> None:
    (project / "md").mkdir()
    (project / "md" / "a.md").write_text("# Fees\n\nLate fees are five dollars per day.\n", encoding="utf-8")
    (project / "real").mkdir()
    (project / "real" / "corpus.jsonl").write_text("from an older build\n", encoding="utf-8")
    # An older build of the same corpus (a folder holding another one is refused without --replace).
    (project / "real" / "manifest.json").write_text('{"pins": {"lib@1": {"source": "md"}}}', encoding="utf-8")
    (project / "corpus").symlink_to("real")
    assert main(_docs("corpus")) == 0
    assert (project / "corpus").is_symlink() and os.readlink(project / "corpus") == "real"
    assert sorted(p.name for p in (project / "real").iterdir()) == ["corpus.jsonl", "manifest.json"]
    assert "from an older build" not in (project / "real" / "corpus.jsonl").read_text(encoding="utf-8")


def test_golden_split_rewrites_the_file_a_symlink_names_and_refuses_a_fifo(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = project / "current.jsonl"
    link.symlink_to("golden.jsonl")
    assert main(["golden", "split", str(link)]) == 0
    assert link.is_symlink()
    assert {json.loads(line)["split"] for line in (project / "golden.jsonl").read_text().splitlines()} <= {
        "calibration",
        "test",
    }
    os.mkfifo(project / "pipe.jsonl")
    assert main(["golden", "split", "pipe.jsonl"]) == 2
    assert "golden split pipe.jsonl: is a FIFO (named pipe)" in capsys.readouterr().err
    assert stat.S_ISFIFO((project / "pipe.jsonl").stat().st_mode)


@pytest.mark.slow
def test_writes_use_a_temporary_name_of_their_own_and_keep_the_permissions(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o600)
    # Another writer's temporary file under the old shared name: a second writer must not reuse it.
    shared = tmp_path / ".out.json.tmp"
    shared.write_text("another writer's half\n", encoding="utf-8")
    live = tmp_path / f".out.json.{os.getppid()}.0123abcd.tmp"  # a live writer's (our parent is alive)
    live.write_text("in progress\n", encoding="utf-8")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = tmp_path / f".out.json.{child.pid}.89abcdef.tmp"  # left by a writer killed before its rename
    dead.write_text("abandoned\n", encoding="utf-8")
    write_text_atomic(out, "new\n")
    assert out.read_text() == "new\n" and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert shared.read_text() == "another writer's half\n" and live.read_text() == "in progress\n"
    assert not dead.exists()


# --------------------------------------------------------- 2. a failed run leaves no summary at --output


@pytest.mark.parametrize(
    ("overrides", "rc"),
    [
        (["retriever=function", "retriever.target=userout:make", "+retriever.kwargs.region=us"], 2),
        # A retriever's bad return or exception is that entry's system error (issue 27): the run goes on. A
        # usage error found after the output check: the answerer's endpoint refuses every call...
        (
            [
                "retriever=function",
                "retriever.target=userout:ids",
                "answerer=openai",
                "answerer.model=m",
                "answerer.max_retries=0",
                "answerer.base_url=http://127.0.0.1:9/v1",
            ],
            2,
        ),
        # ...and a bug in doceval itself (simulated: the scoring step raises) is exit 1.
        (["retriever=function", "retriever.target=userout:ids", "bug"], 1),
        (["retriever=function", "retriever.target=userout:interrupted"], 130),
    ],
    ids=["factory raises", "usage error mid-run", "unexpected error", "ctrl-c"],
)
def test_a_failed_eval_moves_the_previous_summary_aside(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    overrides: list[str],
    rc: int,
) -> None:
    out = project / "runs" / "latest.json"
    out.parent.mkdir()
    out.write_text(json.dumps(OLD), encoding="utf-8")
    if "bug" in overrides:
        import doceval.harness.evaluate as evaluate_module

        def bug(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in doceval")

        monkeypatch.setattr(evaluate_module, "score_answers", bug)
        overrides = [o for o in overrides if o != "bug"]
    assert main(eval_argv(str(out), *overrides)) == rc
    assert not out.exists()
    assert json.loads(out.with_name("latest.json.stale").read_text()) == OLD
    err = capsys.readouterr().err
    assert f"the previous summary at {out} was moved to {out}.stale: this run failed" in err


def test_a_failed_rescore_moves_the_previous_summary_aside(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = project / "rescored.json"
    out.write_text(json.dumps(OLD), encoding="utf-8")
    (project / "no_config.json").write_text(json.dumps({"metrics": {}, "entries": []}), encoding="utf-8")
    assert main([*_judge("rescore", str(out), "no_config.json"), "judge=reference"]) == 2
    assert not out.exists() and json.loads((project / "rescored.json.stale").read_text()) == OLD
    err = capsys.readouterr().err
    assert "not a doceval summary" in err and f"moved to {out}.stale: this run failed" in err


def test_what_is_not_a_failure_after_the_check_leaves_the_output_alone(project: Path) -> None:
    out = project / "out.json"
    out.write_text(json.dumps(OLD), encoding="utf-8")
    assert main([*eval_argv(str(out)), "--limit", "0"]) == 2  # refused before the output check: not a run
    assert json.loads(out.read_text()) == OLD
    # An incomplete run (exit 4) writes its own summary, marked incomplete: nothing is moved aside.
    broken = eval_argv(str(out), "agent=function", "agent.target=userout:broken")
    assert main([*broken, "--max-errors", "0"]) == 4
    assert json.loads(out.read_text())["complete"] is False
    assert main(eval_argv(str(out))) == 0
    assert json.loads(out.read_text())["complete"] is True
    assert not (project / "out.json.stale").exists()


# ----------------------------------------------------------------- 3. verdicts that count failures


def _gate_file(path: Path, **extra: Any) -> Path:
    cfg = {"thresholds": {"hit_rate": 0.6, "refused_correctly": 1.0}, **extra}
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("system_errors", "gate_extra", "rc"),
    [
        (4, {}, 3),  # the shipped default: max_system_errors 0
        (4, {"max_system_errors": 3}, 3),
        (4, {"max_system_errors": 4}, 0),
        (0, {}, 0),
        (None, {}, 0),  # a summary written before the count existed: 0
    ],
)
def test_the_gate_fails_a_run_with_more_system_errors_than_allowed(
    project: Path, capsys: pytest.CaptureFixture[str], system_errors: int | None, gate_extra: dict[str, Any],
    rc: int,
) -> None:  # fmt: skip
    summary = project / "s.json"
    summary.write_text(json.dumps(gated_summary(system_errors)), encoding="utf-8")
    config = _gate_file(project / "gate.yaml", **gate_extra) if gate_extra else CONF / "gate" / "default.yaml"
    assert main(["gate", str(summary), "--config", str(config)]) == rc
    out = capsys.readouterr().out
    allowed = gate_extra.get("max_system_errors", 0)
    failed = f"  - {system_errors} of 10 entries had a system error" in out
    assert (
        failed == (rc == 3)
        and (f"more than max_system_errors: {allowed} in the gate config" in out) == failed
    )


def test_the_shipped_gate_counts_system_errors_for_compare_too(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "new.json").write_text(json.dumps(gated_summary(4)), encoding="utf-8")
    assert main(["compare", "passing.json", "new.json"]) == 3
    out = capsys.readouterr().out
    assert "): FAIL" in out and "  - 4 of 10 entries had a system error" in out
    assert "more than max_system_errors: 0 in the gate config" in out


def test_the_gate_always_fails_an_incomplete_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "partial.json").write_text(json.dumps(gated_summary(4, complete=False)), encoding="utf-8")
    config = _gate_file(project / "lenient.yaml", max_system_errors=100)
    assert main(["gate", "partial.json", "--config", str(config)]) == 3
    out = capsys.readouterr().out
    assert "the run is incomplete (complete: false; 5 system errors > --max-errors 4)" in out


def test_junit_shows_the_system_errors_and_the_incomplete_run(project: Path) -> None:
    (project / "partial.json").write_text(json.dumps(gated_summary(4, complete=False)), encoding="utf-8")
    assert main(["gate", "partial.json", "--junit", "gate.xml"]) == 3
    suite = ET.parse(project / "gate.xml").getroot().find("testsuite")
    assert suite is not None
    failed = {(c.get("classname"), c.get("name")): c.find("failure") for c in suite.iter("testcase")}
    system = failed[("doceval.gate", "system_errors <= 0")]
    assert system is not None and "4 of 10 entries had a system error" in (system.text or "")
    assert failed[("doceval.gate", "a complete run")] is not None
    errored = {name for (cls, name), f in failed.items() if cls == "doceval.entries.system_errors"}
    assert errored == {"a5", "a6", "a7", "a8"}
    assert "model offline on a5" in (failed[("doceval.entries.system_errors", "a5")].text or "")  # type: ignore[union-attr]
    assert suite.get("failures") == str(sum(f is not None for f in failed.values()))


@pytest.mark.parametrize("value", ["-1", "1.5", "true", "'2'", "null"])
def test_a_bad_max_system_errors_exits_2_naming_the_key(
    project: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    config = project / "bad.yaml"
    config.write_text(f"thresholds: {{hit_rate: 0.6}}\nmax_system_errors: {value}\n", encoding="utf-8")
    assert main(["gate", "passing.json", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: max_system_errors=" in err and "expected an integer >= 0" in err


def test_the_composed_gate_block_has_max_system_errors_validated() -> None:
    assert compose([], conf_dir=CONF).gate.max_system_errors == 0
    with pytest.raises(UsageError, match="gate.max_system_errors=-1: expected an integer >= 0"):
        compose(["gate.max_system_errors=-1"], conf_dir=CONF)
    assert "max_system_errors: 0  # " in (CONF / "gate" / "default.yaml").read_text()
