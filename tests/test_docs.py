"""Corpus building: docstring extraction from real wheels (parsed, never imported), chunking, folder mode,
sha256 pinning, atomic output and the `doceval docs` CLI's usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers_foundation import make_wheel

from doceval.cli.main import main
from doceval.common.io import sha256_file
from doceval.errors import UsageError
from doceval.inputs.docs import (
    Document,
    LibrarySpec,
    chunk_document,
    extract_wheel,
    fetch_wheel,
    write_corpus,
)
from doceval.inputs.folders import build_folders_corpus, extract_folder

WHEEL_CACHE = Path(__file__).resolve().parents[1] / "data" / "cache" / "wheels"


@pytest.fixture(scope="module")
def wheel_docs(tmp_path_factory):
    wheel = make_wheel(tmp_path_factory.mktemp("wheel"))
    docs = extract_wheel(wheel, LibrarySpec("Lib", "1.0", exclude=("pkg/v1/*",)))
    return {d.doc_id: d for d in docs}


# ------------------------------------------------------------------------------------------ extraction


def test_public_objects_get_dotted_ids_under_the_normalised_pin(wheel_docs):
    assert set(wheel_docs) == {
        "lib@1.0:pkg",  # pkg/__init__.py: the module name `__init__` is dropped
        "lib@1.0:pkg.core",
        "lib@1.0:pkg.core.Thing",
        "lib@1.0:pkg.core.Thing.method",
        "lib@1.0:pkg.core.Thing.old_method",
        "lib@1.0:pkg.core.old_thing",
        "lib@1.0:pkg.core.legacy_thing",
        "lib@1.0:pkg.core.new_thing",
        "lib@1.0:pkg._impl.public_fn",
    }
    assert wheel_docs["lib@1.0:pkg"].kind == "module"
    assert wheel_docs["lib@1.0:pkg.core.Thing"].kind == "class"
    assert wheel_docs["lib@1.0:pkg.core.Thing.method"].kind == "method"
    assert wheel_docs["lib@1.0:pkg.core.new_thing"].kind == "function"
    doc = wheel_docs["lib@1.0:pkg.core.Thing.method"]
    assert (doc.library, doc.version, doc.path) == ("lib", "1.0", "pkg.core.Thing.method")
    assert doc.text == "def pkg.core.Thing.method(self, x)\n\nDo the method thing with x."


def test_private_names_are_skipped_but_public_names_in_private_modules_are_kept(wheel_docs):
    assert "lib@1.0:pkg._impl.public_fn" in wheel_docs
    assert "Public API, privately." in wheel_docs["lib@1.0:pkg._impl.public_fn"].text
    assert "lib@1.0:pkg._impl" not in wheel_docs  # the private module's own docstring
    assert "lib@1.0:pkg.core._helper" not in wheel_docs
    assert "lib@1.0:pkg.core.Thing._private_method" not in wheel_docs
    assert "lib@1.0:pkg.core.Thing.__init__" not in wheel_docs
    assert not any("Internal helper" in d.text or "Hidden." in d.text for d in wheel_docs.values())


def test_tests_vendored_excluded_and_unparsable_files_are_skipped(wheel_docs, tmp_path):
    for absent in ("pkg.tests", "pkg._vendor", "pkg.v1", "pkg.py2only"):
        assert not any(d.path.startswith(absent) for d in wheel_docs.values()), absent
    # The spec's exclude is what removes pkg/v1 (the default excludes do not cover it) ...
    without_exclude = {d.doc_id for d in extract_wheel(make_wheel(tmp_path), LibrarySpec("lib", "1.0"))}
    assert "lib@1.0:pkg.v1.old.legacy" in without_exclude
    # ... while tests and vendored code are never documented.
    assert not any(".tests." in i or "._vendor." in i or "py2only" in i for i in without_exclude)


def test_deprecation_decorator_messages_are_in_the_document(wheel_docs):
    old = wheel_docs["lib@1.0:pkg.core.old_thing"]
    assert old.deprecated == ["Use new_thing instead"]
    assert old.text == "def pkg.core.old_thing()\n\nDeprecated: Use new_thing instead\n\nMake an old thing."
    method = wheel_docs["lib@1.0:pkg.core.Thing.old_method"]
    assert method.deprecated == ["Thing.old_method is deprecated; call Thing.method instead"]
    assert "Deprecated: Thing.old_method is deprecated; call Thing.method instead" in method.text
    # A decorator with a version argument keeps only the sentence; no docstring is needed to be documented.
    legacy = wheel_docs["lib@1.0:pkg.core.legacy_thing"]
    assert legacy.deprecated == ["The legacy_thing() function is considered legacy"]
    assert "2.0" not in legacy.text
    assert wheel_docs["lib@1.0:pkg.core.new_thing"].deprecated == []


def test_init_docstring_is_folded_into_the_class_document(wheel_docs):
    text = wheel_docs["lib@1.0:pkg.core.Thing"].text
    assert text.splitlines()[0] == "class pkg.core.Thing()(self, size: int=1)"
    assert "A thing that does things." in text
    assert "Create a thing." in text and ":param size: how big the thing is." in text
    assert text.index("A thing that does things.") < text.index("Create a thing.")


def test_module_docstrings(wheel_docs):
    assert wheel_docs["lib@1.0:pkg"].text == "module pkg\n\nThe pkg package: things and helpers."
    assert wheel_docs["lib@1.0:pkg.core"].text == "module pkg.core\n\nCore utilities of pkg."


CLICK_PINS = {
    "click@7.1.2": "dacca89f4bfadd5de3d7489b7c8a566eee0d3676333fbb50030263894c38c0dc",
    "click@8.1.7": "ae74fb96c20a0277a1d615f1e4d73c8414f5a98db8b799a7931d1582f3390c28",
}


def _cached_wheel(pin: str) -> Path:
    """The pinned wheel, downloaded once per machine by the session's real_corpus_dir fixture."""
    wheels = sorted((WHEEL_CACHE / pin).glob("*.whl"))
    assert wheels, f"{pin} wheel missing under {WHEEL_CACHE} although real_corpus_dir built the corpus"
    return wheels[0]


