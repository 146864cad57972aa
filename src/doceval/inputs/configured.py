"""The files and folders a configured run reads, by what the user calls them: what every writer's output must
stay apart from (:func:`doceval.common.paths.refuse_overlap`, docs/design.md section 8.6)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.paths import Named, refuse_overlap
from doceval.inputs.qrels import qrels_path

if TYPE_CHECKING:
    from doceval.config.schema import Config

# The stage outputs a caller may leave out of the list (a stage writes what it would otherwise read).
OWN = ("docs", "index", "candidates", "floors")


def configured_inputs(
    cfg: Config, golden: Path | str | None = None, without: Collection[str] = ()
) -> list[Named]:
    """(name, path) of every input ``cfg`` names: the golden set (``golden`` when given) and its qrels, the
    conversation set and its qrels, the docs folders, and, unless ``without`` names them, the corpus
    (``docs``), the index (``index``), the candidate cache (``candidates``) and the floors file (``floors``)."""
    golden_path = Path(golden) if golden is not None else Path(cfg.golden)
    found: list[Named] = [("the golden set", golden_path), ("its qrels", qrels_path(golden_path))]
    conversations = getattr(cfg, "golden_conversations", None)
    if conversations:
        found += [("the conversation set", conversations), ("its qrels", qrels_path(Path(conversations)))]
    found += [("the docs folder (docs.folders)", folder.path) for folder in cfg.docs.folders]
    own: dict[str, Named] = {
        "docs": ("the corpus (paths.docs)", cfg.paths.docs),
        "index": ("the index (paths.index)", cfg.paths.index),
        "candidates": ("the candidate cache", Path(cfg.paths.runs) / "candidates"),
        "floors": ("the floors file (floors.path)", cfg.floors.path),
    }
    return found + [named for key, named in own.items() if key not in without]


def refuse_stage_overlap(cfg: Config, outputs: list[Named], without: Collection[str] = ()) -> None:
    """A stage's outputs (paths from the config) against what the config says it reads: exit 2 before any work
    when one is, contains or lies inside another (e.g. ``golden`` inside ``paths.runs/candidates``, which the
    retrieve stage replaces whole)."""
    refuse_overlap(
        outputs,
        configured_inputs(cfg, without=without),
        "set the paths apart in doceval.yaml or conf/, then run `doceval params`",
    )
