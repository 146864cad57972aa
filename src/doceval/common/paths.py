"""Paths that cannot escape or destroy (docs/design.md section 8.6).

- :func:`check_pin_part`: a library or version becomes a folder name (``data/folders/LIB@VERSION``,
  ``data/cache/wheels/PIN``) and half of a document id (``LIB@VERSION:path``), so it is non-empty and holds no
  path separator, ``..``, ``:``, ``@`` or control character.
- :func:`refuse_overlap`: the one rule every writer applies before any work: an output is never one of the same
  command's inputs, never contains one and never lies inside one.
- :func:`file_kind`, :func:`input_file`: what is at a path, in words; an input that is a device, FIFO or socket
  is named as such (reading a FIFO blocks, ``/dev/zero`` never ends), not called "not found".
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from doceval.errors import UsageError

# (name, path): what the user would call it ("--golden", "the golden set") and where it is; None: not used.
Named = tuple[str, str | Path | None]

PIN_RULE = (
    "a library and a version are non-empty and hold no path separator (/ or \\), '..', ':', '@' or control "
    "character"
)


def pin_part_problem(value: object) -> str | None:
    """Why ``value`` cannot be a pin's library or version (the part of the rule it breaks), else None."""
    if not isinstance(value, str) or not value.strip():
        return "is empty"
    for bad, why in (
        ("..", "'..'"),
        ("/", "a path separator /"),
        ("\\", "a path separator \\"),
        (":", "':'"),
        ("@", "'@'"),
    ):
        if bad in value:
            return f"holds {why}"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return "holds a control character"
    return None


def pin_part_error(value: object) -> str | None:
    """The broken part of the rule and the rule itself (for a message after ``KEY=VALUE: ``), else None."""
    problem = pin_part_problem(value)
    return None if problem is None else f"{problem}; {PIN_RULE} (a pin LIB@VERSION names a folder)"


def check_pin_part(value: object, what: str) -> str:
    """``value`` when it may be a pin's library or version; else a UsageError naming ``what`` (the flag or key)
    and the rule."""
    error = pin_part_error(value)
    if error is not None:
        raise UsageError(f"{what}={value!r}: {error}")
    assert isinstance(value, str)
    return value


# ------------------------------------------------------------------------------------ outputs and inputs


def _real(path: str | Path) -> Path:
    """The absolute path with every existing link resolved (what a write would really touch)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def _same_file(a: Path, b: Path) -> bool:
    """Two names of one existing file (a hard link) count as the same path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def overlap(output: str | Path, source: str | Path) -> str | None:
    """How writing ``output`` would touch ``source``: ``"is"``, ``"contains"`` or ``"lies inside"``; None when
    the two are apart."""
    out, src = _real(output), _real(source)
    if out == src or _same_file(out, src):
        return "is"
    if out in src.parents:
        return "contains"
    if src in out.parents:
        return "lies inside"
    return None


def refuse_overlap(
    outputs: Iterable[Named], inputs: Iterable[Named], fix: str = "name another output"
) -> None:
    """UsageError (exit 2, before any work) when an output is, contains or lies inside one of the same command's
    inputs (golden set, qrels, docs folders, corpus, summaries...), naming both: writing it would overwrite or
    replace what the command reads. Links are followed, so a link to the golden set is the golden set."""
    sources = [(what, path) for what, path in inputs if path is not None and str(path).strip()]
    for out_what, out in outputs:
        if out is None or not str(out).strip():
            continue
        for in_what, source in sources:
            how = overlap(out, source)
            if how is not None:
                raise UsageError(
                    f"{out_what} {out}: {how} {in_what} {source}, which this command reads (an output never "
                    f"is, holds or lies inside an input); {fix}"
                )


# ------------------------------------------------------------------------------------ what is at a path


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str:
    """``st_mode`` in words: ``a FIFO (named pipe)``, ``a character device``..."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def os_problem(exc: OSError) -> str:
    """An OSError in words, without the path (the caller names it): ``File name too long``."""
    return exc.strerror or str(exc)


def input_file(path: Path, what: str, fix: str) -> Path:
    """``path`` when it is a regular file (or a link to one). A device, FIFO, socket or directory is a
    UsageError saying so (never "not found"); a path the system refuses (a name too long) names the reason.
    A missing file returns ``path``: the caller says what "not found" means for it."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    except OSError as exc:
        raise UsageError(f"{path}: cannot open the {what} ({os_problem(exc)}); {fix}") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path}: is {file_kind(mode)}, not a {what} file; {fix}")
    return path


def is_folder(path: Path, what: str) -> bool:
    """Whether ``path`` is a folder (or a link to one); a path the system refuses (a name too long, a loop of
    links) is a UsageError naming ``what`` and the reason, never a traceback."""
    try:
        return path.is_dir()
    except OSError as exc:
        raise UsageError(
            f"{what} {path}: cannot be read ({os_problem(exc)}); name an existing folder"
        ) from None


def create_new_file(path: Path, text: str, what: str, fix: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, which must not exist: created exclusively (``O_EXCL``), never through
    a link (a dangling one included: the write would land wherever it points). Anything already there, or a
    path the system refuses, is a UsageError naming ``what`` and the fix; nothing is overwritten."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise UsageError(
            f"{what} {path}: already exists (a link counts, even a dangling one); {fix}"
        ) from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot be created ({os_problem(exc)}); {fix}") from None
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(text)
