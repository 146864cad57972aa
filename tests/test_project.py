"""A user's own project (issue 29): `doceval init`, the project's doceval.yaml as the one place its settings
live, params.yaml checked against its sources, conf/ shipped in the package, and hints that name commands
which exist where the user is. Fast: no model, no DVC run (tests/test_project_e2e.py runs the whole recipe)."""

from __future__ import annotations

import fnmatch
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml

from doceval.cli.main import main
from doceval.common.hints import params_command, rerun
from doceval.config.compose import SOURCE_CONF, compose, load_params
from doceval.config.objects import config_dict
from doceval.errors import UsageError

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
    assert rerun("index") == "`doceval index`" and rerun("judge") == "`doceval judge agreement`"
    assert params_command() == "`doceval params`"
    assert main(["docs", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "`doceval params`" in err and "make params" not in err
    (folder / "dvc.yaml").write_text("stages:\n  index:\n    cmd: doceval index\n")
    (folder / "Makefile").write_text("params:\n\tdoceval params\n")
    assert rerun("index") == "`dvc repro index`" and rerun("retrieve") == "`doceval retrieve`"
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
