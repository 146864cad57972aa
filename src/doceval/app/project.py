"""`doceval init DIR`: a user's own evaluation project over their docs and golden set, run by the installed
doceval (no clone): ``doceval.yaml`` (the project's overrides of the shipped conf/), ``params.yaml`` composed
from them, ``dvc.yaml`` with the repository's stages, a golden template, ``.gitignore``/``.dvcignore`` and a short
README. Nothing existing is overwritten."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from doceval.app.scaffold import Scaffold, dvc_init_argv, run_tool
from doceval.common.io import output_folder, write_text_atomic
from doceval.common.paths import Named, check_pin_part, input_file, is_folder, refuse_overlap
from doceval.common.redact import secret_locations
from doceval.config.compose import dump_params
from doceval.config.objects import config_dict
from doceval.config.project import PROJECT_FILE, override_key, read_project_overrides
from doceval.errors import UsageError
from doceval.inputs.folders import extract_folder, folder_pin, folder_pins
from doceval.inputs.qrels import qrels_path
from doceval.inputs.template import template_text

GOLDEN = "golden.jsonl"
TEMPLATE = "golden.template.jsonl"
# What caches, runs, sweeps and MLflow write: rebuilt, never committed. The pipeline's cached outputs are
# ignored too (ignored_outputs), before the first `dvc repro` adds them: a `git add -A` after `doceval stage docs`
# would otherwise commit data/docs, and DVC refuses an output git tracks.
# IGNORED is in .dvcignore too: never a DVC output there (DVC refuses an output .dvcignore hides).
IGNORED = ["/data/cache/", "/eval/runs/", "/eval/sweeps/", "/mlruns/", "__pycache__/"]
# Journals of `doceval eval` (data/runs/eval/) beside the candidate cache: rebuilt, never committed.
GIT_ONLY = ["/data/runs/"]


@dataclass(frozen=True)
class DocsSource:
    """One folder of the user's markdown/rst docs: one version, or (version None) DIR/<version>/ subfolders."""

    path: Path
    library: str
    version: str | None


def _quoted(text: str) -> str:
    """A Hydra override's quoted string: in single quotes, a quote escaped, and a run of backslashes doubled
    only before a quote or at the end (Hydra reads every other backslash as itself: ``'a\\b'`` is ``a\\b``)."""
    body = re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), text)
    return f"'{body}'"


def project_overrides(
    target: Path, sources: Sequence[DocsSource], golden: str, conversations: str | None = None
) -> list[str]:
    """doceval.yaml's overrides: the docs folders (paths relative to the project), no pinned wheels, the golden
    set, and the conversation set (null without one: no path to a set the project does not have)."""
    items = []
    for src in sources:
        rel = Path(os.path.relpath(src.path.resolve(), target.resolve())).as_posix()
        version = "null" if src.version is None else _quoted(src.version)
        items.append(f"{{path: {_quoted(rel)}, library: {_quoted(src.library)}, version: {version}}}")
    folders = f"docs.folders=[{', '.join(items)}]"
    # No pinned wheels and no shipped golden set: this project's docs and labels only.
    return [
        folders,
        "docs.libraries=[]",
        "docs.golden_set=null",
        f"golden={_quoted(golden)}",
        conversations_override(conversations),
    ]


def conversations_override(conversations: str | None) -> str:
    """``golden_conversations=PATH`` (relative to the project), or ``golden_conversations=null``."""
    return f"{CONVERSATIONS_KEY}={'null' if conversations is None else _quoted(conversations)}"


CONVERSATIONS_KEY = "golden_conversations"
CONVERSATIONS_SUMMARY = "eval/conversations/summary.json"  # what the report reads of the conversations stage
INDEX_MANIFEST = "data/index/manifest.json"  # the index stage's one output: what the index is


# The params of the system under test and how it is scored, which every answering stage depends on.
SYSTEM_PARAMS = ["retriever", "answerer", "judge", "memory", "seed", "bootstrap", "intervals", "relevance"]


