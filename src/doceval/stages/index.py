"""DVC stage `index`: embed the corpus into the Qdrant index (data/index) with its manifest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.index.build import build_index
from doceval.index.embed import make_embedder
from doceval.inputs.corpus import load_corpus


def run(params: Mapping[str, Any], progress: bool = True) -> dict[str, Any]:
    paths = params["paths"]
    corpus = load_corpus(Path(paths["docs"]))
    embedder = make_embedder(params["embedder"], Path(paths["cache"]) / "embeddings.sqlite")
    manifest = build_index(corpus, embedder, params["store"], Path(paths["index"]), progress=progress)
    print(json.dumps({k: manifest[k] for k in ("model", "chunks", "content_hash", "embedding_cache")}))
    return manifest
