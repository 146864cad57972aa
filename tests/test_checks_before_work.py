"""No silent wrong numbers, no tracebacks: every bad input of the audit exits 2 (3 for a gate FAIL) with a message
naming the file, line, field or flag, before any work, and leaves every output as it was.

The project is the tiny corpus and golden set of tests/test_eval_cli.py, built once through the real pipeline
(params -> retrieve -> calibrate -> evaluate -> report, bm25, no tracking) and copied for every test.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.cli import main

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# The test_eval_cli golden set, with u2 tagged calibration (an untagged entry belongs to every split, so it
# would be calibrated on and reported: train-on-test) and one more out-of-scope entry for the test split.
ROWS = [
    *({**e, "split": "calibration"} if e["id"] == "u2" else e for e in GOLDEN),
    {"id": "u3", "question": "which pizza topping is the best default option", "library": "click",
     "version": "8.1.7", "out_of_scope": True, "relevant_ids": [], "expected_apis": [], "forbidden_apis": [],
     "split": "test", "kind": "off_topic"},
]  # fmt: skip

BM25 = ["retriever=bm25"]
USER_MODULE_NAME = "guards_userret"  # a name no other test imports (sys.modules is shared)
USER_MODULE = '''
import os

def make(min_score=1):
    """A factory that fails at run time for a bad value: inside a sweep job only (DOCEVAL_SWEEP_DIR is set
    there), so the sweep's own check, which builds the first point in its process, passes. Not its retriever:
    a retriever's exception is that entry's system error, never the point's failure."""
    if str(min_score).startswith("boom") and os.environ.get("DOCEVAL_SWEEP_DIR"):
        raise RuntimeError(f"index offline for min_score={min_score}")
    def retrieve(question, k):
        return []
    return retrieve
