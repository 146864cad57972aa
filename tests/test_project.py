"""A user's own project (issue 29): `doceval init`, the project's doceval.yaml as the one place its settings
live, params.yaml checked against its sources, conf/ shipped in the package, and hints that name commands
which exist where the user is. Fast: no model, no DVC run (tests/test_project_e2e.py runs the whole recipe)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from test_project_e2e import _env as e2e_env

from doceval.app.project import pipeline_outputs
from doceval.cli.main import main
from doceval.common.hints import params_command, rerun
from doceval.config.compose import SOURCE_CONF, compose, load_params
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "acme"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder outside the repository holding the two-version docs and a golden set, as cwd."""
    shutil.copytree(FIXTURE / "docs", tmp_path / "docs")
    shutil.copy(FIXTURE / "golden.jsonl", tmp_path / "golden.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _init(*extra: str) -> int:
    return main(["init", ".", "--docs", "docs", "--library", "acme", "--golden", "golden.jsonl", *extra])


def test_init_scaffolds_a_project_composed_from_its_own_overrides(folder: Path) -> None:
    assert _init() == 0
    for name in ("doceval.yaml", "params.yaml", "dvc.yaml", "golden.template.jsonl", ".gitignore", ".dvcignore",
                 "README.md"):  # fmt: skip
        assert (folder / name).is_file(), name
    overrides = yaml.safe_load((folder / "doceval.yaml").read_text())["overrides"]
    assert "golden='golden.jsonl'" in overrides and "docs.libraries=[]" in overrides
    cfg = load_params(folder / "params.yaml")
    assert [(f.path, f.library, f.version) for f in cfg.docs.folders] == [("docs", "acme", None)]
    assert cfg.golden == "golden.jsonl" and cfg.docs.libraries == ()
    assert config_dict(cfg) == config_dict(compose())  # every command here composes the same thing
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    assert list(stages) == ["docs", "index", "retrieve", "calibrate", "evaluate", "report"]
    assert stages["docs"]["deps"] == ["docs"] and "${golden}" in stages["retrieve"]["deps"]
    deps = [d for s in stages.values() for d in s["deps"]]
    assert not [d for d in deps if "src/doceval" in d]  # the installed package is no dependency
    assert main(["params", "--check"]) == 0
    # The template is in the golden format (the parser accepts it).
    template = [yaml.safe_load(line) for line in (folder / "golden.template.jsonl").read_text().splitlines()]
    assert [row["out_of_scope"] for row in template] == [False, False, True]  # one row per pin, then one out


def test_init_never_overwrites_and_names_what_exists(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "README.md").write_text("mine")
    assert _init() == 2
    err = capsys.readouterr().err
    assert "README.md" in err and "never overwrites" in err
    assert (folder / "README.md").read_text() == "mine"
    assert not (folder / "doceval.yaml").exists() and not (folder / "params.yaml").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["init", ".", "--docs", "nope", "--library", "acme"], "--docs nope: not a folder"),
        (["init", ".", "--docs", "docs"], "--library"),
        (
            ["init", ".", "--docs", "docs", "--library", "a", "--golden", "x.jsonl"],
            "--golden x.jsonl: not a file",
        ),
        (["init", ".", "--docs", "docs", "--docs", "docs", "--library", "a", "--version", "1"], "--version"),
    ],
)
def test_init_bad_input_exits_2_naming_the_flag(
    folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
    assert not (folder / "doceval.yaml").exists()


def test_project_overrides_come_between_conf_and_the_command(folder: Path) -> None:
    (folder / "doceval.yaml").write_text("overrides:\n  - retriever=bm25\n  - retriever.k1=1.5\n  - k=3\n")
    cfg = compose()
    assert cfg.retriever.name == "bm25" and cfg.retriever.k1 == 1.5 and cfg.k == 3  # type: ignore[union-attr]
    assert compose(["k=7"]).k == 7  # the command's override of a key replaces the project's
    # A command that picks another retriever drops the project's keys under `retriever` (k1 is bm25's).
    assert compose(["retriever=dense"]).retriever.name == "dense"
    assert compose(["retriever=dense"]).k == 3


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("overrides: retriever=bm25\n", "overrides is not a list"),
        ("override:\n  - k=3\n", "unknown key(s) override"),
        ("overrides:\n  - 3\n", "overrides[0]=3"),
        ("overrides: [k=3\n", "not valid YAML"),
    ],
)
def test_a_bad_project_file_exits_2_naming_it(
    folder: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    (folder / "doceval.yaml").write_text(text)
    assert main(["params"]) == 2
    err = capsys.readouterr().err
    assert "doceval.yaml" in err and needle in err


def test_a_stale_params_yaml_is_refused_by_every_stage(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's index/eval disagreement: the project changes its embedder but params.yaml still says the old
    one. The index stage refuses before any work, naming the keys and the command that fixes it."""
    assert _init() == 0
    project = folder / "doceval.yaml"
    project.write_text(project.read_text() + "- embedder=minilm_bf16_weights\n")
    capsys.readouterr()
    for stage in ("index", "retrieve", "evaluate"):
        assert main([stage, "--quiet"]) == 2, stage
        err = capsys.readouterr().err
        assert "params.yaml is stale: embedder." in err and "run `doceval params`" in err, err
        assert "doceval.yaml" in err
    assert main(["params", "--check"]) == 2
    err = capsys.readouterr().err
    assert "differs from" in err and "doceval.yaml" in err and "embedder.precision" in err
    assert main(["params"]) == 0
    assert main(["params", "--check"]) == 0
    assert "matches" in capsys.readouterr().out


def test_params_written_with_overrides_are_not_stale(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`doceval params k=3` records its overrides: the stages recompose them, so only a real drift is refused."""
    assert _init() == 0
    assert main(["params", "k=3"]) == 0
    assert load_params("params.yaml").k == 3
    assert main(["params", "--check"]) == 0
    (folder / "params.yaml").write_text((folder / "params.yaml").read_text().replace("k: 3", "k: 4"))
    assert main(["index", "--quiet"]) == 2
    assert "params.yaml is stale: k differ" in capsys.readouterr().err


def test_a_hand_written_params_file_is_read_as_it_is(folder: Path) -> None:
    """No `doceval params` header: nothing to recompose (tests and scripts write such files)."""
    data = config_dict(compose(["k=4"]))
    (folder / "p.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_params(folder / "p.yaml").k == 4
    assert main(["report", "--params", "p.yaml"]) == 2  # fails later, on the missing summary, not on drift


def test_hints_name_commands_that_exist_here(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: `doceval docs` in a plain folder asked for `make params` (no Makefile there), and errors
    suggested `dvc repro index` where there is no dvc.yaml."""
    assert rerun("index") == "`doceval stage index`" and rerun("judge") == "`doceval stage judge`"
    assert params_command() == "`doceval params`"
    assert main(["stage", "docs", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "`doceval params`" in err and "make params" not in err
    (folder / "dvc.yaml").write_text("stages:\n  index:\n    cmd: doceval index\n")
    (folder / "Makefile").write_text("params:\n\tdoceval params\n")
    assert rerun("index") == "`dvc repro index`" and rerun("retrieve") == "`doceval stage retrieve`"
    assert params_command() == "`make params`"
    with pytest.raises(UsageError, match="`make params`"):
        load_params(folder / "missing.yaml")


def test_conf_ships_inside_the_package() -> None:
    """An installed doceval (no clone) composes from the conf/ inside its package; every conf file matches a
    package-data glob, so the wheel carries it."""
    assert (
        SOURCE_CONF == ROOT / "src" / "doceval" / "conf" or SOURCE_CONF.resolve() == (ROOT / "conf").resolve()
    )
    assert (SOURCE_CONF / "config.yaml").is_file()
    package = SOURCE_CONF.parent
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "doceval"
    ]
    files = [p.relative_to(package).as_posix() for p in SOURCE_CONF.rglob("*") if p.is_file()]
    assert files and all(
        any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs) for f in files
    )
    assert config_dict(compose([], conf_dir=SOURCE_CONF)) == config_dict(compose([], conf_dir=ROOT / "conf"))


# ------------------------------------------------------------------ issue 39: init cannot escape or destroy

LONG = "x" * 300  # one path component longer than any file system takes (ENAMETOOLONG)


def _files(root: Path) -> set[str]:
    """Everything under ``root``, links included (a dangling link is a file init must not write through)."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("name", ["README.md", "dvc.yaml", "doceval.yaml"])
def test_h4_init_never_writes_through_a_link(
    folder: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """On main init tested Path.exists() (False for a dangling link) and wrote through a dangling README.md or
    dvc.yaml link to a path outside DIR."""
    outside = folder.parent / f"outside-{name}"
    (folder / "proj").mkdir()
    (folder / "proj" / name).symlink_to(outside)
    assert main(["init", "proj", "--docs", "docs", "--library", "acme"]) == 2
    err = capsys.readouterr().err
    assert f"proj/{name}" in err and "init never overwrites" in err, err
    assert not outside.exists() and _files(folder / "proj") == {name}  # all or nothing


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("afile", "doceval init afile: is a regular file, not a folder"),
        ("afile/sub", "afile/sub"),
        (LONG, "File name too long"),
    ],
)
def test_h12_init_into_a_file_or_a_name_too_long_is_exit_2(
    folder: Path, capsys: pytest.CaptureFixture[str], target: str, needle: str
) -> None:
    """On main `init DIR` where DIR is a file was a traceback (FileExistsError from mkdir), exit 1."""
    (folder / "afile").write_text("mine\n")
    before = _files(folder)
    assert main(["init", target, "--docs", "docs", "--library", "acme"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert _files(folder) == before and (folder / "afile").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--library", "acme", "--version", "../x"], "--docs docs/1.0 --version='../x': holds '..'"),
        (["--library", "a:b", "--version", "1.0"], "--docs docs/1.0 --library='a:b': holds ':'"),
        (["--library", "acme", "--version", "1@2"], "holds '@'"),
    ],
)
def test_h1_init_takes_only_pins_that_name_one_folder(
    folder: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str
) -> None:
    assert main(["init", "proj", "--docs", "docs/1.0", *flags]) == 2
    err = capsys.readouterr().err
    assert needle in err and "hold no path separator" in err, err
    assert not (folder / "proj").exists()


def test_h19_a_docs_folder_with_a_backslash_is_written_as_its_real_path(folder: Path) -> None:
    """On main doceval.yaml doubled the backslash (Hydra reads `'a\\\\b'` as two): a folder that does not
    exist."""
    shutil.copytree(folder / "docs" / "1.0", folder / "b\\c")
    assert main(["init", "proj", "--docs", "b\\c", "--library", "acme", "--version", "1.0"]) == 0
    cfg = compose([], project=folder / "proj" / "doceval.yaml")
    assert [f.path for f in cfg.docs.folders] == ["../b\\c"]
    assert (folder / "proj" / cfg.docs.folders[0].path).is_dir()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["init", ".", "--docs", "."], "init's output doceval.yaml: lies inside the docs folder ."),
        (["init", "proj", "--docs", "."], "lies inside the docs folder ."),
        (
            ["init", ".", "--docs", "docs", "--golden", "README.md"],
            "init's output README.md: is --golden README.md",
        ),
        (["init", ".", "--docs", "data"], "init's output data/docs: lies inside the docs folder data"),
    ],
)
def test_h19_the_project_never_lies_in_its_own_docs(
    folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    """On main `init DIR --docs DIR` made init's own README (and later eval/report.md) a document."""
    (folder / "README.md").write_text("[]\n")
    (folder / "data" / "1.0").mkdir(parents=True)
    (folder / "data" / "1.0" / "a.md").write_text("# A\n\nText.\n")
    before = _files(folder)
    assert main([*argv, "--library", "acme"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "an output never is, holds or lies inside an input" in err, err
    assert _files(folder) == before


def test_h19_two_folders_giving_one_pin_are_refused_at_init(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main init accepted duplicate pins (the docs stage refused them later, after the project was made)."""
    shutil.copytree(folder / "docs" / "1.0", folder / "other")
    argv = ["init", "proj", "--docs", "docs/1.0", "--docs", "other", "--library", "acme", "--version", "1.0",
            "--version", "1.0"]  # fmt: skip
    assert main(argv) == 2
    assert "acme@1.0 comes from both docs/1.0 and other" in capsys.readouterr().err
    assert main(["init", "proj", "--docs", "docs", "--docs", "./docs", "--library", "acme"]) == 2
    assert "acme@1.0 comes from both docs/1.0 and docs/1.0" in capsys.readouterr().err
    assert not (folder / "proj").exists()


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("syntax", "doceval.yaml: overrides[1]: config override k=[1,: not valid override syntax"),
        ("directory", "doceval.yaml: is a directory, not a project file"),
        ("conf env", "DOCEVAL_CONF=nowhere/conf: is not a folder"),
    ],
)
def test_h16_a_bad_project_file_or_conf_folder_is_an_error_naming_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], setup: str, needle: str
) -> None:
    """On main a Hydra syntax error in doceval.yaml did not name the file, and a doceval.yaml that is a
    directory or a $DOCEVAL_CONF naming a missing folder were silently ignored (exit 0)."""
    if setup == "syntax":
        (folder / "doceval.yaml").write_text("overrides:\n  - k=3\n  - 'k=[1,'\n")
    elif setup == "directory":
        (folder / "doceval.yaml").mkdir()
    else:
        monkeypatch.setenv("DOCEVAL_CONF", "nowhere/conf")
    assert main(["params"]) == 2
    assert needle in capsys.readouterr().err
    assert not (folder / "params.yaml").exists()


# ----------------------------------------------------- issue 40 C5, C6: the own-project recipe, as written

ID_FORM = r"acme@(1|2)\.0:[a-z0-9_]+(\.[a-z0-9_]+)+"  # LIB@VERSION:path.section_slug


def test_c5_init_templates_cite_real_ids_one_row_per_pin(folder: Path) -> None:
    """On main the template showed `LIB@VERSION:PAGE#SECTION` and the README `PATH#SECTION`; the real form is
    `LIB@VERSION:path.section_slug`, and each row cites an id the docs stage will build."""
    assert main(["init", ".", "--docs", "docs", "--library", "acme"]) == 0
    rows = [json.loads(line) for line in (folder / "golden.template.jsonl").read_text().splitlines()]
    assert [(r["library"], r["version"], r["out_of_scope"]) for r in rows] == [
        ("acme", "1.0", False), ("acme", "2.0", False), ("acme", "1.0", True)
    ]  # fmt: skip
    assert main(["docs", "--quiet"]) == 0
    built = {pin: set(part.doc_ids) for pin, part in load_corpus(folder / "data" / "docs").partitions.items()}
    for row in rows[:2]:
        (cited,) = row["relevant_ids"]
        assert re.fullmatch(ID_FORM, cited) and cited in built[f"acme@{row['version']}"]
    readme = (folder / "README.md").read_text()
    assert "#SECTION" not in readme and "LIB@VERSION:path.section_slug" in readme
    assert main(["golden", "validate", "golden.template.jsonl", "--corpus", "data/docs"]) == 0


def test_c5_golden_template_writes_real_ids_from_a_built_corpus_and_never_overwrites(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main no command turned the built corpus's ids into a golden file."""
    assert main(["docs", "--quiet", "--folder", "docs", "--library", "acme", "--out", "corpus"]) == 0
    assert main(["golden", "template", "--docs", "corpus", "--out", "new/golden.jsonl"]) == 0
    rows = [json.loads(line) for line in (folder / "new" / "golden.jsonl").read_text().splitlines()]
    assert [r["version"] for r in rows] == ["1.0", "2.0", "1.0"] and rows[-1]["out_of_scope"]
    assert all(re.fullmatch(ID_FORM, r["relevant_ids"][0]) for r in rows[:2])
    assert main(["golden", "validate", "new/golden.jsonl", "--corpus", "corpus"]) == 0
    capsys.readouterr()
    assert main(["golden", "template", "--docs", "corpus", "--out", "golden.jsonl"]) == 2  # the user's own
    assert "--out golden.jsonl: already exists" in capsys.readouterr().err
    assert (folder / "golden.jsonl").read_text() == (FIXTURE / "golden.jsonl").read_text()


@pytest.mark.slow
def test_c5_init_gitignore_covers_every_cached_output_and_keeps_metrics_committable(folder: Path) -> None:
    """On main `doceval docs` then `git add -A` committed data/docs, and `dvc repro` failed: "output
    'data/docs' is already tracked by SCM". Checked by git itself."""
    assert main(["init", ".", "--docs", "docs", "--library", "acme", "--golden", "golden.jsonl"]) == 0
    outs = pipeline_outputs(yaml.safe_load((folder / "dvc.yaml").read_text()))
    assert {o for o, cached in outs.items() if not cached} >= {"eval/metrics.json", "eval/report.md"}
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *outs], cwd=folder, capture_output=True,
                             text=True).stdout.split()  # fmt: skip
    assert sorted(ignored) == sorted(o for o, cached in outs.items() if cached)


def test_c6_a_params_yaml_written_by_dvc_exp_run_s_says_how_to_run_experiments_here(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dvc exp run -S retriever=bm25` writes `retriever: bm25` into params.yaml (DVC cannot compose
    doceval.yaml); on main the stage's refusal did not say what to do instead."""
    assert main(["init", ".", "--docs", "docs", "--library", "acme", "--golden", "golden.jsonl"]) == 0
    params = folder / "params.yaml"
    header, data = params.read_text().splitlines(keepends=True)[:2], yaml.safe_load(params.read_text())
    params.write_text("".join(header) + yaml.safe_dump({**data, "retriever": "bm25"}, sort_keys=False))
    capsys.readouterr()
    assert main(["stage", "docs", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "params.yaml is stale: retriever" in err
    assert (
        "`doceval params KEY=VALUE`, then `dvc exp run`" in err and "`doceval params` alone restores" in err
    )
    assert main(["params", "retriever=bm25"]) == 0  # the supported way: the override recorded in params.yaml
    assert main(["docs", "--quiet"]) == 0
    assert load_params(params).retriever.name == "bm25"


# --------------------------------------------------------------- slow: real git and dvc in the project


def _sh(command: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A shell line as the user types it, with this environment's doceval, dvc and git first on PATH."""
    full = {**e2e_env(), **(env or {})}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=full, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_h19_init_dvc_inside_a_git_subfolder_works(folder: Path) -> None:
    """On main `init sub --dvc` inside a git work tree failed with an empty reason (`dvc init -q` hid DVC's
    "use --subdir") after writing all its files, and the retry was refused."""
    assert _sh("git init -q", folder).returncode == 0
    done = _sh("doceval init sub --docs docs --library acme --dvc", folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "sub" / ".dvc").is_dir() and "analytics = false" in (
        folder / "sub/.dvc/config"
    ).read_text()
    assert _sh("dvc root", folder / "sub").stdout.strip() == "."  # a DVC project of its own in the subfolder


@pytest.mark.slow
@pytest.mark.parametrize("git_before", [False, True])
def test_h19_a_failed_init_dvc_leaves_nothing_and_the_retry_works(folder: Path, git_before: bool) -> None:
    """`dvc init` failing for a real reason (a broken DVC global config): exit 2 quoting DVC's reason, every
    file, folder and `.git` init made removed, a `.git` that was there untouched; the same command then works."""
    broken = folder.parent / f"dvc-global-{folder.name}"
    broken.mkdir()
    (broken / "config").write_text("[core\nbroken = \n")
    if git_before:
        assert _sh("git init -q && git commit -q --allow-empty -m start", folder).returncode == 0
    git_files = sorted(str(p) for p in (folder / ".git").rglob("*")) if git_before else []
    command = "doceval init . --docs docs --library acme --golden golden.jsonl --dvc" + (
        "" if git_before else " --git"
    )
    before = _files(folder) - {p for p in _files(folder) if p.startswith(".git")}
    failed = _sh(command, folder, {"DVC_GLOBAL_CONFIG_DIR": str(broken)})
    assert failed.returncode == 2, failed.stderr
    assert _files(folder) - {p for p in _files(folder) if p.startswith(".git")} == before
    assert (folder / ".git").is_dir() == git_before  # made by this init: removed; there before: kept
    assert "`dvc init` in . failed" in failed.stderr and "config file error" in failed.stderr, failed.stderr
    assert "the same command can be run again" in failed.stderr
    if git_before:
        assert sorted(str(p) for p in (folder / ".git").rglob("*")) == git_files
    done = _sh(command, folder)
    assert done.returncode == 0, done.stderr
    assert (folder / ".dvc").is_dir() and (folder / "doceval.yaml").is_file()


@pytest.mark.slow
def test_c5_c6_the_recipe_order_works_and_experiments_run_as_documented(folder: Path) -> None:
    """The own-project recipe in its order (init, corpus, golden set from its ids, commit, repro), then a DVC
    experiment the way init's README shows it. On main `git add -A` after `doceval docs` committed data/docs
    (`dvc repro`: "already tracked by SCM"), no command wrote the golden template, and `dvc exp run -S` put
    `retriever: bm25` into params.yaml, which every stage refused."""
    (folder / "golden.jsonl").rename(
        folder / "labelled.jsonl"
    )  # the user's labels, written from the template
    for line in [
        "doceval init . --docs docs --library acme --git --dvc",
        "doceval stage docs --quiet && doceval ids --count",
        "doceval golden template --out golden.jsonl",
        "doceval golden validate golden.jsonl --corpus data/docs",
        "cp labelled.jsonl golden.jsonl",  # the user fills the template in
        "git add -A && git commit -qm 'acme docs and golden set'",
    ]:
        done = _sh(line, folder)
        assert done.returncode == 0, f"{line}: {done.stdout}{done.stderr}"
    tracked = _sh("git ls-files", folder).stdout.split()
    assert "golden.jsonl" in tracked and not [p for p in tracked if p.startswith(("data/", "eval/"))], tracked
    assert _sh("dvc repro docs", folder).returncode == 0  # data/docs is DVC's, not git's

    refused = _sh("dvc exp run -S retriever=bm25", folder)
    assert refused.returncode != 0 and "`doceval params KEY=VALUE`, then `dvc exp run`" in refused.stderr
    done = _sh("doceval params && doceval params retriever=bm25 && dvc exp run", folder)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    summary = json.loads((folder / "eval" / "summary.json").read_text())
    assert summary["config"]["retriever"]["name"] == "bm25"
    assert "bm25" in _sh("dvc exp show --no-pager --md", folder).stdout


@pytest.mark.parametrize("flag", ["--docs", "--golden"])
def test_h12_an_input_name_too_long_is_exit_2_naming_it(
    folder: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """Item 4: every OS error on a user-named path is exit 2 naming it (on main: a traceback from is_dir)."""
    argv = {"--docs": ["--docs", LONG], "--golden": ["--docs", "docs", "--golden", LONG]}[flag]
    assert main(["init", "proj", *argv, "--library", "acme"]) == 2
    err = capsys.readouterr().err
    assert LONG in err and "File name too long" in err and "Traceback" not in err, err
    assert not (folder / "proj").exists()
