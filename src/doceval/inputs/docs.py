"""Build the documentation corpus: pinned PyPI wheels -> public docstrings (via ``ast``) -> chunks.

Document ids are ``LIB@VERSION:dotted.path`` (the relevance unit); chunk ids are ``DOC_ID#N``. The wheel is
read as a zip archive and parsed, never imported, so building the corpus runs no library code.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.io import atomic_dir, jsonl_line, sha256_file, write_json_atomic
from doceval.common.progress import iterate
from doceval.errors import UsageError

if TYPE_CHECKING:
    from doceval.config.schema import Library

# Paths never documented: test suites and vendored third-party code (a library's vendored copy would put
# another project's API, or its own older API, into the wrong pin).
DEFAULT_EXCLUDES = (
    "*/tests/*",
    "*/test/*",
    "*/testing/*",
    "*/_vendor/*",
    "*/vendor/*",
    "*/vendored/*",
    "*/conftest.py",
    "*/test_*.py",
    "*_test.py",
    "*/_tests/*",
)


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    version: str
    sha256: str | None = None
    exclude: tuple[str, ...] = ()

    @property
    def pin(self) -> str:
        return f"{normalise_name(self.name)}@{self.version}"


@dataclass
class Document:
    doc_id: str
    library: str
    version: str
    path: str
    kind: str
    text: str
    deprecated: list[str] = field(default_factory=list)


def normalise_name(name: str) -> str:
    """PEP 503 normalisation, lowercase: ``SQLAlchemy`` -> ``sqlalchemy``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_specs(libraries: Sequence[Library]) -> list[LibrarySpec]:
    """The pinned wheels to build the corpus from: ``docs.libraries`` (checked when the config was composed)."""
    return [
        LibrarySpec(name=lib.name, version=lib.version, sha256=lib.sha256, exclude=tuple(lib.exclude or ()))
        for lib in libraries
    ]


# --------------------------------------------------------------------------------------------- wheels


def fetch_wheel(spec: LibrarySpec, cache_dir: Path) -> Path:
    """Return the pinned wheel, downloading it once into ``cache_dir`` and verifying its sha256."""
    target = cache_dir / spec.pin
    target.mkdir(parents=True, exist_ok=True)
    wheels = sorted(target.glob("*.whl"))
    if not wheels:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(target),
            f"{spec.name}=={spec.version}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(target.glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel downloaded"]
            raise UsageError(
                f"docs: could not download {spec.name}=={spec.version} from PyPI ({detail[0]}). "
                "Check the library name and version in params.yaml (docs.libraries)."
            )
    wheel = wheels[0]
    digest = sha256_file(wheel)
    if spec.sha256 and digest != spec.sha256:
        bad = target / (wheel.name + ".rejected")
        wheel.rename(bad)
        raise UsageError(
            f"docs: sha256 mismatch for {spec.name}=={spec.version} ({wheel.name}): expected {spec.sha256}, "
            f"got {digest}. The file was moved aside to {bad}. If the new digest is trusted, set "
            f"docs.libraries[name={spec.name}, version={spec.version}].sha256 to it."
        )
    return wheel


# ----------------------------------------------------------------------------------------- extraction


def _is_excluded(path: str, patterns: Iterable[str]) -> bool:
    probe = "/" + path
    return any(fnmatch.fnmatch(probe, "*/" + p.lstrip("*/")) or fnmatch.fnmatch(probe, p) for p in patterns)


