"""DVC stage `docs`: the documentation corpus (data/docs) from the pinned wheels, or from a docs folder."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from doceval.errors import UsageError
from doceval.inputs.docs import build_corpus, build_folder_corpus, parse_specs


def run(
    params: Mapping[str, Any],
    progress: bool = True,
    *,
    folder: str | None = None,
    library: str | None = None,
    version: str | None = None,
    only: Sequence[str] | None = None,
) -> dict[str, Any]:
    docs_cfg = params["docs"]
    out = Path(params["paths"]["docs"])
    folder = folder or docs_cfg.get("folder")
    if folder:
        library = library or docs_cfg.get("folder_library")
        version = version or docs_cfg.get("folder_version")
        if not library or not version:
            raise UsageError("docs --folder needs --library NAME and --version VERSION for the document ids")
        manifest = build_folder_corpus(Path(folder), library, version, out, int(docs_cfg["chunk_chars"]))
    else:
        specs = parse_specs(docs_cfg["libraries"])
        if only:
            known = {s.pin: s for s in specs}
            unknown = [p for p in only if p not in known]
            if unknown:
                raise UsageError(
                    f"docs --only: {', '.join(unknown)} not configured; known: {', '.join(sorted(known))}"
                )
            specs = [known[p] for p in only]
        cache = Path(params["paths"]["cache"]) / "wheels"
        manifest = build_corpus(specs, out, cache, int(docs_cfg["chunk_chars"]), progress=progress)
    print(
        json.dumps(
            {
                "documents": manifest["documents"],
                "chunks": manifest["chunks"],
                "pins": {p: v["chunks"] for p, v in manifest["pins"].items()},
            }
        )
    )
    return manifest
