"""One engine session per command, and what a command's Ray leaves behind: a Ray started for the run is initialised
once for every phase (C11) and prints no error-level or authentication line; when its node agent (the raylet)
is killed, the run ends with exit 4, its summary marked incomplete and the command to resume, nothing of Ray on
stdout, and no process it started alive (H13). A secret config value reaches no file of Ray's session folder,
in a run or a sweep. Engine keys of the other engine are accepted with a note (fast).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster import RayCluster
from ray_hosts import FAST_HEALTH
from test_engine_hosts import golden_rows

from doceval.config.compose import compose

SRC = Path(__file__).resolve().parents[1] / "src"
MODULE = r"""
import os
import time

DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars", "D4": "returns of gift cards are not accepted"}


def scored(question, k):
    time.sleep(float(os.environ.get("SESSION_DELAY_S", "0")))
    if os.environ.get("SESSION_CALLS"):
        with open(os.environ["SESSION_CALLS"], "a", encoding="utf-8") as calls:
            calls.write(question + "\n")
    words = set(question.split())
    hits = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(hits, key=lambda x: (-x[1], x[0])) if s >= 2][:k]


def make(api_key=None, min_score=2):
    def retrieve(question, k):
        return [d for d, s in scored(question, k) if s >= int(min_score)]
    return retrieve
"""
COUNTED = (
    "import sys, ray\n"
    "calls = []\n"
    "real = ray.init\n"
    "def counting(*args, **kwargs):\n"
    "    calls.append(1)\n"
    "    return real(*args, **kwargs)\n"
    "ray.init = counting\n"
    "from doceval.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "print(f'ray.init calls: {len(calls)}', file=sys.stderr)\n"
    "sys.exit(rc)\n"
)
ERROR_LINE = re.compile(
    r"^\[[^\]]* E \d+ \d+\] ", re.M
)  # glog's error level: "[date time E pid tid] file:line"
SECRET = "sk-live-7f3a9c2e5b1d4f60"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "sessionmod.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(golden_rows(12), encoding="utf-8")
    return tmp_path


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """A short temp root of its own for the Ray a command starts (``$RAY_TMPDIR``): its processes are found by it."""
    folder = Path(f"/tmp/rs{os.getpid()}")
    folder.mkdir(exist_ok=True)
    yield folder
    for pid in _processes_naming(folder):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def _env(ray_tmp: Path | None = None, **extra: str) -> dict[str, str]:
    """The user's environment: no RAY_AUTH_MODE (a normal run must not warn about token authentication)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "DOCEVAL_ENGINE")}
    env.update(RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
               **extra)  # fmt: skip
    if ray_tmp is not None:
        env["RAY_TMPDIR"] = str(ray_tmp)
    return env


def _eval(out: str, *overrides: str) -> list[str]:
    return [sys.executable, "-c", COUNTED, "eval", "--golden", "golden.jsonl", "--split", "all", "--no-track",
            "--quiet", "--output", out, *overrides]  # fmt: skip


def _processes_naming(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_c11_one_ray_session_serves_both_phases_and_prints_no_error_line(
    project: Path, ray_tmp: Path
) -> None:
    """C11: a retriever function answered by doceval's agent runs two phases on Ray (retrieval, answering):
    ray.init once, and neither Ray's error-level core_worker line nor its token-authentication warning."""
    args = (
        "retriever=function",
        "retriever.target=sessionmod:scored",
        "k=2",
        "engine=ray",
        "engine.num_cpus=2",
    )
    done = subprocess.run(_eval("ray.json", *args), cwd=project, env=_env(ray_tmp), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ray.init calls: 1" in done.stderr
    assert done.stderr.count("engine: ray started for this run") == 1
    assert not ERROR_LINE.search(done.stderr), done.stderr[-3000:]
    assert "Token authentication" not in done.stderr + done.stdout
    assert json.loads((project / "ray.json").read_text())["complete"] is True


@pytest.mark.slow
def test_h13_a_killed_node_agent_is_exit_4_with_the_resume_command_and_no_leftovers(
    project: Path, ray_tmp: Path
) -> None:
    """H13: the raylet of the Ray started for the run is killed mid-run: exit 4, the summary marked incomplete,
    the command to resume, no Ray line (raw ANSI colours) on stdout, and no process of that Ray left."""
    args = ("retriever=function", "retriever.target=sessionmod:scored", "k=2", "engine=ray", "engine.num_cpus=1",
            "engine.actors=1")  # fmt: skip
    calls = project / "calls.log"  # one line per call of the retriever (a Ray started here shares this disk)
    env = _env(ray_tmp, SESSION_DELAY_S="0.5", SESSION_CALLS=str(calls), **FAST_HEALTH)
    proc = subprocess.Popen(_eval("ray.json", *args), cwd=project, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 180
    raylets: list[int] = []
    while not raylets and time.monotonic() < deadline and proc.poll() is None:
        if calls.exists() and len(calls.read_text().splitlines()) >= 3:
            raylets = [
                p for p in _processes_naming(ray_tmp) if b"raylet" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
        time.sleep(0.1)
    assert raylets, f"the run's raylet was not found mid-run: {proc.poll()} {proc.communicate()[1][-2000:]}"
    os.kill(raylets[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err[-3000:]
    assert "\x1b[" not in out and "(raylet)" not in out and "Traceback" not in err
    assert "rerun the same command to resume" in err
    summary = json.loads((project / "ray.json").read_text())
    assert summary["complete"] is False
    deadline = time.monotonic() + 20
    while _processes_naming(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _processes_naming(ray_tmp), "a process of the run's Ray outlived it"


def _files_holding(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and _holds(p, secret)]


def _holds(path: Path, secret: str) -> bool:
    try:
        return secret.encode() in path.read_bytes()
    except OSError:  # a socket, a file gone meanwhile
        return False


@pytest.mark.slow
def test_a_secret_config_value_reaches_no_ray_session_file(ray_cluster: RayCluster, project: Path) -> None:
    """Issue 39's secret sinks, Ray's part: a secret given as a config value (its key matches the secret rule)
    appears in no file of the cluster's session folder, after a Ray run and a Ray sweep."""
    secret = [f"+retriever.kwargs.api_key={SECRET}"]
    base = ["retriever=function", "retriever.target=sessionmod:make", "engine=ray",
            f"engine.address={ray_cluster.address}"]  # fmt: skip
    env = _env(RAY_AUTH_MODE="disabled")
    done = subprocess.run(_eval("ray.json", *base, *secret, "k=2"), cwd=project, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = [sys.executable, "-c", COUNTED, "sweep", "--quiet", "--no-track", "-m", "+retriever.kwargs.min_score=1,2",
             "split=all", "golden=golden.jsonl", *base, *secret]  # fmt: skip
    done = subprocess.run(
        sweep, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    assert _files_holding(ray_cluster.temp_dir, SECRET) == []


def test_an_engine_key_of_the_other_engine_is_accepted_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 40 item 8: one script switches engines by one word; engine.num_cpus means nothing locally."""
    cfg = compose(["engine=local", "engine.num_cpus=2", "engine.actors=4"])
    assert cfg.engine.name == "local"
    err = capsys.readouterr().err
    assert "note: engine.num_cpus applies to engine=ray only: ignored under engine=local" in err
    assert "engine.actors applies to engine=ray only" in err
    ray = compose(["engine=ray", "engine.num_cpus=2"])
    assert ray.engine.name == "ray" and ray.engine.num_cpus == 2  # type: ignore[union-attr]
    assert "note:" not in capsys.readouterr().err
