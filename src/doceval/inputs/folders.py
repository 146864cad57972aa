"""Docs folders as a corpus (docs/design.md section 2, *Your own docs*): every markdown, rst and text file under a
folder, one document per section, ids ``LIB@VERSION:relative.path.section_slug``; several folders and versions
built together into one corpus directory.

Only regular files are read. A FIFO, socket or device, a dangling link or a directory with a docs suffix is
skipped with one line on stderr naming it: a file is checked before it is opened and opened non-blocking, then
checked again, so nothing a folder holds can block the build or end it in a traceback.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from doceval.common.paths import check_pin_part, file_kind, is_folder, os_problem, refuse_overlap
from doceval.errors import UsageError
from doceval.inputs.docs import Document, normalise_name, refuse_other_corpus, write_corpus

DOC_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt"})


def folder_pin(library: str, version: str) -> str:
    """``LIB@VERSION`` of a folder's documents: the library normalised like a PyPI name, both parts checked
    (:func:`doceval.common.paths.check_pin_part`)."""
    check_pin_part(library, "library")
    return f"{normalise_name(library)}@{check_pin_part(version, 'version')}"


def docs_files(folder: Path) -> Iterator[tuple[Path, str]]:
    """``(file, text)`` of every regular docs file under ``folder``, sorted by path; every other entry with a docs
    suffix is skipped with a note naming it (:func:`_read_regular`)."""
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in DOC_SUFFIXES):
        text, skipped = _read_regular(path)
        if skipped is not None:
            print(f"note: docs: skipped {path}: {skipped}", file=sys.stderr)
        elif text is not None:
            yield path, text


def _read_regular(path: Path) -> tuple[str | None, str | None]:
    """(the text of a regular file, None), or (None, why it is skipped). A FIFO is never opened for a blocking
    read: the mode is checked first (stat, which follows a link), the file opened with O_NONBLOCK and its mode
    checked again on the open descriptor (it may have been swapped in between)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            return None, f"a symlink to {os.readlink(path)}, which does not exist (a dangling link)"
        return None, "no longer there"
    except OSError as exc:
        return None, f"cannot be read ({os_problem(exc)})"
    if stat.S_ISDIR(mode):
        return None, "a directory with a docs suffix, not a file (the files in it are read)"
    if not stat.S_ISREG(mode):
        return None, f"{file_kind(mode)}, not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return None, f"cannot be read ({os_problem(exc)})"
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return None, f"{file_kind(mode)}, not a regular file"
        data = fh.read()
    # As read_text would: undecodable bytes replaced, universal newlines.
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"), None


# ------------------------------------------------------------------------------------------- sections


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*$|^(.+)\n([=\-~^\"'`#*+]{3,})$", re.MULTILINE)
# Markdown: ATX headings and setext (=== / ---) underlines only; ``` / ~~~ fenced code is never a heading
# (a "# comment" in a code block, or the line before a closing fence, would otherwise start a section).
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*$|^(.+)\n(=+|-+)[ \t]*$", re.MULTILINE)
_MD_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,}).*?(?:^[ \t]{0,3}\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "section"


def extract_folder(folder: Path, library: str, version: str) -> list[Document]:
    """Documents from a folder of markdown/rst files: one document per top-level section of each file.

    Ids are ``LIB@VERSION:relative.path.section_slug`` so they read like the dotted ids of API docs. Only
    regular files are read (:func:`docs_files`).
    """
    pin = folder_pin(library, version)
    docs: dict[str, Document] = {}
    for file, text in docs_files(folder):
        stem = ".".join(file.relative_to(folder).with_suffix("").parts)
        if file.suffix.lower() in {".md", ".markdown"}:
            fences = [(f.start(), f.end()) for f in _MD_FENCE.finditer(text)]
            matches = [
                m for m in _MD_HEADING.finditer(text) if not any(a <= m.start() < b for a, b in fences)
            ]
        else:
            matches = list(_HEADING.finditer(text))
        starts = [(m.start(), m.end(), (m.group(2) or m.group(3) or "").strip()) for m in matches]
        if not starts or starts[0][0] > 0:
            starts.insert(0, (0, 0, ""))
        for i, (start, heading_end, title) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
            body = text[start:end].strip()
            # A heading with nothing under it ("# Backends" straight before "## Redis") is no document: its
            # one line would match queries on the heading's words and take a top-k slot from real sections.
            if not body or not text[heading_end:end].strip():
                continue
            path = f"{stem}.{_slug(title)}" if title else stem
            doc_id = f"{pin}:{path}"
            if doc_id in docs:
                docs[doc_id].text += "\n\n" + body
            else:
                docs[doc_id] = Document(doc_id, normalise_name(library), version, path, "section", body)
    if not docs:
        raise UsageError(
            f"docs: no documents found in {folder} (looked for .md, .rst, .txt files with text). "
            "Point --folder at the directory that holds the documentation sources."
        )
    return list(docs.values())


# ---------------------------------------------------------------------------------------------- build


def folder_pins(folder: Path, library: str, version: str | None) -> list[tuple[Path, str, str]]:
    """(directory, library, version) for one configured folder: itself at ``version``, or with ``version`` None
    each subfolder ``DIR/<version>/`` as one version (the layout of a docs site with a version picker)."""
    if not is_folder(folder, "docs: folder"):
        raise UsageError(f"docs: folder {folder} is not a directory; point it at the docs sources")
    check_pin_part(library, f"docs: folder {folder}: library")
    if version is not None:
        return [(folder, library, check_pin_part(version, f"docs: folder {folder}: version"))]
    subdirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subdirs:
        raise UsageError(
            f"docs: folder {folder} has no version subfolders (DIR/<version>/); give its version "
            "(--version V, or `version:` in docs.folders)"
        )
    # A subfolder's name is its version: rename one the pin rule refuses (e.g. 2.0:beta -> 2.0-beta).
    return [
        (sub, library, check_pin_part(sub.name, f"docs: version subfolder {sub}: version")) for sub in subdirs
    ]


def build_folders_corpus(
    folders: Sequence[tuple[Path, str, str | None]],
    out_dir: Path,
    max_chars: int,
    replace: bool = False,
    out_what: str = "the corpus folder",
) -> dict[str, Any]:
    """One corpus from several docs folders and versions, built together (every pin in one corpus.jsonl).
    ``out_dir`` (named ``out_what`` in messages: ``--out``, ``paths.docs``) is never a folder it reads, nor
    inside or around one (:func:`doceval.common.paths.refuse_overlap`)."""
    refuse_overlap(
        [(out_what, out_dir)],
        [("the docs folder", folder) for folder, _, _ in folders],
        "write the corpus elsewhere (--out DIR, or paths.docs outside every docs folder)",
    )
    by_pin: dict[str, list[Document]] = {}
    sources: dict[str, dict[str, Any]] = {}
    for folder, library, version in folders:
        for directory, lib, ver in folder_pins(folder, library, version):
            pin = folder_pin(lib, ver)
            if pin in by_pin:
                raise UsageError(
                    f"docs: {pin} comes from both {sources[pin]['source']} and {directory}; "
                    "give each library@version one folder"
                )
            by_pin[pin] = extract_folder(directory, lib, ver)
            sources[pin] = {"source": str(directory)}
    if not by_pin:
        raise UsageError("docs: no folders given")
    refuse_other_corpus(out_dir, sources, replace)
    return write_corpus(by_pin, out_dir, max_chars, sources)
