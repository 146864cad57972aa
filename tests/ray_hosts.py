"""Hosts that share no disk, for Ray tests: network namespaces on one machine, joined by a bridge with no route out.

- ``head``: the Ray head and the driver (every `doceval` command of a test runs here, in the test's project folder).
- ``node``: a Ray worker node in a mount and UTS namespace of its own: hostname ``node-b``, a private /tmp (so the
  test's project folder, under /tmp, is not there) and this checkout hidden, so doceval runs there from the node's
  own install, as on a real machine.
- ``laptop``: a machine that is not a node (the HTTP assistant runs here; a driver outside the cluster too).

Every host runs doceval from a virtual environment of its own under /var/tmp (a wheel built from this checkout,
installed with the user's package ``hostsuser`` beside it, the test venv's site-packages below for torch and ray).
Addresses are 10.X.Y.1-3/24, used only inside the namespaces made here. Ray processes are started by PID
(`ray start --block`, each in its own process group) and stopped by PID: every process left in a namespace is
killed before the namespace is deleted. Where namespaces cannot be made, the tests skip saying why; under
``CI=true`` that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ray_cluster import stop_groups

ROOT = Path(__file__).resolve().parents[1]
IP = shutil.which("ip") or "/usr/sbin/ip"
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
HOSTS = {"head": 1, "node": 2, "laptop": 3}
HOSTNAMES = {"head": "head-a", "node": "node-b", "laptop": "laptop-c"}
GCS_PORT, CLIENT_PORT = 6379, 10001  # inside namespaces of their own: no other Ray can hold them
OBJECT_STORE_BYTES = 150 * 1024 * 1024
START_TIMEOUT_S = 120.0
RAY_CLI = "from ray.scripts.scripts import main; main()"
DOCEVAL_CLI = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
# The GCS calls a node dead after ~3 s without a health check answer (Ray's default is ~30 s): short tests.
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
               "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "1000"}  # fmt: skip

USER_PACKAGE = r'''"""A user's systems, installed as a package on every host (tests/ray_hosts.py)."""
import os
import socket
import time

DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars", "D4": "returns of gift cards are not accepted"}
DELAY_S = float(os.environ.get("HOSTSUSER_DELAY_S", "0"))
CALLS = os.environ.get("HOSTSUSER_CALLS")  # a file every host sees: one line per call, for counting them


def _called(question):
    if CALLS:
        with open(CALLS, "a", encoding="utf-8") as out:
            out.write(question + "\n")


def _scored(question, k, bar=2):
    words = set(question.split())
    hits = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(hits, key=lambda x: (-x[1], x[0])) if s >= bar][:k]


def scored(question, k):
    time.sleep(DELAY_S)
    _called(question)
    return _scored(question, k)


def assistant(question, library, version, session_id):
    time.sleep(DELAY_S)
    _called(question)
    hits = _scored(question, 3)
    return {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
            "sources": [{"id": d, "score": s} for d, s in hits], "host": socket.gethostname()}


'''
# A package installed on the driver's host (and the laptop) only, never on the worker node.
DRIVER_ONLY_PACKAGE = r'''"""Installed on the driver's host only."""


def assistant(question, library, version, session_id):
    return {"answer": "only here", "refused": False, "sources": []}
