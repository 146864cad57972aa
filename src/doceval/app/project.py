"""`doceval init DIR`: a user's own evaluation project over their docs and golden set, run by the installed
doceval (no clone): ``doceval.yaml`` (the project's overrides of the shipped conf/), ``params.yaml`` composed
from them, ``dvc.yaml`` with the repository's stages, a golden template, ``.gitignore``/``.dvcignore`` and a short
README. Nothing existing is overwritten."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from doceval.common.redact import secret_locations
from doceval.config.compose import dump_params
from doceval.config.objects import config_dict
from doceval.config.project import PROJECT_FILE
from doceval.errors import UsageError

GOLDEN = "golden.jsonl"
TEMPLATE = "golden.template.jsonl"
# What the pipeline, sweeps and MLflow write: rebuilt, never committed (DVC adds its own outs to .gitignore).
IGNORED = ["/data/cache/", "/eval/runs/", "/eval/sweeps/", "/mlruns/", "__pycache__/"]


@dataclass(frozen=True)
class DocsSource:
    """One folder of the user's markdown/rst docs: one version, or (version None) DIR/<version>/ subfolders."""

    path: Path
    library: str
    version: str | None


def _quoted(text: str) -> str:
    """A Hydra override's quoted string (single quotes, backslash-escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def project_overrides(target: Path, sources: Sequence[DocsSource], golden: str) -> list[str]:
    """doceval.yaml's overrides: the docs folders (paths relative to the project), no pinned wheels, the golden
    set."""
    items = []
    for src in sources:
        rel = Path(os.path.relpath(src.path.resolve(), target.resolve())).as_posix()
        version = "null" if src.version is None else _quoted(src.version)
        items.append(f"{{path: {_quoted(rel)}, library: {_quoted(src.library)}, version: {version}}}")
    folders = f"docs.folders=[{', '.join(items)}]"
    # No pinned wheels and no shipped golden set: this project's docs and labels only.
    return [folders, "docs.libraries=[]", "docs.golden_set=null", f"golden={_quoted(golden)}"]


def _stage(cmd: str, deps: list[str], params: list[str], outs: list[Any], **extra: Any) -> dict[str, Any]:
    return {"cmd": cmd, "deps": deps, "params": params, "outs": outs, **extra}


def dvc_pipeline(doc_paths: Sequence[str]) -> dict[str, Any]:
    """The repository's stages (docs -> index -> retrieve -> calibrate -> evaluate -> report) over the user's
    files; doceval itself is an installed package, so its source is no dependency. No judge stage: it needs
    labelled answers a new project has not written."""
    labels = ["${golden}"]
    answer = [
        "name",  # what the summaries and MLflow call the system under test
        "run",
        "k",
        "retriever",
        "answerer",
        "judge",
        "memory",
        "seed",
        "bootstrap",
        "intervals",
        "relevance",
    ]
    uncached = {"cache": False}
    return {
        "stages": {
            "docs": _stage("doceval docs --quiet", list(doc_paths), ["docs", "paths.docs"], ["data/docs"]),
            "index": _stage(
                "doceval index --quiet", ["data/docs"], ["embedder", "store", "paths.index"], ["data/index"]
            ),  # fmt: skip
            "retrieve": _stage(
                "doceval retrieve --quiet",
                ["data/docs", "data/index", *labels],
                ["retriever", "candidates_k", "k", "golden", "embedder", "store", "paths.runs"],
                ["data/runs/candidates"],
            ),  # fmt: skip
            "calibrate": _stage(
                "doceval calibrate --quiet",
                ["data/runs/candidates", *labels],
                ["calibration", *answer],
                ["eval/calibration"],
            ),  # fmt: skip
            "evaluate": _stage(
                "doceval evaluate --quiet",
                ["data/runs/candidates", *labels, "eval/calibration/floors.json"],
                [*answer, "split", "floors", "limit", "calibration", "candidates_k"],
                ["eval/summary.json", {"eval/ann_vs_exact.json": uncached}, {"eval/tradeoff": uncached}],
                metrics=[{"eval/metrics.json": uncached}],
            ),  # fmt: skip
            "report": _stage(
                "doceval report",
                [
                    "eval/summary.json",
                    "eval/calibration/floors.json",
                    "eval/tradeoff",
                    "eval/ann_vs_exact.json",
                ],
                ["gate"],
                [{"eval/report.md": uncached}],
            ),  # fmt: skip
        }
    }


def golden_template(library: str, version: str) -> str:
    """Two example rows in the golden format (docs/design.md section 3): one question the docs answer, one
    they cannot."""
    rows = [
        {"id": "q001", "question": f"{library} {version}: how do I ...?", "library": library, "version": version,
         "out_of_scope": False, "relevant_ids": [f"{library}@{version}:PAGE#SECTION"],
         "reference_answer": "What a right answer says.", "expected_apis": ["an_api_the_answer_names"],
         "forbidden_apis": ["an_api_of_another_version"], "split": "calibration", "kind": "version_trap"},
        {"id": "oos001", "question": "what is the capital of France?", "library": library, "version": version,
         "out_of_scope": True, "relevant_ids": [], "reference_answer": "", "expected_apis": [],
         "forbidden_apis": [], "split": "test", "kind": "off_topic"},
    ]  # fmt: skip
    return "".join(json.dumps(row) + "\n" for row in rows)


def readme(overrides: Sequence[str]) -> str:
    shown = "\n".join(f"- `{o}`" for o in overrides)
    return f"""# doceval project