@pytest.mark.slow
def test_real_click_wheels_document_each_versions_own_api(real_corpus_dir):
    ids = {}
    for pin, digest in CLICK_PINS.items():
        wheel = _cached_wheel(pin)
        assert sha256_file(wheel) == digest, f"{wheel} is not the pinned click wheel"
        name, version = pin.split("@")
        ids[pin] = {d.doc_id for d in extract_wheel(wheel, LibrarySpec(name, version))}
    # 7.x: the decorator is MultiCommand.resultcallback; 8.x renamed it result_callback, still on MultiCommand
    # (where it is defined; Group inherits it and has no document of its own for it).
    assert "click@7.1.2:click.core.MultiCommand.resultcallback" in ids["click@7.1.2"]
    assert "click@7.1.2:click.core.MultiCommand.result_callback" not in ids["click@7.1.2"]
    assert "click@8.1.7:click.core.MultiCommand.result_callback" in ids["click@8.1.7"]
    assert "click@8.1.7:click.core.MultiCommand.resultcallback" not in ids["click@8.1.7"]
    assert "click@8.1.7:click.core.Group.result_callback" not in ids["click@8.1.7"]
    for pin, found in ids.items():
        assert f"{pin}:click.decorators.option" in found
        assert len(found) > 100
        assert not any(i.split(":", 1)[1].split(".")[-1].startswith("_") for i in found)


@pytest.mark.slow
def test_real_pydantic2_wheel_excludes_the_vendored_v1(real_corpus_dir):
    wheel = _cached_wheel("pydantic@2.8.2")
    docs = {
        d.doc_id: d
        for d in extract_wheel(wheel, LibrarySpec("pydantic", "2.8.2", exclude=("pydantic/v1/*",)))
    }
    assert "pydantic@2.8.2:pydantic.main.BaseModel.model_dump" in docs
    assert not any(i.startswith("pydantic@2.8.2:pydantic.v1.") for i in docs)
    # BaseModel.dict still exists in 2.x, but as a deprecated shim whose document says what to use instead.
    shim = docs["pydantic@2.8.2:pydantic.main.BaseModel.dict"]
    assert shim.deprecated and "model_dump" in shim.deprecated[0]
    assert "Deprecated: " in shim.text


# -------------------------------------------------------------------------------------------- chunking


def _long_doc(paragraphs: list[str]) -> Document:
    text = "\n\n".join(["def lib.mod.long_function(a, b)", *paragraphs])
    return Document("lib@1.0:lib.mod.long_function", "lib", "1.0", "lib.mod.long_function", "function", text)


def test_long_docstring_is_split_into_chunks_that_each_start_with_the_header():
    paragraphs = [
        (f"Paragraph {i} explains option number {i} in some detail. " * 2).strip() for i in range(12)
    ]
    doc = _long_doc(paragraphs)
    chunks = chunk_document(doc, 300)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.startswith("def lib.mod.long_function(a, b)\n\n")
        assert len(chunk) <= 300
    # Nothing lost, nothing duplicated, order kept.
    bodies = [c.split("\n\n", 1)[1] for c in chunks]
    assert "\n\n".join(bodies) == "\n\n".join(paragraphs)


