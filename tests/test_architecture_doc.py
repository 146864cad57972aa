"""docs/architecture.md names everything a newcomer looks for, its generated tables (metrics, config groups,
options, top-level keys, commands: `tests/architecture_tables.py`) say what the code says, and the repository
refers to no file outside itself.

Conventions (stated at the top of docs/architecture.md): modules by dotted path in backticks
(`doceval.scoring.registry`), config groups as `conf/<group>/` and options as `group=option`, CLI commands in
full (`doceval golden validate`), metrics by their registry name (`hit_rate`).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import architecture_tables
import pytest

from doceval.cli.main import build_parser
from doceval.common.metric_names import METRICS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CONF = ROOT / "conf"
DOC = ROOT / "docs" / "architecture.md"
TEXT = DOC.read_text(encoding="utf-8")
TICKED = set(re.findall(r"`([^`\n]+)`", TEXT))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted((SRC / "doceval").rglob("*.py"))}
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir())


def _missing(names: list[str], shown: str) -> str:
    return f"docs/architecture.md does not name these ({shown}): {', '.join(names)}"


def test_every_module_is_named() -> None:
    missing = [name for name in MODULES if name not in TICKED]
    assert not missing, _missing(missing, "add a row `doceval.x.y` | its job, to the modules table")


def test_the_modules_table_names_only_modules_that_exist() -> None:
    rows = re.findall(r"^\| `(doceval[\w.]*)` \|", TEXT, flags=re.MULTILINE)
    assert rows, "no modules table found in docs/architecture.md"
    stale = [name for name in rows if name not in MODULES]
    assert not stale, f"docs/architecture.md lists modules that do not exist (renamed or removed?): {stale}"


def test_named_config_options_exist() -> None:
    named = [m.groups() for t in TICKED if (m := re.fullmatch(r"(\w+)=(\w+)", t)) and m.group(1) in GROUPS]
    stale = [f"{g}={o}" for g, o in named if not (CONF / g / f"{o}.yaml").is_file()]
    assert not stale, f"docs/architecture.md names config options that do not exist: {stale}"


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*prefix, name))
                found += _commands(sub, (*prefix, name))
    return found


def test_the_parser_walk_finds_nested_subcommands() -> None:
    commands = _commands(build_parser())
    assert ("eval",) in commands and ("golden", "validate") in commands and ("beir", "import") in commands


def test_generated_tables_are_current() -> None:
    """The metric, config group, option, top-level key and command tables say what the code says."""
    assert architecture_tables.rendered(TEXT) == TEXT, (
        "docs/architecture.md's generated tables differ from the registry, conf/ or the argument parser: "
        "run `python tests/architecture_tables.py` and commit docs/architecture.md"
    )


def test_a_new_metric_option_key_or_command_changes_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: each source's addition shows in the page it regenerates."""
    extra = dataclasses.replace(METRICS[0], name="precision", description="|R ∩ relevant| / |R|")
    monkeypatch.setattr(architecture_tables, "METRICS", (*METRICS, extra))
    assert "| `precision` | retrieval |" in architecture_tables.rendered(TEXT)
    monkeypatch.undo()

    def with_command() -> argparse.ArgumentParser:
        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.add_parser("explain", help="say why an entry failed")
        return parser

    monkeypatch.setattr(architecture_tables, "build_parser", with_command)
    assert "| `doceval explain` |  | say why an entry failed |" in architecture_tables.rendered(TEXT)


def test_a_new_conf_key_or_option_changes_the_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    with (conf / "config.yaml").open("a", encoding="utf-8") as fh:
        fh.write("newkey: 3   # a key added without regenerating\n")
    (conf / "retriever" / "splade.yaml").write_text("name: splade\ntop: 9\n", encoding="utf-8")
    monkeypatch.setattr(architecture_tables, "CONF", conf)
    page = architecture_tables.rendered(TEXT)
    assert "| `newkey` | `3` | a key added without regenerating |" in page
    assert "| `retriever=splade` | `retriever.top` `9` |" in page and "`retriever=splade`" not in TEXT


def test_a_new_config_group_must_say_who_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "reranker").mkdir()
    (conf / "reranker" / "none.yaml").write_text("name: none\n", encoding="utf-8")
    monkeypatch.setattr(architecture_tables, "CONF", conf)
    with pytest.raises(SystemExit, match="conf/reranker/ in GROUP_READERS"):
        architecture_tables.rendered(TEXT)


def test_the_readers_of_each_group_exist() -> None:
    named = re.findall(r"`(doceval[\w.]*)`", " ".join(architecture_tables.GROUP_READERS.values()))
    stale = [name for name in named if name not in MODULES]
    assert named and not stale, f"GROUP_READERS in tests/architecture_tables.py names no such module: {stale}"


def test_design_names_every_top_level_key() -> None:
    """design.md 6.1's key table (the meanings) names every key of conf/config.yaml the generated table lists."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = design[design.index("### 6.1") : design.index("### 6.2")]
    keys = re.findall(r"^\| `([\w.]+)` \|", architecture_tables.keys_table(), flags=re.MULTILINE)
    # a row may shorten the keys of one block after its first: `paths.docs`, `paths.index` or `.split`
    missing = [k for k in keys if f"`{k}`" not in section and f"`.{k.rsplit('.', 1)[-1]}`" not in section]
    assert keys and not missing, f"docs/design.md section 6.1 does not say what these keys mean: {missing}"


# The dependency rules the page states are checked by tests/test_dependency_rules.py.


# ------------------------------------------------------------------------------- no references outside the repo

# Built from pieces so this file does not match itself.
OUTSIDE = re.compile("|".join(map(re.escape, ("../" + "shared", "/work/" + "shared", "DESIGN" + ".md"))))
ALLOWED = {"docs/design.md"}


@pytest.mark.slow
def test_no_tracked_file_refers_outside_the_repository() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    hits = []
    for rel in filter(None, listed):
        path = ROOT / rel
        if rel in ALLOWED or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        for n, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not hits, (
        "tracked files refer to files outside the repository (the contracts live in docs/design.md; "
        "name data sets by what to download, not by a path on one machine):\n" + "\n".join(hits)
    )


def test_design_section_citations_exist() -> None:
    """Code and docs cite "docs/design.md section N": every cited N is a numbered section there."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (\d+)\. ", design, flags=re.MULTILINE))
    cite = re.compile(r"design\.md[`)\]]*\s+sections?\s+(\d+(?:\s*(?:-|–|,|and)\s*\d+)*)")
    bad = []
    texts = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").glob("*.py"), *ROOT.glob("*.md")]
    texts += [*(ROOT / "docs").glob("*.md"), *(ROOT / "data" / "golden").glob("*.md")]
    for path in sorted(texts):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in cite.finditer(line):
                bad += [
                    f"{path.relative_to(ROOT)}:{n}: section {num}"
                    for num in re.findall(r"\d+", match.group(1))
                    if num not in sections
                ]
    assert sections and not bad, f"citations of sections docs/design.md does not have: {bad}"
