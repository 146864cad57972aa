"""engine=ray across hosts that share no disk (tests/ray_hosts.py): the driver and the head on one host, a worker
node on another with its own hostname, its own /tmp and no view of the driver's project folder or this checkout
(doceval and the user's package come from its own install), an HTTP assistant on a third.

Every run that finishes equals engine=local: a retriever function, a function assistant and an HTTP assistant
(their calls really split across the two hosts), the index, a sweep (R1). What a worker could not do is refused
before the first call, naming the node and the path (R2), or reported as itself (R3); a driver outside the cluster
joins with the address form that works from there (R7); every actor of ``engine.actors`` is used (R8); the engine is
chosen outside params.yaml (R9); an init project's Ray sweep names its points as the local sweep does (R10). No
actor of a command outlives it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_hosts import Hosts, Installs, hosts_cluster
from test_engine_eval import N_ENTRIES, golden_entries

pytestmark = pytest.mark.slow


def golden_rows(n: int = N_ENTRIES) -> str:
    return "".join(json.dumps(r) + "\n" for r in golden_entries(n))


SYSTEMS = {
    "retriever_function": ("retriever=function", "retriever.target=hostsuser.systems:scored", "k=2"),
    "function_assistant": ("agent=function", "agent.target=hostsuser.systems:assistant", "k=2"),
}


@pytest.fixture(scope="module")
def hosts(host_installs: Installs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    with hosts_cluster(host_installs, tmp_path_factory.mktemp("hosts-logs")) as found:
        yield found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "golden.jsonl").write_text(golden_rows(), encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def http_assistant(hosts: Hosts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The HTTP assistant on the laptop host: its URL and the log of (question, caller) per request."""
    log = tmp_path_factory.mktemp("assistant") / "requests.jsonl"
    script = Path(__file__).with_name("hosts_assistant.py")
    argv = [str(hosts.installs.python("laptop")), str(script), hosts.net.ip("laptop"), "8080", str(log)]
    proc = subprocess.Popen(
        hosts.on("laptop", argv), stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
        yield f"http://{hosts.net.ip('laptop')}:8080/ask", log
    finally:
        proc.kill()
        proc.wait(timeout=30)


def eval_args(out: str, *overrides: str) -> list[str]:
    return ["eval", "--golden", "golden.jsonl", "--split", "all", "--no-track", "--quiet", "--output", out,
            *overrides]  # fmt: skip


def on_ray(hosts: Hosts, *args: str) -> tuple[str, ...]:
    return ("engine=ray", f"engine.address={hosts.address}", "engine.actors=2", *args)


def run_ok(
    hosts: Hosts, project: Path, out: str, *args: str, host: str = "head"
) -> tuple[dict[str, Any], str]:
    done = hosts.doceval(eval_args(out, *args), project, host=host)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((project / out).read_text()), done.stderr


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary less what differs between two runs of one system: timings, session tags, the host that
    answered (the assistant says), the engine block, provenance and this invocation's journal bookkeeping."""
    config = {k: v for k, v in summary["config"].items() if k not in ("engine", "provenance", "usage")}
    entries = []
    for entry in summary["entries"]:
        row = {k: v for k, v in entry.items() if k not in ("timing", "extra")}
        if row.get("session_id"):
            row["session_id"] = row["session_id"].rsplit("-", 1)[-1]
        entries.append(row)
    return {
        "metrics": summary["metrics"],
        "config": config,
        "entries": entries,
        "complete": summary["complete"],
    }


def answering_hosts(summary: dict[str, Any]) -> set[str]:
    return {e["extra"]["host"] for e in summary["entries"] if e.get("extra", {}).get("host")}


def assert_no_actor_left(hosts: Hosts) -> None:
    """No system actor of a finished command is alive on either host."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        hosts.ray_pids("head", "SystemActor") or hosts.ray_pids("node", "SystemActor")
    ):
        time.sleep(0.5)
    assert not hosts.ray_pids("head", "SystemActor") and not hosts.ray_pids("node", "SystemActor")


def test_the_worker_host_shares_no_disk_and_runs_its_own_install(hosts: Hosts, project: Path) -> None:
    code = (
        "import sys, os, socket, json, time, ray\n"
        "ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR')\n"
        "@ray.remote(num_cpus=1, scheduling_strategy='SPREAD')\n"
        "def where(folder):\n"
        "    import doceval\n"
        "    time.sleep(1)  # long enough that the four tasks spread over both nodes\n"
        "    return socket.gethostname(), os.path.isdir(folder), doceval.__file__\n"
        "print(json.dumps(sorted(set(ray.get([where.remote(sys.argv[2]) for _ in range(4)])))))\n"
    )
    argv = [str(hosts.installs.python("head")), "-c", code, hosts.address, str(project)]
    from ray_hosts import host_env

    done = subprocess.run(hosts.on("head", argv), capture_output=True, text=True, env=host_env(), timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {host: (visible, module) for host, visible, module in json.loads(done.stdout)}
    assert seen["node-b"][0] is False and str(hosts.installs.base / "node") in seen["node-b"][1]
    head = next(h for h in seen if h != "node-b")
    assert seen[head][0] is True and str(hosts.installs.base / "head") in seen[head][1]


@pytest.mark.parametrize("system", [*SYSTEMS, "http_assistant"])
def test_an_eval_across_hosts_equals_local(
    hosts: Hosts, project: Path, http_assistant: tuple[str, Path], system: str
) -> None:
    url, log = http_assistant
    args = SYSTEMS.get(system) or ("agent=http", f"agent.url={url}", "k=2")
    local, _ = run_ok(hosts, project, "local.json", *args, "engine=local")
    log.write_text("")
    ray, err = run_ok(hosts, project, "ray.json", *on_ray(hosts, *args))
    assert comparable(ray) == comparable(local)
    assert len(ray["entries"]) == N_ENTRIES and ray["complete"] is True
    assert f"engine: ray at {hosts.address}: 2 node(s), 2 CPUs" in err
    if system == "function_assistant":  # the calls really ran on both hosts
        assert answering_hosts(ray) == {answering_hosts(local).pop(), "node-b"}
    if system == "http_assistant":
        callers = {json.loads(line)["client"] for line in log.read_text().splitlines()}
        assert callers == {hosts.net.ip("head"), hosts.net.ip("node")}
    assert_no_actor_left(hosts)


def test_r8_max_concurrency_1_keeps_every_actor(hosts: Hosts, project: Path) -> None:
    """R8: run.max_concurrency=1 is per actor: engine.actors=2 still runs two actors, on both hosts."""
    args = on_ray(hosts, *SYSTEMS["function_assistant"], "run.max_concurrency=1")
    ray, _ = run_ok(hosts, project, "ray.json", *args)
    assert ray["complete"] is True and len(answering_hosts(ray)) == 2, answering_hosts(ray)


def _module(project: Path, dotted: str, body: str) -> None:
    path = project.joinpath(*dotted.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in [path.parent, *path.parent.parents]:
        if folder == project:
            break
        (folder / "__init__.py").touch()
    path.write_text(body, encoding="utf-8")


# A module of the project folder (its own code: a worker imports it by the target's name).
RETRIEVER = "def retrieve(question, k):\n    return [w for w in ('D1', 'D2') if len(question) > k]\n"


def test_r2_a_module_whose_top_name_an_installed_distribution_claims_is_refused_before_launch(
    hosts: Hosts, project: Path
) -> None:
    """R2: ``examples`` is also a top-level package of the installed ir_datasets: the project's own
    examples/askdocs/retrievers.py is still only on this host, and is refused naming node-b and the file."""
    _module(project, "examples.askdocs.retrievers", RETRIEVER)
    args = on_ray(hosts, "retriever=function", "retriever.target=examples.askdocs.retrievers:retrieve", "k=2")
    done = hosts.doceval(eval_args("ray.json", *args), project)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "retriever.target=examples.askdocs.retrievers:retrieve" in done.stderr
    assert "node-b" in done.stderr and str(project / "examples" / "askdocs" / "retrievers.py") in done.stderr
    assert "Traceback" not in done.stderr and not (project / "ray.json").exists()


def test_r2_a_stray_egg_info_does_not_make_a_module_installed(hosts: Hosts, project: Path) -> None:
    """R2: a leftover ``mine.egg-info`` beside ./mine.py claims the name ``mine`` for a distribution that
    is installed nowhere: the module is still refused."""
    (project / "mine.py").write_text(RETRIEVER, encoding="utf-8")
    info = project / "mine.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: mine\nVersion: 0.1\n", encoding="utf-8")
    (info / "top_level.txt").write_text("mine\n", encoding="utf-8")
    (info / "SOURCES.txt").write_text("mine.py\n", encoding="utf-8")
    args = on_ray(hosts, "retriever=function", "retriever.target=mine:retrieve", "k=2")
    done = hosts.doceval(eval_args("ray.json", *args), project)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "retriever.target=mine:retrieve" in done.stderr and "node-b" in done.stderr
    assert str(project / "mine.py") in done.stderr and not (project / "ray.json").exists()


def test_r2_a_module_every_node_holds_at_the_same_path_is_accepted(
    hosts: Hosts, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A folder every node mounts at the same path (here /var/tmp, which node-b sees) is a shared location:
    the module found through the driver's folder is the same file on every node, so it runs."""
    shared = hosts.installs.base / "shared"
    shared.mkdir()
    (shared / "golden.jsonl").write_text(golden_rows(12), encoding="utf-8")
    (shared / "sharedmod.py").write_text(RETRIEVER, encoding="utf-8")
    args = on_ray(hosts, "retriever=function", "retriever.target=sharedmod:retrieve", "k=2")
    summary, _ = run_ok(hosts, shared, "ray.json", *args)
    assert summary["complete"] is True and len(summary["entries"]) == 12


def test_r3_a_module_missing_on_a_worker_is_reported_as_itself(hosts: Hosts, project: Path) -> None:
    """R3: hostsdriver is installed on the driver's host only: building the assistant on node-b fails with
    ModuleNotFoundError, reported as that (the node, the target), not as a worker that died."""
    args = on_ray(hosts, "agent=function", "agent.target=hostsdriver:assistant", "k=2")
    done = hosts.doceval(eval_args("ray.json", *args), project)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "agent.target=hostsdriver:assistant" in done.stderr and "node-b" in done.stderr
    assert "ModuleNotFoundError" in done.stderr and "hostsdriver" in done.stderr
    assert "max_restarts" not in done.stderr and "Traceback" not in done.stderr


def test_r7_a_driver_outside_the_cluster_is_told_the_ray_client_form_and_joins_with_it(
    hosts: Hosts, project: Path
) -> None:
    """R7: from the laptop (not a node) the GCS address is refused at once naming ray://HEAD:10001; that
    address joins, and the run equals local."""
    private = [str(hosts.temp_dir)]  # the laptop is another machine: it cannot see the head's Ray sockets
    args = eval_args(
        "ray.json", "engine=ray", f"engine.address={hosts.address}", *SYSTEMS["retriever_function"]
    )
    started = time.monotonic()
    done = hosts.doceval(args, project, host="laptop", private=private, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert time.monotonic() - started < 30
    assert f"ray://{hosts.net.ip('head')}:10001" in done.stderr and hosts.address in done.stderr
    # Local on the laptop too: the summary records where the laptop's own install keeps the user's module.
    local, _ = run_ok(hosts, project, "local.json", *SYSTEMS["retriever_function"], host="laptop")
    args = eval_args("client.json", "engine=ray", f"engine.address={hosts.client_address}",
                     *SYSTEMS["retriever_function"])  # fmt: skip
    done = hosts.doceval(args, project, host="laptop", private=private)
    assert done.returncode == 0, done.stderr[-3000:]
    assert comparable(json.loads((project / "client.json").read_text())) == comparable(local)


FIXTURE = Path(__file__).resolve().parent / "fixtures" / "acme"


@pytest.fixture(scope="module")
def init_project(hosts: Hosts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`doceval init` over the acme docs, built with engine=local on the driver's host: docs, index (its
    manifest and embedding cache), candidates; a git repository with everything tracked committed."""
    root = tmp_path_factory.mktemp("init") / "project"
    root.mkdir()
    shutil.copytree(FIXTURE / "docs", root / "docs")
    shutil.copy(FIXTURE / "golden.jsonl", root / "golden.jsonl")
    steps = [["init", ".", "--docs", "docs", "--library", "acme", "--golden", "golden.jsonl", "--git"],
             ["docs", "--quiet"], ["index", "--quiet"], ["retrieve", "--quiet"]]  # fmt: skip
    for step in steps:
        done = hosts.doceval(step, root)
        assert done.returncode == 0, f"{step}: {done.stderr[-3000:]}"
    # What `dvc repro` leaves untracked by git (its outputs): this fixture runs the stages without DVC.
    with (root / ".gitignore").open("a", encoding="utf-8") as ignore:
        ignore.write("/data/\n")
    for git in (["add", "-A"], ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "project"]):
        subprocess.run(["git", *git], cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture
def copied(init_project: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(init_project, tmp_path / "project", symlinks=True))


def _index_record(index: Path) -> dict[str, Any]:
    """What the index is (manifest.json) with what its build did (build.json: cache counts, the engine)."""
    return {
        **json.loads((index / "manifest.json").read_text()),
        **json.loads((index / "build.json").read_text()),
    }


def test_the_index_across_hosts_equals_local(hosts: Hosts, copied: Path) -> None:
    index = copied / "data" / "index"
    local = _index_record(index)
    shutil.rmtree(copied / "data" / "index")
    for cache in (copied / "data" / "cache").glob("embeddings.sqlite*"):
        cache.unlink()
    done = hosts.doceval(
        ["index", "--quiet"], copied, DOCEVAL_ENGINE=f"ray address={hosts.address} batch_size=4"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ray = _index_record(index)
    for key in ("content_hash", "model", "embedder", "dim", "partitions", "chunks"):
        assert ray[key] == local[key], key
    # Both embedded everything from an empty cache (a text repeated across the pins is a hit either way).
    assert ray["engine"]["name"] == "ray" and ray["embedding_cache"] == local["embedding_cache"]


def _sweep(hosts: Hosts, project: Path, *overrides: str, flags: tuple[str, ...] = ()) -> Path:
    """`doceval sweep` of k over three points: the sweep's folder."""
    before = set((project / "eval" / "sweeps").glob("*")) if (project / "eval" / "sweeps").exists() else set()
    args = ["sweep", "--quiet", *flags, "-m", "k=1,2,3", "split=all", "floors=zero", *overrides]
    done = hosts.doceval(args, project)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (found,) = set((project / "eval" / "sweeps").glob("*")) - before
    time.sleep(1.1)  # sweep folders are named by the second they start
    return found


def test_r1_a_sweep_across_hosts_needs_no_project_folder_on_the_worker(hosts: Hosts, copied: Path) -> None:
    """R1: every point is a Ray task; those on node-b (no project folder there) get what they read from the
    driver and hand back what they produce: the same points, summaries and MLflow child runs as locally."""
    local = _sweep(hosts, copied)
    ray = _sweep(hosts, copied, "engine=ray", f"engine.address={hosts.address}")
    assert (ray / "points.csv").read_text() == (local / "points.csv").read_text()
    for job in ("0", "1", "2"):
        a, b = (json.loads((d / "points" / f"{job}.json").read_text()) for d in (local, ray))
        assert {k: v for k, v in a.items() if k != "run_id"} == {k: v for k, v in b.items() if k != "run_id"}
        sa, sb = (json.loads((d / "points" / job / "summary.json").read_text()) for d in (local, ray))
        assert comparable(sa) == comparable(sb)
    assert_no_actor_left(hosts)


def test_r10_an_init_project_sweep_names_its_points_as_locally(hosts: Hosts, copied: Path) -> None:
    """R10: a point's name is its own overrides, never the project's (doceval.yaml's docs.folders=...), on
    either engine."""
    local = _sweep(hosts, copied, flags=("--no-track",))
    rows = (local / "points.csv").read_text().splitlines()
    assert rows[1].startswith('0,"k=1 split=all floors=zero') and "docs.folders" not in "".join(rows), rows
    ray = _sweep(hosts, copied, "engine=ray", f"engine.address={hosts.address}", flags=("--no-track",))
    assert rows == (ray / "points.csv").read_text().splitlines()


def test_r9_switching_engines_leaves_params_yaml_and_the_tree_clean(hosts: Hosts, copied: Path) -> None:
    """R9: the engine is an execution choice ($DOCEVAL_ENGINE), never written into params.yaml; a stage and an
    eval on Ray leave git clean, and the summary records where the engine came from."""
    params = (copied / "params.yaml").read_text()
    done = hosts.doceval(["params", "engine=ray"], copied)
    assert done.returncode == 2 and "DOCEVAL_ENGINE" in done.stderr, done.stderr[-2000:]
    assert (copied / "params.yaml").read_text() == params and "engine" not in params.split("\n", 2)[2]
    choice = f"ray address={hosts.address}"
    done = hosts.doceval(["index", "--quiet"], copied, DOCEVAL_ENGINE=choice)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((copied / "data" / "index" / "build.json").read_text())["engine"]["name"] == "ray"
    done = hosts.doceval(["eval", "--no-track", "--quiet", "--output", "eval/ray.json", "floors=zero"], copied,
                         DOCEVAL_ENGINE=choice)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((copied / "eval" / "ray.json").read_text())
    assert (
        summary["config"]["engine"]["name"] == "ray"
        and summary["config"]["engine"]["address"] == hosts.address
    )
    assert summary["config"]["provenance"]["engine"] == {"DOCEVAL_ENGINE": choice}
    assert summary["config"]["provenance"]["git_dirty"] is False
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=copied,
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert status.stdout == ""
