"""Planning a run: which system is under test, which entries, which inputs, floors and candidates.

Three kinds of system go through the same scoring (docs/design.md section 7):
- ``docchat``: doceval's own agent over a retriever (a built-in one, or the user's ``retriever=function``);
- ``function`` / ``http``: the user's whole assistant (``agent=function|http``), which returns its sources.

A doceval docs corpus is opened only when a built-in retriever needs it: a user's retriever function or
assistant brings its own documents, and its relevant ids are the user's ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.naming import OWN_AGENT, is_function_retriever, is_own_agent
from doceval.common.notes import print_note
from doceval.errors import UsageError
from doceval.harness.candidate_cache import check_candidates, load_candidates
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.candidates import compute_candidates, score_range_of
from doceval.harness.floors import Floors, check_floors
from doceval.harness.run_floors import FloorOptions, check_golden_libraries, run_floors
from doceval.harness.stops import ErrorLimits
from doceval.inputs.conversation import first_records, records_of
from doceval.inputs.corpus import Corpus, load_corpus
from doceval.inputs.golden import DEFAULT_PIN, GoldenEntry, parse_golden, select_split
from doceval.inputs.qrels import labels_md5
from doceval.inputs.scope import load_checked_golden
from doceval.inputs.standalone import missing_standalone, standalone_entries
from doceval.seam import Probe

if TYPE_CHECKING:
    from doceval.config.schema import Config
    from doceval.system.external.agents import ExternalAgent
    from doceval.system.retrievers import Retriever


@dataclass
class EvalOptions:
    """What the CLI flags (or the Python API) add on top of the composed config (never written back into it)."""

    golden: Path | None = None
    split: str | None = "__config__"
    limit: int | None = None
    score_floor: float | None = None
    floor_flags: dict[str, float] = field(default_factory=dict)
    no_judge: bool = False
    warm_memory: bool = False
    # --memory-reset needs_memory: each needs_memory turn asked without its conversation's context (a fresh
    # session or memory, the starting pin, no query rewrite); what memory benefit is measured against.
    memory_reset: bool = False
    # --memory-reset standalone (with memory_reset): each needs_memory turn asks its standalone rewrite instead,
    # at its own labelled pin: the ceiling memory recovery is measured against (docs/design.md section 4.6).
    standalone: bool = False
    progress: bool = True
    candidates: CandidateSet | None = None  # reuse a loaded cache (sweeps)
    floors: Floors | None = None  # explicit floors (the calibrate stage scoring its own split)
    run_dir: Path | None = None  # where the journals live (resumable runs)
    max_errors: int | None = None  # stop (exit 4, summary incomplete) once more entries than this failed
    retriever: Retriever | None = None  # a retriever object instead of the configured one (Python API)
    agent: ExternalAgent | None = None  # an assistant instead of the configured agent (Python API)
    repeat: int = 0  # --repeats: which repeat this run is (its own journals; LLM seeds are in the config)
    repeats: int = 1  # --repeats N: how many (N > 1: a user's assistant is sent the repeat index and seed)
    resume: bool = False  # --resume: replay a finished run's journals (an interrupted run resumes anyway)
    fresh: bool = False  # --fresh: set every journal of this run aside and ask the system again


def split_of(cfg: Config, options: EvalOptions) -> str | None:
    if options.split != "__config__":
        return options.split
    return cfg.split.name


def agent_name(cfg: Config, options: EvalOptions) -> str:
    if options.agent is not None:
        return str(options.agent.name)
    return cfg.agent.name


def uses_function_retriever(cfg: Config, options: EvalOptions) -> bool:
    return options.retriever is not None or is_function_retriever(cfg.retriever.name)


def check_one_system(cfg: Config, options: EvalOptions) -> None:
    """One system under test: an assistant brings its own retrieval, so a user's retriever next to it would be
    silently ignored."""
    agent = agent_name(cfg, options)
    if not is_own_agent(agent) and uses_function_retriever(cfg, options):
        raise UsageError(
            f"agent={agent} and retriever=function: the assistant brings its own retrieval, so the retriever "
            f"would be ignored; drop retriever=function to evaluate the assistant, or agent={agent} to evaluate "
            "the retriever with doceval's agent"
        )


def needs_corpus(cfg: Config, options: EvalOptions) -> bool:
    """Only built-in retrievers read doceval's docs corpus; a user's function or assistant brings its own."""
    return is_own_agent(agent_name(cfg, options)) and not uses_function_retriever(cfg, options)


def known_corpus(cfg: Config, entries: Sequence[GoldenEntry], golden_path: Path) -> Corpus | None:
    """The corpus at ``paths.docs`` when the user's system's ids are its documents, else None.

    A user's retriever or assistant brings its own documents; when a doceval corpus is built at ``paths.docs``
    (``doceval docs``) and the golden set's relevant ids are its document ids, doceval knows their text (its
    answerer answers from it) and checks the labels against it, as for a built-in retriever. A golden set
    none of whose relevant ids is a document there labels other documents: the corpus is not the system's."""
    root = Path(cfg.paths.docs)
    if not ((root / "manifest.json").is_file() and (root / "corpus.jsonl").is_file()):
        return None
    corpus = load_corpus(root)
    relevant = {d for e in entries for d in e.relevant_ids}
    if relevant and relevant.isdisjoint(corpus.doc_ids()):
        print_note(
            f"none of the relevant ids of {golden_path} is a document of the corpus in {root} (paths.docs): "
            "they are taken as your system's own ids, and the labels are not checked against that corpus"
        )
        return None
    return corpus


