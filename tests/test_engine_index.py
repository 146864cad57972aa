"""The index stage on Ray (engine=ray, doceval.engine.embedding) against engine=local on a ~200-chunk corpus:
the same vectors, the same retrieval rankings and the same metrics; a Ray started for the run; an embedder actor
SIGKILLed mid-run. Every run is a child `doceval` process in its own project folder (own embedding cache), so
the Ray run really embeds and the pytest process never holds a Ray session."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray_cluster import RayCluster
from tiny_project import make_tiny_project

BIN = Path(sys.executable).parent
VOCABULARY = (
    "queue worker retry backoff schedule broker result backend timeout signal task chord group chain rate limit "
    "priority routing exchange serializer pickle json acknowledgement prefetch heartbeat beat cron interval "
    "revoke terminate soft hard memory pool eventlet gevent thread process autoscale concurrency log level "
    "hostname node cluster replica shard snapshot compression encryption certificate token header payload"
)
WORDS = VOCABULARY.split()
GOLDEN_DOCS = [("1.0", 3), ("1.0", 17), ("1.0", 42), ("2.0", 5), ("2.0", 28), ("2.0", 61)]


def _docstring(rng: random.Random, n_sentences: int) -> str:
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."
        for _ in range(n_sentences)
    )


def corpus_docs(per_pin: int = 80) -> dict[str, list[tuple[str, str]]]:
    """Two pins of ``per_pin`` seeded documents each; one in five is long enough for several chunks (~200 in all
    for 80 a pin)."""
    rng = random.Random(31)
    docs: dict[str, list[tuple[str, str]]] = {}
    for version in ("1.0", "2.0"):
        docs[f"gadget@{version}"] = [
            (f"gadget.mod{i % 8}.func{i}",
             f"def func{i}(x)\n\n" + _docstring(rng, 40 if i % 5 == 0 else 4))
            for i in range(per_pin)
        ]  # fmt: skip
    return docs


def golden_text(docs: dict[str, list[tuple[str, str]]]) -> str:
    """Questions taken from the words of a few documents, and one the corpus cannot answer."""
    lines = []
    for n, (version, i) in enumerate(GOLDEN_DOCS):
        path, text = docs[f"gadget@{version}"][i]
        question = " ".join(text.split("\n\n", 1)[1].split()[:8]).rstrip(".").lower()
        lines.append({"id": f"g{n}", "question": question, "library": "gadget", "version": version,
                      "out_of_scope": False, "relevant_ids": [f"gadget@{version}:{path}"],
                      "reference_answer": "see docs", "expected_apis": [], "forbidden_apis": [],
                      "split": "test", "kind": "lookup"})  # fmt: skip
    lines.append({"id": "oos", "question": "a good pizza place near the station", "library": "gadget",
                  "version": "2.0", "out_of_scope": True, "relevant_ids": [], "reference_answer": "",
                  "expected_apis": [], "forbidden_apis": [], "split": "test", "kind": "off_topic"})  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RAY_ADDRESS", "DOCEVAL_ENGINE"))
    }
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", **extra)  # fmt: skip
    return env


def doceval(project: Path, *args: str, timeout: int = 600, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["doceval", *args], cwd=project, env=_env(**env), text=True, capture_output=True,
                          timeout=timeout, check=False)  # fmt: skip
    assert proc.returncode == 0, f"doceval {' '.join(args)}: {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def new_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = corpus_docs()
    return make_tiny_project(root, docs, golden_text(docs))


def cached_vectors(project: Path) -> dict[str, np.ndarray]:
    """The embedding cache of a project: key -> vector."""
    with sqlite3.connect(project / "data" / "cache" / "embeddings.sqlite") as db:
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in db.execute("SELECT key, vec FROM emb")}


def ranked(project: Path) -> dict[str, list[str]]:
    """The retrieve stage's candidates: entry id -> ranked document ids."""
    rows = [json.loads(line) for line in (project / "data/runs/candidates/candidates.jsonl").open()]
    return {str(r["id"]): [str(c[0]) for c in r["candidates"]] for r in rows}  # [doc_id, score] pairs


def index_retrieve_eval(project: Path, engine: str = "") -> dict[str, Any]:
    """params, index (on ``engine``, a $DOCEVAL_ENGINE value: the engine is never in params.yaml), retrieve, then
    `doceval eval` over the candidates: the index manifest and the eval summary."""
    doceval(project, "params", "floors=zero")
    index = doceval(project, "index", "--quiet", **({"DOCEVAL_ENGINE": engine} if engine else {}))
    doceval(project, "retrieve", "--quiet")
    doceval(project, "eval", "--split", "all", "--no-track", "--quiet", "--output", "out.json", "floors=zero")
    manifest = json.loads((project / "data" / "index" / "manifest.json").read_text())
    # with what this build did (cache counts, engine), kept beside the manifest
    manifest.update(json.loads((project / "data" / "index" / "build.json").read_text()))
    summary = json.loads((project / "out.json").read_text())
    return {"manifest": manifest, "summary": summary, "stderr": index.stderr}


def assert_same_vectors(
    a: dict[str, np.ndarray], b: dict[str, np.ndarray], chunks_only: bool = False
) -> None:
    """Every vector of ``b`` is ``a``'s to cosine 0.99999 (``chunks_only``: ``b`` ran only the index stage,
    ``a`` also embedded the questions)."""
    if chunks_only:
        a = {k: v for k, v in a.items() if k in b}
    assert a.keys() == b.keys() and len(b) >= 150
    cosines = [float(np.dot(a[k], b[k]) / (np.linalg.norm(a[k]) * np.linalg.norm(b[k]))) for k in a]
    assert min(cosines) >= 0.99999, min(cosines)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    project = new_project(tmp_path_factory.mktemp("local"))
    return project, index_retrieve_eval(project)