def _stage(cmd: str, deps: list[str], params: list[str], outs: list[Any], **extra: Any) -> dict[str, Any]:
    return {"cmd": cmd, "deps": deps, "params": params, "outs": outs, **extra}


def dvc_pipeline(doc_paths: Sequence[str], conversation_labels: Sequence[str] = ()) -> dict[str, Any]:
    """The repository's stages (docs -> index -> retrieve -> calibrate -> evaluate -> report) over the user's
    files; doceval itself is an installed package, so its source is no dependency. No judge stage: it needs
    labelled answers a new project has not written. ``conversation_labels`` (the conversation set and its qrels,
    when the project has one): the conversations stage too, and the report depends on what it writes."""
    labels = ["${golden}"]
    answer = ["name", "run", "k", *SYSTEM_PARAMS]  # name: what the summaries and MLflow call the system
    uncached = {"cache": False}
    return {
        "stages": {
            "docs": _stage(
                "doceval stage docs --quiet", list(doc_paths), ["docs", "paths.docs"], ["data/docs"]
            ),
            "index": _stage(
                "doceval stage index --quiet",
                ["data/docs"],
                ["embedder", "store", "paths.index"],
                [{INDEX_MANIFEST: uncached}],  # the shards differ byte for byte per build: never hashed
            ),
            "retrieve": _stage(
                "doceval stage retrieve --quiet",
                ["data/docs", INDEX_MANIFEST, *labels],
                ["retriever", "candidates_k", "k", "golden", "embedder", "store", "paths.runs"],
                ["data/runs/candidates"],
            ),
            "calibrate": _stage(
                "doceval stage calibrate --quiet",
                ["data/runs/candidates", *labels],
                ["calibration", *answer],
                ["eval/calibration"],
            ),
            "evaluate": _stage(
                "doceval stage evaluate --quiet",
                ["data/runs/candidates", *labels, "eval/calibration/floors.json"],
                [*answer, "split", "floors", "limit", "calibration", "candidates_k"],
                ["eval/summary.json", {"eval/ann_vs_exact.json": uncached}, {"eval/tradeoff": uncached}],
                metrics=[{"eval/metrics.json": uncached}],
            ),
            **({"conversations": conversations_stage(conversation_labels)} if conversation_labels else {}),
            "report": _stage(
                "doceval stage report",
                [
                    "eval/summary.json",
                    "eval/calibration/floors.json",
                    "eval/tradeoff",
                    "eval/ann_vs_exact.json",
                    *([CONVERSATIONS_SUMMARY] if conversation_labels else []),
                ],
                ["gate"],
                [{"eval/report.md": uncached}],
            ),
        }
    }


def pipeline_outputs(pipeline: dict[str, Any]) -> dict[str, bool]:
    """Every output of a dvc.yaml's stages (``outs`` and ``metrics``) -> whether DVC caches it."""
    found: dict[str, bool] = {}
    for stage in pipeline["stages"].values():
        for out in [*stage.get("outs", []), *stage.get("metrics", [])]:
            path, opts = next(iter(out.items())) if isinstance(out, dict) else (out, {})
            found[path] = bool(opts.get("cache", True))
    return found


def conversations_stage(labels: Sequence[str]) -> dict[str, Any]:
    """The conversations stage over the project's conversation set (``labels``: ``${golden_conversations}`` and
    its qrels when beside it), with the repository's params and outputs (replays included)."""
    params = [
        "golden_conversations",
        "run",
        "k",
        "split",
        "floors",
        *SYSTEM_PARAMS,
        "calibration",
        "candidates_k",
        "embedder",
        "store",
        "paths.docs",
        "paths.index",
        "paths.eval",
    ]
    return _stage(
        "doceval stage conversations --quiet",
        ["data/docs", INDEX_MANIFEST, *labels, "eval/calibration/floors.json"],
        params,
        [CONVERSATIONS_SUMMARY, "eval/conversations/replays"],
        metrics=[{"eval/conversations/metrics.json": {"cache": False}}],
    )


