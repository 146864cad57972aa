"""store=qdrant_edge: real Qdrant Edge shards on disk (no mocks), against local mode, and through the CLI.

The CLI half runs the real stages on the tiny fixture corpus with embedder=openai pointed at the local
OpenAI-compatible test server (deterministic vectors, no model to load), as tests/test_damaged_inputs.py does.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers_foundation import PIN1, PIN2, build_fixture_corpus, write_fixture_golden
from openai_server import FakeOpenAI

from doceval.cli.main import main
from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.index.store import SearchConfig, VectorStore, collection_name
from doceval.system.retrievers import RETRIEVERS, needs_index

ROOT = Path(__file__).resolve().parents[1]
EDGE = compose(["store=qdrant_edge"]).store
assert isinstance(EDGE, schema.StoreQdrantEdge)
LOCAL = schema.StoreQdrantLocal(name="qdrant_local")
PIN = "lib@1.0"


def _unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _edge(**search: object) -> schema.StoreQdrantEdge:
    return replace(EDGE, search=replace(EDGE.search, **search))


def _fill(store: VectorStore, n: int, dim: int, texts: list[str] | None = None) -> np.ndarray:
    vectors = _unit_vectors(n, dim)
    chunk_ids = [f"{PIN}:mod.f{i}#0" for i in range(n)]
    store.recreate(PIN, dim)
    store.upsert(PIN, chunk_ids, [c.split("#")[0] for c in chunk_ids], vectors, texts=texts, batch=64)
    return vectors


# ------------------------------------------------------------------------------------------ the store


def test_exact_edge_search_ranks_as_local_mode(tmp_path: Path) -> None:
    """The same 300 vectors in both stores: every query gets the same ranked ids and, to float tolerance, scores."""
    with (
        VectorStore(EDGE, path=tmp_path / "edge") as edge,
        VectorStore(LOCAL, path=tmp_path / "qdrant") as local,
    ):
        vectors = _fill(edge, 300, 24)
        assert _fill(local, 300, 24).tolist() == vectors.tolist()
        assert edge.finish(PIN) == 300
        queries = _unit_vectors(25, 24, seed=1)
        for q in queries:
            a, b = edge.search(PIN, q, 20), local.search(PIN, q, 20)
            assert [h[0] for h in a] == [h[0] for h in b]
            assert [h[2] for h in a] == pytest.approx([h[2] for h in b], abs=1e-5)
            # and both are the cosine ranking computed by hand
            expected = np.argsort(-(vectors @ q))[:20]
            assert [h[0] for h in a] == [f"{PIN}:mod.f{i}#0" for i in expected]


def test_shard_round_trip_marker_and_hnsw(tmp_path: Path) -> None:
    with VectorStore(_edge(exact=False, hnsw_ef=64), path=tmp_path / "edge") as store:
        vectors = _fill(store, 200, 16)
        assert store.finish(PIN) == 200
    marker = json.loads((tmp_path / "edge" / f"{collection_name(PIN)}.done.json").read_text())
    assert marker["points"] == 200 and marker["search"] == {
        "m": 16,
        "ef_construct": 100,
        "quantization": None,
    }
    # Reopened for reading: the HNSW graph finds every stored vector first, exact search agrees.
    with VectorStore(_edge(exact=False, hnsw_ef=64), path=tmp_path / "edge", expect={PIN: 200}) as store:
        for i in range(0, 200, 20):
            top = store.search(PIN, vectors[i], 3)
            assert top[0][0] == f"{PIN}:mod.f{i}#0" and top[0][2] == pytest.approx(1.0, abs=1e-5)
            assert store.search(PIN, vectors[i], 3, exact=True)[0][0] == top[0][0]


@pytest.mark.parametrize("quantization", ["scalar", "binary"])
def test_quantized_search_with_rescoring_keeps_true_cosines(tmp_path: Path, quantization: str) -> None:
    cfg = _edge(exact=False, quantization=quantization, rescore=True, oversampling=2.0)
    with VectorStore(cfg, path=tmp_path / "edge") as store:
        vectors = _fill(store, 200, 32)
        store.finish(PIN)
        hits = store.search(PIN, vectors[7], 5)
        assert hits[0][0] == f"{PIN}:mod.f7#0"
        # Rescored: the scores are the original vectors' cosines, not the quantized approximations.
        for chunk_id, _, score in hits:
            i = int(chunk_id.split(".f")[1].split("#")[0])
            assert score == pytest.approx(float(vectors[i] @ vectors[7]), abs=1e-4)


def test_a_half_written_shard_is_never_read_as_complete(tmp_path: Path) -> None:
    """A build killed between upsert and finish leaves a shard without its marker: refused, never read."""
    store = VectorStore(EDGE, path=tmp_path / "edge")
    _fill(store, 50, 8)
    store.close()  # no finish(): no marker
    assert (tmp_path / "edge" / collection_name(PIN)).is_dir()
    with pytest.raises(
        UsageError, match=r"no completeness marker \(a killed index stage\?\).*dvc repro index"
    ):
        VectorStore(EDGE, path=tmp_path / "edge", expect={PIN: 50})
    # A marker that does not match the manifest's count is refused too.
    with VectorStore(EDGE, path=tmp_path / "edge2") as store:
        _fill(store, 50, 8)
        store.finish(PIN)
    with pytest.raises(UsageError, match=r"holds 50 points \(marker says 50\), the index manifest says 51"):
        VectorStore(EDGE, path=tmp_path / "edge2", expect={PIN: 51})
    with pytest.raises(UsageError, match=r"Edge shard of other@2 is missing"):
        VectorStore(EDGE, path=tmp_path / "edge2", expect={PIN: 50, "other@2": 3})
    with pytest.raises(UsageError, match=r"the Edge index is missing"):
        VectorStore(EDGE, path=tmp_path / "nothing", expect={PIN: 50})
    assert not (tmp_path / "nothing").exists()  # reading never creates


def test_hybrid_is_the_engines_rrf_of_bm25_and_dense(tmp_path: Path) -> None:
    texts = ["parse the configuration file", "serialize a model to json", "connect to the database engine"]
    vectors = np.eye(3, 4, dtype=np.float32)
    ids = [f"{PIN}:d{i}#0" for i in range(3)]
    with VectorStore(EDGE, path=tmp_path / "edge") as store:
        store.recreate(PIN, 4)
        store.upsert(PIN, ids, [c.split("#")[0] for c in ids], vectors, texts=texts)
        store.finish(PIN)
        # Dense ranks d0 first (the query vector is d0's); BM25 ranks d1 first (the only one with "json").
        hits = store.hybrid(
            PIN, np.array([1, 0, 0, 0], dtype=np.float32), "json", limit=3, rrf_k=60, depth=10
        )
        scores = {c: s for c, _, s in hits}
        # RRF is 1 / (60 + rank), rank from 0. d0: first by dense only, 1/60. d1: first by BM25, and second or
        # third by dense (its cosine 0 ties d2's; the engine breaks the tie), so 1/60 + 1/61 or 1/60 + 1/62.
        assert hits[0][0] == ids[1]
        assert scores[ids[1]] in (
            pytest.approx(1 / 60 + 1 / 61, abs=1e-6),
            pytest.approx(1 / 60 + 1 / 62, abs=1e-6),
        )
        assert scores[ids[0]] == pytest.approx(1 / 60, abs=1e-6)
        # A query matching d0 both ways: first in both rankings, 2 / 60.
        both = store.hybrid(PIN, np.array([1, 0, 0, 0], dtype=np.float32), "configuration", 3, 60, 10)
        assert both[0][0] == ids[0] and both[0][2] == pytest.approx(2 / 60, abs=1e-6)


def test_hybrid_needs_the_edge_store(tmp_path: Path) -> None:
    with (
        VectorStore(LOCAL, path=tmp_path / "qdrant") as store,
        pytest.raises(UsageError, match="retriever=hybrid_native needs store=qdrant_edge"),
    ):
        store.hybrid(PIN, np.ones(4, dtype=np.float32), "x", 3, 60, 10)


def test_search_config_refuses_what_the_engine_would_accept_silently() -> None:
    for bad, needle in [
        ({"quantization": "product"}, "store.search.quantization='product' is not supported"),
        ({"oversampling": 0.5}, "store.search.oversampling=0.5 must be >= 1"),
    ]:
        with pytest.raises(UsageError, match=needle):
            SearchConfig.of(_edge(**bad))
    # An unknown key never gets that far: the schema refuses it when the config is composed.
    with pytest.raises(UsageError, match=r"store\.search\.nope: unknown key"):
        compose(["store=qdrant_edge", "+store.search.nope=1"])


# ------------------------------------------------------------------------------------------ through the CLI

KEY_ENV = "DOCEVAL_EDGE_TEST_KEY"
GOLDEN = [
    ("c1", "serialize the model to a dictionary", PIN1, [f"{PIN1}:demo.Model.dict"], "calibration"),
    ("c2", "validate one field before the model is created", PIN1, [f"{PIN1}:demo.validator"], "calibration"),
    ("c3", "the capital of France", PIN2, [], "calibration"),
    ("t1", "model to a JSON string", PIN1, [f"{PIN1}:demo.Model.json"], "test"),
    ("t2", "declare a field with a default value", PIN2, [f"{PIN2}:demo.Field"], "test"),
    ("t3", "a good pizza recipe", PIN1, [], "test"),
]  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def _embedder(server: FakeOpenAI) -> dict[str, object]:
    return {"name": "openai", "base_url": server.base_url, "model": "fake-embedding", "api_key_env": KEY_ENV,
            "batch_size": 4}  # fmt: skip


def _overrides(server: FakeOpenAI) -> list[str]:
    return ["embedder=openai", f"embedder.base_url={server.base_url}", "embedder.model=fake-embedding",
            f"embedder.api_key_env={KEY_ENV}", "embedder.batch_size=4", "tracking.enabled=false"]  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, server: FakeOpenAI) -> Path:
    """docs -> index (store=qdrant_edge, the default) once; every test works on a copy."""
    root = tmp_path_factory.mktemp("edge") / "project"
    build_fixture_corpus(root / "data" / "docs")
    write_fixture_golden(root, GOLDEN)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert params["store"]["name"] == "qdrant_edge" and params["store"]["search"]["exact"] is True
    params["paths"] = {"docs": "data/docs", "index": "data/index", "runs": "data/runs", "cache": "data/cache",
                       "eval": "eval"}  # fmt: skip
    params["golden"] = "data/golden/v2.1.jsonl"
    params["embedder"] = _embedder(server)
    params["tracking"] = {**params["tracking"], "enabled": False, "uri": None}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "conf").symlink_to(ROOT / "conf")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, "sk-test")
        mp.chdir(root)
        assert main(["index", "--params", "params.yaml", "--quiet"]) == 0
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(built, copy, symlinks=True)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.chdir(copy)
    return copy


def _eval(server: FakeOpenAI, *extra: str) -> list[str]:
    return ["eval", "--split", "test", "--no-track", "--quiet", "--output", "out.json", "floors=zero",
            "golden=data/golden/v2.1.jsonl", *_overrides(server), *extra]  # fmt: skip


def test_the_index_manifest_records_the_edge_store(built: Path) -> None:
    manifest = json.loads((built / "data/index/manifest.json").read_text())
    assert manifest["store"] == "qdrant_edge" and manifest["location"] == "edge"
    assert manifest["search"] == {"m": 16, "ef_construct": 100, "quantization": None}
    assert manifest["partitions"] == {PIN1: 7, PIN2: 3}
    for pin, n in manifest["partitions"].items():
        assert (
            json.loads((built / "data/index/edge" / f"{collection_name(pin)}.done.json").read_text())[
                "points"
            ]
            == n
        )


@pytest.mark.parametrize("retriever", [n for n in RETRIEVERS.names() if needs_index(n)])
def test_every_index_retriever_runs_from_the_cli_on_edge(
    project: Path, server: FakeOpenAI, retriever: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_eval(server, f"retriever={retriever}")) == 0, capsys.readouterr().err
    summary = json.loads((project / "out.json").read_text())
    assert summary["metrics"]["counts"]["n_entries"] == 3
    assert summary["config"]["candidates"]["search"]["store"] == "qdrant_edge"
    assert summary["config"]["candidates"]["search"]["exact"] is True
    # t1 asks for demo.Model.json by its own words: every retriever finds it within k.
    t1 = next(e for e in summary["entries"] if e["id"] == "t1")
    assert f"{PIN1}:demo.Model.json" in [d for d, _ in t1["retrieved"]]


def test_exact_edge_and_local_mode_give_the_same_candidates(
    project: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_eval(server, "retriever=dense", "k=5", "paths.runs=runs_edge")) == 0
    edge = json.loads((project / "out.json").read_text())
    local_params = yaml.safe_load((project / "params.yaml").read_text())
    local_params["store"] = {"name": "qdrant_local"}
    local_params["paths"]["index"] = "index_local"
    (project / "local.yaml").write_text(yaml.safe_dump(local_params))
    assert main(["index", "--params", "local.yaml", "--quiet"]) == 0
    argv = _eval(
        server, "retriever=dense", "k=5", "store=qdrant_local", "paths.index=index_local", "paths.runs=r2"
    )
    assert main(argv) == 0, capsys.readouterr().err
    local = json.loads((project / "out.json").read_text())
    for a, b in zip(edge["entries"], local["entries"], strict=True):
        assert [d for d, _ in a["retrieved"]] == [d for d, _ in b["retrieved"]]
        assert [s for _, s in a["retrieved"]] == pytest.approx([s for _, s in b["retrieved"]], abs=1e-5)
    assert edge["metrics"]["mrr"] == local["metrics"]["mrr"]


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["store.search.m=32"], ["store.search.m=32 (index: 16)", "`doceval stage index`"]),
        (
            ["store.search.quantization=scalar"],
            ["store.search.quantization='scalar' (index: None)", "doceval stage index"],
        ),
        (["store=qdrant_local"], ["built into qdrant_edge, but store=qdrant_local", "`doceval stage index`"]),
        (["embedder.model=another"], ["index built with", "rerun `doceval stage index`"]),
        (["store.search.quantization=product"], ["store.search.quantization=product", "scalar, binary"]),
        (["store.search.oversampling=0.5"], ["store.search.oversampling=0.5", ">= 1"]),
        (
            ["retriever=hybrid_native", "store=qdrant_server", "store.url=http://127.0.0.1:9"],
            ["built into qdrant_edge"],
        ),
    ],
    ids=[
        "m",
        "quantization added",
        "other store",
        "other embedder",
        "unknown quantization",
        "oversampling",
        "server",
    ],
)
def test_an_index_built_otherwise_is_refused_with_exit_2(
    project: Path,
    server: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    needles: list[str],
) -> None:
    capsys.readouterr()
    assert main(_eval(server, "retriever=dense", *extra)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_query_time_parameters_need_no_rebuild(project: Path, server: FakeOpenAI) -> None:
    argv = _eval(server, "retriever=dense", "store.search.exact=false", "store.search.hnsw_ef=32",
                 "store.search.oversampling=2.0", "store.search.rescore=false")  # fmt: skip
    assert main(argv) == 0
    search = json.loads((project / "out.json").read_text())["config"]["candidates"]["search"]
    assert search["exact"] is False and search["hnsw_ef"] == 32 and search["rescore"] is False


def test_ann_vs_exact_section_in_the_report(project: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["store"]["search"]["exact"] = False
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for stage in ("retrieve", "calibrate", "evaluate"):
        assert main([stage, "--params", "params.yaml", "--quiet"]) == 0, stage
    assert (project / "data/runs/candidates/exact.jsonl").is_file()
    data = json.loads((project / "eval/ann_vs_exact.json").read_text())
    assert data["exact"] is False and [r["metric"] for r in data["rows"]] == [
        "hit_rate",
        "recall",
        "mrr",
        "ndcg",
    ]
    # 10 points per shard: HNSW over a graph this small finds the exact neighbours, so nothing changes.
    assert all(r["change"] in (0.0, None) for r in data["rows"])
    assert data["overlap_at_k"]["mean"] == 1.0
    assert main(["report", "--params", "params.yaml"]) in (0, 3)
    report = (project / "eval/report.md").read_text()
    assert "## ANN vs exact" in report and "| hit_rate | " in report and "Mean top-5 overlap" in report
    # Exact again: one line, no table.
    params["store"]["search"]["exact"] = True
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for stage in ("retrieve", "evaluate"):
        assert main([stage, "--params", "params.yaml", "--quiet"]) == 0, stage
    assert not (project / "data/runs/candidates/exact.jsonl").exists()
    assert main(["report", "--params", "params.yaml"]) in (0, 3)
    report = (project / "eval/report.md").read_text()
    assert "The configured search is exact (qdrant_edge): nothing to compare." in report


KILLED_INDEX = """
import time
import doceval.index.store.edge as edge
from doceval.cli.main import main