def test_a_huge_paragraph_is_hard_wrapped():
    doc = _long_doc(["x" * 1000])
    header = "def lib.mod.long_function(a, b)"
    chunks = chunk_document(doc, 300)
    assert len(chunks) == 4
    assert all(c.startswith(header + "\n\n") and len(c) <= 300 + len(header) + 2 for c in chunks)
    assert "".join(c[len(header) + 2 :] for c in chunks) == "x" * 1000


def test_a_section_without_blank_lines_is_still_chunked():
    # Folder docs often run a heading straight into its text: the header is the first line only.
    lines = [f"Line {i} of a long section body without any blank line." for i in range(40)]
    doc = Document(
        "lib@1.0:guide.intro", "lib", "1.0", "guide.intro", "section", "# Intro\n" + "\n".join(lines)
    )
    chunks = chunk_document(doc, 400)
    assert len(chunks) > 4
    assert all(c.startswith("# Intro\n\n") and len(c) <= 400 + len("# Intro") + 2 for c in chunks)


def test_write_corpus_numbers_chunks_per_document_and_counts_them(tmp_path):
    paragraphs = [
        (f"Paragraph {i} explains option number {i} in some detail. " * 2).strip() for i in range(12)
    ]
    long_doc = _long_doc(paragraphs)
    short = Document(
        "lib@1.0:lib.mod.short", "lib", "1.0", "lib.mod.short", "function", "def lib.mod.short()\n\nShort."
    )
    manifest = write_corpus(
        {"lib@1.0": [short, long_doc]}, tmp_path / "docs", 300, {"lib@1.0": {"source": "x.whl"}}
    )
    records = [json.loads(line) for line in (tmp_path / "docs" / "corpus.jsonl").read_text().splitlines()]
    long_ids = [r["chunk_id"] for r in records if r["doc_id"] == long_doc.doc_id]
    n = len(chunk_document(long_doc, 300))
    assert long_ids == [f"{long_doc.doc_id}#{i}" for i in range(n)]
    assert [r["chunk_id"] for r in records if r["doc_id"] == short.doc_id] == ["lib@1.0:lib.mod.short#0"]
    assert records[0]["doc_id"] == long_doc.doc_id  # documents sorted by id: "long_function" < "short"
    assert set(records[0]) == {"chunk_id", "doc_id", "library", "version", "kind", "text"}
    assert manifest["pins"]["lib@1.0"] == {"documents": 2, "chunks": n + 1, "source": "x.whl"}
    assert (manifest["documents"], manifest["chunks"], manifest["chunk_chars"]) == (2, n + 1, 300)
    assert manifest["content_hash"] == sha256_file(tmp_path / "docs" / "corpus.jsonl")
    assert json.loads((tmp_path / "docs" / "manifest.json").read_text()) == manifest


def test_write_corpus_is_atomic(tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "manifest.json").write_text('{"old": true}\n')
    (out / "corpus.jsonl").write_text("old corpus\n")
    good = Document("lib@1.0:lib.a", "lib", "1.0", "lib.a", "function", "def lib.a()\n\nFine.")
    broken = Document("lib@1.0:lib.b", "lib", "1.0", "lib.b", "function", None)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        write_corpus({"lib@1.0": [good, broken]}, out, 300, {})
    assert (out / "manifest.json").read_text() == '{"old": true}\n'
    assert (out / "corpus.jsonl").read_text() == "old corpus\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no half-written temp dir left behind


# ----------------------------------------------------------------------------------------- folder mode


def _docs_folder(root: Path) -> Path:
    (root / "reference").mkdir(parents=True)
    (root / "guide.md").write_text(
        "Preamble before any heading.\n\n"
        "# Getting Started\n\nInstall it with pip.\n\n"
        "```python\n# a comment in code, not a heading\nimport mylib\n```\n\n"
        "## Configure the Client!\nSet MYLIB_URL before connecting.\n",
        encoding="utf-8",
    )
    (root / "reference" / "api.rst").write_text(
        "Overview\n========\n\nThe API in one page.\n\n"
        "Client Options\n--------------\n\nTimeouts and retries.\n",
        encoding="utf-8",
    )
    (root / "logo.png").write_bytes(b"\x89PNG not documentation")
    return root