def conversation_labels(target: Path, conversations: Path | None) -> list[str]:
    """The conversations stage's label deps: the set (through its key) and its qrels when beside it."""
    if conversations is None:
        return []
    qrels = qrels_path(conversations)
    rel = Path(os.path.relpath(qrels.resolve(), target.resolve())).as_posix()
    return ["${golden_conversations}", *([rel] if qrels.is_file() else [])]


def gitignore(pipeline: dict[str, Any]) -> str:
    """init's .gitignore: caches and runs, and every cached DVC output; uncached ones (metrics, the report)
    stay committable."""
    cached = [f"/{path}" for path, cache in pipeline_outputs(pipeline).items() if cache]
    return "".join(f"{p}\n" for p in dict.fromkeys([*IGNORED, *GIT_ONLY, *cached]))


def readme(overrides: Sequence[str], golden: str, template: bool) -> str:
    shown = "\n".join(f"- `{o}`" for o in overrides)
    write = (
        f"doceval golden template --out {golden}  # one row per version, real ids: edit them\n"
        if template
        else ""
    )
    return f"""# doceval project

An evaluation of a documentation assistant over these docs with [doceval](https://pypi.org/project/doceval/).

- `doceval.yaml`: this project's settings, as overrides of doceval's shipped configuration:
{shown}
- `params.yaml`: composed from doceval's configuration and `doceval.yaml` by `doceval params` (every stage refuses
  a stale one); `dvc.yaml`: the pipeline docs -> index -> retrieve -> calibrate -> evaluate -> report.
- `{TEMPLATE}`: the golden set's format (docs/design.md section 3 of doceval): one example row per version of
  the docs, citing a real document id `LIB@VERSION:path.section_slug`, and one out-of-scope row.
- `.gitignore`: caches, runs and every output DVC caches (data/, eval/summary.json, eval/calibration/);
  eval/metrics.json and eval/report.md stay committable.

First run, in this order (the golden set cites ids of the corpus `doceval stage docs` builds):

```bash
doceval stage docs                     # the corpus of these docs (data/docs)
doceval ids                            # its document ids, for relevant_ids
{write}doceval golden validate {golden} --corpus data/docs
git add -A && git commit -m "doceval project"
dvc repro                              # the headline: eval/metrics.json, eval/report.md
```

Then:

```bash
doceval eval retriever=bm25            # any configuration, on the same sources plus the overrides given
doceval params retriever=bm25 && dvc exp run   # a DVC experiment (`dvc exp run -S` cannot read doceval.yaml)
doceval params                         # back to doceval.yaml alone
doceval sweep -m floors.global=0.1,0.2 # a sweep over the cached candidates
doceval history                        # a metric across commits (needs a git commit per run)
mlflow ui --backend-store-uri sqlite:///$PWD/mlruns/mlflow.db
```

Conversations: `golden_conversations` in `doceval.yaml` names a conversation set (null: none; `doceval init .
--conversations FILE` adds one to this project). With one, `dvc repro` replays it (`eval/conversations/`) and
`doceval conversations agent=http agent.url=...` replays it for any configuration: memory benefit, standalone
ceiling, memory recovery and leak.
"""


def project_text(overrides: Sequence[str]) -> str:
    return (
        "# This project's configuration: doceval's shipped conf/, then these overrides, then a command's own\n"
        "# (`doceval eval retriever=bm25`). After an edit: `doceval params` (the stages read params.yaml).\n"
        + yaml.safe_dump({"overrides": list(overrides)}, sort_keys=False, width=1000)
    )


