"""DVC stage `docs`: the documentation corpus (data/docs) from the pinned wheels, or from docs folders.

`doceval docs --folder DIR [--library L] [--version V]` (repeatable, built together into one corpus) writes its
own directory (`--out`, default under `data/folders/`, see :func:`folder_out`), never `paths.docs`, the DVC
output, unless `--out` names it. A build never writes over a different corpus without `--replace`
(doceval.inputs.docs.refuse_other_corpus).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.hints import rerun
from doceval.common.paths import Named, check_pin_part, refuse_overlap
from doceval.errors import UsageError
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.docs import build_corpus, parse_specs
from doceval.inputs.folders import build_folders_corpus, folder_pin, folder_pins

if TYPE_CHECKING:
    from doceval.config.schema import Config

FOLDERS_DIR = Path("data/folders")
# One --folder group of the command line: (DIR, --library or None, --version or None).
FolderArg = tuple[str, str | None, str | None]


def folder_out(pins: Sequence[str], out: str | None = None) -> Path:
    """Where `docs --folder` writes: ``out``, or under ``data/folders/`` the corpus's name: ``LIB@VERSION`` for
    one pin, ``LIB`` for several versions of one library, ``LIB1+LIB2`` (sorted) for several libraries. The
    pins were checked where they entered (:func:`doceval.common.paths.check_pin_part`), so the name is one
    folder inside ``data/folders/``."""
    if out:
        return Path(out)
    libraries = sorted({pin.split("@", 1)[0] for pin in pins})
    name = pins[0] if len(pins) == 1 else "+".join(libraries)
    return FOLDERS_DIR / name


def command_line_folders(folders: Sequence[FolderArg]) -> list[tuple[Path, str, str | None]]:
    """The --folder groups with their libraries: a group without --library takes the one before it."""
    resolved: list[tuple[Path, str, str | None]] = []
    library: str | None = None
    for path, own_library, version in folders:
        library = own_library or library
        if library is None:
            raise UsageError(
                f"docs --folder {path}: needs --library NAME after it (later --folder groups without "
                "--library take the library of the one before)"
            )
        check_pin_part(library, f"docs --folder {path} --library")
        if version is not None:
            check_pin_part(version, f"docs --folder {path} --version")
        resolved.append((Path(path), library, version))
    return resolved


def run(
    cfg: Config,
    progress: bool = True,
    *,
    folders: Sequence[FolderArg] = (),
    only: Sequence[str] | None = None,
    out: str | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    docs = cfg.docs
    docs_dir = Path(cfg.paths.docs)
    if out and not folders:
        raise UsageError("docs --out: only with --folder (the wheel corpus is the DVC output paths.docs)")
    if folders:
        # Folders named on the command line get their own corpus directory, outside DVC's outputs.
        groups = command_line_folders(folders)
        pins = [folder_pin(lib, ver) for group in groups for _, lib, ver in folder_pins(*group)]
        target = folder_out(pins, out)
        what = "--out" if out else "the corpus folder"
        manifest = build_folders_corpus(groups, target, docs.chunk_chars, replace, what)
    else:
        target = docs_dir
        # The DVC output: never one of the configured inputs (docs folders, golden set, ...) nor the wheel cache.
        refuse_stage_overlap(cfg, [("paths.docs", target)], without=("docs",))
        cache: Named = ("the wheel cache (paths.cache)", Path(cfg.paths.cache) / "wheels")
        refuse_overlap([("paths.docs", target)], [cache], "set paths.docs apart from it")
        if docs.folders:
            # docs.folders in params.yaml: the DVC stage builds paths.docs from them, all versions together.
            configured = [(Path(f.path), f.library, f.version) for f in docs.folders]
            manifest = build_folders_corpus(configured, target, docs.chunk_chars, replace, "paths.docs")
        else:
            manifest = _build_wheels(cfg, target, only, progress, replace)
    print(
        json.dumps(
            {
                "documents": manifest["documents"],
                "chunks": manifest["chunks"],
                "pins": {p: v["chunks"] for p, v in manifest["pins"].items()},
            }
        )
    )
    if folders:
        _print_next_steps(manifest, target, docs_dir)
    return manifest


def _build_wheels(
    cfg: Config, target: Path, only: Sequence[str] | None, progress: bool, replace: bool
) -> dict[str, Any]:
    specs = parse_specs(cfg.docs.libraries)
    if only:
        known = {s.pin: s for s in specs}
        unknown = [p for p in only if p not in known]
        if unknown:
            raise UsageError(
                f"docs --only: {', '.join(unknown)} not configured; known: {', '.join(sorted(known))}"
            )
        specs = [known[p] for p in only]
    cache = Path(cfg.paths.cache) / "wheels"
    return build_corpus(specs, target, cache, cfg.docs.chunk_chars, progress=progress, replace=replace)


def _print_next_steps(manifest: Mapping[str, Any], target: Path, docs_dir: Path) -> None:
    pins = ", ".join(f"{p} ({v['documents']} documents)" for p, v in manifest["pins"].items())
    print(f"wrote {pins} to {target}")
    if target.resolve() == docs_dir.resolve():
        print(
            f"note: {target} is paths.docs, the docs stage's output; {rerun('docs')} rebuilds it from params"
        )
        return
    print(f"list its ids:        doceval ids --docs {target}")
    print(
        "evaluate against it: doceval eval --golden GOLDEN --split all --no-track "
        f"retriever=bm25 floors=zero paths.docs={target}"
    )