An evaluation of a documentation assistant over these docs with [doceval](https://pypi.org/project/doceval/).

- `doceval.yaml`: this project's settings, as overrides of doceval's shipped configuration:
{shown}
- `params.yaml`: composed from doceval's configuration and `doceval.yaml` by `doceval params` (every stage refuses
  a stale one); `dvc.yaml`: the pipeline docs -> index -> retrieve -> calibrate -> evaluate -> report.
- `{TEMPLATE}`: the golden set's format, two example rows (docs/design.md section 3 of doceval); ids are
  `LIBRARY@VERSION:PATH#SECTION`: list them with `doceval ids`.

```bash
doceval docs && doceval ids            # build the corpus, list its document ids for the golden set
doceval golden validate {GOLDEN} --corpus data/docs
dvc repro                              # the headline: eval/metrics.json, eval/report.md
doceval eval retriever=bm25            # any configuration, on the same sources plus the overrides given
doceval sweep -m floors.global=0.1,0.2 # a sweep over the cached candidates
doceval history                        # a metric across commits (needs a git commit per run)
mlflow ui --backend-store-uri sqlite:///$PWD/mlruns/mlflow.db
```
"""


def project_text(overrides: Sequence[str]) -> str:
    return (
        "# This project's configuration: doceval's shipped conf/, then these overrides, then a command's own\n"
        "# (`doceval eval retriever=bm25`). After an edit: `doceval params` (the stages read params.yaml).\n"
        + yaml.safe_dump({"overrides": list(overrides)}, sort_keys=False, width=1000)
    )


def derived_files(target: Path, sources: Sequence[DocsSource], overrides: Sequence[str]) -> dict[Path, str]:
    """The files init writes beside doceval.yaml, by path, with their text: params.yaml composed from the
    doceval.yaml already in ``target`` (one source of truth), the pipeline, the template, ignores, README."""
    # lazy: start-up (Hydra, ~0.35 s), as every command that composes
    from doceval.config.compose import compose

    cfg = compose([], project=target / PROJECT_FILE)
    held = secret_locations(config_dict(cfg))
    if held:
        raise UsageError(f"doceval init: {', '.join(held)} would write a credential into params.yaml")
    doc_deps = [Path(os.path.relpath(s.path.resolve(), target.resolve())).as_posix() for s in sources]
    pipeline = yaml.safe_dump(dvc_pipeline(doc_deps), sort_keys=False, width=1000)
    first = sources[0]
    return {
        target / "params.yaml": dump_params(cfg),
        target / "dvc.yaml": "# doceval's pipeline over this project's docs and golden set.\n" + pipeline,
        target / TEMPLATE: golden_template(first.library, first.version or "VERSION"),
        target / ".gitignore": "".join(f"{p}\n" for p in IGNORED),
        target / ".dvcignore": "".join(f"{p.lstrip('/')}\n" for p in IGNORED),
        target / "README.md": readme(overrides),
    }


def _check_sources(sources: Sequence[DocsSource], golden: Path | None) -> None:
    if not sources:
        raise UsageError("doceval init: no docs: pass --docs PATH --library NAME [--version V]")
    for src in sources:
        if not src.path.is_dir():
            raise UsageError(f"--docs {src.path}: not a folder; pass the folder of your markdown/rst docs")
        if not src.library.strip():
            raise UsageError(
                f"--docs {src.path}: --library is empty; pass the library's name (e.g. --library acme)"
            )
    if golden is not None and not golden.is_file():
        raise UsageError(
            f"--golden {golden}: not a file; pass your golden set (JSONL), or leave it out for a template"
        )


def init_project(
    target: Path,
    sources: Sequence[DocsSource],
    golden: Path | None = None,
    git: bool = False,
    dvc: bool = False,
) -> list[Path]:
    """Scaffold the project in ``target`` (created if needed); returns the files written. Exit 2 (UsageError)
    naming every file that already exists, before anything is written."""
    _check_sources(sources, golden)
    target.mkdir(parents=True, exist_ok=True)
    golden_rel = Path(os.path.relpath(golden.resolve(), target.resolve())).as_posix() if golden else GOLDEN
    overrides = project_overrides(target, sources, golden_rel)
    existing = [p for p in _targets(target) if p.exists()]
    if existing:
        raise UsageError(
            f"doceval init: {', '.join(str(p) for p in existing)} already exist(s); init never overwrites: move "
            "them aside or pick another DIR"
        )
    project = target / PROJECT_FILE
    project.write_text(project_text(overrides), encoding="utf-8")
    try:
        files = derived_files(target, sources, overrides)
    except BaseException:
        project.unlink()  # nothing half-made is left behind
        raise
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    if git:
        _run_tool(["git", "init", "-q"], target)
    if dvc:
        in_git = git or _inside_git(target)
        _run_tool(["dvc", "init", "-q", *([] if in_git else ["--no-scm"])], target)
        _run_tool(["dvc", "config", "core.analytics", "false"], target)
    return [project, *files]


def _targets(target: Path) -> list[Path]:
    names = [PROJECT_FILE.name, "params.yaml", "dvc.yaml", TEMPLATE, ".gitignore", ".dvcignore", "README.md"]
    return [target / name for name in names]


def _tool(name: str) -> str:
    """An executable: beside this interpreter first (the venv doceval runs in has dvc), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise UsageError(f"doceval init: `{name}` not found; install it, or leave out --{name}")
    return found


def _inside_git(folder: Path) -> bool:
    try:
        probe = subprocess.run(
            [_tool("git"), "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True
        )
    except UsageError:
        return False
    return probe.returncode == 0 and probe.stdout.strip() == "true"


def _run_tool(argv: list[str], cwd: Path) -> None:
    done = subprocess.run([_tool(argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(
            f"doceval init: `{' '.join(argv)}` in {cwd} failed (exit {done.returncode}): "
            f"{done.stderr.strip()[-500:]}"
        )