def load_inputs(
    cfg: Config, options: EvalOptions, need_corpus: bool = True
) -> tuple[Corpus | None, list[GoldenEntry], Path, str]:
    """The corpus (when needed) and the golden set, checked against it. Without a corpus, relevant ids are the
    user's own and entries may omit library/version (they get the default pin). A user's system whose ids are
    the documents of the corpus at ``paths.docs`` (:func:`known_corpus`) gets that corpus, checked the same."""
    golden_path = options.golden or Path(cfg.golden)
    if not need_corpus:
        entries = parse_golden(golden_path, default_pin=DEFAULT_PIN, allow_drafts=cfg.allow_drafts)
        corpus = known_corpus(cfg, entries, golden_path)
        if corpus is None:
            return None, entries, golden_path, labels_md5(golden_path)
    else:
        corpus = load_corpus(Path(cfg.paths.docs))
    # Scope labels are checked against this corpus: a label wrong for it is an error, not a silent score.
    entries, md5, _ = load_checked_golden(golden_path, corpus, allow_drafts=cfg.allow_drafts)
    return corpus, entries, golden_path, md5


def cached_candidates(
    cfg: Config,
    options: EvalOptions,
    corpus: Corpus | None,
    all_entries: Sequence[GoldenEntry],
    golden_md5: str,
    k: int,
) -> CandidateSet | None:
    """The given or cached candidates when they match this golden set and retriever; None when the run must
    retrieve live (:func:`retrieve_live`).

    A user's retriever is always run live: the on-disk cache is keyed on the config, and the user's code can
    change under an unchanged config."""
    index_dir = Path(cfg.paths.index)

    def check(candidates: CandidateSet) -> None:
        check_candidates(
            candidates,
            all_entries,
            golden_md5,
            cfg.retriever,
            k,
            corpus,
            index_dir,
            cfg.store,
            cfg.memory.rewrite,
            options.memory_reset,
            options.standalone,
        )

    if options.candidates is not None:
        check(options.candidates)
        return options.candidates
    if options.standalone:  # the cache holds the golden set's own questions: the rewrites are retrieved live
        return None
    runs = Path(cfg.paths.runs)
    if not uses_function_retriever(cfg, options) and (runs / "candidates" / "meta.json").is_file():
        cached = load_candidates(runs)
        try:
            check(cached)  # options.standalone is False here (returned above)
            return cached
        except UsageError as exc:
            # Another retriever, golden set or a deeper k: retrieve live in the run, leaving the cache alone.
            reason = (
                f"k={k} is more than the {cached.depth} candidates cached per entry (candidates_k)"
                if k > cached.depth
                else str(exc).split(";")[0]
            )
            print_note(
                f"{reason}: retrieving live for this run (the cache in {runs / 'candidates'} is left alone)"
            )
    return None


