"""Joining a Ray cluster for one command, or starting one for it, and leaving it as found.

``engine.address`` (or ``$RAY_ADDRESS`` when it is null) names an existing cluster: ``auto`` (the one `ray
start` runs on this machine), ``HOST:PORT`` (its GCS: only from a machine that is a node of it) or
``ray://HOST:PORT`` (Ray Client: from anywhere). An address that does not answer is exit 2 naming it, found by
a plain TCP connect first (ray.init itself waits minutes on a dead address); a GCS address asked from a machine
that is not a node is exit 2 naming the ``ray://`` form (ray.init would wait, then crash). Null with no
``$RAY_ADDRESS``, or ``local``, starts a Ray of this process's own, stopped when the command ends, every
process it started included. Nested sessions (a sweep's points, the index stage inside ``dvc repro``) reuse the
one open. Ray's own log lines stay off the terminal: doceval says what went wrong itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import ray
import ray._private.worker as ray_worker

from doceval.config import schema
from doceval.errors import UsageError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0  # the TCP check of a cluster address before ray.init is asked to join it
CLIENT_PORT = (
    10001  # Ray Client's port on the head unless `ray start --ray-client-server-port` says otherwise
)
HEAD_CHECK_S, HEAD_MISSES = 2.0, 3  # an actor whose head has not answered for ~6 s ends itself


@dataclass(frozen=True)
class RaySession:
    """The cluster a command runs on: the address it joined (``None``: one started for this command) and
    whether its nodes are all on this machine (then worker processes can read the driver's files)."""

    address: str | None
    started_here: bool
    driver_cwd: str

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return [n for n in ray.nodes() if n.get("Alive")]

    def all_local(self) -> bool:
        """Every live node runs on this host (a cluster started here, or `ray start` on 127.0.0.1)."""
        if self.started_here:
            return True
        here = _host_addresses()
        return all(str(n.get("NodeManagerAddress")) in here for n in self.nodes)


def resolve_address(engine: schema.EngineRay) -> str | None:
    """The cluster to join: ``engine.address``, else ``$RAY_ADDRESS``; None (or ``local``): start one."""
    address = engine.address if engine.address is not None else os.environ.get("RAY_ADDRESS") or None
    if address is None or address == "local":
        return None
    return address


def _host_port(address: str) -> tuple[str, int] | None:
    """The TCP endpoint of ``HOST:PORT`` or ``ray://HOST:PORT`` (None for ``auto``)."""
    if address == "auto":
        return None
    bare = address.removeprefix("ray://").rstrip("/")
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(
            f"engine.address={address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT "
            "(e.g. engine.address=127.0.0.1:6379), or null for a Ray started for the run"
        )
    return host.strip("[]"), int(port)


def check_reachable(address: str) -> None:
    """Exit 2 naming ``address`` when nothing listens there."""
    endpoint = _host_port(address)
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise UsageError(
            f"engine.address={address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
            "(`ray start --head`), fix the address (or $RAY_ADDRESS), or set engine.address=local to start "
            "a Ray for this run"
        ) from None


def _gcs_node_addresses(address: str) -> list[str] | None:
    """The addresses of the live nodes the GCS at ``address`` knows, or None when it cannot be asked (then
    ray.init is left to judge)."""
    try:
        # lazy: ray's own GCS client, the one ray.init uses (a private module: its absence only skips the check)
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        infos = GcsClient(address=address).get_all_node_info(timeout=CONNECT_TIMEOUT_S)
        return [str(i.node_manager_address) for i in infos.values() if int(i.state) == 0]
    except Exception:  # noqa: BLE001 - any failure of the probe: no verdict, ray.init decides
        return None


def _route_address(host: str, port: int) -> str | None:
    """This machine's address on the route to ``host`` (a UDP socket's local end: no packet is sent)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host, port))
        return str(sock.getsockname()[0])
    return None


def check_node_address(address: str) -> None:
    """A GCS address (``HOST:PORT``) joins only from a node of that cluster (the driver attaches to the local
    raylet): from any other machine, exit 2 naming the Ray Client address that works from anywhere."""
    endpoint = _host_port(address)
    if endpoint is None or address.startswith("ray://"):
        return
    nodes = _gcs_node_addresses(address)
    if nodes is None:
        return
    here = _host_addresses() | {_route_address(*endpoint) or "127.0.0.1"}
    if not nodes or set(nodes) & here:
        return
    client = f"ray://{endpoint[0]}:{CLIENT_PORT}"
    answers = _answers(endpoint[0], CLIENT_PORT)
    raise UsageError(
        f"engine.address={address}: this machine is not a node of that cluster (its nodes: "
        f"{', '.join(sorted(nodes))}), and a GCS address joins only from a node; from here use Ray Client: "
        f"engine.address={client}{' (it answers)' if answers else ''} (the head's --ray-client-server-port, "
        f"{CLIENT_PORT} unless changed), or run doceval on a node"
    )


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def driver_import_paths(cwd: str) -> list[str]:
    """The driver's folders every worker of the job gets on its import path: its working directory (where the
    user's retriever or assistant module is found, as locally) and its $PYTHONPATH. On another host these
    name folders of that host, which hold the driver's files only if someone put them there."""
    paths = [cwd, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return list(dict.fromkeys(paths))


def _runtime_env() -> dict[str, Any]:
    """What every worker of this job gets: the driver's import path and no usage reporting."""
    paths = driver_import_paths(os.getcwd())
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths), "RAY_USAGE_STATS_ENABLED": "0"}}