def derived_files(
    target: Path,
    sources: Sequence[DocsSource],
    overrides: Sequence[str],
    ids_by_pin: Mapping[str, Sequence[str]],
    conversations: Path | None = None,
) -> dict[Path, str]:
    """The files init writes beside doceval.yaml, by path, with their text: params.yaml composed from the
    doceval.yaml already in ``target`` (one source of truth), the pipeline, the template (real ids), ignores,
    README."""
    # lazy: start-up (Hydra, ~0.35 s), as every command that composes
    from doceval.config.compose import compose

    cfg = compose([], project=target / PROJECT_FILE)
    held = secret_locations(config_dict(cfg))
    if held:
        raise UsageError(f"doceval init: {', '.join(held)} would write a credential into params.yaml")
    pipeline = dvc_pipeline(
        [_relative(s.path, target) for s in sources], conversation_labels(target, conversations)
    )
    return {
        target / "params.yaml": dump_params(cfg),
        target / "dvc.yaml": DVC_HEADER + yaml.safe_dump(pipeline, sort_keys=False, width=1000),
        target / TEMPLATE: template_text(ids_by_pin),
        target / ".gitignore": gitignore(pipeline),
        target / ".dvcignore": "".join(f"{p.lstrip('/')}\n" for p in IGNORED),
        target / "README.md": readme(overrides, cfg.golden, template=not (target / cfg.golden).exists()),
    }


DVC_HEADER = "# doceval's pipeline over this project's docs and golden set.\n"


def _relative(path: Path, target: Path) -> str:
    return Path(os.path.relpath(path.resolve(), target.resolve())).as_posix()


def _check_conversations(conversations: Path | None) -> None:
    if conversations is not None and not conversations.is_file():
        raise UsageError(
            f"--conversations {conversations}: not a file; pass your conversation set (JSONL, docs/design.md "
            "section 3 of doceval), or leave it out (golden_conversations stays null)"
        )


def read_sources(sources: Sequence[DocsSource], golden: Path | None) -> dict[str, list[str]]:
    """Each pin the docs folders give -> its document ids (what the template cites), once every folder,
    library and version is checked: a folder that is none, a pin the rule refuses (a library or version with
    a path separator, '..', ':', '@'), two folders giving one pin."""
    if not sources:
        raise UsageError("doceval init: no docs: pass --docs PATH --library NAME [--version V]")
    found: dict[str, tuple[Path, list[str]]] = {}
    for src in sources:
        if not is_folder(src.path, "--docs"):
            raise UsageError(f"--docs {src.path}: not a folder; pass the folder of your markdown/rst docs")
        check_pin_part(src.library, f"--docs {src.path} --library")
        if src.version is not None:
            check_pin_part(src.version, f"--docs {src.path} --version")
        for directory, library, version in folder_pins(src.path, src.library, src.version):
            pin = folder_pin(library, version)
            if pin in found:
                raise UsageError(
                    f"doceval init: {pin} comes from both {found[pin][0]} and {directory}; give each "
                    "library@version one docs folder"
                )
            found[pin] = (directory, sorted(d.doc_id for d in extract_folder(directory, library, version)))
    fix = "pass your golden set (JSONL), or leave it out for a template"
    if golden is not None and not input_file(golden, "golden set", fix).is_file():
        raise UsageError(f"--golden {golden}: not a file; {fix}")
    return {pin: ids for pin, (_, ids) in found.items()}


def init_project(
    target: Path,
    sources: Sequence[DocsSource],
    golden: Path | None = None,
    git: bool = False,
    dvc: bool = False,
    conversations: Path | None = None,
) -> list[Path]:
    """Scaffold the project in ``target`` (created if needed); returns the files written. All or nothing:
    everything is checked first (exit 2 naming every file that already exists, a docs folder that holds or
    lies around the project's outputs, ...), files are created exclusively, and a failure at any step (a
    `dvc init` that fails, Ctrl-C) removes what this init made. A .git or .dvc already there is left alone.
    ``conversations``: the project's conversation set (``golden_conversations`` and the conversations stage)."""
    output_folder(target, f"doceval init {target}", "pass a folder (new or existing) as DIR")
    ids_by_pin = read_sources(sources, golden)
    _check_conversations(conversations)
    golden_rel = _relative(golden, target) if golden else GOLDEN
    conversations_rel = _relative(conversations, target) if conversations else None
    overrides = project_overrides(target, sources, golden_rel, conversations_rel)
    files = [target / name for name in _NAMES]
    # every output init's pipeline can have (the conversations stage's too)
    outs = [target / out for out in pipeline_outputs(dvc_pipeline([], ["${golden_conversations}"]))]
    read: list[Named] = [("the docs folder", s.path) for s in sources]
    read += [("--golden", golden), ("--conversations", conversations)]
    refuse_overlap(
        [("init's output", p) for p in files + outs],
        read,
        "keep the docs and the golden set apart from the project's files and outputs "
        "(e.g. DIR/docs, or init the project in another folder)",
    )
    existing = [p for p in files if os.path.lexists(p)]
    if existing:
        raise UsageError(
            f"doceval init: {', '.join(str(p) for p in existing)} already exist(s); init never overwrites: move "
            "them aside or pick another DIR"
        )
    with Scaffold(target) as made:
        made.folder()
        made.file(target / PROJECT_FILE, project_text(overrides))
        derived = derived_files(target, sources, overrides, ids_by_pin, conversations)
        for path, text in derived.items():
            made.file(path, text)
        _init_tools(made, git, dvc)
    return [target / PROJECT_FILE, *derived]


