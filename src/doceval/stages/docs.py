"""DVC stage `docs`: the documentation corpus (data/docs) from the pinned wheels, or from a docs folder.

`doceval docs --folder DIR` (the command line, not params.yaml) builds a separate corpus in its own
directory (`--out`, default `data/folders/LIB@VERSION`), never in `paths.docs`, the DVC output, unless
`--out` names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.errors import UsageError
from doceval.inputs.docs import (
    build_corpus,
    build_folder_corpus,
    build_folders_corpus,
    normalise_name,
    parse_specs,
)

if TYPE_CHECKING:
    from doceval.config.schema import Config

FOLDERS_DIR = Path("data/folders")


def folder_out(library: str, version: str, out: str | None = None) -> Path:
    """Where `docs --folder` writes: ``out``, or ``data/folders/LIB@VERSION`` (the normalised pin)."""
    return Path(out) if out else FOLDERS_DIR / f"{normalise_name(library)}@{version}"


def run(
    cfg: Config,
    progress: bool = True,
    *,
    folder: str | None = None,
    library: str | None = None,
    version: str | None = None,
    only: Sequence[str] | None = None,
    out: str | None = None,
) -> dict[str, Any]:
    docs = cfg.docs
    docs_dir = Path(cfg.paths.docs)
    if out and not folder:
        raise UsageError("docs --out: only with --folder (the wheel corpus is the DVC output paths.docs)")
    if folder:
        # A folder named on the command line gets its own corpus directory, outside DVC's outputs.
        if not library or not version:
            raise UsageError("docs --folder needs --library NAME and --version VERSION for the document ids")
        target = folder_out(library, version, out)
        manifest = build_folder_corpus(Path(folder), library, version, target, docs.chunk_chars)
    elif docs.folders:
        # docs.folders in params.yaml: the DVC stage builds paths.docs from them, all versions together.
        target = docs_dir
        manifest = build_folders_corpus(
            [(Path(f.path), f.library, f.version) for f in docs.folders], target, docs.chunk_chars
        )
    else:
        specs = parse_specs(docs.libraries)
        if only:
            known = {s.pin: s for s in specs}
            unknown = [p for p in only if p not in known]
            if unknown:
                raise UsageError(
                    f"docs --only: {', '.join(unknown)} not configured; known: {', '.join(sorted(known))}"
                )
            specs = [known[p] for p in only]
        cache = Path(cfg.paths.cache) / "wheels"
        target = docs_dir
        manifest = build_corpus(specs, target, cache, docs.chunk_chars, progress=progress)
    print(
        json.dumps(
            {
                "documents": manifest["documents"],
                "chunks": manifest["chunks"],
                "pins": {p: v["chunks"] for p, v in manifest["pins"].items()},
            }
        )
    )
    if folder:
        _print_next_steps(manifest, target, docs_dir)
    return manifest


def _print_next_steps(manifest: Mapping[str, Any], target: Path, docs_dir: Path) -> None:
    pins = ", ".join(f"{p} ({v['documents']} documents)" for p, v in manifest["pins"].items())
    print(f"wrote {pins} to {target}")
    if target.resolve() == docs_dir.resolve():
        print(
            f"note: {target} is paths.docs, the docs stage's DVC output; `dvc repro` rebuilds it from params"
        )
        return
    print(f"list its ids:        doceval ids --docs {target}")
    print(
        "evaluate against it: doceval eval --golden GOLDEN --split all --no-track "
        f"retriever=bm25 floors=zero paths.docs={target}"
    )
