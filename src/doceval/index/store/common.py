"""What every store shares: partition names, point ids (stable per chunk) and the rerun hint."""

from __future__ import annotations

import re
import uuid

from doceval.common.hints import rerun

_NAMESPACE = uuid.UUID("6f1c7a52-3f0e-4c7e-9b7e-0d0cdbc0e001")


def rebuild_hint() -> str:
    """How to rebuild the index here (read when a message is built: the working directory decides)."""
    return f"rerun {rerun('index')}"


Hit = tuple[str, str, float]  # (chunk_id, doc_id, score)


def collection_name(pin: str) -> str:
    """``pydantic@2.8.2`` -> ``doceval__pydantic__2_8_2`` (Qdrant names allow [A-Za-z0-9_-])."""
    return "doceval__" + re.sub(r"[^A-Za-z0-9_-]", "_", pin.replace("@", "__"))


def point_id(chunk_id: str) -> str:
    """Derived from the chunk id: upserting a chunk again replaces its point, never duplicates it."""
    return str(uuid.uuid5(_NAMESPACE, chunk_id))
