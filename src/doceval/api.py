"""The Python API, for notebooks and pytest: the same code as the CLI, with the user's system as a parameter.

    from doceval import evaluate, compare, gate

    def retrieve(question, k):                 # your retriever: ids best first, or (id, score) pairs
        ...

    base = evaluate("golden.jsonl", retriever=retrieve, k=3)
    new = evaluate("golden.jsonl", agent=my_assistant)    # my_assistant(question=, library=, version=, session_id=)
    print(compare(base, new).rows)
    assert gate(new, {"hit_rate": 0.6, "refused_correctly": 1.0}).passed

``evaluate`` returns a :class:`Summary`: the dict ``doceval eval --output`` writes (``{"metrics", "config",
"entries", "complete"}``) with those blocks as attributes too (``s.metrics["hit_rate"]``), so ``compare``/``gate``
take either a summary from here or a file path or MLflow run id. ``retriever=`` takes a function or a built-in
retriever's name (``"bm25"``: the same as ``overrides=["retriever=bm25"]``).

``compose`` and ``load_params`` return the typed, frozen :class:`doceval.config.schema.Config`; change one with
``dataclasses.replace`` and pass it to ``evaluate_config``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from doceval.common.journal import journal_note
from doceval.common.naming import USER_FUNCTION, is_function_retriever
from doceval.common.notes import collected_notes
from doceval.common.registry import as_variant
from doceval.config.compose import compose, load_params
from doceval.config.schema import AgentFunction, Config, Gate, RetrieverFunction
from doceval.errors import UsageError
from doceval.harness.evaluate import evaluate as evaluate_typed
from doceval.harness.plan import EvalOptions
from doceval.harness.repeats import evaluate_repeats
from doceval.results import CompareResult, GateResult, check_gate_config, load_gate_config
from doceval.results import compare as compare_summaries
from doceval.results import gate as gate_summary
from doceval.results import load_summary as load_summary_mapping
from doceval.summary import RunSettings, as_summary
from doceval.summary import Summary as TypedSummary
from doceval.system.retrievers import RETRIEVERS

__all__ = [
    "EvalOptions",
    "Summary",
    "compare",
    "compose",
    "evaluate",
    "evaluate_config",
    "gate",
    "load_params",
    "load_summary",
]


class Summary(dict[str, Any]):
    """A run summary (docs/design.md section 7): the JSON object ``doceval eval --output`` writes, as a read-only
    dict (``json.dump`` it, index it: ``s["metrics"]``), over the typed summary (``typed``,
    :class:`doceval.summary.Summary`); its blocks as attributes: ``metrics`` (values, counts, intervals), ``config``
    (the configuration as recorded), ``entries`` (one row per golden entry), ``complete``; the resolved run
    settings typed as ``settings`` (``s.settings.floors.source``, ``s.settings.k``); and ``notes``: what the run
    said on stderr as ``note:`` lines (not part of the dict: the file has no such key)."""

    notes: list[str] = []  # noqa: RUF012 - a class-level default; evaluate() sets each instance's own list

    def __init__(self, data: Mapping[str, Any] | TypedSummary) -> None:
        typed = as_summary(data)
        super().__init__(typed.to_dict())
        self._typed = typed

    @property
    def typed(self) -> TypedSummary:
        return self._typed

    @property
    def settings(self) -> RunSettings:
        return self._typed.settings

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self["metrics"])

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._typed.settings.recorded)

    @property
    def entries(self) -> list[dict[str, Any]]:
        return list(self["entries"])

    @property
    def complete(self) -> bool:
        return self._typed.complete

    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise TypeError("a doceval.Summary is read-only: copy it (dict(summary)) to change it")

    __setitem__ = __delitem__ = __ior__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild it from its items (the default would set them one by one).
        return (type(self), (dict(self),), {"notes": self.notes} if "notes" in self.__dict__ else None)

    clear = pop = popitem = setdefault = update = _read_only


def load_summary(path_or_run_id: str | Path) -> Summary:
    """A run summary from a JSON file or an MLflow run id, checked (``UsageError`` naming the problem)."""
    return Summary(load_summary_mapping(path_or_run_id, mlflow_summary_loader()))


def _built_in_retrievers() -> tuple[str, ...]:
    """The registered retrievers a name can pick, read when asked (``function`` is the user's own: pass the
    function itself)."""
    return tuple(n for n in RETRIEVERS.names() if not is_function_retriever(n))


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def _composed(
    overrides: Sequence[str], retriever: object, agent: object, k: int | None, allow_drafts: bool, track: bool
) -> Config:
    """conf/ + ``overrides`` + what the arguments set (k, a built-in retriever's name, ``retriever=function`` or
    ``agent=function`` for a user's callable, whose settings (the deadline) then come from conf/, no floors for
    a user's retriever unless ``overrides`` name some, drafts), with tracking on only when asked."""
    extra = ([f"k={k}"] if k is not None else []) + (["allow_drafts=true"] if allow_drafts else [])
    if isinstance(retriever, str):
        extra.append(f"retriever={retriever}")
    elif retriever is not None:
        extra.append(f"retriever={USER_FUNCTION}")
        if not any(o.split("=", 1)[0].lstrip("+~") == "floors" for o in overrides):
            extra.append("floors=zero")
    if agent is not None:
        extra.append(f"agent={USER_FUNCTION}")
    cfg = compose([*overrides, *extra])
    return dataclasses.replace(cfg, tracking=dataclasses.replace(cfg.tracking, enabled=track))


def evaluate(
    golden: str | Path,
    *,
    retriever: Callable[..., Any] | str | None = None,
    agent: Callable[..., Mapping[str, Any]] | None = None,
    k: int | None = None,
    split: str | None = None,
    overrides: Sequence[str] = (),
    judge: bool | None = None,
    warm_memory: bool = False,
    max_errors: int | None = None,
    track: bool = False,
    progress: bool = False,
    resume: bool = False,
    fresh: bool = False,
    allow_drafts: bool = False,
    repeats: int = 1,
) -> Summary:
    """Evaluate a golden set (JSONL or JSON array) and return its summary.

    - ``retriever``: ``retrieve(question, k)`` (library/version keywords passed when it accepts them)
      returning ids best first or ``(id, score)`` pairs; doceval's agent answers from what it retrieves. Or a
      built-in retriever's name (``"bm25"``, ``"dense"``, ...): the configured system with that retriever.
    - ``agent``: the user's whole assistant, ``agent(question=, library=, version=, session_id=)`` returning
      ``{"answer", "sources", "refused"}``; a fresh session id per entry unless ``warm_memory``.
    - Neither: the configured system (conf/ + ``overrides``, e.g. ``["retriever=bm25"]``).
    - ``k`` (default: the config's); ``split``: ``"calibration"``, ``"test"`` or ``"all"`` (every entry), by
      default the configured one (``split=test`` as shipped), as ``doceval eval``; untagged entries belong to
      every split. ``judge``: the configured judge; off by default (answer_accuracy "not judged") unless
      ``overrides`` choose one (``["judge=openai", ...]``: it runs); ``judge=False`` with such an override
      raises (one of them is a mistake).
    - ``repeats``: answer and judge every entry N times (``doceval eval --repeats N``): each entry scored by its
      mean over the repeats, the spread and the flaky entries in the summary's ``repeats`` block.
    - ``track``: log to MLflow. **Off by default**, whatever the configuration says: a test or a notebook
      writes no tracking store unless it asks (``track=True``, the store of ``tracking.uri``).
    - Journals (7.3): an interrupted run resumes; a finished one is redone unless ``resume``; ``fresh`` restarts.
    - ``allow_drafts``: score unreviewed drafts (`doceval golden draft`) instead of refusing them.
    A user's callable runs without floors unless ``overrides`` name some: calibrated floors belong to the
    retriever they were calibrated for. Every note the CLI would print on stderr is in the result's ``notes``.
    """
    _check_evaluate_args(
        golden,
        retriever,
        agent,
        k,
        split,
        overrides,
        max_errors,
        repeats,
        warm_memory=warm_memory,
        track=track,
        progress=progress,
        resume=resume,
        fresh=fresh,
        allow_drafts=allow_drafts,
    )
    judge = _judge_wanted(judge, overrides)
    cfg = _composed(overrides, retriever, agent, k, allow_drafts, track)
    options = EvalOptions(
        golden=Path(golden),
        split="__config__" if split is None else (None if split == "all" else split),  # `eval --split`'s rule
        no_judge=not judge,
        warm_memory=warm_memory,
        progress=progress,
        max_errors=max_errors,
        resume=resume,
        fresh=fresh,
    )
    # A built-in retriever (a name) is composed like `doceval eval retriever=NAME`: no user function.
    cfg = _users_system(cfg, options, None if isinstance(retriever, str) else retriever, agent)
    with collected_notes() as notes:
        summary = Summary(evaluate_repeats(cfg, options, repeats))
    journal = journal_note(summary.settings.usage)
    summary.notes = [*notes, *([journal] if journal else [])]
    if track:
        # lazy: start-up (mlflow, ~2 s): an untracked evaluation never loads it
        from doceval import tracking

        tracking.log_configured_run(cfg, summary.typed, {}, run_name=None, tags={"stage": "api"})
    return summary


def evaluate_config(cfg: Config, options: EvalOptions | None = None) -> Summary:
    """Score ``cfg`` (a :class:`doceval.config.schema.Config`: ``compose``, ``load_params``, changed with
    ``dataclasses.replace``) as ``doceval eval`` would, untracked: its :class:`Summary`."""
    return Summary(evaluate_typed(cfg, options))


def _users_system(cfg: Config, options: EvalOptions, retriever: Any, agent: Any) -> Config:
    """The user's callable as the system under test: ``options`` gain it, and the config names it."""
    if retriever is not None:
        # lazy: start-up (a user's callable needs none of this when the configured system runs)
        from doceval.system.retrievers.function import FunctionRetriever

        name = _name(retriever)
        composed = as_variant(cfg.retriever, RetrieverFunction, "retriever")  # see _composed
        function = FunctionRetriever.from_callable(retriever, name=name, timeout_s=composed.timeout_s)
        options.retriever = function
        # The summary names the user's callable (and the deadline its calls run with), and no floors of another
        # retriever can match it.
        block = RetrieverFunction(
            name=USER_FUNCTION, target=name, kwargs=MappingProxyType({}), timeout_s=function.timeout_s
        )
        cfg = dataclasses.replace(cfg, retriever=block)
    if agent is not None:
        # lazy: start-up (as above)
        from doceval.system.external.agents import function_agent

        name = _name(agent)
        options.agent = function_agent(agent, cfg.agent, name=name)  # _composed chose agent=function
        # The config names the user's callable, as it does a retriever function.
        agent_block = as_variant(cfg.agent, AgentFunction, "agent")
        cfg = dataclasses.replace(cfg, agent=dataclasses.replace(agent_block, target=name))
    return cfg


def _judge_wanted(judge: Any, overrides: Sequence[str]) -> bool:
    """Whether ``evaluate`` runs the judge: ``judge`` when given; None: only when ``overrides`` choose one
    (``judge=openai``, ``judge.model=...``). ``judge=False`` beside such an override raises: one of the two is
    a mistake, and silently running no judge would hide it."""
    if judge is not None and not isinstance(judge, bool):
        raise _bad(
            "evaluate",
            "judge",
            judge,
            "True or False (None: judge when the overrides choose a judge)",
            "judge=True",
        )
    chosen = [o for o in overrides if o.split("=", 1)[0].lstrip("+~").split(".")[0] == "judge"]
    if judge is False and chosen:
        raise UsageError(
            f"evaluate(judge=False, overrides=[{chosen[0]!r}, ...]): the overrides choose a judge but judge=False "
            "runs none; pass judge=True to run it, or drop the judge override"
        )
    return bool(judge) or (judge is None and bool(chosen))


# ------------------------------------------------------------------------------ checking the arguments
# Python does not check annotations: a wrong type would fail deep inside (a TypeError, an AttributeError) with
# no word about which argument. Each check names the argument, what it got and how to call it.


def _bad(function: str, name: str, value: Any, expected: str, example: str) -> UsageError:
    shown = f"{value!r:.60}" if not isinstance(value, list | tuple | dict) else f"a {type(value).__name__}"
    return UsageError(f"{function}({name}={shown}): expected {expected} (e.g. {example})")


def _check_evaluate_args(
    golden: Any,
    retriever: Any,
    agent: Any,
    k: Any,
    split: Any,
    overrides: Any,
    max_errors: Any,
    repeats: Any,
    **flags: Any,
) -> None:
    if isinstance(golden, list | tuple) and golden and all(isinstance(r, Mapping) for r in golden):
        raise UsageError(
            "evaluate(golden=a list of rows): expected the path of a golden set file; write the rows to a JSONL "
            "file, one JSON object per line, and pass its path (e.g. evaluate('golden.jsonl', retriever=fn))"
        )
    if not isinstance(golden, str | Path) or not str(golden).strip():
        raise _bad(
            "evaluate",
            "golden",
            golden,
            "the path of a golden set (str or pathlib.Path), JSONL or a JSON array",
            "evaluate('golden.jsonl', retriever=fn)",
        )
    if isinstance(retriever, str) and retriever not in _built_in_retrievers():
        raise UsageError(
            f"evaluate(retriever={retriever!r:.60}): not a built-in retriever; pass one of "
            f"{', '.join(_built_in_retrievers())} (e.g. retriever='bm25'), or your own function (retriever=my_retrieve)"
        )
    for name, fn in (("retriever", retriever), ("agent", agent)):
        if fn is not None and not callable(fn) and not (name == "retriever" and isinstance(fn, str)):
            raise _bad(
                "evaluate", name, fn, "a function or None", f"evaluate('golden.jsonl', {name}=my_{name})"
            )
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise _bad("evaluate", "k", k, "an integer >= 1 or None (the config's k)", "k=5")
    if split is not None and not isinstance(split, str):
        raise _bad(
            "evaluate", "split", split, "a split name, 'all' or None (the configured split)", "split='all'"
        )
    if (
        isinstance(overrides, str)
        or not isinstance(overrides, list | tuple)
        or not all(isinstance(o, str) for o in overrides)
    ):
        # Named by type only: an override can hold a secret (a URL's password, a token).
        raise UsageError(
            f"evaluate(overrides=a {type(overrides).__name__}): expected a list of KEY=VALUE strings "
            "(e.g. overrides=['k=3'])"
        )
    if max_errors is not None and (
        isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0
    ):
        raise _bad("evaluate", "max_errors", max_errors, "an integer >= 0 or None (no limit)", "max_errors=2")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise _bad("evaluate", name, value, "True or False", f"{name}=True")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise _bad("evaluate", "repeats", repeats, "an integer >= 1", "repeats=3")
    if retriever is not None and agent is not None:
        raise UsageError("evaluate: pass retriever= or agent=, not both (an agent brings its own retrieval)")


def mlflow_summary_loader(uri: str | None = None) -> Callable[[str], Mapping[str, Any]]:
    """A loader of a run's summary.json artifact by MLflow run id, through :mod:`doceval.tracking` (the only
    package that imports mlflow), imported only when a run id is actually met. The store is ``uri``, else
    ``MLFLOW_TRACKING_URI``, else ./mlruns/mlflow.db."""

    def load(run_id: str) -> Mapping[str, Any]:
        try:
            tracking = importlib.import_module("doceval.tracking")
        except ImportError as exc:
            raise UsageError(
                f"{run_id}: looks like an MLflow run id, but MLflow tracking is not available ({exc}); "
                "pass the run's summary JSON instead"
            ) from exc
        root = Path.cwd()
        data: Mapping[str, Any] = tracking.load_summary_from_run(
            run_id, tracking.tracking_uri(uri, root), root
        )
        return data

    return load


def _summary(value: Any, function: str = "compare", name: str = "base") -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str | Path):
        raise _bad(
            function,
            name,
            value,
            "a summary (the dict evaluate returns), a summary JSON path or an MLflow run id",
            f"{function}('eval/runs/base.json', ...)",
        )
    return load_summary_mapping(value, mlflow_summary_loader())