def test_folder_of_markdown_and_rst_becomes_section_documents(tmp_path):
    docs = {d.doc_id: d for d in extract_folder(_docs_folder(tmp_path / "src"), "My_Lib", "1.0")}
    assert set(docs) == {
        "my-lib@1.0:guide",  # text before the first heading
        "my-lib@1.0:guide.getting_started",
        "my-lib@1.0:guide.configure_the_client",
        "my-lib@1.0:reference.api.overview",
        "my-lib@1.0:reference.api.client_options",
    }
    started = docs["my-lib@1.0:guide.getting_started"]
    assert started.text.startswith("# Getting Started\n\nInstall it with pip.")
    assert "# a comment in code, not a heading\nimport mylib" in started.text  # code stays in its section
    assert (
        docs["my-lib@1.0:reference.api.client_options"].text
        == "Client Options\n--------------\n\nTimeouts and retries."
    )
    assert all(d.kind == "section" and d.library == "my-lib" and d.version == "1.0" for d in docs.values())


def test_build_folder_corpus_writes_a_loadable_corpus(tmp_path):
    manifest = build_folders_corpus(
        [(_docs_folder(tmp_path / "src"), "mylib", "1.0")], tmp_path / "docs", 1500
    )
    assert manifest["pins"]["mylib@1.0"]["documents"] == 5
    assert manifest["pins"]["mylib@1.0"]["source"] == str(tmp_path / "src")


def test_empty_folder_is_a_usage_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no documents found in .*empty"):
        extract_folder(tmp_path / "empty", "mylib", "1.0")
    with pytest.raises(UsageError, match="not a directory"):
        build_folders_corpus([(tmp_path / "missing", "mylib", "1.0")], tmp_path / "docs", 1500)


# ------------------------------------------------------------------------------------------ sha256 pin


def test_cached_wheel_with_the_pinned_digest_is_used_without_network(tmp_path):
    wheel = make_wheel(tmp_path / "cache" / "lib@1.0")
    spec = LibrarySpec("lib", "1.0", sha256=sha256_file(wheel))
    assert fetch_wheel(spec, tmp_path / "cache") == wheel


def test_sha256_mismatch_names_library_and_digests_and_moves_the_wheel_aside(tmp_path):
    pin_dir = tmp_path / "cache" / "lib@1.0"
    pin_dir.mkdir(parents=True)
    fake = pin_dir / "lib-1.0-py3-none-any.whl"
    fake.write_bytes(b"tampered wheel bytes")
    actual = sha256_file(fake)
    expected = "0" * 64
    with pytest.raises(UsageError) as err:
        fetch_wheel(LibrarySpec("lib", "1.0", sha256=expected), tmp_path / "cache")
    message = str(err.value)
    assert "sha256 mismatch for lib==1.0" in message
    assert f"expected {expected}" in message and f"got {actual}" in message
    assert not fake.exists()
    assert (pin_dir / "lib-1.0-py3-none-any.whl.rejected").read_bytes() == b"tampered wheel bytes"
    assert str(pin_dir / "lib-1.0-py3-none-any.whl.rejected") in message


# ---------------------------------------------------------------------------------------------- the CLI


def _params_file(tmp_path: Path, libraries: list[dict]) -> Path:
    """A complete params.yaml (the shipped composition) with these libraries and paths under tmp_path."""
    from doceval.config.compose import compose
    from doceval.config.objects import config_dict

    params = config_dict(compose())
    params["docs"] = {**params["docs"], "folders": [], "libraries": libraries}
    params["paths"] = {**params["paths"], "docs": str(tmp_path / "data" / "docs"),
                       "cache": str(tmp_path / "data" / "cache")}  # fmt: skip
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_cli_docs_only_unknown_pin_exits_2_listing_the_known_pins(tmp_path, capsys):
    params = _params_file(tmp_path, [{"name": "Lib", "version": "1.0"}, {"name": "other", "version": "2.0"}])
    assert main(["docs", "--params", str(params), "--quiet", "--only", "nope@1"]) == 2
    err = capsys.readouterr().err
    assert "nope@1 not configured" in err
    assert "known: lib@1.0, other@2.0" in err
    assert not (tmp_path / "data" / "docs").exists()


def test_cli_docs_builds_the_corpus_from_a_cached_pinned_wheel(tmp_path, capsys):
    wheel = make_wheel(tmp_path / "data" / "cache" / "wheels" / "lib@1.0")
    params = _params_file(
        tmp_path, [{"name": "Lib", "version": "1.0", "sha256": sha256_file(wheel), "exclude": ["pkg/v1/*"]}]
    )
    assert main(["docs", "--params", str(params), "--quiet", "--only", "lib@1.0"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary == {"documents": 9, "chunks": 9, "pins": {"lib@1.0": 9}}
    manifest = json.loads((tmp_path / "data" / "docs" / "manifest.json").read_text())
    assert manifest["pins"]["lib@1.0"]["sha256"] == sha256_file(wheel)
    assert manifest["pins"]["lib@1.0"]["source"] == wheel.name
