"""Multi-version corpora (docs/design.md section 2): several folders and versions built together into one corpus
(repeatable `--folder DIR --library L --version V`, the `DIR/<version>/` layout, `docs.folders` in params), a
build never silently writes over another corpus (`--replace`), and a heading with nothing under it is no
document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus
from doceval.inputs.folders import build_folders_corpus, extract_folder

# A made-up queue library in two versions: 2.0 renamed `enqueue` to `submit`.
PAGES = {
    "1.0": {
        "guide.md": "# Submitting jobs\n\nCall `enqueue(job)` to queue a job.\n",
        "backends.md": "# Backends\n\n## Redis\n\nSet `REDIS_URL`.\n\n## Memory\n\nFor tests only.\n",
    },
    "2.0": {
        "guide.md": "# Submitting jobs\n\nCall `submit(job)`. `enqueue` was removed in 2.0.\n",
        "backends.md": "# Backends\n\n## Redis\n\nSet `QUEUE_URL`.\n",
    },
}
IDS_1 = ["mylib@1.0:backends.memory", "mylib@1.0:backends.redis", "mylib@1.0:guide.submitting_jobs"]
IDS_2 = ["mylib@2.0:backends.redis", "mylib@2.0:guide.submitting_jobs"]


def _site(root: Path) -> Path:
    """``root/<version>/*.md``: the layout of a docs site with a version picker."""
    for version, files in PAGES.items():
        (root / version).mkdir(parents=True)
        for name, text in files.items():
            (root / version / name).write_text(text, encoding="utf-8")
    return root


def _ids(corpus_dir: Path) -> list[str]:
    corpus = load_corpus(corpus_dir)
    return sorted({d for part in corpus.partitions.values() for d in part.doc_ids})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a complete params.yaml (the shipped composition, no wheels) and the two-version docs."""
    monkeypatch.chdir(tmp_path)
    params = config_dict(compose())
    params["docs"] = {**params["docs"], "folders": [], "libraries": []}
    params["paths"] = {**params["paths"], "docs": "data/docs", "cache": "data/cache"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    _site(tmp_path / "site")
    return tmp_path


def _docs(*args: str) -> int:
    return main(["docs", "--quiet", *args])


def test_repeated_folder_groups_build_one_corpus_of_both_versions(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main a second --folder replaced the first: only 2.0 was built."""
    assert _docs("--folder", "site/1.0", "--library", "MyLib", "--version", "1.0",
                 "--folder", "site/2.0", "--version", "2.0") == 0  # fmt: skip
    target = Path("data/folders/mylib")  # several versions of one library: named by the library
    assert _ids(target) == IDS_1 + IDS_2
    assert (
        "wrote mylib@1.0 (3 documents), mylib@2.0 (2 documents) to data/folders/mylib"
        in capsys.readouterr().out
    )
    assert not Path("data/docs").exists()


def test_a_folder_without_version_is_one_version_per_subfolder(project: Path) -> None:
    assert _docs("--folder", "site", "--library", "mylib", "--out", "corpora/both") == 0
    assert _ids(Path("corpora/both")) == IDS_1 + IDS_2


def test_docs_folders_in_params_build_paths_docs_with_every_version(project: Path) -> None:
    params = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
    params["docs"]["folders"] = [{"path": "site", "library": "mylib", "version": None}]
    Path("params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    assert _docs() == 0
    assert _ids(Path("data/docs")) == IDS_1 + IDS_2


def test_a_second_version_never_silently_replaces_the_first(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main building 2.0 into the --out of 1.0 exited 0 and kept only 2.0."""
    out = "corpora/mylib"
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", out) == 0
    capsys.readouterr()
    assert _docs("--folder", "site/2.0", "--library", "mylib", "--version", "2.0", "--out", out) == 2
    err = capsys.readouterr().err
    assert f"docs: {out} holds another corpus (mylib@1.0); this build writes mylib@2.0" in err
    assert "--replace" in err and "--out DIR" in err
    assert _ids(Path(out)) == IDS_1  # untouched

    # Rebuilding the same folders in place (however the path is spelled) is fine.
    assert _docs("--folder", "./site/1.0", "--library", "mylib", "--version", "1.0", "--out", out) == 0
    # The same pin from another folder is another corpus too.
    (project / "copy").mkdir()
    (project / "copy" / "guide.md").write_text("# Other\n\nText.\n", encoding="utf-8")
    assert _docs("--folder", "copy", "--library", "mylib", "--version", "1.0", "--out", out) == 2
    assert "holds mylib@1.0 built from site/1.0, and this build reads it from copy" in capsys.readouterr().err

    assert (
        _docs("--folder", "site/2.0", "--library", "mylib", "--version", "2.0", "--out", out, "--replace")
        == 0
    )
    assert _ids(Path(out)) == IDS_2


def test_an_out_folder_that_holds_no_corpus_is_never_wiped(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out pointing at the docs sources themselves: on main the build replaced the folder, deleting them."""
    assert _docs("--folder", "site/1.0", "--library", "mylib", "--version", "1.0", "--out", "site") == 2
    assert (
        "--out site: contains the docs folder site/1.0, which this command reads" in capsys.readouterr().err
    )
    assert (project / "site" / "2.0" / "guide.md").is_file()


def test_two_folders_giving_the_same_pin_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _docs("--folder", "site", "--library", "mylib",
                 "--folder", "site/2.0", "--version", "2.0") == 2  # fmt: skip
    assert "mylib@2.0 comes from both site/2.0 and site/2.0" in capsys.readouterr().err
    with pytest.raises(UsageError, match="give each library@version one folder"):
        build_folders_corpus([(project / "site", "mylib", None), (project / "site" / "1.0", "MyLib", "1.0")],
                             project / "out", 1500)  # fmt: skip
    assert not (project / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--library", "mylib", "--folder", "site"], "--library mylib: give --folder DIR before it"),
        (
            ["--folder", "site", "--version", "1.0", "--version", "2.0"],
            "--version: given twice for --folder site",
        ),
        (["--folder", "site/1.0", "--version", "1.0"], "docs --folder site/1.0: needs --library NAME"),
    ],
)
def test_folder_flags_out_of_order_are_usage_errors(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    try:
        code = _docs(*args)
    except SystemExit as exc:  # argparse's usage errors exit 2 from the parser
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not Path("data/folders").exists()


def test_a_heading_with_nothing_under_it_is_no_document(tmp_path: Path) -> None:
    """docs/design.md section 2: an empty section is no document. On main "# Backends" alone was one."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "backends.md").write_text(PAGES["1.0"]["backends.md"], encoding="utf-8")
    (folder / "api.rst").write_text(
        "Reference\n=========\n\nClient\n------\n\nConnects.\n\nEmpty\n-----\n", encoding="utf-8"
    )
    ids = sorted(d.doc_id for d in extract_folder(folder, "mylib", "1.0"))
    assert ids == ["mylib@1.0:api.client", "mylib@1.0:backends.memory", "mylib@1.0:backends.redis"]


def test_a_file_of_headings_only_gives_no_documents(tmp_path: Path) -> None:
    (tmp_path / "toc.md").write_text("# Guide\n\n## Install\n", encoding="utf-8")
    with pytest.raises(UsageError, match="no documents found"):
        extract_folder(tmp_path, "mylib", "1.0")


def test_the_manifest_records_each_pin_and_its_folder(project: Path) -> None:
    assert _docs("--folder", "site", "--library", "mylib", "--out", "c") == 0
    pins = json.loads(Path("c/manifest.json").read_text(encoding="utf-8"))["pins"]
    assert {p: v["source"] for p, v in pins.items()} == {"mylib@1.0": "site/1.0", "mylib@2.0": "site/2.0"}
