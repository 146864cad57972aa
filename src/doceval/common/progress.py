"""Progress for every long step (docs, embed, index, retrieve, agent, judge, sweep): a tqdm bar on a terminal,
one plain line per step anywhere else. A bar redraws itself with carriage returns several times a second,
which a log file or a CI console keeps as hundreds of frames (about 140 for one sweep); off a terminal the
step prints once, when it ends: ``agent (function): 21/21 entry in 3.2 s (errors=1)``.

Written to stderr (read at call time, so a redirected or scrubbing stream is the one used)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import IO, Any, TypeVar

from tqdm import tqdm

__all__ = ["Progress", "iterate", "on_terminal"]

T = TypeVar("T")


def on_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr now) is an interactive terminal."""
    target = stream if stream is not None else sys.stderr
    isatty = getattr(target, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


class Progress:
    """One step's progress: ``update(n)``, ``set_postfix(**values)``, ``close()`` (or a ``with`` block).
    ``enabled=False`` writes nothing."""

    def __init__(
        self, total: int | None, desc: str, unit: str, *, enabled: bool = True, initial: int = 0
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n = initial
        self._enabled = enabled
        self._postfix: dict[str, Any] = {}
        self._start = time.monotonic()
        self._closed = False
        self._bar: Any = None
        if enabled and on_terminal():
            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=sys.stderr)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, **values: Any) -> None:
        self._postfix.update(values)
        if self._bar is not None:
            self._bar.set_postfix(refresh=False, **values)

    def line(self) -> str:
        """The step's one line: what it did, out of how many, how long it took, and its postfix values."""
        done = f"{self.n}/{self.total}" if self.total is not None else str(self.n)
        extra = ", ".join(f"{k}={v}" for k, v in self._postfix.items())
        took = time.monotonic() - self._start
        return f"{self.desc}: {done} {self.unit} in {took:.1f} s" + (f" ({extra})" if extra else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._enabled:
            print(self.line(), file=sys.stderr, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def iterate(
    items: Iterable[T], desc: str, unit: str, *, enabled: bool = True, total: int | None = None
) -> Iterator[T]:
    """``items`` with a :class:`Progress` ticking once per item (closed when the loop ends or breaks)."""
    count = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
    with Progress(count, desc, unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update(1)
