"""Shared, real (no mocks) fixtures for the foundation tests: a tiny corpus, a tiny wheel, the MiniLM model.

Imported by test_docs / test_retrievers / test_store / test_embed (pytest puts tests/ on sys.path). Not a
conftest: the model is loaded at most once per session through :func:`minilm`, whichever module asks first.
"""

from __future__ import annotations

import functools
import json
import zipfile
from pathlib import Path

from doceval.inputs.docs import Document, write_corpus

# ------------------------------------------------------------------------------------- fixture corpus

PIN1 = "demo@1.0"
PIN2 = "demo@2.0"
CHUNK_CHARS = 80

# doc_id -> (kind, full document text). Every text is "header line\n\nparagraph[\n\nparagraph...]".
_DOCS: dict[str, tuple[str, str]] = {
    f"{PIN1}:demo.Model.dict": (
        "method",
        "def demo.Model.dict(self)\n\nSerialize the model to a dictionary.",
    ),
    f"{PIN1}:demo.Model.json": (
        "method",
        "def demo.Model.json(self)\n\nSerialize the model to a JSON string.",
    ),
    f"{PIN1}:demo.Field": ("class", "class demo.Field()\n\nDeclare a field with a default value."),
    f"{PIN1}:demo.validator": (
        "function",
        "def demo.validator(*fields)\n\n"
        "Decorate a method to validate one field.\n\n"
        "Validators run before the model is created.\n\n"
        "Raise ValueError to reject a value.",
    ),
    f"{PIN1}:demo.config": ("module", "module demo.config\n\nGlobal configuration of the weather."),
    f"{PIN2}:demo.BaseModel.model_dump": (
        "method",
        "def demo.BaseModel.model_dump(self)\n\nSerialize the model to a dictionary.",
    ),
    f"{PIN2}:demo.BaseModel.model_dump_json": (
        "method",
        "def demo.BaseModel.model_dump_json(self)\n\nSerialize the model to a JSON string.",
    ),
    # Same text as demo@1.0's Field: the embedding cache must embed it once.
    f"{PIN2}:demo.Field": ("class", "class demo.Field()\n\nDeclare a field with a default value."),
}

# The chunks write_corpus must produce from _DOCS at CHUNK_CHARS (checked by build_fixture_corpus).
EXPECTED_CHUNKS: dict[str, list[str]] = {
    doc_id: [text] for doc_id, (_, text) in _DOCS.items() if doc_id != f"{PIN1}:demo.validator"
}
EXPECTED_CHUNKS[f"{PIN1}:demo.validator"] = [
    "def demo.validator(*fields)\n\nDecorate a method to validate one field.",
    "def demo.validator(*fields)\n\nValidators run before the model is created.",
    "def demo.validator(*fields)\n\nRaise ValueError to reject a value.",
]


def fixture_documents() -> dict[str, list[Document]]:
    by_pin: dict[str, list[Document]] = {}
    for doc_id, (kind, text) in _DOCS.items():
        pin, path = doc_id.split(":", 1)
        library, version = pin.split("@")
        by_pin.setdefault(pin, []).append(Document(doc_id, library, version, path, kind, text))
    return by_pin


def build_fixture_corpus(out_dir: Path) -> dict:
    """Write the fixture corpus with the real docs.write_corpus and check it chunked as EXPECTED_CHUNKS."""
    manifest = write_corpus(fixture_documents(), out_dir, CHUNK_CHARS, {PIN1: {"source": "fixture"}})
    got: dict[str, list[str]] = {}
    with (out_dir / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            got.setdefault(rec["doc_id"], []).append(rec["text"])
    assert got == EXPECTED_CHUNKS, "fixture corpus no longer chunks as the tests assume"
    return manifest


# ------------------------------------------------------------------------------------------ tiny wheel

CORE_PY = '''\
"""Core utilities of pkg."""

import typing_extensions


def deprecated(message):
    def wrap(func):
        return func

    return wrap


class Thing:
    """A thing that does things."""

    def __init__(self, size: int = 1):
        """Create a thing.

        :param size: how big the thing is.
        """
        self.size = size

    def method(self, x):
        """Do the method thing with x."""
        return x

    @typing_extensions.deprecated("Thing.old_method is deprecated; call Thing.method instead")
    def old_method(self):
        """The old way of doing the method thing."""

    def _private_method(self):
        """Hidden."""


@deprecated("Use new_thing instead")
def old_thing():
    """Make an old thing."""


@sa_deprecated("2.0", "The legacy_thing() function is considered legacy")
def legacy_thing():
    pass


def new_thing():
    """Make a new thing."""


def _helper():
    """Internal helper, not documented."""
'''

WHEEL_FILES: dict[str, str] = {
    "pkg/__init__.py": '"""The pkg package: things and helpers."""\n',
    "pkg/core.py": CORE_PY,
    "pkg/_impl.py": '"""Private implementation."""\n\n\ndef public_fn():\n    """Public API, privately."""\n',
    "pkg/tests/test_x.py": 'def test_something():\n    """A test, never documentation."""\n',
    "pkg/_vendor/other.py": 'def vendored():\n    """Another project\'s code."""\n',
    "pkg/v1/old.py": 'def legacy():\n    """The v1 API kept for compatibility."""\n',
    "pkg/py2only.py": 'print "hello"\n\n\ndef py2():\n    """Python 2 only."""\n',
    "pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
}


def make_wheel(
    directory: Path, files: dict[str, str] | None = None, name: str = "pkg-1.0-py3-none-any.whl"
) -> Path:
    """A real wheel (zip) holding ``files``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in (files or WHEEL_FILES).items():
            zf.writestr(member, text)
    return path


# ------------------------------------------------------------------------------------------ the model


@functools.cache
def minilm(option: str = "minilm"):
    """The real all-MiniLM-L6-v2 embedder as conf/embedder/OPTION.yaml configures it, loaded once per session."""
    from doceval.config import schema
    from doceval.config.compose import compose
    from doceval.index.embed import MiniLMEmbedder

    block = compose([f"embedder={option}"]).embedder
    assert isinstance(block, schema.EmbedderMiniLM)
    return MiniLMEmbedder(batch_size=block.batch_size, device=block.device, precision=block.precision)


def write_fixture_golden(root: Path, rows: list[tuple[str, str, str, list[str], str]]) -> Path:
    """``data/golden/v2.1.jsonl`` under ``root`` from ``(id, question, pin, relevant_ids, split)`` rows: an
    entry without relevant ids is out of scope."""
    golden = root / "data" / "golden" / "v2.1.jsonl"
    golden.parent.mkdir(parents=True)
    golden.write_text("".join(
        json.dumps({"id": gid, "question": q, "library": pin.split("@")[0], "version": pin.split("@")[1],
                    "out_of_scope": not rel, "relevant_ids": rel, "reference_answer": "see docs" if rel else "",
                    "expected_apis": [], "forbidden_apis": [], "split": split,
                    "kind": "lookup" if rel else "off_topic"}) + "\n"
        for gid, q, pin, rel, split in rows
    ))  # fmt: skip
    return golden