@dataclass(frozen=True)
class RunPlan:
    """What one evaluation covers: the system, the cut-off, the entries of the split and their inputs."""

    system: str  # "docchat" (doceval's agent over a retriever), "function" or "http" (the user's assistant)
    k: int
    limit: int | None
    split: str | None
    corpus: Corpus | None  # None: the user's own documents (no doceval corpus opened)
    golden_path: Path
    golden_md5: str
    entries: list[GoldenEntry]
    floors: Floors
    candidates: CandidateSet | None  # None for an external assistant: its sources are its retrieval
    threshold: int  # relevance.threshold: the grade a document needs to count as relevant
    signal: str  # floors.signal: what a floor applies to (docs/design.md section 5.5)
    agent: ExternalAgent | None = None
    signal_values: dict[str, float] | None = None  # per entry id, for a per-question signal
    all_entries: list[GoldenEntry] = field(default_factory=list)  # the whole golden set, every split
    # Live retrieval is the run's (retrieve_live): until then there are no candidates, and floors that depend
    # on the retriever's scores (a user's function may return bare ids) are not settled yet.
    awaits_retrieval: bool = False
    # doceval's agent over the user's retriever function: an empty list is its refusal, and the ids it returns
    # may be documents doceval does not know (the answer then cannot be read from their text).
    user_retriever: bool = False

    @property
    def scored(self) -> bool:
        """Whether retrieval came with scores (floors and calibration need them)."""
        return self.candidates is not None and self.candidates.meta.get("scored", True) is not False

    def probes(self) -> list[Probe]:
        """The entries as the system sees them: the question and its library version, no labels. Every turn of
        a conversation carries the conversation's starting pin (a version picker's), never the turn's label:
        following "and in 1.10?" is the system's job."""
        return [Probe(e.id, e.question, *(e.start_pin or (e.library, e.version))) for e in self.entries]

    def labelled_probes(self) -> list[Probe]:
        """The entries with their own labelled pin: what the judge grades an answer against."""
        return [Probe(e.id, e.question, e.library, e.version) for e in self.entries]

    def conversations(self) -> dict[str, str]:
        """Entry id -> conversation id, for the turns of a conversation (one session, one memory each)."""
        return {e.id: e.conversation for e in self.entries if e.conversation is not None}


def _floor_options(cfg: Config, options: EvalOptions) -> FloorOptions:
    return FloorOptions(
        options.floors, options.score_floor, options.floor_flags, uses_function_retriever(cfg, options)
    )


def _external_agent(cfg: Config, options: EvalOptions) -> ExternalAgent | None:
    if options.agent is not None:
        return options.agent
    if is_own_agent(agent_name(cfg, options)):
        return None
    # lazy: start-up (the assistant clients, ~30 ms, load only when an external assistant is evaluated)
    from doceval.system.external.agents import make_agent

    return make_agent(cfg.agent)


def _check_limits(cfg: Config, options: EvalOptions) -> tuple[int, int | None]:
    """(k, limit), each checked, and the run's error limits."""
    k = cfg.k
    if k < 1:
        raise UsageError(f"k={k}: must be at least 1")
    limit = options.limit if options.limit is not None else cfg.limit
    if limit is not None and int(limit) < 1:
        raise UsageError(f"--limit {limit}: must be at least 1 (or omit it for every entry)")
    if options.max_errors is not None and options.max_errors < 0:
        raise UsageError(f"--max-errors {options.max_errors}: must be 0 or more")
    return k, None if limit is None else int(limit)


