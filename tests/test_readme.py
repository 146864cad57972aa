"""README.md is a page a newcomer reads in ten minutes, and everything it shows is true (issue 40, C12):

- at most 300 lines of at most 120 characters; its one headline table is eval/metrics.json's (intervals and n
  from eval/report.md), and its conversation figures are eval/conversations/metrics.json's;
- every shell block runs in a slow test that reads it from the README (tests/readme_blocks.py), except the
  commands named as excluded; the Python block too; every page it links to exists;
- nothing cites a README section any more (the reference material lives in docs/), and the configuration page
  lists every option each config group has.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import summary_reference
from readme_blocks import BLOCKS, EXCLUDED, PYTHON_BLOCK_TEST, README, ROOT, commands, excluded, shell_blocks

TEXT = README.read_text(encoding="utf-8")


def test_the_readme_is_at_most_300_lines_of_at_most_120_characters() -> None:
    lines = TEXT.splitlines()
    long = [f"{n}: {len(line)}" for n, line in enumerate(lines, 1) if len(line) > 120]
    assert len(lines) <= 300 and not long, f"{len(lines)} lines; longer than 120 characters: {long}"


def _headline_rows() -> dict[str, list[str]]:
    head = TEXT.index("| metric (k = 5) | value | 95% CI | n |")
    rows = {}
    for line in TEXT[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].split(" (")[0]] = cells[1:]
    return rows


def _report_rows() -> dict[str, list[str]]:
    report = (ROOT / "eval" / "report.md").read_text(encoding="utf-8")
    section = report[report.index("## Headline metrics") :].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5:
            rows[cells[0].split(" (")[0]] = cells[1:]
    return rows


def test_the_headline_table_is_the_committed_metrics() -> None:
    metrics = json.loads((ROOT / "eval" / "metrics.json").read_text())
    report = _report_rows()
    rows = _headline_rows()
    assert {"hit_rate", "recall", "mrr", "ndcg", "refused_correctly", "version_correctness"} <= set(rows)
    for name, (value, interval, n) in rows.items():
        if metrics[name] is None:
            assert value == "not judged" and n == "0", name
            continue
        assert value == f"{metrics[name]:.4f}", f"README {name} {value}, eval/metrics.json {metrics[name]}"
        assert [value, interval, n] == [report[name][0], report[name][1], report[name][3]], name
        assert int(n) == metrics[f"n_{name}"], name


def test_the_conversation_figures_are_the_committed_ones() -> None:
    m = json.loads((ROOT / "eval" / "conversations" / "metrics.json").read_text())
    with_memory = m["conversations.needs_memory.hit_rate"]
    reset = with_memory - m["conversations.memory_benefit.hit_rate"]
    n = m["n_conversations"]
    all_right = round(m["conversations.all_turns_correct"] * n)
    sentence = (
        f"On {n} test conversations memory raises hit_rate on the turns that\nneed it from {reset:.4f} "
        f"to {with_memory:.4f}, and {all_right} of {n} conversations get every turn right."
    )
    assert sentence in TEXT


def _test_functions() -> dict[str, ast.FunctionDef]:
    """Every test function of tests/, by its id (tests/FILE.py::NAME)."""
    found = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"tests/{path.name}::{node.name}"] = node
    return found


def _is_slow(node: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) == "pytest.mark.slow" for d in node.decorator_list)


def test_every_shell_block_has_a_slow_test_that_reads_it_from_the_readme() -> None:
    tests = _test_functions()
    blocks = shell_blocks()
    untested = [
        b[0] for b in blocks if b and not all(map(excluded, b)) and not b[0].startswith(tuple(BLOCKS))
    ]
    assert not untested, f"README shell blocks with no test (add them to tests/readme_blocks.py): {untested}"
    partly = [b for b in blocks if any(map(excluded, b)) and not all(map(excluded, b))]
    assert not partly, f"an excluded command shares a block with commands the tests run: {partly}"
    for first, test_ids in BLOCKS.items():
        assert commands(first)  # exactly one block starts with it
        for test_id in test_ids:
            node = tests.get(test_id)
            assert node is not None, f"{test_id} (README block {first!r}) does not exist"
            assert _is_slow(node), f"{test_id} runs a README block: mark it slow"
            source = ast.unparse(node)
            assert f"commands({first!r})" in source or f"_block({first!r}" in source, (
                f"{test_id} does not read the block {first!r} from the README"
            )
    node = tests[PYTHON_BLOCK_TEST]
    assert "python_block()" in ast.unparse(node), "the README's Python block runs in no test"
    said = " ".join(TEXT.split())  # the README says which commands no test runs
    assert "the tests run every command of this page but this one, a server, and `make bench`" in said
    assert all(command in said for command in EXCLUDED)


def test_every_page_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert links and not missing, missing


def test_nothing_cites_a_readme_section_it_no_longer_has() -> None:
    """On main, messages and comments pointed at README sections ("The same headline on every CPU", "A GPU",
    "Scaling out") that now live in docs/."""
    headings = {line.lstrip("#").strip() for line in TEXT.splitlines() if line.startswith("#")}
    cite = re.compile(
        r"(?<![/\w])README(?:\.md)?(?:'s)?,?\s+[\"'“]([^\"'”]+)[\"'”]"
    )  # not data/golden/README.md
    paths = [*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.yaml"), *(ROOT / "conf").rglob("*.yaml"),
             *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "docs").glob("*.md"),
             ROOT / "CONTRIBUTING.md", ROOT / "Makefile"]  # fmt: skip
    stale = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{n}: {m}" for m in cite.findall(line) if m not in headings]
    assert not stale, stale


def test_the_configuration_page_lists_every_option_of_every_group() -> None:
    """On main the README said "four built-in retrievers" (there are five) and listed stale options."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"`(\w+)/` \(([^)]*)\)", page))
    for group in sorted(p for p in (ROOT / "conf").iterdir() if p.is_dir()):
        options = sorted(f.stem for f in group.glob("*.yaml"))
        assert group.name in listed, f"docs/configuration.md does not list conf/{group.name}/"
        named = sorted(re.findall(r"[\w+]+", listed[group.name].split(":")[0]))
        assert named == options, f"conf/{group.name}/: the page lists {named}, the folder has {options}"