def add_conversations(target: Path, conversations: Path) -> list[Path]:
    """Give an existing project (``doceval init`` wrote it) its conversation set: ``golden_conversations`` in
    doceval.yaml, the conversations stage in dvc.yaml and the report's dependency on it. Exit 2 when the
    project has one already; returns the files rewritten (params.yaml is the user's `doceval params`)."""
    _check_conversations(conversations)
    project, pipeline_file = target / PROJECT_FILE.name, target / "dvc.yaml"
    missing = [str(p) for p in (project, pipeline_file) if not p.is_file()]
    if missing:
        raise UsageError(
            f"doceval init {target} --conversations: {', '.join(missing)} not found; it adds a conversation set "
            "to a project `doceval init DIR --docs ...` made (or pass --docs to make one with it)"
        )
    overrides = read_project_overrides(project)
    pipeline = yaml.safe_load(pipeline_file.read_text(encoding="utf-8")) or {}
    stages = pipeline.get("stages") or {}
    kept = [o for o in overrides if override_key(o) != CONVERSATIONS_KEY]
    if "conversations" in stages or any(
        o != conversations_override(None) for o in overrides if o not in kept
    ):
        raise UsageError(
            f"doceval init {target} --conversations: the project has a conversation set already "
            f"({CONVERSATIONS_KEY} in {project}, or a conversations stage in {pipeline_file}); edit "
            f"{CONVERSATIONS_KEY} in {project} to point at another one"
        )
    if "report" not in stages:
        raise UsageError(f"{pipeline_file}: no report stage; it is not the pipeline `doceval init` writes")
    labels = conversation_labels(target, conversations)
    report = stages.pop("report")
    report["deps"] = [*report.get("deps", []), CONVERSATIONS_SUMMARY]
    pipeline["stages"] = {**stages, "conversations": conversations_stage(labels), "report": report}
    write_text_atomic(
        project, project_text([*kept, conversations_override(_relative(conversations, target))])
    )
    write_text_atomic(pipeline_file, DVC_HEADER + yaml.safe_dump(pipeline, sort_keys=False, width=1000))
    return [project, pipeline_file]


_NAMES = [PROJECT_FILE.name, "params.yaml", "dvc.yaml", TEMPLATE, ".gitignore", ".dvcignore", "README.md"]


def _init_tools(made: Scaffold, git: bool, dvc: bool) -> None:
    """`git init` and `dvc init` (analytics off) where asked and not there yet; a repository already there is
    used as it is (one line says so)."""
    target = made.target
    if git:
        if os.path.lexists(target / ".git"):
            print(f"note: {target / '.git'} exists: git init skipped", file=sys.stderr)
        else:
            made.tool(["git", "init", "-q"], ".git")
    if dvc:
        if os.path.lexists(target / ".dvc"):
            print(f"note: {target / '.dvc'} exists: dvc init skipped", file=sys.stderr)
            return
        made.tool(dvc_init_argv(target, git), ".dvc")
        run_tool(["dvc", "config", "core.analytics", "false"], target)
