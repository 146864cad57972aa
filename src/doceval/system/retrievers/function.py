"""The user's own retriever: a Python function named by ``retriever.target=MODULE:ATTR``.

``ATTR(question, k)`` returns up to k document ids best first, or ``(id, score)`` pairs; an empty list is a
refusal. ``library``/``version`` are passed as keyword arguments when the function accepts them. With
``+retriever.kwargs.NAME=VALUE`` overrides ATTR is a factory, called once with them, that returns the function
(or an object with a ``.retrieve(question, k, ...)`` method); a class is always such a factory. No docs corpus is
needed: library and version come from the probe.

Each call runs on a worker thread with a deadline (``retriever.timeout_s``, null: none): a call past it raises
:class:`~doceval.common.concurrency.CallTimedOut` and is abandoned (counted in :attr:`FunctionRetriever.abandoned`).
A result of the wrong shape raises :class:`InvalidRetrieval`; the harness records either, or anything the
function raises, as that question's system error.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from doceval.common.concurrency import DeadlineCaller, timeout_of
from doceval.common.naming import USER_FUNCTION
from doceval.common.targets import build_from_factory, load_target, provenance_of
from doceval.errors import UsageError
from doceval.seam import InvalidRetrieval, source_problem
from doceval.system.retrievers.base import Ranked

if TYPE_CHECKING:
    from doceval.config import schema

_EXAMPLE = "def retrieve(question, k, library=None, version=None) -> list[str]"


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some built-ins and C callables have none: call and see
        return None


class FunctionRetriever:
    name = USER_FUNCTION
    # User scores may be on any scale (a distance, a logit), so no floor is out of range.
    score_range = (-math.inf, math.inf)

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        where: str,
        target: str,
        kwargs: Mapping[str, Any] | None = None,
        origin: Any = None,
        timeout_s: float | None,
    ) -> None:
        """Use :meth:`from_target`, :meth:`from_config` or :meth:`from_callable`.

        ``fn`` is the retrieve callable; ``where`` prefixes every error (``retriever.target=mod:fn``); ``origin``
        is the object whose code :meth:`describe` hashes (the factory, when there is one); ``timeout_s`` the
        deadline of each call (None: called in the caller's thread, no deadline).
        """
        self.target = target
        self.timeout_s = timeout_of(timeout_s, "retriever.timeout_s")
        self._caller = DeadlineCaller("doceval-retriever")
        self.kwargs: dict[str, Any] = dict(kwargs or {})
        self.where = where
        self._fn = fn
        self._origin = fn if origin is None else origin
        # None until the first non-empty result fixes it: True for (id, score) pairs, False for bare ids.
        self.scored: bool | None = None
        self._lock = threading.Lock()  # the agent may retrieve from several threads
        sig = _signature(fn)
        self._passes = {"library": False, "version": False}
        if sig is not None:
            params = sig.parameters.values()
            any_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
            for key in self._passes:
                p = sig.parameters.get(key)
                self._passes[key] = any_kw or (
                    p is not None
                    and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
                )
            try:
                sig.bind("question", 1, **self._extra("lib", "1"))
            except TypeError as exc:
                raise UsageError(
                    f"{where}: {getattr(fn, '__qualname__', fn)!r}{sig} cannot be called as (question, k): "
                    f"{exc}; define it as {_EXAMPLE}"
                ) from None

    # ------------------------------------------------------------------------------------ construction

    @classmethod
    def from_config(cls, cfg: schema.RetrieverFunction) -> FunctionRetriever:
        """The ``retriever`` block: ``target`` (MODULE:ATTR), ``kwargs`` (factory arguments, may be empty) and
        ``timeout_s`` (None: no deadline)."""
        target = cfg.target
        if target is None:
            raise UsageError(
                "retriever=function needs retriever.target=MODULE:ATTR, e.g. "
                "`doceval eval retriever=function retriever.target=my_retriever:retrieve` for retrieve() "
                "in ./my_retriever.py"
            )
        kwargs = cfg.kwargs  # free-form (config.schema.OPEN_MAPPINGS): read as the mapping the user wrote
        if not isinstance(kwargs, Mapping) or not all(isinstance(key, str) for key in kwargs):
            raise UsageError(
                f"retriever.kwargs={kwargs!r}: expected a mapping of keyword arguments for the factory "
                "(set them as +retriever.kwargs.NAME=VALUE)"
            )
        timeout_s = timeout_of(cfg.timeout_s, "retriever.timeout_s")
        return cls.from_target(target, kwargs, timeout_s=timeout_s)

    @classmethod
    def from_target(
        cls,
        target: str,
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None,
    ) -> FunctionRetriever:
        where = f"retriever.target={target}"
        attr = load_target(target, "retriever.target")
        fn = cls._build(attr, dict(kwargs or {}), where, "+retriever.kwargs.NAME=VALUE")
        return cls(fn, where=where, target=target, kwargs=kwargs, origin=attr, timeout_s=timeout_s)

    @classmethod
    def from_callable(
        cls,
        fn: Any,
        name: str = "callable",
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None,
    ) -> FunctionRetriever:
        """For the Python API: ``fn`` is the retrieve function, an object with ``.retrieve``, or (with ``kwargs``,
        or when it is a class) a factory of either. ``name`` stands for the target in errors and
        :meth:`describe`."""
        where = f"retriever callable {name!r}"
        built = cls._build(fn, dict(kwargs or {}), where, "kwargs=")
        return cls(built, where=where, target=name, kwargs=kwargs, origin=fn, timeout_s=timeout_s)

    @staticmethod
    def _build(attr: Any, kwargs: dict[str, Any], where: str, how: str) -> Callable[..., Any]:
        """The retrieve callable from ATTR: itself, or what the factory ATTR(**kwargs) returns."""
        return build_from_factory(attr, kwargs, where=where, how=how, method="retrieve", example=_EXAMPLE)

    def __getstate__(self) -> dict[str, Any]:
        # engine=ray ships a retriever given as an object (the Python API) to its actors: the function goes
        # by reference to its module or by value (a closure); the deadline threads and lock are per process.
        state = dict(self.__dict__)
        for own in ("_caller", "_lock"):
            del state[own]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._caller = DeadlineCaller("doceval-retriever")
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------- retrieve

    def _extra(self, library: str, version: str) -> dict[str, str]:
        pairs = {"library": library, "version": version}
        return {key: value for key, value in pairs.items() if self._passes[key]}

    @property
    def abandoned(self) -> int:
        """Calls abandoned past their deadline so far (their threads may still be running)."""
        return self._caller.abandoned

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        extra = self._extra(library, version)
        try:
            result = self._caller.call(lambda: self._fn(question, k, **extra), self.timeout_s)
        except BaseException as exc:
            exc.add_note(f"raised by {self.where} on the question {_short(question)}")
            raise
        return self._check(result, question, k)

    def _check(self, result: Any, question: str, k: int) -> Ranked:
        about = f"{self.where} on the question {_short(question)}"
        if not isinstance(result, list):
            raise InvalidRetrieval(
                about,
                f"returned a value of type {type(result).__name__}; return a list of document ids best first, "
                "or of (id, score) pairs ([] to refuse)",
            )
        ids: list[str] = []
        scores: list[float] = []
        scored: bool | None = None
        for i, item in enumerate(result):
            if isinstance(item, str):
                doc_id, score, pair = item, None, False
            elif isinstance(item, list | tuple):
                if len(item) != 2:
                    raise InvalidRetrieval(
                        about, f"item {i} has {len(item)} values; a scored item is a pair (id, score)"
                    )
                doc_id, score, pair = item[0], item[1], True
            else:
                raise InvalidRetrieval(
                    about,
                    f"item {i} is of type {type(item).__name__} ({item!r:.60}); "
                    "expected a str document id or an (id, score) pair",
                )
            if scored is not None and pair != scored:
                raise InvalidRetrieval(about, "mixes bare ids and (id, score) pairs; return one form")
            scored = pair
            # One rule with an assistant's sources: a non-empty str id, a finite score (None: a bare id).
            problem = source_problem(doc_id, score if pair else None)
            if problem is None and pair and score is None:
                problem = f"({doc_id!r:.60}) has the score None; expected a number"
            if problem is not None:
                raise InvalidRetrieval(about, f"item {i} {problem}")
            ids.append(doc_id)
            scores.append(float(score) if pair and score is not None else 0.0)
        if scored is None:
            return []  # refused
        with self._lock:
            if self.scored is None:
                self.scored = scored
            elif self.scored != scored:
                before = "(id, score) pairs" if self.scored else "bare ids"
                now = "(id, score) pairs" if scored else "bare ids"
                raise InvalidRetrieval(
                    about,
                    f"returned {now}, but {before} for earlier questions; return one form for every "
                    "question (floors need scores on one scale)",
                )
        # Duplicates collapse keeping the first, as best_per_document keeps the best; list order is the ranking.
        first: dict[str, float] = {}
        for doc_id, score in zip(ids, scores, strict=True):
            first.setdefault(doc_id, score)
        ranked: Ranked = list(first.items())[: max(k, 0)]
        if not scored:
            # Rank as score (k, k-1, ...): the order survives every consumer; floors are not applied to these.
            ranked = [(doc_id, float(k - rank)) for rank, (doc_id, _) in enumerate(ranked)]
        return ranked

    # -------------------------------------------------------------------------------------- provenance

    def describe(self) -> dict[str, Any]:
        """What ran: the target, the factory kwargs and where its code came from (sha256 of the source file, or
        the installed distribution and version), so two runs of different user code never look alike."""
        return {
            "name": self.name,
            "target": self.target,
            "kwargs": dict(self.kwargs),
            **provenance_of(self._origin),
        }
