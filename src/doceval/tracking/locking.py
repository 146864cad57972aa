"""A cross-process file lock around sqlite store writes: MLflow's migrations crash when several processes create
a store at once.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.errors import UsageError
from doceval.tracking.uris import _sqlite_db

if TYPE_CHECKING:
    pass

_LOCK_TIMEOUT_S = 600.0


class _StoreLock:
    """An inter-process lock (flock on a file next to the db), re-entrant within a process and thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rlock = threading.RLock()
        self._depth = 0
        self._fh: io.TextIOWrapper | None = None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._rlock:
            if self._depth == 0:
                self._fh = self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fh is not None:
                    self._release(self._fh)
                    self._fh = None

    def _acquire(self) -> io.TextIOWrapper:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held open across the context
        try:
            # lazy: POSIX only (Windows has no fcntl: the in-process lock alone)
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: in-process lock only
            return fh
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fh
            except BlockingIOError:
                if time.monotonic() > deadline:
                    fh.close()
                    raise UsageError(
                        f"{self.path}: another process has held the MLflow store lock for over "
                        f"{_LOCK_TIMEOUT_S:g} s; stop it or remove a stale lock holder"
                    ) from None
                time.sleep(0.05)

    @staticmethod
    def _release(fh: io.TextIOWrapper) -> None:
        try:
            # lazy: POSIX only (Windows has no fcntl)
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except ImportError:  # pragma: no cover
            pass
        finally:
            fh.close()


_LOCKS: dict[str, _StoreLock] = {}
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
        lock = _LOCKS.setdefault(str(path), _StoreLock(path))
    with lock.hold():
        yield
