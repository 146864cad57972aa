"""Docs folders as a corpus, hardened (issue 39 H1, H3, H9; issue 40 C5): a pin names a folder, so it cannot
escape `data/folders/`; the build never writes over the folders it reads, and `--replace` replaces only a
doceval corpus; a docs folder is read for its regular files only (a FIFO never blocks); `docs --folder` works
outside a project (doceval.inputs.folders, doceval.stages.docs)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus

PAGES = {
    "guide.md": "# Submitting jobs\n\nCall `enqueue(job)` to queue a job.\n",
    "backends.md": "# Backends\n\n## Redis\n\nSet `REDIS_URL`.\n",
}
IDS = ["mylib@1.0:backends.redis", "mylib@1.0:guide.submitting_jobs"]
DOCEVAL = Path(sys.executable).parent / "doceval"


def _write_site(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, text in PAGES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its text: what must be left exactly as it was."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _ids(corpus_dir: Path) -> list[str]:
    corpus = load_corpus(corpus_dir)
    return sorted({d for part in corpus.partitions.values() for d in part.doc_ids})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``work/`` as cwd with a complete params.yaml (so the commands reach their work on the start commit too),
    ``work/site/1.0`` a docs folder, and ``victim/`` beside it: a folder no docs build may touch."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    params = config_dict(compose())
    params["docs"] = {**params["docs"], "folders": [], "libraries": []}
    (work / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    _write_site(work / "site" / "1.0")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("not a corpus\n", encoding="utf-8")
    yield work


def _docs(*args: str) -> int:
    return main(["docs", "--quiet", *args])


# ------------------------------------------------------------------------------------- H1: pins


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--version", "../../../victim", "holds '..'"),
        ("--version", "../victim", "holds '..'"),
        ("--library", "ABS/victim", "holds a path separator /"),  # ABS: an absolute folder beside the project
        ("--library", "a\\b", "holds a path separator \\"),
        ("--version", "2.0:beta", "holds ':'"),
        ("--version", "2.0@x", "holds '@'"),
        ("--version", "", "is empty"),
        ("--version", "1.0\n", "holds a control character"),
    ],
)
def test_h1_a_pin_that_could_escape_data_folders_is_refused_where_it_enters(
    project: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, rule: str
) -> None:
    """On main `--version ../../../../victim --replace` deleted an unrelated folder and wrote the corpus there;
    `--library /abs/path` wrote outside data/folders; `:`, `@` or nothing made ambiguous pins."""
    value = value.replace("ABS", str(project.parent / "abs"))
    args = {"--library": "mylib", "--version": "1.0", flag: value}
    before = _tree(project.parent)
    assert _docs("--folder", "site/1.0", "--library", args["--library"], "--version", args["--version"],
                 "--replace") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"docs --folder site/1.0 {flag}={value!r}: {rule}" in err, err
    assert "a library and a version are non-empty and hold no path separator" in err  # the rule, in words
    assert _tree(project.parent) == before and not (project / "data").exists()
    assert not (project.parent / "abs").exists()


@pytest.mark.parametrize(
    ("folder", "needle"),
    [
        (
            {"path": "site/1.0", "library": "mylib", "version": "../victim"},
            "docs.folders[0].version=../victim",
        ),
        ({"path": "site/1.0", "library": "my/lib", "version": "1.0"}, "docs.folders[0].library=my/lib"),
        ({"path": "site", "library": "mylib", "version": None}, "version subfolder site/2.0:beta"),
    ],
)
def test_h1_pins_from_docs_folders_and_version_subfolders_follow_the_same_rule(
    project: Path, capsys: pytest.CaptureFixture[str], folder: dict[str, str | None], needle: str
) -> None:
    _write_site(project / "site" / "2.0:beta")
    params = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
    params["docs"]["folders"] = [folder]
    Path("params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    assert _docs() == 2
    err = capsys.readouterr().err
    assert needle in err and "hold no path separator" in err, err
    assert not (project / "data").exists()
    with pytest.raises(UsageError, match="holds '..'"):
        compose(
            ["docs.libraries=[{name: pydantic, version: '../../x'}]"]
        )  # a wheel's pin names its cache folder


# -------------------------------------------------------------------- H3: never over the sources


@pytest.mark.parametrize(
    ("out", "how"),
    [("site/1.0", "is the docs folder site/1.0"), ("site", "contains the docs folder site/1.0")],
)
@pytest.mark.parametrize("replace", [True, False])
def test_h3_the_build_never_writes_over_the_docs_it_reads(
    project: Path, capsys: pytest.CaptureFixture[str], out: str, how: str, replace: bool
) -> None:
    """On main `--out docs/1.0 --replace` deleted the docs being read; without --replace the refusal said
    "holds no doceval corpus", not that this is the source folder."""
    before = _tree(project)
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", out,
                 *(["--replace"] if replace else [])) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"--out {out}: {how}, which this command reads" in err, err
    assert "holds no doceval corpus" not in err
    assert _tree(project) == before


def test_h3_replace_replaces_only_a_doceval_corpus(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--replace writes over another corpus, never over a folder holding anything else (on main it replaced
    any folder whole)."""
    corpus = "corpora/mylib"
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", corpus) == 0
    _write_site(project / "other")
    assert (
        _docs("--folder", "other", "--library", "other", "--version", "2", "--out", corpus, "--replace") == 0
    )
    assert _ids(Path(corpus)) == ["other@2:backends.redis", "other@2:guide.submitting_jobs"]
    (project / "notes").mkdir()
    (project / "notes" / "todo.txt").write_text("mine\n", encoding="utf-8")
    capsys.readouterr()
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", "notes",
                 "--replace") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "notes is not empty and holds todo.txt, which no doceval corpus holds" in err
    assert "--replace replaces only a doceval corpus" in err
    assert _tree(project / "notes") == {"todo.txt": "mine\n"}
    # A corpus folder with something else in it is no longer only a corpus.
    (project / corpus / "mine.md").write_text("# Mine\n", encoding="utf-8")
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", corpus,
                 "--replace") == 2  # fmt: skip
    assert "holds mine.md, which no doceval corpus holds" in capsys.readouterr().err
    assert (project / corpus / "mine.md").is_file()


