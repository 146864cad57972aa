"""Kill a child process with SIGKILL once its journal holds a few finished lines (the resume tests)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path


def kill_once_journaled(
    args: list[str], journal: Path, min_lines: int = 4, timeout_s: float = 20
) -> list[str]:
    """Start ``args``, SIGKILL it as soon as ``journal`` has ``min_lines`` lines; returns the ids journaled whole."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= min_lines:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    return [json.loads(x)["id"] for x in journal.read_text().splitlines() if x.endswith("}")]
