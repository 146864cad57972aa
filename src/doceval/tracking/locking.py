"""A cross-process file lock around sqlite store writes: MLflow's migrations crash when several processes create
a store at once (the lock itself is :class:`doceval.common.locking.FileLock`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from doceval.common.locking import FileLock
from doceval.tracking.uris import _sqlite_db

_LOCK_TIMEOUT_S = 600.0
_STORE_FIX = "stop that process, or wait for it to finish writing its run"


_LOCKS: dict[str, FileLock] = {}
_LOCKS_GUARD = threading.Lock()
_ENSURED: set[tuple[int, str]] = set()  # (pid, uri): stores this process has already created/checked


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    db = _sqlite_db(uri)
    if db is None:
        yield
        return
    path = db.with_name(db.name + ".lock")
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(str(path), FileLock(path, f"{path} (the MLflow store lock)", _STORE_FIX))
    with lock.hold(_LOCK_TIMEOUT_S):
        yield
