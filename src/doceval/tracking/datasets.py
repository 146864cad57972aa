"""The golden set as an MLflow evaluation dataset (records with inputs and expectations), so the UI's Datasets
page shows what a run was scored on. The DVC-pinned JSONL file stays the source of truth: the dataset is
named by the file's stem and md5 (``golden-v2-4021aefd``), created once per content, and attached to every
experiment that scores against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.io import scan_jsonl
from doceval.tracking.secrets import scrub
from doceval.tracking.traces import EXPECTATIONS

if TYPE_CHECKING:
    from mlflow.store.tracking.abstract_store import AbstractStore

LABELS = EXPECTATIONS  # the golden labels a dataset record holds: those a trace shows as expectations


def dataset_name(golden_path: Path, md5: str) -> str:
    return f"golden-{Path(golden_path).stem}-{md5[:8]}"


def golden_records(golden_path: Path, secrets: list[str]) -> list[dict[str, Any]]:
    """One record per golden entry: the probe the system sees as inputs, the labels as expectations, the id,
    split and kind as tags. Lines that do not parse are skipped: the stage that read the file validated it."""
    records = []
    for _, rec, problem in scan_jsonl(Path(golden_path)):
        if problem or not isinstance(rec, Mapping):
            continue
        expectations = {k: rec[k] for k in LABELS if rec.get(k) not in (None, [])}
        records.append(
            {
                "inputs": {k: rec.get(k) for k in ("question", "library", "version")},
                "expectations": expectations,
                "tags": {
                    "entry_id": str(rec.get("id")),
                    "split": str(rec.get("split")),
                    "kind": str(rec.get("kind")),
                },
            }
        )
    clean: list[dict[str, Any]] = scrub(records, secrets)
    return clean


def register_golden(
    store: AbstractStore, experiment_id: str, golden_path: Path, md5: str | None, secrets: list[str]
) -> str | None:
    """The golden set's evaluation dataset id, created (with its records) on first use and attached to
    ``experiment_id``; None when the file is gone or the store keeps no evaluation datasets."""
    # lazy: start-up (mlflow, seconds; only tracking loads it)
    from mlflow.exceptions import MlflowException

    path = Path(golden_path)
    if not path.is_file() or not md5:
        return None
    name = dataset_name(path, md5)
    try:
        found = store.search_datasets(filter_string=f"name = '{name}'", max_results=1)
    except (MlflowException, NotImplementedError):
        return None  # a store without evaluation datasets (e.g. a file store)
    if found:
        dataset = found[0]
        if experiment_id not in store.get_dataset_experiment_ids(dataset.dataset_id):
            store.add_dataset_to_experiments(dataset.dataset_id, [experiment_id])
        return str(dataset.dataset_id)
    try:
        dataset = store.create_dataset(
            name,
            tags={"doceval.golden_md5": md5, "doceval.golden_path": str(path)},
            experiment_ids=[experiment_id],
        )
    except MlflowException:  # a parallel run against a server created it first
        found = store.search_datasets(filter_string=f"name = '{name}'", max_results=1)
        if not found:
            raise
        store.add_dataset_to_experiments(found[0].dataset_id, [experiment_id])
        return str(found[0].dataset_id)
    store.upsert_dataset_records(dataset.dataset_id, golden_records(path, secrets))
    return str(dataset.dataset_id)