@pytest.mark.slow
def test_ray_index_matches_local_vectors_rankings_and_metrics(
    local_run: tuple[Path, dict[str, Any]], ray_cluster: RayCluster, tmp_path: Path
) -> None:
    local, here = local_run
    project = new_project(tmp_path / "ray")
    there = index_retrieve_eval(project, f"ray address={ray_cluster.address} batch_size=16")
    assert_same_vectors(cached_vectors(local), cached_vectors(project))
    # Interchangeable indexes: the same hash, model and counts; only the engine record differs.
    lm, rm = here["manifest"], there["manifest"]
    assert lm["engine"] == {"name": "local"}
    assert rm["engine"] == {"name": "ray", "actors": 2, "batch_size": 16, "gpus_per_actor": 0}
    for key in ("content_hash", "model", "embedder", "dim", "partitions", "search"):
        assert lm[key] == rm[key], key
    assert rm["embedding_cache"] == {"hits": 0, "misses": rm["chunks"]}  # the Ray run embedded everything
    assert ranked(local) == ranked(project) and len(ranked(project)) == 7
    assert here["summary"]["metrics"] == there["summary"]["metrics"]
    assert there["summary"]["metrics"]["hit_rate"] > 0.5  # the questions do find their documents
    assert f"engine: ray at {ray_cluster.address}" in there["stderr"]


@pytest.mark.slow
def test_ray_started_for_the_run_is_stopped_after_it(
    local_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    local, _ = local_run
    project = new_project(tmp_path / "own")
    doceval(project, "params", "floors=zero")
    env = _env(DOCEVAL_ENGINE="ray num_cpus=2")
    proc = subprocess.Popen(["doceval", "index", "--quiet"], cwd=project, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    seen: set[int] = set()
    while proc.poll() is None:  # the Ray it starts runs in its folder: raylet and GCS inherit the cwd
        seen |= ray_processes_in(project)
        time.sleep(0.5)
    _, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert "engine: ray started for this run: 1 node(s), 2 CPUs" in err
    assert seen, "no raylet or GCS of the run's own Ray was seen"
    assert_same_vectors(cached_vectors(local), cached_vectors(project), chunks_only=True)
    deadline = time.monotonic() + 30
    while ray_processes_in(project) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ray_processes_in(project), "the run left its Ray running"


@pytest.mark.slow
def test_a_killed_embedder_actor_is_restarted_and_the_run_completes(
    local_run: tuple[Path, dict[str, Any]], ray_cluster: RayCluster, tmp_path: Path
) -> None:
    local, _ = local_run
    project = new_project(tmp_path / "killed")
    doceval(project, "params", "floors=zero")
    choice = f"ray address={ray_cluster.address} batch_size=8"
    proc = subprocess.Popen(["doceval", "index", "--quiet"], cwd=project, env=_env(DOCEVAL_ENGINE=choice), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    killed: tuple[int, int] | None = None  # (pid, vectors cached when it died)
    deadline = time.monotonic() + 300
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        done, actors = cached_rows(project), embedder_actor_pids()
        if done and actors:  # an actor has delivered at least one batch and is still working
            os.kill(actors[0], signal.SIGKILL)
            killed = (actors[0], done)
        time.sleep(0.2)
    _, err = proc.communicate(timeout=600)
    assert killed is not None, "no embedder actor was caught mid-run"
    chunks = json.loads((project / "data" / "docs" / "manifest.json").read_text())["chunks"]
    assert killed[1] < chunks, "the actor was killed after the work was done"
    assert proc.returncode == 0, err[-3000:]
    assert_same_vectors(cached_vectors(local), cached_vectors(project), chunks_only=True)
    manifest = json.loads((project / "data" / "index" / "manifest.json").read_text())
    record = json.loads((project / "data" / "index" / "build.json").read_text())
    assert manifest["chunks"] == chunks and record["embedding_cache"]["misses"] == chunks


def cached_rows(project: Path) -> int:
    """Vectors the driver has written to the cache so far (0 before the file or its table exists)."""
    path = project / "data" / "cache" / "embeddings.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM emb").fetchone()[0])
    except sqlite3.OperationalError:  # being created or written this instant
        return 0


def embedder_actor_pids() -> list[int]:
    """Processes running an embedder actor (an actor of the fan-out: Ray titles it ``ray::SystemActor``)."""
    return sorted(pid for pid, cmd in _processes() if cmd.startswith(b"ray::SystemActor"))


def ray_processes_in(folder: Path) -> set[int]:
    """Ray's raylet and GCS processes whose working directory is ``folder``."""
    out = set()
    for pid, cmd in _processes():
        if b"raylet" in cmd or b"gcs_server" in cmd:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cwd").resolve() == folder.resolve():
                    out.add(pid)
    return out


def _processes() -> list[tuple[int, bytes]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                out.append((int(entry.name), (entry / "cmdline").read_bytes()))
    return out


@pytest.mark.slow
def test_the_index_stage_loads_no_ray_for_engine_local() -> None:
    # The stage module and what it imports at the top: ray (~1 s) must wait for engine=ray.
    code = "import sys, doceval.stages.index, doceval.index.build; print('ray' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