def _module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _string_args(node: ast.AST) -> list[str]:
    """Every string constant in a decorator call's arguments (``deprecated_params`` nests them in tuples)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _deprecations(decorators: Sequence[ast.expr]) -> list[str]:
    messages = []
    for dec in decorators:
        if not isinstance(dec, ast.Call):
            continue
        callee = ast.unparse(dec.func)
        if "deprecat" not in callee.lower():
            continue
        # Drop version-only strings such as "1.4" / "2.0": the message is the sentence.
        texts = [s.strip() for s in _string_args(dec) if not re.fullmatch(r"[\d.]+", s.strip())]
        texts = [t for t in texts if len(t) > 3]
        if texts:
            messages.append(" ".join(texts))
    return messages


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    try:
        return "(" + ast.unparse(node.args) + ")"
    except Exception:  # pragma: no cover - ast.unparse handles every parsed node on 3.11
        return "()"


def _body_defs(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Definitions in a body, looking through ``if``/``try`` blocks (compat shims define API there)."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from _body_defs(stmt.body)
            yield from _body_defs(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _body_defs(stmt.body)
            for handler in stmt.handlers:
                yield from _body_defs(handler.body)


def extract_module(source: str, module: str, pin: str) -> list[Document]:
    """Public documents of one module's source. Raises SyntaxError on unparsable code."""
    tree = ast.parse(source)
    library, version = pin.split("@", 1)
    docs: dict[str, Document] = {}

    def add(path: str, kind: str, header: str, docstring: str | None, deprecated: list[str]) -> None:
        if not docstring and not deprecated:
            return
        lines = [header]
        lines += [f"Deprecated: {m}" for m in deprecated]
        if docstring:
            lines.append(docstring.strip())
        doc = Document(f"{pin}:{path}", library, version, path, kind, "\n\n".join(lines), deprecated)
        prior = docs.get(doc.doc_id)
        if prior is None or len(doc.text) > len(prior.text):
            docs[doc.doc_id] = doc

    own = module.rsplit(".", 1)[-1]
    if not own.startswith("_"):
        add(module, "module", f"module {module}", ast.get_docstring(tree), [])

    def visit(body: Sequence[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in _body_defs(body):
            assert isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            if node.name.startswith("_"):
                continue
            path = f"{prefix}.{node.name}"
            deprecated = _deprecations(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                bases = ", ".join(ast.unparse(b) for b in node.bases)
                doc = ast.get_docstring(node) or ""
                # The constructor's docstring documents the class's parameters; it has no public id of its own.
                init = next(
                    (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
                )
                init_doc = ast.get_docstring(init) if init is not None else None
                header = f"class {path}({bases})" + (_signature(init) if init is not None else "")
                add(path, "class", header, "\n\n".join(d for d in (doc, init_doc) if d) or None, deprecated)
                visit(node.body, path, in_class=True)
            else:
                kind = "method" if in_class else "function"
                add(path, kind, f"def {path}{_signature(node)}", ast.get_docstring(node), deprecated)

    visit(tree.body, module, in_class=False)
    return list(docs.values())


def extract_wheel(wheel: Path, spec: LibrarySpec) -> list[Document]:
    """All public documents in a wheel's Python sources (tests, vendored code and ``exclude`` skipped)."""
    patterns = DEFAULT_EXCLUDES + spec.exclude
    docs: dict[str, Document] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if not name.endswith(".py") or ".dist-info/" in name or ".data/" in name:
                continue
            if _is_excluded(name, patterns):
                continue
            source = zf.read(name).decode("utf-8", errors="replace")
            try:
                found = extract_module(source, _module_name(name), spec.pin)
            except SyntaxError:
                continue  # py2-only files in old wheels; they document nothing importable on 3.11
            for doc in found:
                docs.setdefault(doc.doc_id, doc)
    return list(docs.values())


# ------------------------------------------------------------------------------------------- chunking


def chunk_document(doc: Document, max_chars: int) -> list[str]:
    """Split a document on paragraph boundaries into chunks of at most ~max_chars.

    Every chunk after the first repeats the document's header line, so a chunk still says what it documents.
    """
    header, _, rest = doc.text.partition("\n\n")
    if "\n" in header:  # a section whose heading runs straight into its text: the header is its first line
        header, _, lead = header.partition("\n")
        rest = f"{lead}\n\n{rest}" if rest else lead
    paragraphs = [p for p in re.split(r"\n\s*\n", rest) if p.strip()] if rest else []
    chunks: list[str] = []
    current = header
    for para in paragraphs:
        # A single huge paragraph is hard-wrapped so no chunk exceeds the model's window by much.
        pieces = [para[i : i + max_chars] for i in range(0, len(para), max_chars)] or [para]
        for piece in pieces:
            if len(current) + 2 + len(piece) > max_chars and current != header:
                chunks.append(current)
                current = header
            current = f"{current}\n\n{piece}"
    chunks.append(current)
    return chunks


# ---------------------------------------------------------------------------------------------- build


def write_corpus(
    documents_by_pin: dict[str, list[Document]],
    out_dir: Path,
    max_chars: int,
    sources: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Write ``corpus.jsonl`` (one chunk per line) and ``manifest.json`` atomically into ``out_dir``."""
    with atomic_dir(out_dir) as tmp:
        per_pin: dict[str, dict[str, Any]] = {}
        corpus_path = tmp / "corpus.jsonl"
        with corpus_path.open("w", encoding="utf-8") as fh:
            for pin in sorted(documents_by_pin):
                docs = sorted(documents_by_pin[pin], key=lambda d: d.doc_id)
                n_chunks = 0
                for doc in docs:
                    for n, text in enumerate(chunk_document(doc, max_chars)):
                        record = {
                            "chunk_id": f"{doc.doc_id}#{n}",
                            "doc_id": doc.doc_id,
                            "library": doc.library,
                            "version": doc.version,
                            "kind": doc.kind,
                            "text": text,
                        }
                        fh.write(jsonl_line(record))
                        n_chunks += 1
                per_pin[pin] = {"documents": len(docs), "chunks": n_chunks, **sources.get(pin, {})}
        manifest = {
            "pins": per_pin,
            "documents": sum(v["documents"] for v in per_pin.values()),
            "chunks": sum(v["chunks"] for v in per_pin.values()),
            "chunk_chars": max_chars,
            "content_hash": sha256_file(corpus_path),
        }
        write_json_atomic(tmp / "manifest.json", manifest)
    return manifest


def _read_manifest(out_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pins"), dict) else None


def _same_source(recorded: Any, new: Any) -> bool:
    """A wheel's file name, or a folder (recorded as given: ``docs/1.0`` and ``./docs/1.0`` are one folder)."""
    if recorded == new:
        return True
    return (
        isinstance(recorded, str) and isinstance(new, str) and Path(recorded).resolve() == Path(new).resolve()
    )


CORPUS_FILES = frozenset({"corpus.jsonl", "manifest.json"})


def refuse_other_corpus(out_dir: Path, sources: dict[str, dict[str, Any]], replace: bool) -> None:
    """UsageError when ``out_dir`` holds something other than this corpus (other pins, or the same pins from
    other sources, or files that are no corpus at all): building replaces the whole folder, so writing 2.0 over
    1.0 would silently keep only 2.0. Rebuilding the same pins from the same sources is fine; ``replace`` allows
    writing over another doceval corpus, never over a folder that holds anything else (a corpus folder holds
    only corpus.jsonl and manifest.json)."""
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    manifest = _read_manifest(out_dir)
    fix = (
        "pass --replace to write over it, build every version together in one command (repeat --folder DIR "
        "--version V, or one DIR/<version>/ folder), or write elsewhere (--out DIR)"
    )
    others = sorted(p.name for p in out_dir.iterdir() if p.name not in CORPUS_FILES)
    if manifest is None or others:
        held = (
            f"holds {', '.join(others[:3])}{' ...' if len(others) > 3 else ''}, which no doceval corpus holds"
            if others
            else "holds no doceval corpus (no manifest.json listing its pins)"
        )
        raise UsageError(
            f"docs: {out_dir} is not empty and {held}; --replace replaces only a doceval corpus (a folder of "
            "corpus.jsonl and manifest.json): write elsewhere (--out DIR), or empty the folder yourself"
        )
    if replace:
        return
    old = {
        pin: meta.get("source") if isinstance(meta, dict) else None for pin, meta in manifest["pins"].items()
    }
    new = {pin: meta.get("source") for pin, meta in sources.items()}
    if set(old) != set(new):
        raise UsageError(
            f"docs: {out_dir} holds another corpus ({', '.join(sorted(manifest['pins'])) or 'no pins'}); this "
            f"build writes {', '.join(sorted(new))}, and would drop what it does not rebuild; {fix}"
        )
    moved = [pin for pin in sorted(new) if not _same_source(old[pin], new[pin])]
    if moved:
        raise UsageError(
            f"docs: {out_dir} holds {moved[0]} built from {old[moved[0]]}, and this build reads it from "
            f"{new[moved[0]]}; {fix}"
        )


def build_corpus(
    specs: Sequence[LibrarySpec],
    out_dir: Path,
    cache_dir: Path,
    max_chars: int,
    progress: bool = True,
    replace: bool = False,
) -> dict[str, Any]:
    if not specs:
        raise UsageError("docs: no libraries configured (docs.libraries is empty in params.yaml)")
    by_pin: dict[str, list[Document]] = {}
    sources: dict[str, dict[str, Any]] = {}
    for spec in iterate(specs, "docs", "lib", enabled=progress):
        wheel = fetch_wheel(spec, cache_dir)
        by_pin[spec.pin] = extract_wheel(wheel, spec)
        sources[spec.pin] = {"source": wheel.name, "sha256": sha256_file(wheel)}
        if not by_pin[spec.pin]:
            raise UsageError(
                f"docs: {spec.pin} ({wheel.name}) has no public docstrings; check its exclude list"
            )
    refuse_other_corpus(out_dir, sources, replace)
    return write_corpus(by_pin, out_dir, max_chars, sources)
