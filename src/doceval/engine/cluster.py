"""Joining a Ray cluster for one command, or starting one for it, and leaving it as found.

``engine.address`` (or ``$RAY_ADDRESS`` when it is null) names an existing cluster: ``auto`` (the one `ray
start` runs on this machine), ``HOST:PORT`` (its GCS) or ``ray://HOST:PORT`` (Ray Client). An address that
does not answer is exit 2 naming it, found by a plain TCP connect first (ray.init itself waits minutes on a
dead address). Null with no ``$RAY_ADDRESS``, or ``local``, starts a Ray of this process's own, stopped when
the command ends. Nested sessions (a sweep's points, the index stage inside ``dvc repro``) reuse the one open.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from doceval.config import schema
from doceval.errors import UsageError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0  # the TCP check of a cluster address before ray.init is asked to join it


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
    kwargs: dict[str, Any] = {
        "runtime_env": _runtime_env(),
        "log_to_driver": False,  # workers' stray prints would break the progress lines and tables
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    if address is None:
        kwargs.update(include_dashboard=False, num_cpus=engine.num_cpus, num_gpus=None)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        raise UsageError(
            f"engine.address={address}: could not join the Ray cluster there ({exc}); check it with "
            "`ray status --address ADDRESS`, or set engine.address=local to start a Ray for this run"
        ) from None
    print(f"engine: ray {'started for this run' if address is None else 'at ' + address}: "
          f"{_describe_resources()}", file=sys.stderr)  # fmt: skip
    try:
        yield RaySession(address, address is None, os.getcwd())
    finally:
        ray.shutdown()


def _describe_resources() -> str:
    res = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    gpus = f", {res['GPU']:g} GPUs" if res.get("GPU") else ""
    return f"{len(nodes)} node(s), {res.get('CPU', 0):g} CPUs{gpus}"


def _host_addresses() -> set[str]:
    """This host's addresses as Ray reports nodes by (its resolved IPs and loopback)."""
    names = {"127.0.0.1", "localhost", socket.gethostname()}
    with contextlib.suppress(OSError):
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    with contextlib.suppress(Exception):
        names.add(ray.util.get_node_ip_address())
    return {str(n) for n in names}


def driver_local_path(session: RaySession, path: str | Path, what: str, fix: str) -> None:
    """Exit 2 when a worker would have to open ``path`` on the driver's disk and the cluster has nodes on
    other hosts (which cannot): names the path, what needs it, and the fix."""
    if session.all_local():
        return
    raise UsageError(
        f"engine=ray: {what} would make workers on other hosts open {path}, a path on this machine; {fix}"
    )
