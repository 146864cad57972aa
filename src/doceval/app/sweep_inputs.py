"""What a sweep point reads, sent to the node that runs it: no node needs the driver's project folder.

A point evaluates from the project's files: the golden set (and its qrels), the built corpus, the candidate
cache, the index manifest the candidates were checked against, and the floors artifact. The driver reads each
such file once into a snapshot (relative path -> bytes) that goes through Ray's object store; a task writes the
snapshot into a scratch folder of its node (once per worker process) and runs the point there, with the
point's configuration as the driver composed it. Files outside the project folder are not shipped: like any
path a user's function is handed (``retriever.kwargs.*``), they must be on every node at the same path, which
a probe checks before the first task (:func:`external_paths`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from doceval.config.schema import Config
from doceval.inputs.qrels import qrels_path

MANIFEST, CORPUS = "manifest.json", "corpus.jsonl"


def point_inputs(cfg: Config) -> list[Path]:
    """The files one point reads (relative to the project folder when the config says so), those that exist."""
    golden = Path(cfg.golden)
    docs, runs, index = Path(cfg.paths.docs), Path(cfg.paths.runs), Path(cfg.paths.index)
    candidates = runs / "candidates"
    found = [golden, qrels_path(golden), docs / MANIFEST, docs / CORPUS, index / MANIFEST]
    if cfg.floors.path:
        found.append(Path(cfg.floors.path))
    if candidates.is_dir():
        found += sorted(p for p in candidates.iterdir() if p.is_file())
    return [p for p in found if p.is_file()]


def snapshot(configs: Iterable[Config], root: Path) -> tuple[dict[str, bytes], list[str]]:
    """(relative path -> bytes of every input under ``root`` of any point, the absolute paths outside it)."""
    files: dict[str, bytes] = {}
    outside: list[str] = []
    for cfg in configs:
        for path in point_inputs(cfg):
            full = (root / path).resolve()
            if not full.is_relative_to(root.resolve()):
                outside.append(str(full))
                continue
            rel = str(full.relative_to(root.resolve()))
            if rel not in files:
                files[rel] = full.read_bytes()
    return files, sorted(set(outside))


def external_paths(configs: Iterable[Mapping[str, Any]], root: Path, outside: Iterable[str]) -> list[str]:
    """Paths every node must hold itself: inputs outside the project folder, and existing paths handed to the
    user's code (a value under ``*.kwargs``)."""
    found = set(outside)
    for cfg in configs:
        for key, value in _strings(cfg):
            if ".kwargs." in f".{key}." and value and (root / value).exists():
                found.add(str((root / value).resolve()))
    return sorted(found)


def _strings(data: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(data, Mapping):
        for k, v in data.items():
            yield from _strings(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(data, list | tuple):
        for v in data:
            yield from _strings(v, prefix)
    elif isinstance(data, str):
        yield prefix, data


def digest(files: Mapping[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()[:16]


_MATERIALIZED: dict[str, Path] = {}  # snapshot digest -> its scratch folder in this worker process


def materialize(files: Mapping[str, bytes], key: str) -> Path:
    """The snapshot written into a scratch folder of this process (once per snapshot), removed at its exit."""
    found = _MATERIALIZED.get(key)
    if found is not None and found.is_dir():
        return found
    folder = Path(tempfile.mkdtemp(prefix=f"doceval-sweep-{key}-"))
    atexit.register(shutil.rmtree, folder, True)
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _MATERIALIZED[key] = folder
    return folder


@contextlib.contextmanager
def in_folder(folder: Path) -> Iterator[None]:
    """``folder`` as working directory for the block (config paths are relative to it); a worker process runs
    many tasks, so the one it had is restored after."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def collect(out_dir: Path) -> dict[str, bytes]:
    """Every file a point wrote under ``out_dir`` (its summary, its journals), for the driver to write."""
    return {str(p.relative_to(out_dir)): p.read_bytes() for p in sorted(out_dir.rglob("*")) if p.is_file()}