def finish(self, pin):
    print("writing", flush=True)
    time.sleep(600)

edge.EdgeStore.finish = finish
main(["index", "--params", "params.yaml", "--quiet"])
"""


@pytest.mark.slow
def test_a_killed_index_stage_leaves_the_previous_index_whole(project: Path) -> None:
    before = {p: p.stat().st_size for p in (project / "data/index").rglob("*") if p.is_file()}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_INDEX], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "writing", proc.stderr.read() if proc.stderr else ""
    temps = [p for p in (project / "data").iterdir() if p.name.startswith(".index.")]
    assert len(temps) == 1 and not list(temps[0].rglob("*.done.json"))  # half a shard, no marker
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert {p: p.stat().st_size for p in (project / "data/index").rglob("*") if p.is_file()} == before
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 0  # the previous index reads whole
    # A half-written shard put in place by hand (a copied folder, say): detected, never read.
    (project / "data/index/edge" / f"{collection_name(PIN2)}.done.json").unlink()
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 2


def _file_hashes(root: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def test_reading_the_index_never_changes_its_files(project: Path) -> None:
    """DVC hashed the index when the index stage ended: a reader must leave every byte as it was (the engine
    rewrites a shard on its first load, so the index stage settles each shard before it finishes)."""
    before = _file_hashes(project / "data/index")
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 0
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 0
    assert _file_hashes(project / "data/index") == before


@pytest.mark.slow
@pytest.mark.parametrize("option", ["minilm", "minilm_bf16", "minilm_bf16_weights", "minilm_auto"])
def test_every_minilm_embedder_option_indexes_and_retrieves_from_the_cli(project: Path, option: str) -> None:
    """The shipped conf/embedder/<option>.yaml through the index and retrieve stages with the real model: the
    manifest and the candidates name the precision and device that ran (``auto`` resolved as this machine
    allows), and an index of one precision is refused to a run asking for another."""
    from doceval.index.hardware import resolve_precision

    shipped = yaml.safe_load((ROOT / "conf" / "embedder" / f"{option}.yaml").read_text())
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["embedder"] = shipped
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert main(["index", "--params", "params.yaml", "--quiet"]) == 0
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 0
    manifest = json.loads((project / "data/index/manifest.json").read_text())
    precision = resolve_precision(shipped["precision"], "cpu")
    assert shipped["precision"] != "auto" or precision in ("fp32", "bf16_weights")
    assert manifest["embedder"] == {"precision": precision, "device": "cpu"}
    model = manifest["model"]
    assert model.endswith(f":{precision}") if precision != "fp32" else ":bf16" not in model
    meta = json.loads((project / "data/runs/candidates/meta.json").read_text())
    assert meta["embedder"] == {"model": model, "precision": precision, "device": "cpu"}
    assert main(["eval", "--split", "test", "--no-track", "--quiet", "--output", "out.json", "floors=zero",
                 "golden=data/golden/v2.1.jsonl", f"embedder={option}", "tracking.enabled=false"]) == 0  # fmt: skip
    summary = json.loads((project / "out.json").read_text())
    # What `auto` chose, in the summary too.
    assert summary["config"]["candidates"]["embedder"] == meta["embedder"]
    other = {**shipped, "precision": "fp32" if precision != "fp32" else "bf16_weights"}
    (project / "params.yaml").write_text(yaml.safe_dump({**params, "embedder": other}, sort_keys=False))
    assert main(["retrieve", "--params", "params.yaml", "--quiet"]) == 2