'''


def _golden_text(rows: list[dict[str, Any]]) -> str:
    """JSONL, with the reference answers test_eval_cli gives its entries."""
    lines = [{**e, "reference_answer": "ref " + " ".join(e["expected_apis"])} for e in rows]
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny project after the pipeline: candidates, floors.json (with its calibrated ids), summary, report."""
    root = tmp_path_factory.mktemp("guards") / "project"
    root.mkdir()
    make_tiny_project(root, DOCS, _golden_text(ROWS))
    (root / f"{USER_MODULE_NAME}.py").write_text(USER_MODULE, encoding="utf-8")
    cwd = Path.cwd()
    os.chdir(root)
    try:
        assert main(["params", *BM25, "tracking.enabled=false"]) == 0
        for stage in ("retrieve", "calibrate", "evaluate"):
            assert main([stage, "--quiet"]) == 0, stage
        assert main(["report"]) == 0
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "project"
    shutil.copytree(built, root, symlinks=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    yield root
    sys.modules.pop(USER_MODULE_NAME, None)


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file of the project (conf/ is the repository's, linked)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    }


def _writable(folder: Path) -> bool:
    try:
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` read-only for the block: mode 555, or immutable (chattr +i) where root ignores modes."""
    folder.mkdir(parents=True, exist_ok=True)
    mode = folder.stat().st_mode
    immutable = False
    folder.chmod(0o555)
    try:
        if _writable(folder) and shutil.which("chattr"):
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        if _writable(folder):
            pytest.skip("cannot make a folder read-only here (root, and no chattr)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(mode)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------------ setups


def swapped_golden(root: Path) -> None:
    """The golden set with its calibration/test tags swapped: the test split is now what floors.json saw."""
    swap = {"calibration": "test", "test": "calibration"}
    rows = [{**e, "split": swap.get(str(e["split"]), e["split"])} for e in ROWS]
    (root / "swapped.jsonl").write_text(_golden_text(rows), encoding="utf-8")


def bad_floors(root: Path) -> None:
    data = json.loads((root / "eval" / "calibration" / "floors.json").read_text())
    data["per_library"]["pydantic"] = -1.0  # a BM25 score is never negative
    (root / "bad_floors.json").write_text(json.dumps(data), encoding="utf-8")


def params_with(**tracking: object) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        import yaml

        params = yaml.safe_load((root / "params.yaml").read_text())
        params["tracking"] = {**params["tracking"], **tracking}
        (root / "p.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")

    return setup


def write(name: str, data: bytes) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).write_bytes(data)

    return setup


def summary_with(**changes: object) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        summary = json.loads((root / "eval" / "summary.json").read_text())
        (root / "s.json").write_text(json.dumps({**summary, **changes}), encoding="utf-8")

    return setup


# ------------------------------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Case:
    argv: list[str]
    code: int
    message: str
    setup: Callable[[Path], None] | None = None
    read_only: str | None = None  # a folder made read-only for the command


def eval_argv(*extra: str, output: str = "out.json", track: bool = False) -> list[str]:
    return ["eval", "--quiet", "--output", output, *(["--no-track"] if not track else []), *extra, *BM25]


CASES = {
    # 1. train-on-test by entry ids, and floors.json named as the source of a bad floor
    "swapped tags refused by ids": Case(
        eval_argv("--golden", "swapped.jsonl"), 2,
        "floors were calibrated on 2 of the 2 entries being reported (a3, u2): train-on-test", swapped_golden),
    "floors.json floor out of range names floors.json": Case(
        eval_argv("floors.path=bad_floors.json"), 2,
        "bad_floors.json: per_library.pydantic=-1.0: outside the bm25 retriever's score range", bad_floors),
    # 2. outputs checked before the work
    "--output is a directory": Case(eval_argv(output="eval"), 2, "--output eval: is a directory"),
    "--output under /proc": Case(
        eval_argv(output="/proc/nope/x.json"), 2, "--output /proc/nope/x.json: cannot create the folder /proc/nope"),
    "--output under a file": Case(eval_argv(output="params.yaml/x.json"), 2, "params.yaml is a file, not a folder"),
    "eval --output under a read-only eval/": Case(
        eval_argv(output="eval/runs/x.json"), 2, "--output eval/runs/x.json: cannot create the folder eval/runs",
        read_only="eval"),
    "evaluate stage, read-only eval/": Case(
        ["evaluate", "--quiet"], 2, "eval/summary.json: cannot write in eval", read_only="eval"),
    "report stage, read-only eval/": Case(["report"], 2, "eval/report.md: cannot write in eval", read_only="eval"),
    # 3. tracking problems of any scheme before any work
    "tracking: unsupported scheme": Case(
        eval_argv("tracking.uri=ftp://x/y", track=True), 2,
        "MLflow tracking URI ftp://x/y cannot be opened: scheme ftp:// is not an MLflow tracking store"),
    "tracking: file store": Case(
        eval_argv("tracking.uri=file:///tmp/doceval-fs", track=True), 2, "file stores are not supported"),
    "tracking: sqlite under /proc": Case(
        eval_argv("tracking.uri=sqlite:////proc/nope/mlflow.db", track=True), 2,
        "sqlite:////proc/nope/mlflow.db cannot be written: cannot write in /proc/nope"),
    "tracking: read-only mlruns/": Case(
        eval_argv(track=True), 2, "mlruns/mlflow.db cannot be written: cannot write in", read_only="mlruns"),
    "tracking: database driver missing, password redacted": Case(
        eval_argv("tracking.uri=mssql+nodriver://u:pw-s3cret@127.0.0.1:1/db", track=True), 2,
        "mssql+nodriver://***@127.0.0.1:1/db cannot be opened: its database driver is not available"),
    "tracking: evaluate stage, unsupported scheme": Case(
        ["evaluate", "--quiet", "--params", "p.yaml"], 2, "ftp://x/y cannot be opened",
        params_with(enabled=True, uri="ftp://x/y")),
    "tracking: evaluate stage, read-only mlruns/": Case(
        ["evaluate", "--quiet", "--params", "p.yaml"], 2, "cannot write in", params_with(enabled=True),
        read_only="mlruns"),
    # 4. sweeps with a bad value: every point validated before anything is launched
    "sweep k=0": Case(
        ["sweep", "-m", "k=0,3", "floors=zero", *BM25, "--no-track", "--quiet"], 2,
        "sweep point 1 of 2 (k=0): k=0: expected an integer >= 1"),
    "sweep a bad value at a later point": Case(
        ["sweep", "-m", "k=3,0", "floors=zero", *BM25, "--no-track", "--quiet"], 2, "sweep point 2 of 2 (k=0): k=0"),
    "sweep floors.global=abc": Case(
        ["sweep", "-m", "floors.global=abc,0.2", *BM25, "--no-track", "--quiet"], 2,
        "sweep point 1 of 2 (floors.global=abc): floors.global=abc: expected a number"),
    "sweep k above the cached candidates": Case(
        ["sweep", "-m", "k=3,500", "floors=zero", *BM25, "--no-track", "--quiet"], 2,
        "sweep point 2 of 2 (k=500): k=500 exceeds the cached depth candidates_k=100"),
    "sweep on the calibration split with calibrated floors": Case(
        ["sweep", "-m", "k=3,4", *BM25, "--no-track", "--quiet"], 2, "sweep point 1 of 2 (k=3): eval/calibration/floors.json"),
    # 6. golden files that are binary, not UTF-8, or a folder
    "golden: UTF-16": Case(
        eval_argv("--golden", "utf16.jsonl"), 2,
        "utf16.jsonl:1: byte 0xff at byte offset 0 (line 1) is not UTF-8",
        write("utf16.jsonl", '{"id": "x"}\n'.encode("utf-16"))),
    "golden: Latin-1 on line 2": Case(
        eval_argv("--golden", "latin1.jsonl"), 2, "latin1.jsonl:2: byte 0xe9 at byte offset 22 (line 2)",
        write("latin1.jsonl", b'{"id": "x"}\n{"q": "caf\xe9"}\n')),
    "golden: binary": Case(
        eval_argv("--golden", "blob.jsonl"), 2, "blob.jsonl:1: byte 0x89 at byte offset 0",
        write("blob.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00")),
    "golden validate: not UTF-8": Case(
        ["golden", "validate", "latin1.jsonl"], 2, "latin1.jsonl:2: byte 0xe9",
        write("latin1.jsonl", b'{"id": "x"}\n{"q": "caf\xe9"}\n')),
    "golden: a folder": Case(eval_argv("--golden", "data"), 2, "data: is a directory, not a golden set"),
    # 8. a summary that measured nothing, or an incomplete run, fails the gate
    "gate: no entries": Case(["gate", "s.json"], 3, "nothing was measured", summary_with(entries=[])),
    "gate: incomplete run": Case(
        ["gate", "s.json"], 3, "the run is incomplete", summary_with(complete=False)),
}  # fmt: skip


@pytest.mark.parametrize(
    "case",  # a read-only folder takes `chattr +i` (a process), a read-only mlruns/ an MLflow store: slow
    [pytest.param(c, id=what, marks=[pytest.mark.slow] if c.read_only else []) for what, c in CASES.items()],
)
def test_bad_input_exits_with_a_message_and_leaves_outputs_alone(
    project: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    if case.setup is not None:
        case.setup(project)
    before = snapshot(project)
    with read_only(project / case.read_only) if case.read_only else contextlib.nullcontext():
        code = main(case.argv)
    out, err = capsys.readouterr()
    assert code == case.code, err
    assert case.message in out + err
    assert "Traceback" not in err and "unexpected error" not in err
    assert snapshot(project) == before  # nothing written, nothing rewritten
    assert not (project / "eval" / "sweeps").exists() or not any((project / "eval" / "sweeps").iterdir())


def test_credentials_in_a_tracking_uri_are_redacted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for uri in (
        f"http://user:pw-s3cret@127.0.0.1:{closed_port()}",
        "mssql+nodriver://u:pw-s3cret@127.0.0.1:1/db",
    ):
        assert main(eval_argv(f"tracking.uri={uri}", track=True)) == 2
        err = capsys.readouterr().err
        assert "***@127.0.0.1" in err and "pw-s3cret" not in err and "--no-track" in err


# ------------------------------------------------------------------------------------------- train-on-test


def test_the_swapped_golden_copy_is_refused_before_any_retrieval(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another md5 means live retrieval; the floors guard must refuse first, whatever the split names say."""
    import doceval.harness.plan as plan

    swapped_golden(project)

    def no_retrieval(*args: object, **kwargs: object) -> None:
        raise AssertionError("retrieval ran before the train-on-test guard")

    monkeypatch.setattr(plan, "compute_candidates", no_retrieval)
    assert main(eval_argv("--golden", "swapped.jsonl")) == 2
    err = capsys.readouterr().err
    assert "eval/calibration/floors.json: floors were calibrated on 2 of the 2 entries" in err
    assert "floors=zero" in err and "--score-floor" in err and "disjoint" in err
    # Named any way, the same entries are refused: the split, the file, a subset by --limit.
    assert main(eval_argv("--golden", "swapped.jsonl", "--split", "test", "--limit", "1")) == 2


def test_floors_from_another_golden_set_pass_when_no_id_overlaps(project: Path) -> None:
    rows = [{**e, "id": f"copy-{e['id']}"} for e in ROWS]  # another file, another md5, no shared id
    (project / "other.jsonl").write_text(_golden_text(rows), encoding="utf-8")
    assert main(eval_argv("--golden", "other.jsonl", "--split", "calibration")) == 0
    floors = json.loads((project / "out.json").read_text())["config"]["floors"]
    assert floors["source"] == "calibrated:eval/calibration/floors.json"
    # The summary records the calibrated ids by count and digest, not the list.
    assert floors["provenance"]["n_calibrated_ids"] == 2 and "calibrated_ids" not in floors["provenance"]
    assert len(floors["provenance"]["calibrated_ids_sha256"]) == 64


def test_the_artifact_records_the_entries_it_was_calibrated_on(project: Path) -> None:
    prov = json.loads((project / "eval" / "calibration" / "floors.json").read_text())["provenance"]
    assert prov["calibrated_ids"] == [
        "a3",
        "u2",
    ]  # the calibration split: a3 and u2 (u1 is test, a flask entry)
    assert prov["calibrated_ids_sha256"] == hashlib.sha256(b"a3\nu2").hexdigest()


def test_an_older_artifact_falls_back_to_split_names_with_a_note(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "eval" / "calibration" / "floors.json"
    data = json.loads(path.read_text())
    for key in ("calibrated_ids", "calibrated_ids_sha256"):
        del data["provenance"][key]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(eval_argv("--split", "test")) == 0
    assert "does not record which entries it was calibrated on" in capsys.readouterr().err
    assert main(eval_argv("--split", "calibration")) == 2
    assert "train-on-test" in capsys.readouterr().err


def test_an_edited_id_list_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = project / "eval" / "calibration" / "floors.json"
    data = json.loads(path.read_text())
    data["provenance"]["calibrated_ids"] = ["a3"]  # u2 dropped by hand, the digest left as it was
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(eval_argv("--split", "calibration")) == 2
    assert "does not match provenance.calibrated_ids_sha256" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ notes (7)


def test_live_retrieval_and_a_long_limit_say_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(eval_argv("k=150", "floors=zero")) == 0
    err = capsys.readouterr().err
    assert (
        "note: k=150 is more than the 100 candidates cached per entry (candidates_k): retrieving live" in err
    )
    assert json.loads((project / "out.json").read_text())["config"]["k"] == 150
    assert main(eval_argv("--limit", "99999", "floors=zero")) == 0
    err = capsys.readouterr().err
    assert "note: --limit 99999 is more than the 4 entries of split 'test': scoring all 4" in err
    assert len(json.loads((project / "out.json").read_text())["entries"]) == 4


# ------------------------------------------------------------------------------------------------ sweeps (4)


def _user_sweep(*values: str, track: list[str]) -> list[str]:
    return ["sweep", "-m", f"+retriever.kwargs.min_score={','.join(values)}", "retriever=function",
            f"retriever.target={USER_MODULE_NAME}:make", "split=test", *track, "--quiet", "--jobs", "1"]  # fmt: skip


@pytest.mark.slow
def test_a_point_failing_at_run_time_marks_the_parent_failed_and_the_folder(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{project / 'store' / 'mlflow.db'}"
    assert main(_user_sweep("1", "boom", track=[f"tracking.uri={uri}"])) == 2
    err = capsys.readouterr().err
    assert (
        "sweep: point 2 (+retriever.kwargs.min_score=boom) failed: retriever.target=guards_userret:make: the "
        "factory called with kwargs min_score raised RuntimeError: index offline"
    ) in err
    assert "Traceback" not in err
    parent = re.search(r"MLflow parent run ([0-9a-f]{32}) is marked FAILED", err)
    assert parent, err
    client = MlflowClient(uri)
    assert client.get_run(parent.group(1)).info.status == "FAILED"
    assert (
        client.get_run(parent.group(1)).data.tags["sweep_failed_point"] == "+retriever.kwargs.min_score=boom"
    )
    (folder,) = (project / "eval" / "sweeps").iterdir()
    assert "RuntimeError: index offline" in (folder / "FAILED").read_text()  # the finished point is kept
    assert [p.name for p in (folder / "points").glob("*.json")] == ["0.json"]


@pytest.mark.slow
def test_a_sweep_whose_every_point_fails_leaves_no_folder(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_user_sweep("boom1", "boom2", track=["--no-track"])) == 2
    err = capsys.readouterr().err
    assert "point 1 (+retriever.kwargs.min_score=boom1) failed" in err and "was removed" in err
    assert not (project / "eval" / "sweeps").exists() or not any((project / "eval" / "sweeps").iterdir())


@pytest.mark.slow
def test_a_good_sweep_still_runs(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "sweep",
                "-m",
                "floors.global=0.0,1000",
                "split=test",
                *BM25,
                "--no-track",
                "--quiet",
                "--jobs",
                "1",
            ]
        )
        == 0
    )
    (folder,) = (project / "eval" / "sweeps").iterdir()
    assert (folder / "points.csv").is_file() and not (folder / "FAILED").exists()


# ------------------------------------------------------------------------------------------------ pipes (5)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow
def test_eval_piped_into_head_ends_without_a_traceback(project: Path) -> None:
    cmd = "doceval eval --no-track --quiet --output piped.json retriever=bm25 | head -1"
    proc = subprocess.run(["bash", "-c", f"{cmd}; echo rc=${{PIPESTATUS[0]}} >&2"], cwd=project, env=_env(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.stdout.startswith("split=test k=5 system=bm25")
    assert (
        "Traceback" not in proc.stderr
        and "BrokenPipe" not in proc.stderr
        and "Exception ignored" not in proc.stderr
    )
    assert re.search(r"rc=(0|141)\b", proc.stderr), proc.stderr  # 141 when a write hit the closed pipe
    assert json.loads((project / "piped.json").read_text())["entries"]  # the summary was written first


@pytest.mark.slow
def test_a_reader_gone_before_the_first_line_exits_141(project: Path) -> None:
    proc = subprocess.Popen([str(BIN / "doceval"), "eval", "--no-track", "--quiet", "--output", "gone.json",
                             *BM25], cwd=project, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away at once: every write hits a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert json.loads((project / "gone.json").read_text())["entries"]