# ------------------------------------------------------------------------------- the two commands (slow)


def _clone(tmp_path: Path) -> Path:
    """A clone of this checkout's HEAD, as a newcomer has it, with this environment as its .venv (make's setup
    finds its stamp and installs nothing). The checkout's caches, where it has them, come along as on a machine
    that ran the pipeline before: DVC's cache hard-linked (DVC never writes a cache file in place; stages it
    holds are restored from the run cache) and data/cache copied (wheels and embeddings, content-addressed: a
    stage that reruns downloads and embeds only what they lack). Without them the whole pipeline runs."""
    clone = tmp_path / "doceval"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    venv = Path(sys.prefix)
    want = hashlib.sha256((clone / "pyproject.toml").read_bytes() + (clone / "constraints.txt").read_bytes())
    stamp = venv / ".installed"
    if not stamp.is_file() or stamp.read_text().strip() != want.hexdigest():
        pytest.fail(
            f"{venv} is not the environment `make setup` installs for HEAD (no matching {stamp}): "
            "run `make setup` and the tests from its .venv"
        )
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    if (ROOT / ".dvc" / "cache").is_dir():
        shutil.copytree(ROOT / ".dvc" / "cache", clone / ".dvc" / "cache", copy_function=_link_or_copy)
    if (ROOT / "data" / "cache").is_dir():
        shutil.copytree(ROOT / "data" / "cache", clone / "data" / "cache")
    return clone


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)  # DVC never writes a cache file in place
    except OSError:
        shutil.copy2(source, target)


def _make(clone: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(clone / "src"), "MLFLOW_DISABLE_TELEMETRY": "true"}
    done = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=3600)  # fmt: skip
    assert done.returncode == 0, (
        f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.mark.slow
def test_make_repro_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (repro, _) = commands("make repro")
    clone = _clone(tmp_path)
    done = _make(clone, repro)
    last = done.stdout.strip().splitlines()
    assert any(line.startswith("hit_rate@5 ") for line in last[-20:]), done.stdout[-2000:]
    assert (clone / "eval" / "metrics.json").read_bytes() == (ROOT / "eval" / "metrics.json").read_bytes()
    again = _make(clone, "git status --porcelain --untracked-files=no")
    assert again.stdout == "", f"make repro changed tracked files: {again.stdout}"
    _assert_the_reference_summaries(clone)


def _assert_the_reference_summaries(clone: Path) -> None:
    """Issue 44's typed summary changed how summaries are built, not what they say: the metrics files equal the
    reference commit's bytes, and each summary.json equals the reference once what differs between equal runs is
    removed (tests/summary_reference.py)."""
    commit = summary_reference.reference_commit()
    for name in summary_reference.METRICS:
        shown = _make(clone, f"git show {commit}:{name}").stdout.encode("utf-8")
        assert (clone / name).read_bytes() == shown, f"{name} differs from {commit[:8]}'s"
    for name, fixture in summary_reference.SUMMARIES.items():
        made = summary_reference.canonical(json.loads((clone / name).read_text(encoding="utf-8")))
        assert made == summary_reference.reference(fixture), (
            f"{name} differs from {commit[:8]}'s (normalised)"
        )


@pytest.mark.slow
def test_make_test_runs_as_the_readme_shows(tmp_path: Path) -> None:
    (_, test) = commands("make repro")
    clone = _clone(tmp_path)
    done = _make(clone, test)
    assert re.search(r"\d+ passed", done.stdout), done.stdout[-2000:]
