"""One plug-in rule: a registry per kind of plug-in (retriever, answerer, judge, agent, store, embedder).

A plug-in registers its builder under the name its config block carries (``retriever.name``, ``judge.name``,
...) together with the capability flags its kind declares; code that needs one asks the registry (its builder,
its flags), never an ``isinstance`` chain over the config variants. The names are read from the registry when
asked, never copied at import time, so a plug-in registered after the built-ins is found like one of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from doceval.errors import UsageError

E = TypeVar("E")
V = TypeVar("V")

__all__ = ["Registry", "as_variant"]


class Registry(Mapping[str, E]):
    """``name -> entry`` for one kind of plug-in; ``key`` is its config key (``retriever``, ``judge``, ...).

    An entry is the kind's own frozen dataclass: the builder and the capability flags code asks about.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self._entries: dict[str, E] = {}

    def add(self, name: str, entry: E) -> None:
        """Register ``entry`` as ``name``; the same entry again is a no-op (a module imported twice), another
        entry under a taken name is a programming error."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.key}: a plug-in name must be a non-empty string, not {name!r}")
        if name in self._entries and self._entries[name] != entry:
            raise ValueError(f"{self.key} {name!r} is registered twice")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's temporary plug-in)."""
        del self._entries[name]

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted: the same whatever order the plug-ins registered in."""
        return tuple(sorted(self._entries))

    def require(self, name: object) -> E:
        """The entry for ``name``; a name nobody registered is a usage error listing the registered ones."""
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            raise UsageError(f"{self.key}={name!r} is not known; choose one of: {', '.join(self.names())}")
        return entry

    def __getitem__(self, name: str) -> E:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.key!r}: {', '.join(self.names())})"


def as_variant(block: object, kind: type[V], key: str) -> V:
    """``block`` as the config variant its builder reads (the registry chose the builder by the block's name, so
    another variant is a registration bug, not bad input)."""
    if not isinstance(block, kind):
        name = getattr(block, "name", "?")
        raise TypeError(f"{key}={name}: expected a {kind.__name__} block, got {type(block).__name__}")
    return block
