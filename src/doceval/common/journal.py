"""Append-only JSONL journals that make long LLM runs resumable (the agent's answers, the judge's verdicts).

A record counts as done only once its line is flushed and fsync'd, so a run killed at any point (SIGKILL
included) loses at most the records in flight. Loading cuts off a torn last line, so appends start on a
clean line and that record is simply redone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from doceval.common.bounded_json import loads
from doceval.common.io import jsonl_line
from doceval.common.locking import FileLock
from doceval.common.redact import scrub_data
from doceval.errors import UsageError

log = logging.getLogger(__name__)

T = TypeVar("T")
D = TypeVar("D")


def load_records(path: Path, parse: Callable[[dict[str, Any]], T], what: str) -> list[T]:
    """The journal's records in file order (empty when the file does not exist).

    ``parse`` turns one JSON object into a record and raises KeyError/TypeError/ValueError on another shape;
    such a line (or invalid JSON) anywhere but a torn last line is a UsageError naming ``file:line``.
    """
    if not path.exists() and not path.is_symlink():
        return []
    try:
        raw = path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            keep = raw.rfind(b"\n") + 1
            log.warning("%s: dropping a partly written last line (that entry will be redone)", path)
            with path.open("r+b") as fh:
                fh.truncate(keep)
            raw = raw[:keep]
    except OSError as exc:
        raise journal_error(path, exc) from None
    records: list[T] = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = loads(line)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            records.append(parse(data))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"{path}:{lineno}: not {what} ({exc}); delete the journal to start over"
            ) from None
    return records


def journal_error(path: Path, exc: OSError) -> UsageError:
    """An OS error on a journal (a directory or a device where the file should be, no permission, a full
    disk) as the usage error that names the path and the fix."""
    what = (
        "is a directory, not a journal file" if path.is_dir() else f"cannot be used ({exc.strerror or exc})"
    )
    return UsageError(
        f"{path}: {what}; move it away (the run writes its journal there), or set paths.runs to a folder "
        "doceval can write"
    )


class Journal:
    """Appends one JSON object per line, durable before :meth:`append` returns; thread-safe.

    ``path=None`` journals nothing (runs that are cheaper to redo than to fsync).
    """

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = path.open("a", encoding="utf-8")
            except OSError as exc:
                raise journal_error(path, exc) from None

    @property
    def active(self) -> bool:
        """False for ``path=None``: callers skip building records nobody will write."""
        return self._fh is not None

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        # Strict JSON, lone surrogates escaped (a reply cannot break the journal), and no credential a
        # system echoed (resumed entries neither).
        line = jsonl_line(scrub_data(record))
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def dataclass_from_record(cls: type[D], data: Mapping[str, Any]) -> D:
    """A journaled dataclass from its JSON record: every field required (KeyError names the missing ones),
    keys it does not know ignored, so records written by an older version still load."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    missing = [n for n in names if n not in data]
    if missing:
        raise KeyError(f"missing field(s) {', '.join(missing)}")
    return cls(**{n: data[n] for n in names})


# ------------------------------------------------------------------------------ which journals a run reuses

FINISHED_MARKER = "finished.json"  # beside a run's journals once its run finished (its summary was built)
PREVIOUS_DIR = "previous"  # a finished run's journals, kept when a rerun starts over


@dataclass(frozen=True)
class JournalPlan:
    """How a run treats the journals of an earlier invocation with the same run key."""

    mode: (
        str  # "new", "resume" (an interrupted run), "resume-finished" (--resume), "fresh" (--fresh), "rerun"
    )
    run_dir: Path | None

    @property
    def reuses(self) -> bool:
        return self.mode in ("resume", "resume-finished")


def plan_journals(run_dir: Path | None, journals: list[Path], *, resume: bool, fresh: bool) -> JournalPlan:
    """The journal rule (docs/design.md section 7.3): an interrupted run's journals are resumed; a finished
    run's journals are replayed only with ``resume`` (otherwise the system is asked again: a redeployed
    service must not be scored from its old replies); ``fresh`` always starts over. Journals set aside are
    moved to ``previous/``, never deleted."""
    if resume and fresh:
        raise UsageError("--resume and --fresh contradict each other: pass one (or neither)")
    if run_dir is None or not journals:
        return JournalPlan("new", None)
    finished = (run_dir / FINISHED_MARKER).is_file()
    present = [p for p in journals if p.is_file()]
    if not present and not finished:
        return JournalPlan("new", run_dir)
    if not fresh and (resume or not finished):
        return JournalPlan("resume-finished" if finished else "resume", run_dir)
    keep = run_dir / PREVIOUS_DIR
    keep.mkdir(parents=True, exist_ok=True)
    for path in [*present, run_dir / FINISHED_MARKER]:
        if path.is_file():
            os.replace(path, keep / path.name)
    return JournalPlan("fresh" if fresh else "rerun", run_dir)


def mark_finished(plan: JournalPlan, record: Mapping[str, Any]) -> None:
    """Record that the run whose journals live in ``plan.run_dir`` finished (a later plain rerun starts over)."""
    if plan.run_dir is None:
        return
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    tmp = plan.run_dir / f".{FINISHED_MARKER}.{os.getpid()}"
    tmp.write_text(json.dumps(dict(record), sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, plan.run_dir / FINISHED_MARKER)


JOURNAL_LOCK = "journal.lock"  # beside a run's journals, held (flock) by the one run writing them


@contextlib.contextmanager
def journal_lock(run_dir: Path | None) -> Iterator[None]:
    """Hold the lock of the journals in ``run_dir`` for the block: a second run of the same configuration
    started meanwhile exits 2 naming the first instead of asking the system again into the same journal."""
    if run_dir is None:
        yield
        return
    lock = FileLock(
        run_dir / JOURNAL_LOCK,
        f"the journals in {run_dir}",
        "another run of this configuration is writing them; wait for it to finish, then rerun this command "
        "(it picks up what that run journaled)",
    )
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(lock.hold(timeout_s=0))
        except OSError as exc:  # the folder cannot be made or written: not the block's errors
            raise journal_error(run_dir / JOURNAL_LOCK, exc) from None
        yield


def journal_note(usage: Any) -> str | None:
    """One console line saying how many entries came from a journal, and why (the summary's
    ``config.usage``); None when none did and the run started afresh for no reason worth stating."""
    if not isinstance(usage, Mapping) or not isinstance(usage.get("journal"), Mapping):
        return None
    entries, verdicts = usage.get("resumed", 0), usage.get("resumed_verdicts", 0)
    mode, where = usage["journal"].get("mode"), usage["journal"].get("dir")
    if entries or verdicts:
        why = "a finished run, --resume" if mode == "resume-finished" else "an interrupted run"
        return (
            f"journal: {entries} entries and {verdicts} verdicts replayed from {where} ({why}); "
            "--fresh asks the system again"
        )
    if mode == "rerun":
        return (
            f"journal: the earlier run of this configuration had finished; asked the system again ({where})"
        )
    if mode == "fresh":
        return f"journal: --fresh: earlier journals set aside in {where}/previous"
    return None