def compare(
    base: Mapping[str, Any] | str | Path, new: Mapping[str, Any] | str | Path, **options: Any
) -> CompareResult:
    """Side by side, paired by entry id (``doceval compare``); summaries, summary files or MLflow run ids."""
    known = [p for p in inspect.signature(compare_summaries).parameters if p not in ("base", "new")]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise UsageError(f"compare({unknown[0]}=...): not an option of compare; options: {', '.join(known)}")
    return compare_summaries(_summary(base, "compare", "base"), _summary(new, "compare", "new"), **options)


def gate(
    summary: Mapping[str, Any] | str | Path,
    thresholds: Mapping[str, float] | None = None,
    *,
    config: Gate | Config | Mapping[str, Any] | str | Path | None = None,
    baseline: Mapping[str, Any] | str | Path | None = None,
    allow_different_k: bool = False,
    allow_different_judge: bool = False,
) -> GateResult:
    """The CI gate (``doceval gate``): ``thresholds`` such as ``{"hit_rate": 0.6}`` (drift off), or a gate
    ``config``: a :class:`~doceval.config.schema.Gate` (``cfg.gate`` of a composed config), a whole
    :class:`~doceval.config.schema.Config` (its gate), a mapping written like conf/gate/default.yaml (checked as a
    gate file is), or the path of a conf/gate YAML file or of a params.yaml (its ``gate`` block); default: the
    gate composed from conf/ + doceval.yaml, as ``doceval gate`` applies it.

    ``baseline``: a summary the non-regression rule compares against. With ``thresholds`` or the composed gate,
    the composed gate's ``non_regression`` block (metrics, tolerance, mode, alpha) is applied (enabled), and the
    result's notes say so; an explicit ``config`` whose non_regression is disabled raises (the baseline would
    be ignored)."""
    if thresholds is not None and not isinstance(thresholds, Mapping):
        raise _bad(
            "gate", "thresholds", thresholds, "a mapping of metric name to number", "{'hit_rate': 0.6}"
        )
    if config is not None and not isinstance(config, Gate | Config | Mapping | str | Path):
        raise _bad(
            "gate",
            "config",
            config,
            "a gate config (schema.Gate, a Config, a mapping) or a conf/gate YAML path",
            "config='conf/gate/default.yaml'",
        )
    base = None if baseline is None else _summary(baseline, "gate", "baseline")
    rules, notes = _gate_config(thresholds, config), []
    if base is not None and not rules.non_regression.enabled:
        if thresholds is None and config is not None:
            raise UsageError(
                "gate(baseline=...): the gate's non_regression is disabled, so the baseline would be ignored; "
                "enable it in the config (non_regression: {enabled: true, metrics: [...]}) or drop baseline="
            )
        composed = compose([]).gate.non_regression
        rules = dataclasses.replace(rules, non_regression=dataclasses.replace(composed, enabled=True))
        notes.append(
            f"baseline= given: non_regression of the composed gate applied ({', '.join(composed.metrics)}, "
            f"{composed.mode}, tolerance {composed.tolerance:g}, alpha {composed.alpha:g})"
        )
    result = gate_summary(
        _summary(summary, "gate", "summary"),
        rules,
        baseline=base,
        allow_different_k=allow_different_k,
        allow_different_judge=allow_different_judge,
    )
    result.notes[:0] = notes
    return result


def _gate_config(
    thresholds: Mapping[str, float] | None, config: Gate | Config | Mapping[str, Any] | str | Path | None
) -> Gate:
    """The gate ``gate()`` applies, from its ``thresholds`` or ``config`` argument (checked by the caller)."""
    if thresholds is not None:
        return check_gate_config({"thresholds": dict(thresholds), "non_regression": {"enabled": False}})
    if config is None:
        return compose([]).gate
    if isinstance(config, Gate):
        return config
    if isinstance(config, Config):
        return config.gate
    if isinstance(config, str | Path):
        return load_gate_config(config)
    return check_gate_config(config)
