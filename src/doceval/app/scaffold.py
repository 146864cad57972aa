"""Making a new project all or nothing (`doceval init`, docs/design.md section 6.8): folders and files created
exclusively (never over anything, never through a link), `git init` / `dvc init` run only where there is no
repository yet, and everything made undone when a later step fails or is interrupted, so a retry starts clean.
A ``.git`` or ``.dvc`` that was there before is never touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from doceval.common.paths import create_new_file, os_problem
from doceval.errors import UsageError


class Scaffold:
    """What one init made, in order; on an exception inside ``with``, all of it is removed (newest first)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        # What this init created, with how to undo it: "rmdir" (a folder it made, empty again once the rest is
        # gone), "unlink" (a file it wrote), "rmtree" (the folder a tool made: .git, .dvc).
        self.made: list[tuple[Path, str]] = []

    def __enter__(self) -> Scaffold:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.undo()

    def folder(self) -> None:
        """Create the target folder and any missing parents, recording the ones made."""
        missing = [p for p in (self.target, *self.target.parents) if not os.path.lexists(p)]
        for path in reversed(missing):
            try:
                path.mkdir()
            except OSError as exc:
                raise UsageError(
                    f"doceval init {self.target}: cannot create the folder {path} ({os_problem(exc)}); pass a "
                    "folder you can create"
                ) from None
            self.made.append((path, "rmdir"))

    def file(self, path: Path, text: str) -> None:
        create_new_file(
            path, text, "doceval init:", "init never overwrites: move it aside or pick another DIR"
        )
        self.made.append((path, "unlink"))

    def tool(self, argv: list[str], creates: str) -> None:
        """Run ``argv`` in the target; the folder it ``creates`` (``.git``, ``.dvc``) is undone with the rest,
        also when the tool itself fails half-way."""
        made = self.target / creates
        fresh = not os.path.lexists(made)
        try:
            run_tool(argv, self.target)
        finally:
            if fresh and os.path.lexists(made):
                self.made.append((made, "rmtree"))

    def undo(self) -> None:
        for path, how in reversed(self.made):
            with contextlib.suppress(OSError):
                if how == "rmtree" and not path.is_symlink():
                    shutil.rmtree(path)
                elif how == "rmdir":
                    path.rmdir()  # only once empty: never what someone else put there meanwhile
                else:
                    path.unlink()
        self.made.clear()


def tool_path(name: str) -> str:
    """An executable: beside this interpreter first (the venv doceval runs in has dvc), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise UsageError(f"doceval init: `{name}` not found; install it, or leave out --{name}")
    return found


def git_root(folder: Path) -> Path | None:
    """The top of the git work tree ``folder`` is in; None outside one (or without git)."""
    try:
        probe = subprocess.run(
            [tool_path("git"), "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True
        )
    except UsageError:
        return None
    return Path(probe.stdout.strip()).resolve() if probe.returncode == 0 and probe.stdout.strip() else None


def dvc_init_argv(target: Path, git: bool) -> list[str]:
    """`dvc init` as the target needs it: at the top of a git work tree (or one --git makes) plain, in a
    folder inside one ``--subdir`` (a project in a subfolder of a repository), outside git ``--no-scm``."""
    if git:
        return ["dvc", "init"]
    root = git_root(target)
    if root is None:
        return ["dvc", "init", "--no-scm"]
    return ["dvc", "init"] if root == target.resolve() else ["dvc", "init", "--subdir"]


def run_tool(argv: list[str], cwd: Path) -> None:
    """Run a tool (analytics off for dvc); a failure is a UsageError quoting what it said (stderr, else
    stdout: dvc prints some errors there)."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run([tool_path(argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "(it printed nothing)")[-500:]
        raise UsageError(
            f"doceval init: `{' '.join(argv)}` in {cwd} failed (exit {done.returncode}): {said}; nothing init "
            "wrote is left, so the same command can be run again once this is fixed"
        )