'''


def unavailable() -> str | None:
    """Why network and mount namespaces cannot be made here; None when they can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making network and mount namespaces needs root (ip netns, unshare -m -u)"
    name = f"dvprobe{os.getpid()}"
    try:
        subprocess.run([IP, "netns", "add", name], check=True, capture_output=True, timeout=30)
        subprocess.run([IP, "netns", "exec", name, UNSHARE, "-m", "-u", "true"], check=True, capture_output=True,
                       timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return f"cannot make namespaces here ({exc} {detail.decode(errors='replace').strip()})"
    finally:
        subprocess.run([IP, "netns", "del", name], capture_output=True, check=False, timeout=30)
    return None


def require_namespaces() -> None:
    reason = unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: the multi-host Ray tests must run here (as root): {reason}")
    pytest.skip(reason)


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True, timeout=60)


@dataclass
class Network:
    """The namespaces ``<prefix>-head|node|laptop`` on a bridge in ``<prefix>-br``, addresses ``subnet.1-3``."""

    prefix: str
    subnet: str

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def ip(self, host: str) -> str:
        return f"{self.subnet}.{HOSTS[host]}"

    def create(self) -> None:
        bridge = self.ns("br")
        _run(IP, "netns", "add", bridge)
        _run(IP, "-n", bridge, "link", "add", "br0", "type", "bridge")
        _run(IP, "-n", bridge, "link", "set", "br0", "up")
        for host, n in HOSTS.items():
            ns = self.ns(host)
            _run(IP, "netns", "add", ns)
            _run(
                IP,
                "link",
                "add",
                "eth0",
                "netns",
                ns,
                "type",
                "veth",
                "peer",
                "name",
                f"p{n}",
                "netns",
                bridge,
            )
            _run(IP, "-n", bridge, "link", "set", f"p{n}", "master", "br0")
            _run(IP, "-n", bridge, "link", "set", f"p{n}", "up")
            _run(IP, "-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
            _run(IP, "-n", ns, "link", "set", "eth0", "up")
            _run(IP, "-n", ns, "link", "set", "lo", "up")  # no default route: nothing leaves the bridge

    def pids(self, host: str) -> list[int]:
        out = subprocess.run(
            [IP, "netns", "pids", self.ns(host)], capture_output=True, text=True, check=False
        )
        return [int(p) for p in out.stdout.split() if p.isdigit()]

    def kill_all(self, host: str) -> None:
        """SIGKILL every process of the namespace (by PID) until none is left."""
        deadline = time.monotonic() + 20
        while (pids := self.pids(host)) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)

    def delete(self) -> None:
        for host in HOSTS:
            self.kill_all(host)
        for name in [*(self.ns(h) for h in HOSTS), self.ns("br")]:
            subprocess.run([IP, "netns", "del", name], capture_output=True, check=False, timeout=30)


def _copy_source(dest: Path) -> None:
    """What a wheel of doceval is built from: the package (conf/ shipped inside it), pyproject and README."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", dest / "src", ignore=skip, symlinks=True)
    shutil.copytree(ROOT / "conf", dest / "conf", ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)


def _user_package(dest: Path, files: dict[str, str]) -> None:
    """A package named ``dest.name`` holding ``files`` (name -> text), ready for a wheel."""
    (dest / dest.name).mkdir(parents=True)
    for name, text in {"__init__.py": "", **files}.items():
        (dest / dest.name / name).write_text(text, encoding="utf-8")
    (dest / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{dest.name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{dest.name}"]\n',
        encoding="utf-8",
    )


def _wheel(source: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(out), str(source)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = [w for w in out.glob("*.whl") if w.name.startswith(source.name + "-")]
    return wheel


@dataclass
class Installs:
    """One virtual environment per host (doceval's wheel and the user's package), under ``base``."""

    base: Path
    wheels: list[Path]
    driver_only: list[Path]

    def python(self, host: str) -> Path:
        return self.base / host / "bin" / "python"

    def make(self, host: str) -> None:
        venv = self.base / host
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        # torch, ray and the rest come from the test venv's site-packages, below the node's own packages.
        purelib = Path(sysconfig.get_paths()["purelib"])
        site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        (site / "zz_base_packages.pth").write_text(f"{purelib}\n", encoding="utf-8")
        subprocess.run([sys.executable, "-m", "pip", "--python", str(self.python(host)), "install", "--no-deps",
                        "--no-index", "-q", *map(str, self.wheels),
                        *(map(str, self.driver_only) if host != "node" else ())], check=True, capture_output=True,
                       timeout=300)  # fmt: skip


@contextlib.contextmanager
def installs() -> Iterator[Installs]:
    base = Path(tempfile.mkdtemp(prefix="doceval-hosts-", dir="/var/tmp"))
    try:
        build = base / "build"
        _copy_source(build / "doceval")
        _user_package(build / "hostsuser", {"systems.py": USER_PACKAGE})
        _user_package(build / "hostsdriver", {"__init__.py": DRIVER_ONLY_PACKAGE})
        wheels = [_wheel(build / name, build / "dist") for name in ("doceval", "hostsuser", "hostsdriver")]
        found = Installs(base, wheels[:2], wheels[2:])
        for host in HOSTS:
            found.make(host)
        yield found
    finally:
        shutil.rmtree(base, ignore_errors=True)


def hidden_paths() -> list[Path]:
    """What a worker node must not see: this checkout (doceval's source, the tests) and an editable install's."""
    import doceval

    paths = {ROOT, Path(doceval.__file__).resolve().parents[1]}
    for pth in Path(sysconfig.get_paths()["purelib"]).glob("__editable__.doceval*.pth"):
        paths |= {Path(line.strip()) for line in pth.read_text().splitlines() if line.strip().startswith("/")}
    found = [p for p in paths if p.is_dir()]
    return sorted(
        p for p in found if not any(p != q and p.is_relative_to(q) for q in found)
    )  # outermost only


def host_env(**extra: str) -> dict[str, str]:
    """The environment of a process on a host: no PYTHONPATH (doceval comes from the host's install)."""
    drop = ("PYTHONPATH", "RAY_ADDRESS", "DOCEVAL_ENGINE", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("MLFLOW_", "DVC_"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", MLFLOW_DISABLE_TELEMETRY="true",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)  # fmt: skip
    return env


@dataclass
class Hosts:
    """The three hosts, the installs and the Ray cluster (head on ``head``, a worker node on ``node``)."""

    net: Network
    installs: Installs
    logs: Path
    head_cpus: int = 1
    temp_dir: Path = Path("/tmp/ray-hosts")
    env: dict[str, str] = field(
        default_factory=dict
    )  # every Ray process's (and so every actor's) environment
    head: subprocess.Popen[bytes] | None = None
    node: subprocess.Popen[bytes] | None = None
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.net.ip('head')}:{GCS_PORT}"

    @property
    def client_address(self) -> str:
        return f"ray://{self.net.ip('head')}:{CLIENT_PORT}"

    def on(self, host: str, argv: Sequence[str], private: Sequence[str | Path] = ()) -> list[str]:
        """``argv`` on ``host``; with ``private`` folders, in a mount and UTS namespace of its own (hostname
        ``HOSTNAMES[host]``) where each of them is an empty tmpfs."""
        cmd = [IP, "netns", "exec", self.net.ns(host)]
        if not private:
            return [*cmd, *argv]
        mounts = " && ".join(f"mount -t tmpfs -o size=512m tmpfs {p}" for p in map(str, private))
        # The test venv's site-packages (torch, ray: below every host's own packages) stay visible even when the
        # venv lies in a hidden folder (CI's checkout holds its .venv): bound aside first, then back in place.
        venv = Path(sys.prefix).resolve()
        if any(venv.is_relative_to(Path(p)) for p in private):
            aside = self.installs.base / "base-venv"
            aside.mkdir(exist_ok=True)
            mounts = (f"mount --bind {venv} {aside} && {mounts} && mkdir -p {venv} && "
                      f"mount --bind {aside} {venv}")  # fmt: skip
        script = f'hostname {HOSTNAMES[host]} && {mounts} && exec "$@"'
        return [*cmd, UNSHARE, "-m", "-u", "--propagation", "private", "sh", "-c", script, "sh", *argv]

    def _ray(
        self, host: str, args: Sequence[str], private: Sequence[str | Path] = ()
    ) -> subprocess.Popen[bytes]:
        log = self.logs / f"{host}-{len(self.started)}.log"
        # A Ray Client session's server starts on the head: on two busy cores that can take longer than 30 s.
        env = host_env(**FAST_HEALTH, RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S="120", **self.env)
        argv = [str(self.installs.python(host)), "-c", RAY_CLI, "start", "--block", *args]
        proc = subprocess.Popen(self.on(host, argv, private), stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # fmt: skip
        self.started.append(proc)
        return proc

    def start_head(self) -> None:
        self.head = self._ray("head", ["--head", f"--node-ip-address={self.net.ip('head')}", "--port", str(GCS_PORT),
                                       "--num-cpus", str(self.head_cpus), "--include-dashboard=false",
                                       "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir",
                                       str(self.temp_dir), "--ray-client-server-port", str(CLIENT_PORT)])  # fmt: skip

    def start_node(self) -> None:
        """A worker node that sees neither /tmp of the head's host (the project folders) nor this checkout."""
        fresh = [Path("/tmp"), Path("/dev/shm")]
        private = [*fresh, *(p for p in hidden_paths() if not any(p.is_relative_to(f) for f in fresh))]
        self.node = self._ray("node", ["--address", self.address, f"--node-ip-address={self.net.ip('node')}",
                                       "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE_BYTES)],
                              private)  # fmt: skip

    def alive_nodes(self) -> int:
        code = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR'); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")  # fmt: skip
        out = subprocess.run(self.on("head", [str(self.installs.python("head")), "-c", code, self.address]),
                             capture_output=True, text=True, env=host_env(), timeout=90, check=False)  # fmt: skip
        return int(out.stdout.strip() or 0) if out.returncode == 0 else 0

    def wait_for_nodes(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.alive_nodes() == n:
                return
            for proc in (self.head, self.node):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"ray start exited {proc.returncode}: {self.log_tail()}")
            time.sleep(1)
        raise RuntimeError(
            f"the cluster did not reach {n} nodes in {START_TIMEOUT_S:.0f} s: {self.log_tail()}"
        )

    def log_tail(self) -> str:
        return " | ".join(p.read_text(errors="replace")[-600:] for p in sorted(self.logs.glob("*.log")))

    def kill_node(self) -> None:
        """The worker host dies: every process on it, at once (SIGKILL)."""
        self.net.kill_all("node")
        if self.node is not None:
            self.node.wait(timeout=30)

    def restart_node(self) -> None:
        """After :meth:`kill_node`: a fresh worker node on the same host (an empty /tmp, as after a reboot)."""
        self.start_node()
        self.wait_for_nodes(2)

    def kill_head(self) -> None:
        """The head dies: its `ray start` process group (GCS, raylet, agents) and its workers."""
        assert self.head is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.head.pid, signal.SIGKILL)
        self.head.wait(timeout=30)
        for pid in self.ray_pids("head"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def ray_pids(self, host: str, title: str = "") -> list[int]:
        """Ray's processes on ``host`` (a worker's command line starts ``ray::``; ``title``: e.g. SystemActor)."""
        found = []
        for pid in self.net.pids(host):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if cmd.startswith(f"ray::{title}") or (
                    not title and ("raylet" in cmd or "gcs_server" in cmd)
                ):
                    found.append(pid)
        return found

    def stop(self) -> None:
        stop_groups(self.started)
        for host in HOSTS:
            self.net.kill_all(host)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def command(self, args: Sequence[str], host: str = "head", private: Sequence[str] = ()) -> list[str]:
        """`doceval ARGS` on ``host`` from its own install."""
        return self.on(host, [str(self.installs.python(host)), "-c", DOCEVAL_CLI, *args], private)

    def doceval(self, args: Sequence[str], cwd: Path, host: str = "head", timeout: float = 300,
                private: Sequence[str] = (), **env: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """`doceval ARGS` on ``host`` (with the cluster's environment, so local runs see what actors see)."""
        return subprocess.run(self.command(args, host, private), cwd=cwd, env=host_env(**{**self.env, **env}),
                              text=True, capture_output=True, timeout=timeout, check=False)  # fmt: skip

    def popen(self, args: Sequence[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(args), cwd=cwd, env=host_env(**{**self.env, **env}), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


@contextlib.contextmanager
def hosts_cluster(
    installs: Installs, logs: Path, head_cpus: int = 1, env: dict[str, str] | None = None
) -> Iterator[Hosts]:
    """The namespaces and a running two-node cluster for the block; everything stopped and deleted after."""
    prefix = f"dv{os.getpid() % 100000}x{time.monotonic_ns() % 1000}"
    subnet = f"10.{200 + os.getpid() % 50}.{time.monotonic_ns() % 250}"
    net = Network(prefix, subnet)
    logs.mkdir(parents=True, exist_ok=True)
    hosts = Hosts(net, installs, logs, head_cpus, Path(f"/tmp/ray-{prefix}"), env=dict(env or {}))
    try:
        net.create()
        hosts.start_head()
        hosts.wait_for_nodes(1)
        hosts.start_node()
        hosts.wait_for_nodes(2)
        yield hosts
    finally:
        hosts.stop()
        net.delete()


@pytest.fixture(scope="session")
def host_installs() -> Iterator[Installs]:
    require_namespaces()
    with installs() as found:
        yield found