def limited(
    entries: list[GoldenEntry], limit: int | None, split: str | None, from_flag: bool = True
) -> list[GoldenEntry]:
    """The first ``limit`` entries of the split, a conversation counting as one entry with all its turns
    (never cut: its turns are scored together, all_turns_correct among them)."""
    if limit is None:
        return entries
    records = len(records_of(entries))
    if limit > records:
        flag = f"--limit {limit}" if from_flag else f"limit={limit}"
        where = "every split" if split is None else f"split {split!r}"
        what = "entries" if records == len(entries) else "entries (a conversation counts as one)"
        print_note(f"{flag} is more than the {records} {what} of {where}: scoring all {records}")
    return first_records(entries, limit)


# The floors of a plan that awaits a user's retriever: settled from its scores once it has run.
PENDING_FLOORS = "pending: set once the retriever has run"


def plan_run(cfg: Config, options: EvalOptions) -> RunPlan:
    """Resolve k, limit and split, load the inputs, and pick the floors and candidates (checked against each
    other). Every bad input is a UsageError here. Planning never calls the system under test: an assistant's
    probe and any live retrieval (a user's retriever, or no matching cache) are the run's, in
    :func:`retrieve_live` (the plan ``awaits_retrieval`` until then)."""
    k, limit = _check_limits(cfg, options)
    split = split_of(cfg, options)
    check_one_system(cfg, options)
    agent = _external_agent(cfg, options)
    corpus, all_entries, golden_path, golden_md5 = load_inputs(cfg, options, needs_corpus(cfg, options))
    entries = limited(select_split(all_entries, split, golden_path), limit, split, options.limit is not None)
    if options.standalone:
        entries, all_entries = _standalone(options, entries, golden_path), standalone_entries(all_entries)
    builtin = agent is None and not uses_function_retriever(cfg, options)
    # Floors first where they do not depend on what the retriever returns: a bad floor (or floors calibrated on
    # the entries being reported) costs no retrieval.
    floors = (
        run_floors(
            cfg,
            _floor_options(cfg, options),
            split,
            external=False,
            scored=True,
            report_ids=[e.id for e in entries],
        )
        if builtin
        else Floors(float("-inf"), {}, source=PENDING_FLOORS)
    )
    if agent is None and not builtin and options.floor_flags:  # a typo costs no call of the user's code
        check_golden_libraries(
            Floors(float("-inf"), dict(options.floor_flags), source="cli"), all_entries, golden_path
        )
    plan = RunPlan(
        OWN_AGENT if agent is None else agent.name,
        k,
        limit,
        split,
        corpus,
        golden_path,
        golden_md5,
        entries,
        floors,
        None,
        cfg.relevance.threshold,
        cfg.floors.signal,
        agent,
        all_entries=all_entries,
        user_retriever=agent is None and not builtin,
    )
    if agent is not None:
        return settle(cfg, options, plan, None)
    cands = cached_candidates(cfg, options, corpus, all_entries, golden_md5, k)
    if cands is None:
        return dataclasses.replace(plan, awaits_retrieval=True)
    return settle(cfg, options, plan, cands)


def _standalone(options: EvalOptions, entries: list[GoldenEntry], golden_path: Path) -> list[GoldenEntry]:
    """The evaluated entries as the standalone replay asks them; every needs_memory turn needs its rewrite."""
    if not options.memory_reset:
        raise UsageError(
            "the standalone replay asks needs_memory turns without their context: set memory_reset"
        )
    missing = missing_standalone(entries)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UsageError(
            f"{golden_path}: --memory-reset standalone: {len(missing)} needs_memory turn(s) have no standalone "
            f"rewrite ({shown}); add `standalone` to each (the question a user would ask with no history, "
            "docs/design.md section 3), or use --memory-reset needs_memory"
        )
    return standalone_entries(entries)


def retrieve_live(cfg: Config, options: EvalOptions, plan: RunPlan) -> RunPlan:
    """The run's retrieval when the plan awaits it: the user's retriever over the evaluated entries (its
    failures count towards --max-errors), or a built-in one over every entry (no matching cache); then the
    floors that depend on its scores. A plan that does not await retrieval is returned as it is."""
    if not plan.awaits_retrieval:
        return plan
    user = uses_function_retriever(cfg, options)
    live = dataclasses.replace(cfg, candidates_k=max(cfg.candidates_k, plan.k))
    limits = ErrorLimits(options.max_errors, cfg.run.max_abandoned)
    # A user's retriever sees every question: doceval's router (over a corpus it may know) is not its.
    cands = compute_candidates(
        live,
        None if user else plan.corpus,
        plan.entries if user else plan.all_entries,
        plan.golden_path,
        plan.golden_md5,
        options.progress,
        retriever=options.retriever,
        limits=limits,
        memory_reset=options.memory_reset,
        standalone=options.standalone,
        journal=(options.run_dir, options.resume, options.fresh),
    )
    return settle(cfg, options, dataclasses.replace(plan, awaits_retrieval=False), cands)


