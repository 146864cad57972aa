"""A real two-process Ray cluster on 127.0.0.1 for tests: a head and one worker node, each `ray start --block`
in its own process group (RAY_USAGE_STATS_ENABLED=0, one CPU each, small object stores, no dashboard), both
stopped by killing those process groups (never `ray stop`, which stops every Ray on the machine). Worker
processes Ray forks into their own groups die with their raylet; the teardown waits for that and then kills any
process still naming this cluster's temp dir.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 200 * 1024 * 1024  # small stores: two nodes on a 2-core CI machine
START_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    # RAY_AUTH_MODE: a ~/.ray/auth_token left by any earlier Ray on the machine turns token auth on for
    # some processes and not others; this cluster is loopback-only and runs without it.
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    # The worker processes import doceval and the tests' helper modules (a user's retriever or assistant).
    src = str(Path(__file__).resolve().parents[1] / "src")
    tests = str(Path(__file__).resolve().parent)
    paths = [src, tests, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


@dataclass
class RayCluster:
    """A running head and worker node; ``address`` is the head's GCS (``127.0.0.1:PORT``)."""

    address: str
    temp_dir: Path
    head: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    last_count_error: str = ""

    def add_worker(self) -> subprocess.Popen[bytes]:
        log = self.temp_dir.parent / f"worker-{len(self.workers)}.log"
        self.logs.append(log)
        proc = subprocess.Popen(
            [RAY, "start", "--block", "--address", self.address, "--node-ip-address=127.0.0.1",
             "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE_BYTES)],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
        )  # fmt: skip
        self.workers.append(proc)
        return proc

    def wait_for_nodes(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.alive_nodes() >= n:
                return
            for proc in [self.head, *self.workers]:
                if proc.poll() is not None:
                    raise RuntimeError(f"ray start exited {proc.returncode}: " + self.log_tail())
            time.sleep(0.5)
        raise RuntimeError(
            f"the Ray cluster did not reach {n} nodes in {START_TIMEOUT_S:.0f} s (last count: "
            f"{self.last_count_error or 'no error'}): " + self.log_tail()
        )

    def alive_nodes(self) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _COUNT_NODES, self.address], capture_output=True, text=True, env=_env(),
            timeout=60, check=False,
        )  # fmt: skip
        self.last_count_error = "" if out.returncode == 0 else out.stderr[-800:]
        return int(out.stdout.strip() or 0) if out.returncode == 0 else 0

    def worker_pids(self) -> list[int]:
        """Ray worker processes (tasks and actors) of this cluster: their command lines name its temp dir."""
        own = {self.head.pid, *(w.pid for w in self.workers)}
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in own:
                continue
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if str(self.temp_dir) in cmd and "default_worker.py" in cmd:
                    pids.append(int(entry.name))
        return pids

    def log_tail(self) -> str:
        return " | ".join(p.read_text(errors="replace")[-800:] for p in self.logs if p.exists())

    def stop(self) -> None:
        procs = [*self.workers, self.head]
        stop_groups(procs)
        for proc in procs:  # what `ray start` left in its group (raylet, gcs, agents)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while self._leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self._leftovers():  # worker processes in groups of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _leftovers(self) -> list[int]:
        out = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    cmd = (entry / "cmdline").read_bytes()
                    if str(self.temp_dir).encode() in cmd:
                        out.append(int(entry.name))
        return out


def stop_groups(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each `ray start --block` process group (it stops what it started), SIGKILL one that lingers."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


_COUNT_NODES = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
print(sum(1 for n in ray.nodes() if n["Alive"]))
"""


@contextlib.contextmanager
def ray_cluster_at(base: Path, workers: int = 1) -> Iterator[RayCluster]:
    """A head and ``workers`` worker nodes on 127.0.0.1 under ``base`` (temp dir and logs)."""
    # Ray's socket paths must stay under 107 bytes: a short temp dir of its own.
    temp_dir = Path(f"/tmp/ray-{os.getpid()}-{free_port()}")
    port = free_port()
    address = f"127.0.0.1:{port}"
    base.mkdir(parents=True, exist_ok=True)
    log = base / "head.log"
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", "--port", str(port),
         "--num-cpus", "1", "--include-dashboard=false", "--object-store-memory", str(OBJECT_STORE_BYTES),
         "--temp-dir", str(temp_dir), "--ray-client-server-port", str(free_port())],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
    )  # fmt: skip
    cluster = RayCluster(address, temp_dir, head, logs=[log])
    try:
        cluster.wait_for_nodes(1)
        for _ in range(workers):
            cluster.add_worker()
        cluster.wait_for_nodes(1 + workers)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """One real cluster (head + one worker node, 2 CPUs in all) shared by the Ray tests of a session."""
    with ray_cluster_at(tmp_path_factory.mktemp("ray")) as cluster:
        yield cluster
