"""The headline's run summaries as issue 44's typed summary (M1) found them: each ``summary.json`` with what may
differ between equal runs removed (``config.provenance``, ``config.run_key``, ``config.usage`` and the replays'
run keys), kept gzipped under tests/fixtures/summary_reference/ with the commit it came from.

A change that moves the headline on purpose moves this reference with it (and adds a row to docs/history.md):
``python tests/summary_reference.py --write`` after ``dvc repro``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "fixtures" / "summary_reference"
# The pipeline's summaries by the fixture that holds each, normalised.
SUMMARIES = {
    "eval/summary.json": "summary.json.gz",
    "eval/conversations/summary.json": "conversations.json.gz",
}
METRICS = ("eval/metrics.json", "eval/conversations/metrics.json")
VOLATILE_CONFIG = ("provenance", "run_key", "usage")


def normalised(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without what differs between equal runs: provenance (versions, git state), run keys (they hash
    the code) and LLM usage (cached calls count as none)."""
    out = json.loads(json.dumps(summary))
    for key in VOLATILE_CONFIG:
        out.get("config", {}).pop(key, None)
    replays = out.get("metrics", {}).get("conversations", {}).get("replays", {})
    for replay in replays.values():
        replay.pop("run_key", None)
    return out


def canonical(summary: dict[str, Any]) -> bytes:
    return json.dumps(normalised(summary), sort_keys=True, indent=1, ensure_ascii=False).encode("utf-8")


def reference(fixture: str) -> bytes:
    return gzip.decompress((FOLDER / fixture).read_bytes())


def reference_commit() -> str:
    return (FOLDER / "COMMIT").read_text(encoding="utf-8").strip()


def write(root: Path = ROOT) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for source, fixture in SUMMARIES.items():
        data = canonical(json.loads((root / source).read_text(encoding="utf-8")))
        (FOLDER / fixture).write_bytes(gzip.compress(data, mtime=0))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
    (FOLDER / "COMMIT").write_text(head.stdout.strip() + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/summary_reference.py --write  (after dvc repro, on the commit to pin)")
    write()
