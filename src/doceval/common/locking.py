"""A cross-process lock on a file (``flock``), re-entrant within a process and thread-safe: around sqlite store
writes (MLflow's migrations crash when several processes create a store at once) and around a run's journals
(two identical runs at once would both ask the system and append to one journal).

The holder writes its pid and command (program and subcommand: never the arguments, which may hold a
secret) into the lock file, so a process that finds the lock taken can say who
holds it. POSIX only; elsewhere the in-process lock alone.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from doceval.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the in-process lock alone
    fcntl = None  # type: ignore[assignment]

DEFAULT_TIMEOUT_S = 600.0


class LockHeld(UsageError):
    """Another process holds the lock (exit 2): the message names it and says what to do."""


class FileLock:
    """An exclusive ``flock`` on ``path`` (created when missing, never deleted: removing a lock file another
    process waits on would let two holders in). ``what`` and ``fix`` word the message when it is held."""

    def __init__(self, path: Path, what: str, fix: str) -> None:
        self.path = path
        self.what = what
        self.fix = fix
        self._rlock = threading.RLock()
        self._depth = 0
        self._fh: io.TextIOWrapper | None = None

    @contextlib.contextmanager
    def hold(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[None]:
        """Hold the lock for the block, waiting up to ``timeout_s`` for another process to let go (0: not at
        all); still held then is :class:`LockHeld`."""
        with self._rlock:
            if self._depth == 0:
                self._fh = self._acquire(timeout_s)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fh is not None:
                    self._fh.close()  # closing the descriptor releases its flock
                    self._fh = None

    def _acquire(self, timeout_s: float) -> io.TextIOWrapper:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open across the context
        if fcntl is None:  # pragma: no cover - not POSIX
            return fh
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self.holder()
                    fh.close()
                    waited = f" for over {timeout_s:g} s" if timeout_s > 0 else ""
                    raise LockHeld(
                        f"{self.what}: held by another process{waited} ({holder}); {self.fix}"
                    ) from None
                time.sleep(0.05)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} ({_command()})\n")
        fh.flush()
        return fh

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it (pid and command), or that it is not known."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            text = ""
        return text.splitlines()[0][:300] if text else "pid not recorded"


def _command() -> str:
    """``doceval eval``: the program and its first argument, never the rest (an override may hold a secret)."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    first = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
    return f"{program} {first}".strip()
