"""A number is right or it is not printed: every stage verifies what it reads.

The real stages run through `doceval` (in process) on the tiny fixture corpus, indexed into a real local Qdrant
store with embedder=openai pointed at the local OpenAI-compatible test server (deterministic vectors, no model
to load), so the whole table runs in seconds. Each row damages one input the way an audit found it damaged,
runs a command, and checks the exit code, the message, and that nothing on disk changed (no empty collection
recreated, no meta.json rewritten, no output half-replaced) - or, for a cache, that the result is the same as
with an intact one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helpers_foundation import PIN1, PIN2, build_fixture_corpus, fixture_documents, write_fixture_golden
from openai_server import FakeOpenAI

from doceval.cli.main import main
from doceval.common.io import atomic_dir, remove_stale_temp_dirs
from doceval.config import schema
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.candidate_cache import check_candidates, load_candidates
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.candidates import retriever_fingerprint
from doceval.index.build import index_hash
from doceval.index.embed import EmbeddingCache
from doceval.index.store import VectorStore
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import write_corpus
from doceval.inputs.golden import parse_golden

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "DOCEVAL_INTEGRITY_TEST_KEY"
COLLECTION2 = "doceval__demo__2_0"  # PIN2's collection: 3 points

GOLDEN = [
    ("c1", "serialize the model to a dictionary", PIN1, [f"{PIN1}:demo.Model.dict"], "calibration"),
    ("c2", "validate one field before the model is created", PIN1, [f"{PIN1}:demo.validator"], "calibration"),
    ("c3", "serialize the model to a JSON string", PIN2, [f"{PIN2}:demo.BaseModel.model_dump_json"],
     "calibration"),
    ("c4", "the capital of France", PIN2, [], "calibration"),
    ("t1", "model to a JSON string", PIN1, [f"{PIN1}:demo.Model.json"], "test"),
    ("t2", "declare a field with a default value", PIN2, [f"{PIN2}:demo.Field"], "test"),
    ("t3", "global configuration", PIN1, [f"{PIN1}:demo.config"], "test"),
    ("t4", "a good pizza recipe", PIN1, [], "test"),
]  # fmt: skip
REFERENCED = {d for *_, rel, _ in GOLDEN for d in rel}

RETRIEVE = ["retrieve", "--params", "params.yaml", "--quiet"]
INDEX = ["index", "--params", "params.yaml", "--quiet"]
CALIBRATE = ["calibrate", "--params", "params.yaml", "--quiet"]
EVAL = [
    "eval",
    "--split",
    "test",
    "--no-track",
    "--quiet",
    "--output",
    "out.json",
    "retriever=bm25",
    "floors=zero",
]


# ------------------------------------------------------------------------------------------ the project


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, server: FakeOpenAI) -> Path:
    """docs -> index -> retrieve (dense) -> calibrate, once, through the CLI; every row works on a copy."""
    root = tmp_path_factory.mktemp("integrity") / "project"
    build_fixture_corpus(root / "data" / "docs")
    write_fixture_golden(root, GOLDEN)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["paths"] = {"docs": "data/docs", "index": "data/index", "runs": "data/runs", "cache": "data/cache",
                       "eval": "eval"}  # fmt: skip
    params["golden"] = "data/golden/v2.1.jsonl"
    params["embedder"] = {"name": "openai", "base_url": server.base_url, "model": "fake-embedding",
                          "api_key_env": KEY_ENV, "batch_size": 4}  # fmt: skip
    params["retriever"] = {"name": "dense"}
    params["store"] = {
        "name": "qdrant_local"
    }  # these rows damage local mode's files (Edge: test_store_edge.py)
    params["tracking"] = {**params["tracking"], "enabled": False, "uri": None}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "conf").symlink_to(ROOT / "conf")  # `doceval eval` composes conf/ from the working directory
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, "sk-test")
        mp.chdir(root)
        for argv in (INDEX, RETRIEVE, CALIBRATE):
            assert main(argv) == 0, argv
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(built, copy, symlinks=True)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.chdir(copy)
    return copy


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (symlinks not followed) -> sha256 of its bytes."""
    out: dict[str, str] = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# ------------------------------------------------------------------------------------------ the damage