def settle(cfg: Config, options: EvalOptions, plan: RunPlan, cands: CandidateSet | None) -> RunPlan:
    """The plan with its candidates, and the floors and signal checked against them (floors that wait on the
    retriever's scores are picked here)."""
    builtin = plan.agent is None and not uses_function_retriever(cfg, options)
    floors = plan.floors
    if floors.source == PENDING_FLOORS:
        scored = cands is not None and cands.meta.get("scored", True) is not False
        floors = run_floors(
            cfg,
            _floor_options(cfg, options),
            plan.split,
            external=plan.agent is not None,
            scored=scored,
            report_ids=[e.id for e in plan.entries],
        )
    signal = plan.signal
    calibrated_signal = (floors.provenance or {}).get("signal", "score") if floors.provenance else None
    if calibrated_signal is not None and calibrated_signal != signal:
        raise UsageError(
            f"floors from {floors.source} were calibrated on floors.signal={calibrated_signal}, not {signal}: a "
            f"floor on one signal means nothing on another. Rerun calibrate with floors.signal={signal} "
            "(`dvc exp run -S floors.signal=...`), or choose floors explicitly"
        )
    values: dict[str, float] | None = None
    if signal != "score":
        if cands is None or not builtin:
            raise UsageError(
                f"floors.signal={signal}: a per-question signal needs doceval's retriever candidates; "
                "an external assistant or a user's function uses floors.signal=score"
            )
        # lazy: start-up (the trade-off and floor search, ~35 ms, load only for a per-question signal)
        from doceval.harness.tradeoff import entry_signal

        vec = entry_signal(signal, plan.entries, cands, plan.corpus)
        values = {e.id: float(v) for e, v in zip(plan.entries, vec, strict=True)}
    elif cands is not None and plan.corpus is not None:
        check_floors(floors, plan.corpus.libraries, score_range_of(cands.meta), cfg.retriever.name)
    elif cands is not None:
        check_golden_libraries(floors, plan.all_entries, plan.golden_path)
    calibrated_md5 = (floors.provenance or {}).get("golden_md5")
    if calibrated_md5 is not None and calibrated_md5 != plan.golden_md5 and not plan.conversations():
        # Allowed (the ids are disjoint), but floors tuned to other labels are rarely what the user meant. A
        # conversation set takes the single-question set's floors by design (docs/design.md 6.4): no note.
        print_note(
            f"floors from {floors.source} were calibrated on golden md5 {calibrated_md5}, this run reads "
            f"{plan.golden_path} (md5 {plan.golden_md5}); rerun calibrate on this golden set for its own floors"
        )
    return dataclasses.replace(plan, floors=floors, candidates=cands, signal_values=values)


def variant(
    cfg: Config,
    plan: RunPlan,
    floors: Floors | None = None,
    candidates: CandidateSet | None = None,
) -> RunPlan:
    """The same evaluation with explicit floors, or with other candidates of the same entries (the evaluate
    stage's comparisons: one global floor, exact search), checked as :func:`plan_run` checks them; nothing is
    loaded again and nothing is retrieved."""
    options = EvalOptions(progress=False, floors=floors, candidates=candidates)
    if candidates is not None:
        assert plan.agent is None
        cached_candidates(cfg, options, plan.corpus, plan.all_entries, plan.golden_md5, plan.k)
    cands = candidates if candidates is not None else plan.candidates
    return settle(
        cfg, options, dataclasses.replace(plan, floors=floors if floors is not None else plan.floors), cands
    )