def test_h3_the_configured_corpus_never_lies_in_a_docs_folder(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """paths.docs inside docs.folders (the docs stage under DVC) is refused before the build, as --out is."""
    params = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
    params["docs"]["folders"] = [{"path": "site", "library": "mylib", "version": None}]
    params["paths"]["docs"] = "site/corpus"
    Path("params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    before = _tree(project / "site")
    assert _docs() == 2
    assert (
        "paths.docs site/corpus: lies inside the docs folder (docs.folders) site" in capsys.readouterr().err
    )
    assert _tree(project / "site") == before and not (project / "site" / "corpus").exists()


# ----------------------------------------------------------------- H9: only regular files are read


def _fifo(site: Path) -> None:
    os.mkfifo(site / "odd.md")


def _socket(site: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(site / "odd.md"))  # the file stays when the socket closes


def _device(site: Path) -> None:
    (site / "odd.md").symlink_to("/dev/null")


def _dangling(site: Path) -> None:
    (site / "odd.md").symlink_to(site / "missing.md")


def _directory(site: Path) -> None:
    (site / "odd.md").mkdir()
    (site / "odd.md" / "inner.md").write_text("# Inner\n\nRead as any file.\n", encoding="utf-8")


ODD = {
    "fifo": (_fifo, "a FIFO (named pipe), not a regular file"),
    "socket": (_socket, "a socket, not a regular file"),
    "device": (_device, "a character device, not a regular file"),
    "dangling link": (_dangling, "which does not exist (a dangling link)"),
    "directory": (_directory, "a directory with a docs suffix, not a file (the files in it are read)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(ODD))
def test_h9_a_docs_folder_is_read_for_its_regular_files_only_and_never_blocks(
    project: Path, kind: str
) -> None:
    """On main a FIFO named *.md blocked `doceval docs` forever, and a dangling *.md link or a directory named
    notes.md was a traceback (rglob filtered by suffix only). A subprocess with a deadline: a hang fails the test
    instead of stalling the suite."""
    make, why = ODD[kind]
    make(project / "site" / "1.0")
    argv = [str(DOCEVAL), "docs", "--quiet", "--folder", "site/1.0", "--library", "mylib", "--version", "1.0"]
    done = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stderr.splitlines() if line.startswith("note: docs: skipped ")]
    assert len(skipped) == 1 and skipped[0].startswith("note: docs: skipped site/1.0/odd.md: "), done.stderr
    assert why in skipped[0], skipped
    inner = ["mylib@1.0:odd.md.inner.inner"] if kind == "directory" else []
    assert _ids(project / "data" / "folders" / "mylib@1.0") == sorted([*IDS, *inner])


# ------------------------------------------------------------- C5: `docs --folder` outside a project


def test_c5_docs_folder_runs_outside_a_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ "Your docs as a corpus" is presented as standalone; on main it exited 2 "params.yaml not found"."""
    monkeypatch.chdir(tmp_path)
    _write_site(tmp_path / "site" / "1.0")
    assert not (tmp_path / "params.yaml").exists()
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0") == 0
    assert _ids(tmp_path / "data" / "folders" / "mylib@1.0") == IDS
    assert not (tmp_path / "params.yaml").exists()  # nothing of a project is made
