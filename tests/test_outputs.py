"""Outputs that never destroy an input, and OS errors on user-named paths (issue 39 H2, H12, H17; item 1):
every writer refuses, before any work, an output that is, holds or lies inside one of the same command's inputs
(doceval.common.paths.refuse_overlap); a name the system refuses (too long) is exit 2 naming it; a path ending
in '/' is a folder, never a file; a device or FIFO given as an input is named as such, never "not found"."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import test_output_safety

from doceval.cli.main import main

DOCEVAL = Path(sys.executable).parent / "doceval"
LONG = "x" * 300  # one path component longer than any file system takes (ENAMETOOLONG)


project = test_output_safety.project  # the user folder of the output tests: a fixture `files` builds on


@pytest.fixture
def files(project: Path) -> Path:
    """test_output_safety's user folder (a retriever function, golden.jsonl, passing.json) and a label file."""
    (project / "labels.jsonl").write_text('{"id": "q1", "answer": "five dollars", "label": "correct"}\n')
    return project


def _eval(output: str) -> list[str]:
    return test_output_safety.eval_argv(output)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------ H2: an output is never an input


@pytest.mark.parametrize("spelled", ["golden.jsonl", "./golden.jsonl", "link.jsonl", "hard.jsonl"])
def test_h2_eval_never_writes_its_summary_over_the_golden_set(
    files: Path, capsys: pytest.CaptureFixture[str], spelled: str
) -> None:
    """On main `eval --golden g.jsonl --output g.jsonl` overwrote the golden set with the summary; a link or a
    hard link to it is the same file."""
    (files / "link.jsonl").symlink_to("golden.jsonl")
    os.link(files / "golden.jsonl", files / "hard.jsonl")
    before = _snapshot(files)
    assert main(_eval(spelled)) == 2
    err = capsys.readouterr().err
    assert f"--output {spelled}: is the golden set golden.jsonl, which this command reads" in err, err
    assert _snapshot(files) == before


# Every writer with an output a user names, and a command line where that output is one of its inputs.
WRITERS: dict[str, tuple[list[str], str, str]] = {
    "eval --output (qrels)": (_eval("golden.qrels.jsonl"), "--output golden.qrels.jsonl: is its qrels", ""),
    "gate --junit": (["gate", "passing.json", "--junit", "passing.json"], "--junit passing.json: is the summary", ""),
    "compare --plot": (["compare", "passing.json", "passing.json", "--no-gate", "--plot", "passing.json"],
                       "--plot passing.json: is OLD passing.json", ""),
    "judge validate --output": (["judge", "validate", "labels.jsonl", "--no-track", "--output", "labels.jsonl"],
                                "--output labels.jsonl: is the labels labels.jsonl", ""),
    "judge rescore --output": (["judge", "rescore", "passing.json", "--no-track", "--output", "passing.json"],
                               "--output passing.json: is the summary passing.json", ""),
    "golden audit --out": (["golden", "audit", "golden.jsonl", "--sample", "2", "--out", "golden.jsonl"],
                           "--out golden.jsonl: is the golden set golden.jsonl", ""),
    "golden pool --out": (["golden", "pool", "passing.json", "--golden", "golden.jsonl", "--out", "passing.json"],
                          "--out passing.json: is a run passing.json", ""),
    "beir import --out": (["beir", "import", "beir", "--out", "beir"], "--out beir/docs: lies inside the BEIR folder beir", "beir"),
}  # fmt: skip


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_refuses_an_output_that_is_or_lies_inside_an_input(
    files: Path, capsys: pytest.CaptureFixture[str], writer: str
) -> None:
    """Item 1's rule for every writer (on main each of these overwrote or wrote into its own input)."""
    argv, needle, folder = WRITERS[writer]
    if folder:
        (files / folder).mkdir()
        (files / folder / "corpus.jsonl").write_text(
            '{"_id": "d1", "text": "a document"}\n', encoding="utf-8"
        )
    before = _snapshot(files)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "an output never is, holds or lies inside an input" in err, err
    assert _snapshot(files) == before


def test_a_stage_refuses_an_output_that_holds_a_configured_input(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The retrieve stage replaces paths.runs/candidates whole: a golden set kept there would be deleted."""
    assert main(["params", "golden=data/runs/candidates/golden.jsonl"]) == 0
    assert main(["retrieve", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the candidate cache (paths.runs) data/runs/candidates: contains the golden set" in err, err


# ------------------------------------------------------------- H12: a name the system refuses is exit 2


OUTPUTS: dict[str, Callable[[str], list[str]]] = {
    "eval --output": lambda p: _eval(p),
    "gate --junit": lambda p: ["gate", "passing.json", "--junit", p],
    "compare --plot": lambda p: ["compare", "passing.json", "passing.json", "--no-gate", "--plot", p],
    "docs --out": lambda p: [
        "docs",
        "--quiet",
        "--folder",
        "site",
        "--library",
        "a",
        "--version",
        "1",
        "--out",
        p,
    ],
    "golden audit --out": lambda p: ["golden", "audit", "golden.jsonl", "--sample", "2", "--out", p],
}


@pytest.mark.parametrize("command", list(OUTPUTS))
def test_h12_an_output_name_too_long_is_exit_2_naming_it(
    files: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """On main a 300-character --output name was a traceback (ENAMETOOLONG from Path.is_symlink), exit 1."""
    (files / "site").mkdir()
    (files / "site" / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    assert main(OUTPUTS[command](LONG + ".out")) == 2
    err = capsys.readouterr().err
    assert f"{LONG}.out" in err and "File name too long" in err and "Traceback" not in err, err


# ------------------------------------------------------------------- H17: folders and odd inputs


@pytest.mark.parametrize("command", ["eval --output", "gate --junit", "golden audit --out"])
def test_h17_an_output_ending_in_a_slash_is_a_folder_never_a_file(
    files: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """On main `--output newdir/` wrote a file named newdir (design 8.6 refuses a directory at an output)."""
    assert main(OUTPUTS[command]("newdir/")) == 2
    err = capsys.readouterr().err
    assert "newdir/: ends in '/', so it names a folder, not a file" in err, err
    assert not (files / "newdir").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["golden", "validate", "--no-corpus", "INPUT"], "not a golden set file"),
        (["gate", "INPUT"], "not a run summary file"),
    ],
)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_h17_a_device_or_fifo_given_as_an_input_is_named_never_not_found(
    files: Path, argv: list[str], what: str, kind: str
) -> None:
    """On main /dev/zero or a FIFO given as golden set or summary was "not found". A subprocess with a deadline:
    opening a FIFO would block."""
    if kind == "fifo":
        os.mkfifo(files / "pipe.jsonl")
        path, shown = "pipe.jsonl", "a FIFO (named pipe)"
    else:
        path, shown = "/dev/zero", "a character device"
    done = subprocess.run([str(DOCEVAL), *(path if w == "INPUT" else w for w in argv)], cwd=files,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{path}: is {shown}, {what}" in done.stderr and "not found" not in done.stderr, done.stderr