def _ray_message(data: dict[str, Any], ignore_prefix: bool = False) -> None:
    """Where the driver's listener of cluster errors sends them ("(raylet) Raylet is terminated ..." with raw
    ANSI colours, on stdout): doceval's log at debug level, off the terminal. doceval reports what it means
    (a node lost: exit 4 and the resume command)."""
    for line in data.get("lines", []):
        log.debug("ray (%s): %s", data.get("pid"), line)


# Ray prints the cluster errors its driver hears on stdout, whatever log_to_driver says; its listener looks
# this function up when it prints, so replacing it keeps them off a user's stdout (piped into tables, JSON).
if hasattr(ray_worker, "print_to_stdstream"):
    ray_worker.print_to_stdstream = _ray_message


@contextlib.contextmanager
def ray_session(engine: schema.EngineRay) -> Iterator[RaySession]:
    """Ray initialised for the block: joined at the configured address or started here; shut down after
    unless it was already initialised by an enclosing session."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = resolve_address(engine)
    if ray.is_initialized():
        yield RaySession(address, address is None, os.getcwd())
        return
    if address is not None:
        check_reachable(address)
        check_node_address(address)
    _init(address, engine)
    print(
        f"engine: ray {'started for this run' if address is None else 'at ' + address}: "
        f"{_describe_resources()}",
        file=sys.stderr,
    )
    started = _session_dir() if address is None else None
    try:
        yield RaySession(address, address is None, os.getcwd())
    finally:
        with contextlib.suppress(
            Exception
        ):  # a session whose node died may fail to close: its processes go below
            ray.shutdown()
        if started is not None:
            _stop_leftovers(started)


def _init(address: str | None, engine: schema.EngineRay) -> None:
    kwargs: dict[str, Any] = {
        "runtime_env": _runtime_env(),
        "log_to_driver": False,  # workers' stray prints would break the progress lines and tables
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    if address is None:
        kwargs.update(include_dashboard=False, num_cpus=engine.num_cpus, num_gpus=None)
    # A Ray started for the run turns on token authentication and says so once, as a warning: by design, and
    # not the user's concern.
    auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = auth_log.level
    auth_log.setLevel(logging.ERROR)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        raise UsageError(
            f"engine.address={address}: could not join the Ray cluster there ({exc}); check it with "
            "`ray status --address ADDRESS`, or set engine.address=local to start a Ray for this run"
        ) from None
    finally:
        auth_log.setLevel(level)


def _session_dir() -> str | None:
    node = getattr(ray_worker.global_worker, "node", None)
    return str(node.get_session_dir_path()) if node is not None else None


def _stop_leftovers(session_dir: str | None) -> None:
    """Every process of the Ray this command started that outlived ray.shutdown (an agent whose raylet was
    killed, a worker of a lost node): found by its session folder on the command line, ended by PID."""
    if not session_dir:
        return
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and any(session_dir in part for part in proc.info["cmdline"] or ()):
                os.kill(proc.pid, signal.SIGKILL)


def this_node() -> str:
    """The node a worker runs on, as messages name it: hostname (address)."""
    return f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"


def live_nodes() -> list[dict[str, Any]] | None:
    """The cluster's live nodes, or None when its head no longer answers (asked with a TCP connect first:
    Ray's own client would wait a minute for a dead head)."""
    host, _, port = str(ray.get_runtime_context().gcs_address).rpartition(":")
    if not (host and port.isdigit() and _answers(host, int(port))):
        return None
    try:
        return [n for n in ray.nodes() if n.get("Alive")]
    except Exception:  # noqa: BLE001 - the head went away meanwhile
        return None


def hostable(cpus: float, gpus: float) -> bool:
    """Whether a live node of the cluster could host one actor of ``cpus`` CPUs and ``gpus`` GPUs (by its
    totals); False when the head no longer answers."""
    nodes = [n.get("Resources", {}) for n in live_nodes() or []]
    return any(r.get("CPU", 0) >= cpus and r.get("GPU", 0) >= gpus for r in nodes)


_watching = threading.Event()


def exit_without_head() -> None:
    """In an actor: end this worker process once the cluster's head has not answered for HEAD_MISSES checks.
    Ray ends an actor whose driver ended, but only through the head: with the head dead, the actor would run on
    until its own raylet gave up (a minute or more)."""
    if _watching.is_set():
        return
    _watching.set()
    host, _, port = str(ray.get_runtime_context().gcs_address).rpartition(":")

    def watch() -> None:
        missed = 0
        while True:
            time.sleep(HEAD_CHECK_S)
            missed = 0 if _answers(host, int(port)) else missed + 1
            if missed >= HEAD_MISSES:
                os._exit(1)

    if host and port.isdigit():
        threading.Thread(target=watch, name="doceval-head-watch", daemon=True).start()


def _describe_resources() -> str:
    res = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    gpus = f", {res['GPU']:g} GPUs" if res.get("GPU") else ""
    return f"{len(nodes)} node(s), {res.get('CPU', 0):g} CPUs{gpus}"


def _host_addresses() -> set[str]:
    """This host's addresses as Ray reports nodes by (every interface's, its resolved IPs and loopback)."""
    names = {"127.0.0.1", "localhost", socket.gethostname()}
    with contextlib.suppress(OSError):
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    with contextlib.suppress(Exception):
        names |= {str(a.address) for addrs in psutil.net_if_addrs().values() for a in addrs}
    return {str(n) for n in names}