def cut_lines(path: str, keep: int) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        lines = (root / path).read_text().splitlines(keepends=True)
        (root / path).write_text("".join(lines[:keep]))

    return damage


def cut_mid_line(path: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        data = (root / path).read_bytes()
        (root / path).write_bytes(data[: data.index(b"\n", len(data) // 2) - 20])

    return damage


def write(path: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / path).write_text(text)


def remove(path: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        target = root / path
        shutil.rmtree(target) if target.is_dir() else target.unlink()

    return damage


def edit_json(path: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        data = json.loads((root / path).read_text())
        edit(data)
        (root / path).write_text(json.dumps(data))

    return damage


def delete_points(n: int) -> Callable[[Path], None]:
    """Points gone from a collection whose folder and meta.json entry are intact (a short collection)."""

    def damage(root: Path) -> None:
        db = sqlite3.connect(root / "data/index/qdrant/collection" / COLLECTION2 / "storage.sqlite")
        db.execute("DELETE FROM points WHERE rowid IN (SELECT rowid FROM points LIMIT ?)", (n,))
        db.commit()
        db.close()

    return damage


def drop_unreferenced_chunks(root: Path) -> None:
    """The audit's case: chunks no golden entry references, gone (here all 2 of them; up to 30%)."""
    path = root / "data/docs/corpus.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    free = [i for i, line in enumerate(lines) if json.loads(line)["doc_id"] not in REFERENCED]
    drop = set(free[: max(1, int(0.3 * len(lines)))])
    path.write_text("".join(line for i, line in enumerate(lines) if i not in drop))


def edit_a_chunk(root: Path) -> None:
    path = root / "data/docs/corpus.jsonl"
    path.write_text(path.read_text().replace("Global configuration", "Local configuration"))


def rebuild_corpus_changed(root: Path) -> None:
    """The docs stage rerun on changed docs after retrieve: a valid corpus, not the one the cache came from."""
    docs = fixture_documents()
    docs[PIN2][0].text += "\n\nA new paragraph."
    write_corpus(docs, root / "data/docs", 80, {})


def rebuild_index_other_model(root: Path) -> None:
    """The index stage rerun with another embedder after retrieve: the manifest a new index would write."""
    path = root / "data/index/manifest.json"
    manifest = json.loads(path.read_text())
    manifest["model"] = "another-embedder"
    manifest["content_hash"] = index_hash(manifest["corpus_hash"], "another-embedder", manifest["dim"])
    path.write_text(json.dumps(manifest))


def garbage(path: str) -> Callable[[Path], None]:
    return lambda root: (root / path).write_bytes(os.urandom(4096))


def truncate_half(path: str) -> Callable[[Path], None]:
    def damage(root: Path) -> None:
        data = (root / path).read_bytes()
        (root / path).write_bytes(data[: len(data) // 2])

    return damage


# ------------------------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Case:
    id: str
    damage: Callable[[Path], None]
    argv: list[str]
    code: int
    needle: str  # in stderr
    changes: tuple[str, ...] = ()  # path prefixes allowed to change (exit 0 rows); nothing else may


CACHE = "data/cache/embeddings.sqlite"
CASES = [
    # 1. the index: every collection present with its point count, read without creating anything
    Case("collection deleted", remove(f"data/index/qdrant/collection/{COLLECTION2}"), RETRIEVE, 2,
         f"collection {COLLECTION2} of the index was deleted"),
    Case("collection short", delete_points(1), RETRIEVE, 2,
         f"collection {COLLECTION2} ({PIN2}) holds 2 points, the index manifest says 3"),
    Case("collection not listed in meta.json",
         edit_json("data/index/qdrant/meta.json", lambda m: m["collections"].pop(COLLECTION2)), RETRIEVE, 2,
         f"collection {COLLECTION2} is not listed"),
    Case("collection storage garbage", garbage(f"data/index/qdrant/collection/{COLLECTION2}/storage.sqlite"),
         RETRIEVE, 2, "the local Qdrant index is damaged"),
    Case("index manifest not an object", write("data/index/manifest.json", "[]"), RETRIEVE, 2,
         "not an index manifest"),
    Case("index manifest counts edited",
         edit_json("data/index/manifest.json", lambda m: m["partitions"].update({PIN2: 4})), RETRIEVE, 2,
         f"{PIN2} 4 points, corpus has 3 chunks"),
    Case("index manifest missing", remove("data/index/manifest.json"), RETRIEVE, 2, "index manifest not found"),
    # 2. Qdrant's meta.json: detected before Qdrant opens the folder (it would write an empty one)
    Case("qdrant meta.json missing", remove("data/index/qdrant/meta.json"), RETRIEVE, 2, "meta.json: missing"),
    Case("qdrant meta.json emptied", write("data/index/qdrant/meta.json", ""), RETRIEVE, 2, "meta.json: empty"),
    Case("qdrant meta.json garbage", write("data/index/qdrant/meta.json", "{\"collec"), RETRIEVE, 2,
         "meta.json:1: not valid JSON"),
    # 3. the corpus against its manifest: content hash, then chunks per pin
    Case("corpus cut to 8 lines", cut_lines("data/docs/corpus.jsonl", 8), EVAL, 2,
         "corpus.jsonl does not match its manifest (8 chunks, manifest says 10)"),
    Case("corpus cut mid-line", cut_mid_line("data/docs/corpus.jsonl"), EVAL, 2,
         "corpus.jsonl does not match its manifest"),
    Case("unreferenced chunks removed", drop_unreferenced_chunks, EVAL, 2,
         "corpus.jsonl does not match its manifest (8 chunks, manifest says 10)"),
    Case("a chunk edited", edit_a_chunk, EVAL, 2, "differs from content_hash"),
    Case("corpus manifest is []", write("data/docs/manifest.json", "[]"), EVAL, 2, "not a corpus manifest"),
    Case("corpus manifest is a string", write("data/docs/manifest.json", '"x"'), EVAL, 2, "not a corpus manifest"),
    Case("corpus manifest chunks edited",
         edit_json("data/docs/manifest.json", lambda m: m["pins"][PIN2].update({"chunks": 4})), EVAL, 2,
         f"chunks by pin: {PIN2} 3 of 4"),
    Case("corpus cut, retrieve", cut_lines("data/docs/corpus.jsonl", 8), RETRIEVE, 2, "rerun `doceval stage docs`"),
    Case("corpus cut, index", cut_lines("data/docs/corpus.jsonl", 8), INDEX, 2, "rerun `doceval stage docs`"),
    Case("corpus cut, calibrate", cut_lines("data/docs/corpus.jsonl", 8), CALIBRATE, 2, "rerun `doceval stage docs`"),
    # 4. the candidate cache: from this corpus and index, whole
    Case("corpus rebuilt after retrieve", rebuild_corpus_changed, CALIBRATE, 2,
         "candidate cache was retrieved from another corpus"),
    Case("index rebuilt after retrieve", rebuild_index_other_model, CALIBRATE, 2,
         "candidate cache was retrieved from another index"),
    Case("candidates cut mid-line", cut_mid_line("data/runs/candidates/candidates.jsonl"), CALIBRATE, 2,
         "the file is damaged (cut short?); rerun `doceval stage retrieve`"),  # no dvc.yaml in the copy
    Case("candidates cut mid-line, eval", cut_mid_line("data/runs/candidates/candidates.jsonl"), EVAL, 2,
         "rerun `doceval stage retrieve`"),
    Case("candidates cut at a line", cut_lines("data/runs/candidates/candidates.jsonl", 5), CALIBRATE, 2,
         "candidate cache holds 5 entries, meta.json says 8"),
    Case("candidates meta not an object", write("data/runs/candidates/meta.json", "[]"), CALIBRATE, 2,
         "not candidate cache metadata"),
    Case("candidates record of the wrong shape",
         write("data/runs/candidates/candidates.jsonl", '{"id": "c1", "candidates": 3}\n'), CALIBRATE, 2,
         "not a candidate record"),
    # 5. the embedding cache: a cache, rebuilt (moved aside, warned), the result unchanged
    Case("embedding cache garbage", garbage(CACHE), RETRIEVE, 0, "", changes=(CACHE,)),
    Case("embedding cache half-truncated", truncate_half(CACHE), RETRIEVE, 0, "", changes=(CACHE,)),
    Case("embedding cache garbage, index", garbage(CACHE), INDEX, 0, "",
         changes=(CACHE, "data/index/")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_damaged_input(
    case: Case, project: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    intact = snapshot(project)
    intact_index = json.loads((project / "data/index/manifest.json").read_text())
    case.damage(project)
    before = snapshot(project)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="doceval.index.embed"):
        code = main(case.argv)
    err = capsys.readouterr().err
    assert code == case.code, err
    after = snapshot(project)
    if case.code:
        assert case.needle in err
        assert "Traceback" not in err
        assert "fix or remove that line" not in err  # an output is rebuilt by its stage, never edited
        assert after == before  # nothing written, nothing recreated, no output replaced
        return
    # A damaged cache: moved aside with a warning, rebuilt; every output as with the intact cache.
    aside = [p for p in after if p.startswith(CACHE + ".corrupt-")]
    assert len(aside) == 1 and after[aside[0]] == before[CACHE]
    assert any("is corrupt" in r.getMessage() and aside[0] in r.getMessage() for r in caplog.records)
    unchanged = {p: h for p, h in after.items() if not p.startswith(case.changes)}
    assert unchanged == {p: h for p, h in intact.items() if not p.startswith(case.changes)}
    if case.argv is INDEX:  # a rebuilt index: the same content and points (timings and cache counts differ)
        manifest = json.loads((project / "data/index/manifest.json").read_text())
        assert manifest["content_hash"] == intact_index["content_hash"]
        assert manifest["partitions"] == intact_index["partitions"] == {PIN1: 7, PIN2: 3}
        # Every text embedded again (the one hit: the same Field text in both pins, within this build).
        record = json.loads((project / "data/index/build.json").read_text())
        assert record["embedding_cache"] == {"hits": 1, "misses": 9}
        assert main(RETRIEVE) == 0  # and it reads back: the same candidates as before
        runs = {p: h for p, h in snapshot(project).items() if p.startswith("data/runs/")}
        assert runs == {p: h for p, h in intact.items() if p.startswith("data/runs/")}


def test_the_intact_project_passes_every_check(project: Path) -> None:
    before = snapshot(project)
    assert main(RETRIEVE) == 0
    assert main(EVAL) == 0
    summary = json.loads((project / "out.json").read_text())
    assert summary["metrics"]["counts"]["n_entries"] == 4
    after = snapshot(project)
    assert {p: h for p, h in after.items() if p != "out.json"} == before  # retrieve rewrote the same bytes


# ------------------------------------------------------------------------------ the pieces, one by one


LOCAL = schema.StoreQdrantLocal(name="qdrant_local")


def test_reading_a_store_never_creates_one(tmp_path: Path) -> None:
    missing = tmp_path / "qdrant"
    with pytest.raises(UsageError, match=r"local Qdrant index is missing; rerun `dvc repro index`"):
        VectorStore(LOCAL, path=missing, expect={PIN1: 7})
    assert not missing.exists()


def test_a_short_collection_in_a_store_opened_for_reading(built: Path, tmp_path: Path) -> None:
    shutil.copytree(built / "data/index/qdrant", tmp_path / "qdrant")
    with VectorStore(LOCAL, path=tmp_path / "qdrant", expect={PIN1: 7, PIN2: 3}) as store:
        assert store.count(PIN2) == 3
    with pytest.raises(
        UsageError, match=rf"{COLLECTION2} \({PIN2}\) holds 3 points, the index manifest says 4"
    ):
        VectorStore(LOCAL, path=tmp_path / "qdrant", expect={PIN1: 7, PIN2: 4})
    # The failed open released Qdrant's lock: the store opens again.
    VectorStore(LOCAL, path=tmp_path / "qdrant", expect={PIN1: 7, PIN2: 3}).close()


def test_index_checks_only_apply_to_retrievers_that_read_the_index(built: Path, tmp_path: Path) -> None:
    corpus = load_corpus(built / "data/docs")
    entries = parse_golden(built / "data/golden/v2.1.jsonl", corpus_ids=corpus.doc_ids())
    cands = load_candidates(built / "data/runs")
    md5 = cands.meta["golden_md5"]
    dense = schema.RetrieverDense(name="dense")
    check_candidates(cands, entries, md5, dense, 5, corpus=corpus, index_dir=built / "data/index")
    with pytest.raises(UsageError, match=r"another index .*has no manifest\); rerun `dvc repro retrieve`"):
        check_candidates(cands, entries, md5, dense, 5, corpus=corpus, index_dir=tmp_path)
    # A bm25 cache does not depend on the index: no index, no complaint.
    bm25_cfg = compose(["retriever=bm25"]).retriever
    meta = {
        **cands.meta,
        "retriever": config_dict(bm25_cfg),
        "retriever_fingerprint": retriever_fingerprint(bm25_cfg),
    }
    bm25 = CandidateSet(meta, cands.ranked, cands.routed)
    check_candidates(bm25, entries, md5, bm25_cfg, 5, corpus=corpus, index_dir=tmp_path)
    with pytest.raises(
        UsageError, match=r"holds 7 entries, meta.json says 8 \(cut short\?\); rerun `dvc repro"
    ):
        short = CandidateSet(meta, dict(list(cands.ranked.items())[:7]), cands.routed)
        check_candidates(short, entries, md5, bm25_cfg, 5, corpus=corpus)


def test_a_corrupt_embedding_cache_found_mid_run_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np

    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    cache.put_many([("a", np.ones(4, dtype=np.float32))])
    assert set(cache.get_many(["a"])) == {"a"}
    cache.close()
    data = path.read_bytes()
    path.write_bytes(data[:100] + os.urandom(len(data) - 100))  # a valid header over garbage pages
    with caplog.at_level(logging.WARNING, logger="doceval.index.embed"):
        cache = EmbeddingCache(path)
        assert cache.get_many(["a"]) == {}  # a miss: embedded again, never a wrong vector
        cache.put_many([("b", np.zeros(4, dtype=np.float32))])
        assert set(cache.get_many(["a", "b"])) == {"b"}
        cache.close()
    assert len(list(tmp_path.glob("embeddings.sqlite.corrupt-*"))) == 1
    assert any("is corrupt" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------ 6. temp folders


WRITER = """
import sys, time
from pathlib import Path
from doceval.common.io import atomic_dir
with atomic_dir(Path(sys.argv[1])) as tmp:
    (tmp / "part").write_text("half")
    print(tmp, flush=True)
    sys.stdin.readline()
"""


def _writer(target: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


@pytest.mark.slow
def test_stale_temp_dirs_are_removed_and_a_live_writers_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "index"
    killed, stale = _writer(target)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert stale.is_dir() and stale.name.startswith(f".index.{killed.pid}.")
    live, running = _writer(target)
    legacy_old = tmp_path / ".index.k2j3h4l5"  # an older doceval's name: no pid, from before this process
    legacy_new = tmp_path / ".index.a1b2c3d4"  # no pid, newer than this process: maybe a writer running now
    legacy_swap = tmp_path / ".index.old"
    unrelated = [tmp_path / ".index.backup", tmp_path / ".indexes.k2j3h4l5", tmp_path / ".other.k2j3h4l5"]
    for folder in (legacy_old, legacy_new, legacy_swap, *unrelated):
        folder.mkdir()
    day_ago = time.time() - 86400
    for folder in (legacy_old, legacy_swap):
        os.utime(folder, (day_ago, day_ago))
    try:
        with atomic_dir(target) as tmp:
            (tmp / "whole").write_text("ours")
        assert (target / "whole").read_text() == "ours"
        assert not stale.exists() and not legacy_old.exists() and not legacy_swap.exists()
        assert running.is_dir() and (running / "part").read_text() == "half"  # a live writer's, untouched
        assert legacy_new.is_dir() and all(p.is_dir() for p in unrelated)
    finally:
        assert live.stdin is not None
        live.stdin.write("\n")
        live.stdin.close()
        assert live.wait(timeout=30) == 0
    assert (target / "part").read_text() == "half"  # the live writer finished and swapped its output in
    assert not running.exists()
    assert remove_stale_temp_dirs(target) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["index", legacy_new.name, *(p.name for p in unrelated)]
    )


def test_own_temp_dir_is_locked_while_in_use(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with atomic_dir(target) as outer:
        with atomic_dir(target) as inner:  # its clean-up must not take the outer one for stale
            assert outer.is_dir()
            (inner / "f").write_text("inner")
        (outer / "f").write_text("outer")
    assert (target / "f").read_text() == "outer"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failed_block_leaves_the_previous_output_and_no_temp_dir(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "f").write_text("previous")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "f").write_text("half")
        raise RuntimeError("killed")
    assert (target / "f").read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_an_output_gets_the_permissions_mkdir_gives(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with atomic_dir(tmp_path / "out") as tmp:
        (tmp / "f").write_text("x")
    assert (tmp_path / "out").stat().st_mode == (tmp_path / "plain").stat().st_mode  # not mkdtemp's 0700


# ------------------------------------------------------------------------------ 7. calibrate writes whole


CALIBRATE_KILLED = """
import sys, time
import doceval.stages.calibrate as stage
from doceval.cli.main import main

def plot(artifact, path):
    path.write_bytes(b"half a png")
    print("writing", flush=True)
    time.sleep(600)

stage.plot_calibration = plot
main(["calibrate", "--params", "params.yaml", "--quiet"])
"""


@pytest.mark.slow
def test_a_killed_calibrate_leaves_the_previous_folder_whole(project: Path) -> None:
    out = project / "eval" / "calibration"
    before = snapshot(out)
    assert {"floors.json", "floors.png", "summary.json", "curves/global.csv"} <= set(before)
    proc = subprocess.Popen([sys.executable, "-c", CALIBRATE_KILLED], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    temps = [p for p in (project / "eval").iterdir() if p.name.startswith(".calibration.")]
    assert len(temps) == 1 and (temps[0] / "floors.json").is_file()  # new floors, not beside old curves
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert snapshot(out) == before
    # The next calibrate removes the killed one's temp folder and swaps in a whole new output.
    assert main(CALIBRATE) == 0
    assert sorted(p.name for p in (project / "eval").iterdir() if p.name.startswith(".")) == []
    assert set(snapshot(out)) == set(before)


def test_a_failing_calibrate_leaves_the_previous_folder_whole(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import doceval.stages.calibrate as stage

    def broken(artifact: object, path: Path) -> None:
        path.write_bytes(b"half")
        raise OSError("disk full")

    out = project / "eval" / "calibration"
    before = snapshot(out)
    monkeypatch.setattr(stage, "plot_calibration", broken)
    assert main(CALIBRATE) == 1
    assert snapshot(out) == before
    assert [p.name for p in (project / "eval").iterdir() if p.name.startswith(".calibration")] == []
