"""Small file helpers shared by every stage: hashing, atomic outputs, JSON/JSONL with line numbers.

Every JSON doceval writes goes through :func:`json_text` (or :func:`jsonl_line`): strict JSON, never ``NaN`` or
``Infinity`` (JavaScript's ``JSON.parse`` and many other readers refuse them), lone surrogates as ``\\udXXX``
escapes. Text files are written with lone surrogates backslash-escaped, never a UnicodeEncodeError.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from doceval.common.bounded_json import loads
from doceval.common.paths import file_kind, os_problem
from doceval.common.redact import scrub_data
from doceval.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: liveness falls back to the pid in the name
    fcntl = None  # type: ignore[assignment]

# When this process started (close enough: doceval.common.io is imported before any stage writes). A temp
# folder without a pid in its name (written by an older doceval) counts as stale only if it is older than this.
_PROCESS_START = time.time()


def _digest_file(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    return _digest_file(path, "sha256")


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory that replaces ``target`` only if the block succeeds.

    A failed or interrupted stage leaves the previous output (or nothing), never a half-written one. The
    temporary sibling is ``.<name>.<pid>.<random>``, locked (``flock``) while its writer runs; a writer killed
    with SIGKILL cannot remove it, so every call first removes the stale siblings of ``target``: unlocked ones
    whose pid is dead (or, without a pid in the name, older than this process). A sibling another live process
    is writing is left alone. A symlink at ``target`` has the folder it points at replaced; a file, device,
    FIFO or dangling link there is refused (:func:`output_folder`) before the block runs.
    """
    target = output_folder(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(target)
    tmp = _make_temp_dir(target)
    lock = _lock_dir(tmp)
    try:
        yield tmp
        if target.exists():
            old = tmp.with_name(tmp.name + ".old")
            old_lock = _lock_dir(target)  # the previous output, locked while it is being discarded
            try:
                target.rename(old)
                tmp.rename(target)
                shutil.rmtree(old, ignore_errors=True)
            finally:
                _unlock(old_lock)
        else:
            tmp.rename(target)
    finally:
        _unlock(lock)
        shutil.rmtree(tmp, ignore_errors=True)


def output_folder(
    target: Path | str, what: str | None = None, fix: str = "remove it or name another output folder"
) -> Path:
    """The folder :func:`atomic_dir` replaces: ``target``, or the folder a symlink there points at (the link
    stays a link). Anything else already there (a file, a device, a FIFO, a dangling link) is a UsageError
    naming ``what`` (default: the path) and the fix: renaming it aside would put a folder where /dev/null was.
    A path the system refuses (a name too long, a file where a folder should be) is a UsageError saying why."""
    what = what or str(target)
    target = Path(target)
    link, mode = _lstat(target, what, fix)
    if link:
        real = Path(os.path.realpath(target))
        if not real.is_dir():
            raise UsageError(f"{what}: is a symlink to {real}, which is not a folder; {fix}")
        return real
    if mode is None:
        return target  # nothing there yet
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{what}: is {file_kind(mode)}, not a folder; {fix}")
    return target


def _lstat(path: Path, what: str, fix: str) -> tuple[bool, int | None]:
    """(is a symlink, the mode of what is there or None when nothing is); an OSError other than "not there"
    (ENAMETOOLONG, ELOOP, EACCES) is a UsageError naming ``what``, the reason and the fix."""
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False, None
    except OSError as exc:
        raise UsageError(f"{what}: cannot use this path ({os_problem(exc)}); {fix}") from None
    return stat.S_ISLNK(mode), mode


def _make_temp_dir(target: Path) -> Path:
    """``.<name>.<pid>.<8 random hex>``, made by ``mkdir`` (the umask applies: outputs get the permissions any
    folder gets, not ``mkdtemp``'s 0700)."""
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            tmp.mkdir()
        except FileExistsError:
            continue
        return tmp


def _temp_pattern(name: str) -> re.Pattern[str]:
    """``.<name>.<pid>.<random>[.old]`` (this module), or ``.<name>.<random>`` and ``.<name>.old`` (older
    versions, no pid): 8 random characters, as ``tempfile.mkdtemp`` makes them."""
    return re.compile(rf"\.{re.escape(name)}\.(?:(?:(\d+)\.)?[a-z0-9_]{{8}}(?:\.old)?|old)")


def remove_stale_temp_dirs(target: Path) -> list[Path]:
    """Remove the temporary siblings of ``target`` that no live writer holds; returns what was removed."""
    if not target.parent.is_dir():
        return []
    pattern = _temp_pattern(target.name)
    removed: list[Path] = []
    for path in sorted(target.parent.iterdir()):
        match = pattern.fullmatch(path.name)
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue  # a live writer (or a reused pid: kept, harmless)
        if pid is None and _mtime(path) >= _PROCESS_START:
            continue  # no pid to ask: only what predates this process is surely stale
        lock = _try_lock(path)
        if lock is None:
            continue  # locked: someone is writing it right now
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            _unlock(lock)
        if not path.exists():
            removed.append(path)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    except OSError:
        return False
    return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return _PROCESS_START


def _lock_dir(path: Path) -> int | None:
    """An exclusive ``flock`` on a directory, held until :func:`_unlock` (or the process dies)."""
    if fcntl is None:
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


def _try_lock(path: Path) -> int | None:
    """Take the directory's lock without waiting: a descriptor when free (the caller unlocks), None when held.
    Without ``fcntl`` every folder counts as free (-1): the pid test is all there is."""
    if fcntl is None:
        return -1
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        os.close(fd)  # closing the descriptor releases its flock


# A lone surrogate (U+D800..U+DFFF) is a valid character of a Python str (json.loads('"\\ud800"') makes one) but
# not encodable as UTF-8: written raw it raises UnicodeEncodeError. Every text doceval writes escapes them.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
TEXT_ERRORS = "backslashreplace"  # how text files write a lone surrogate: as \udXXX


def _keep_bytes_else_escape(exc: UnicodeError) -> tuple[bytes, int]:
    """A codec error handler for the terminal: a surrogate that stands for an undecodable byte (Python's
    ``surrogateescape``, e.g. a file name in the C locale) prints as that byte, any other as ``\\udXXX``."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = b""
    for ch in exc.object[exc.start : exc.end]:
        code = ord(ch)
        out += bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else ch.encode("ascii", "backslashreplace")
    return out, exc.end


TERMINAL_ERRORS = "doceval.terminal"
codecs.register_error(TERMINAL_ERRORS, _keep_bytes_else_escape)


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(data: Any, *, indent: int | None = None, sort_keys: bool = False,
              default: Callable[[Any], Any] | None = None) -> str:  # fmt: skip
    """``data`` as strict JSON: a non-finite float (NaN, +-Infinity) is a ValueError naming where it is (a bug:
    such values are written as null with a stated reason where they are made), and a lone surrogate becomes
    the escape ``\\ud800``, valid JSON that reads back as the same string."""
    try:
        text = json.dumps(data, indent=indent, sort_keys=sort_keys, default=default, ensure_ascii=False,
                          allow_nan=False)  # fmt: skip
    except ValueError as exc:
        where = non_finite_path(data)
        if where is None:
            raise
        raise ValueError(f"not strict JSON: {where} is not a finite number ({exc})") from None
    return _SURROGATE.sub(_escape_surrogate, text) if _SURROGATE.search(text) else text


def jsonl_line(record: Any, default: Callable[[Any], Any] | None = None) -> str:
    """One JSONL line (strict JSON, see :func:`json_text`), newline included."""
    return json_text(record, default=default) + "\n"


def non_finite_path(data: Any, path: str = "$") -> str | None:
    """Where the first NaN or +-Infinity in a JSON-like value is (``$.config.floors.global``), else None."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{path} = {data}"
    if isinstance(data, Mapping):
        for key, value in data.items():
            found = non_finite_path(value, f"{path}.{key}")
            if found:
                return found
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            found = non_finite_path(value, f"{path}[{i}]")
            if found:
                return found
    return None


def finite_or_null(data: Any) -> Any:
    """A JSON-like value with every NaN and +-Infinity replaced by None: what an older doceval wrote as
    ``NaN``/``Infinity`` (its readers still take it) read as the null a current one writes."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, Mapping):
        return {key: finite_or_null(value) for key, value in data.items()}
    if isinstance(data, list):
        return [finite_or_null(value) for value in data]
    return data


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\udXXX`` (for text that is not JSON)."""
    return _SURROGATE.sub(_escape_surrogate, text) if _SURROGATE.search(text) else text


def without_surrogates(data: Any) -> Any:
    """A JSON-like value with :func:`escape_surrogates` applied to every string (mapping keys included): for
    stores that take only UTF-8 (sqlite through MLflow), where the escape is the only way to keep the text."""
    if isinstance(data, str):
        return escape_surrogates(data)
    if isinstance(data, Mapping):
        return {without_surrogates(key): without_surrogates(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [without_surrogates(value) for value in data]
    return data


def write_text_atomic(path: Path, text: str) -> None:
    """UTF-8 text through :func:`write_bytes_atomic`, with every registered secret masked
    (:mod:`doceval.common.redact`): the last line of defence, whatever the caller forgot. A lone surrogate
    in ``text`` is written as ``\\udXXX``."""
    write_bytes_atomic(path, scrub_data(text).encode("utf-8", errors=TEXT_ERRORS))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary sibling and rename: readers see the old file or the new one, never half.

    Only a regular file is ever replaced (:func:`output_target`): a symlink to one has its target replaced and
    stays a link; a device, FIFO, socket, directory or dangling link is a UsageError, never turned into a
    regular file. The temporary sibling is ``.<name>.<pid>.<random>.tmp``, one per writer, so two processes
    writing the same output cannot clobber each other's half-written file; a writer killed before its rename
    leaves one behind, removed by the next write once that pid is gone."""
    target = output_target(path, str(path), "remove it or name another output file")
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temp_files(target)
    tmp = _make_temp_file(target)
    try:
        tmp.write_bytes(data)
        _keep_mode(target, tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _make_temp_file(target: Path) -> Path:
    """``.<name>.<pid>.<8 random hex>.tmp``, created exclusively (the umask applies, as to any new file)."""
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp


def _remove_stale_temp_files(target: Path) -> None:
    """Remove the temporary files of ``target`` whose writer (the pid in the name) is no longer running."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(\d+)\.[0-9a-f]{{8}}\.tmp")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _pid_alive(pid):
            with contextlib.suppress(OSError):
                (target.parent / name).unlink()


def _keep_mode(target: Path, tmp: Path) -> None:
    """A replaced file keeps its permissions (a summary made private stays private)."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return  # a new file: the umask's permissions
    os.chmod(tmp, mode)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json_text(data, indent=2) + "\n")


def write_jsonl_atomic(path: Path, records: Iterable[Any]) -> None:
    """One strict JSON object per line (:func:`jsonl_line`), written atomically."""
    write_text_atomic(path, "".join(jsonl_line(r) for r in records))


def read_json(path: Path, what: str, rerun: str | None = None) -> Any:
    """Read a JSON file or raise a UsageError naming it (and the stage that makes it)."""
    hint = f" Run `{rerun}` to (re)build it." if rerun else ""
    if not path.is_file():
        raise UsageError(f"{path}: {what} not found.{hint}")
    try:
        return loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: {what} is not valid JSON ({exc.msg}).{hint}") from exc


def iter_jsonl(path: Path, rerun: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)``; a bad line raises a UsageError with file:line.

    ``rerun`` names the command that writes the file when it is an output (a cut line means rebuild it, not
    edit it); without it the file is the user's own and the fix is that line."""
    fix = (
        f"the file is damaged (cut short?); rerun `{rerun}` to rebuild it"
        if rerun
        else "fix or remove that line"
    )
    with path.open(encoding="utf-8-sig") as fh:  # a BOM (Windows editors) is not part of line 1
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{path}:{lineno}: not valid JSON ({exc.msg}); {fix}") from exc


def scan_jsonl(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line_number, record, problem)`` for every non-blank line; a bad line has a problem text and no
    record, so validators can report every bad line at once instead of stopping at the first. A UTF-8 BOM at the
    start is dropped, as the golden set's reader drops it."""
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, loads(line), None
            except json.JSONDecodeError as exc:
                yield lineno, None, f"not valid JSON: {exc.msg} at column {exc.colno}"


def probe_folder(folder: Path) -> None:
    """Create ``folder`` if needed and make (then remove) a temporary file in it; OSError when either fails."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".doceval-", suffix=".probe"):
        pass


def output_target(path: Path | str, what: str, fix: str) -> Path:
    """The regular file that writing the output ``path`` replaces: ``path`` itself (existing or not), or, for a
    symlink, the file it resolves to (the link stays a link). Anything else already at ``path`` is a UsageError
    naming ``what`` and the fix: outputs are replaced whole (temporary sibling + rename), which would turn a
    device (/dev/null, /dev/full), a FIFO or a socket into a regular file, and cannot replace a directory. A
    name given with a trailing slash (``newdir/``) names a folder, never a file; a path the system refuses (a
    name too long) is a UsageError saying why."""
    if isinstance(path, str) and path.endswith(("/", os.sep)):
        raise UsageError(
            f"{what}: ends in '/', so it names a folder, not a file; name a file in it (e.g. "
            f"{Path(path) / 'summary.json'}), or {fix}"
        )
    path = Path(path)
    link, mode = _lstat(path, what, fix)
    if link:
        real = Path(os.path.realpath(path))
        try:
            mode = real.stat().st_mode
        except FileNotFoundError:
            raise UsageError(
                f"{what}: is a symlink to {real}, which does not exist (a dangling link); point the link at an "
                f"existing file or remove it, or {fix}"
            ) from None
        except OSError as exc:
            raise UsageError(f"{what}: cannot follow the symlink ({os_problem(exc)}); {fix}") from None
        if not stat.S_ISREG(mode):
            raise UsageError(f"{what}: is a symlink to {real}, {file_kind(mode)}, not a regular file; {fix}")
        return real
    if mode is None:
        return path  # a new file (a parent that is a file is check_writable's to report)
    if stat.S_ISDIR(mode):
        raise UsageError(
            f"{what}: is a directory; name a file in it (e.g. {path / 'summary.json'}), or {fix}"
        )
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{what}: is {file_kind(mode)}, not a regular file; doceval replaces an output file whole and "
            f"never writes into a device, pipe or socket; {fix}"
        )
    return path


def check_writable(path: Path | str, what: str, fix: str) -> None:
    """Refuse (UsageError naming ``what`` and the fix) an output path that cannot be written: anything but a
    regular file or a symlink to one (:func:`output_target`), a folder that cannot be created, or one where no
    file can be made (read-only, /proc). Creates the folder when needed and tries a temporary file in it;
    called before any work, so a bad path never costs a run. Pass the path as the user typed it (a str): a
    trailing slash is then refused (it names a folder)."""
    path = output_target(path, what, fix)
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{what}: {folder} is a file, not a folder; {fix}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{what}: cannot create the folder {folder} ({exc.strerror or exc}); {fix}"
        ) from None
    try:
        probe_folder(folder)
    except OSError as exc:
        raise UsageError(f"{what}: cannot write in {folder} ({exc.strerror or exc}); {fix}") from None
