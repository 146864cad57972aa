"""Content-addressed sqlite cache of successful completions: every generation parameter is in the key, errors are
never cached.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import json_text


def cache_key(params: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of every generation parameter."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    # surrogatepass: a lone surrogate in a prompt (an assistant's reply) keys like any character
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """Content-addressed sqlite cache of successful completions (``key -> JSON``), shared across threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")  # readers in other processes don't block writers
            # No fsync per commit: a cache that loses its last entries on power loss costs only a re-ask,
            # while an fsync under the lock would serialise every concurrent call for milliseconds.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        value: dict[str, Any] = json.loads(row[0])
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        try:
            text = json_text(value)  # strict, lone surrogates escaped: sqlite takes it
        except ValueError:
            return  # a NaN in a reply: not cached (asked again next time), never a failed call
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, value, created) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"


def observed_usage(path: str | Path | None, model: str, template_id: str) -> tuple[float, float, int] | None:
    """The mean prompt and completion tokens of the replies a cache holds for ``model`` and ``template_id`` (a
    template's name and content hash), and how many; None without a cache file or such a reply. Read only: a
    dry run creates nothing."""
    if not path or not Path(path).is_file():
        return None
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            rows = db.execute("SELECT value FROM responses").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    seen: list[tuple[int, int]] = []
    for (text,) in rows:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if value.get("model") == model and value.get("template") == template_id:
            prompt, completion = value.get("prompt_tokens"), value.get("completion_tokens")
            if all(isinstance(t, int) and not isinstance(t, bool) for t in (prompt, completion)):
                seen.append((prompt, completion))
    if not seen:
        return None
    return sum(p for p, _ in seen) / len(seen), sum(c for _, c in seen) / len(seen), len(seen)


_OPEN: dict[Path, tuple[ResponseCache, int]] = {}
_OPEN_LOCK = threading.Lock()


def open_cache(path: str | Path) -> ResponseCache:
    """The process's one cache for ``path``: clients sharing a file share one connection, since two sqlite
    connections writing one file at once wait on each other's locks (the busy handler sleeps for ms at a
    time). Release it with :func:`release_cache`."""
    key = Path(path).resolve()
    with _OPEN_LOCK:
        cache, users = _OPEN.get(key, (None, 0))
        if cache is None:
            cache = ResponseCache(key)
        _OPEN[key] = (cache, users + 1)
        return cache


def release_cache(cache: ResponseCache) -> None:
    """One user fewer; the connection closes with the last one."""
    key = cache.path.resolve()
    with _OPEN_LOCK:
        shared, users = _OPEN.get(key, (None, 0))
        if shared is not cache:
            cache.close()  # not from open_cache
            return
        if users <= 1:
            del _OPEN[key]
            cache.close()
        else:
            _OPEN[key] = (cache, users - 1)
