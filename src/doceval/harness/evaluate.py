"""`evaluate(cfg)`: replay a golden split through the system under test and score it. Pure apart from file
reads, the journals and the LLM cache; the CLI, the DVC stage and the Python API are thin wrappers around it.

The steps, in order: :func:`~doceval.harness.plan.plan_run` (what is evaluated, without calling the
system), :func:`~doceval.harness.plan.retrieve_live` (live retrieval), :func:`prepare_agent` and
:func:`open_ledger` (how the LLM work runs), then for doceval's agent :func:`score_retrieval` (candidates,
floors, k) before :func:`run_docchat`, and for the user's assistant :func:`run_assistant` before
:func:`score_sources` (its returned sources, cut at k); then :func:`score_answers` (the judge grades, then
the answer metrics) and :func:`doceval.harness.summary.build_summary`. Per-entry scores come first (every summary metric is the
mean of the entries' column of the same name, NaN meaning "does not apply"), aggregates second; the metrics
themselves come from :mod:`doceval.scoring.registry`. An entry whose system call failed (a system error) is
counted and shown, and scored by no metric.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from doceval.common.journal import journal_lock, mark_finished, plan_journals
from doceval.common.notes import print_note
from doceval.common.provenance import code_hash
from doceval.common.redact import register_config
from doceval.config import schema
from doceval.config.objects import config_dict
from doceval.engine import command_session
from doceval.errors import UsageError
from doceval.harness.candidates import turn_queries
from doceval.harness.plan import EvalOptions, RunPlan, plan_run, retrieve_live
from doceval.harness.retrieval_journal import finish_retrieval
from doceval.harness.retrieval_scores import RetrievalScores, score_retrieval, score_sources
from doceval.harness.run_parts import AgentSetup, AnswerScores, SystemRun, reset_mode
from doceval.harness.summary import answerer_record, build_summary, system_block
from doceval.index.embed import judge_encoder
from doceval.llm import Ledger
from doceval.scoring.judge import make_judge
from doceval.scoring.judging import judge_answers, load_verdicts
from doceval.scoring.reference_judge import version_strings
from doceval.scoring.registry import ANSWER_NAMES, answer_scores, names
from doceval.seam import Reply
from doceval.summary import Summary
from doceval.system.docchat.answerers import is_offline, make_answerer
from doceval.system.docchat.runner import RemoteUnits, load_journal, run_agent
from doceval.system.docchat.search import PrecomputedSearch

if TYPE_CHECKING:
    from doceval.config.schema import Config

__all__ = ["EvalOptions", "evaluate"]


def run_key(parts: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# The loop that calls the user's assistant and journals its replies (imported lazily below: start-up).
ASSISTANT_LOOP = "doceval.harness.agents"


def journaled_modules(user_assistant: bool, judge_cfg: schema.Judge) -> list[str]:
    """The modules whose code made the journals' answers and verdicts: doceval's agent and its answerer, or the
    loop that journals the user's assistant's replies; the judging loop, the judge and what the reference judge
    embeds with; the journal's format."""
    answering = [ASSISTANT_LOOP] if user_assistant else [run_agent.__module__, make_answerer.__module__]
    judging = (
        [] if isinstance(judge_cfg, schema.JudgeNone) else [judge_answers.__module__, make_judge.__module__]
    )
    if isinstance(judge_cfg, schema.JudgeReference):
        judging.append(judge_encoder.__module__)
    return [*answering, *judging, plan_journals.__module__]


def journaled_code(plan: RunPlan, judge_cfg: schema.Judge) -> str:
    """The run key's ``code``: :func:`code_hash` of :func:`journaled_modules` (their import closures, imports
    inside functions included) and the prompts. A change there starts a new run directory; a change elsewhere (a
    report renderer's docstring) keeps the paid answers and verdicts."""
    return code_hash(journaled_modules(plan.agent is not None, judge_cfg), data=["prompts"])


def prepare_agent(cfg: Config, options: EvalOptions, plan: RunPlan) -> AgentSetup:
    """Build the answerer and judge (a bad model config fails here, before anything is spent) and the run key
    naming the journals' directory: what changes an answer or a verdict, not the budget (raising it resumes)."""
    answerer_cfg, judge_cfg, warm = _roles(cfg, options, plan)
    budget = cfg.run.budget_usd
    answerer = make_answerer(answerer_cfg) if answerer_cfg is not None else None
    judge = make_judge(judge_cfg, version_strings(plan.entries), judge_encoder)
    if warm and options.memory_reset:
        raise UsageError(
            "--memory-reset needs_memory with warm memory (--warm-memory or memory.isolate=false): a turn "
            "cannot be asked without context while one memory spans the run; drop one of them"
        )
    key = run_key_of(cfg, options, plan)
    run_dir = options.run_dir or Path(cfg.paths.runs) / "eval" / key
    # The journals make LLM and assistant runs resumable; an offline, unjudged run of doceval's agent costs
    # milliseconds to redo, and fsyncing every entry would dominate a sweep point.
    offline = is_offline(answerer_cfg) and judge is None
    journal, judge_journal = (None, None) if offline else (run_dir / "journal.jsonl", run_dir / "judge.jsonl")
    return AgentSetup(
        answerer_cfg,
        judge_cfg,
        answerer,
        judge,
        warm,
        None if budget is None else float(budget),
        cfg.run.max_concurrency,
        key,
        journal,
        judge_journal,
        cfg.run.max_abandoned,
        cfg.memory.rewrite,
        options.memory_reset,
        cfg.engine,
        options.standalone,
    )


def _roles(
    cfg: Config, options: EvalOptions, plan: RunPlan
) -> tuple[schema.Answerer | None, schema.Judge, bool]:
    """doceval's answerer (None: the user's assistant answers), the judge (none with --no-judge), warm memory."""
    answerer_cfg = cfg.answerer if plan.agent is None else None
    judge_cfg: schema.Judge = schema.JudgeNone(name="none") if options.no_judge else cfg.judge
    return answerer_cfg, judge_cfg, options.warm_memory or not cfg.memory.isolate


def run_key_of(cfg: Config, options: EvalOptions, plan: RunPlan) -> str:
    """The run key naming the journals' directory: what changes an answer or a verdict, not the budget (raising
    it resumes). It hashes the blocks as the summary records them (config_dict): a run key does not change with
    the code that reads them. `eval --dry-run` reads the journals it names without building anything."""
    answerer_cfg, judge_cfg, warm = _roles(cfg, options, plan)
    return run_key(
        {
            "golden": plan.golden_md5,
            "split": plan.split,
            "limit": plan.limit,
            "k": plan.k,
            "floors": plan.floors.as_dict(),
            **({"signal": plan.signal} if plan.signal != "score" else {}),
            "retriever": config_dict(cfg.retriever),
            "system": system_block(cfg, plan),
            "answerer": answerer_record(answerer_cfg, plan),
            "judge": config_dict(judge_cfg),
            "warm": warm,
            # Follow-ups are retrieved with the rewrite: another one is another system (golden sets with turns).
            **({"rewrite": cfg.memory.rewrite} if plan.conversations() else {}),
            # Another replay of the same conversations (what memory benefit compares against): its own journals.
            **({"memory_reset": reset_mode(options)} if options.memory_reset else {}),
            "code": journaled_code(plan, judge_cfg),
            # A repeat of a run is a run of its own (an assistant's replies are not cached by seed).
            **({"repeat": options.repeat} if options.repeat else {}),
        }
    )


def open_ledger(setup: AgentSetup, plan: RunPlan) -> Ledger:
    """The run's one ledger: answering and judging share its budget, and what earlier invocations spent on
    this run's entries (both journals) counts against it."""
    ids = {e.id for e in plan.entries}
    spent = 0.0
    if setup.agent_journal is not None and plan.agent is None:
        spent += sum(r.cost_usd for i, r in load_journal(setup.agent_journal).items() if i in ids)
    if setup.judge_journal is not None:
        spent += sum(r.cost_usd for i, r in load_verdicts(setup.judge_journal).items() if i in ids)
    return Ledger(setup.budget_usd, spent_usd=spent)


def _stopped(what: str, why: str, journal: Path | None) -> UsageError:
    return UsageError(
        f"the {what}: {why} rerun the same command to resume from {journal} (finished entries are not redone)"
    )


def docchat_remote(setup: AgentSetup, plan: RunPlan) -> RemoteUnits | None:
    """How doceval's agent answers on ``engine=ray``: the extractive answerer on Ray actors, with isolated
    memory; None (answered here) for engine=local, warm memory (one memory, strictly in probe order) and an
    LLM answerer, whose response cache (sqlite) and budget ledger are this machine's."""
    engine = setup.engine
    if not isinstance(engine, schema.EngineRay):
        return None
    if setup.warm:
        print_note(
            "engine=ray: doceval's agent answers here, on the driver: warm memory is one memory "
            "asked strictly in probe order"
        )
        return None
    if not is_offline(setup.answerer_cfg):
        name = setup.answerer_cfg.name if setup.answerer_cfg is not None else "none"
        print_note(
            f"engine=ray: doceval's agent answers here, on the driver: answerer={name} keeps its LLM "
            "cache (sqlite) and the run's budget ledger on this machine"
        )
        return None
    # lazy: start-up (the Ray fan-out and the external systems' modules, ~60 ms) loads only for engine=ray
    from doceval.harness.remote import docchat_on_ray

    assert setup.answerer_cfg is not None  # is_offline(None) is False
    return docchat_on_ray(engine, setup.answerer_cfg, setup.reset_ids(plan))


def run_docchat(
    plan: RunPlan, retrieval: RetrievalScores, setup: AgentSetup, ledger: Ledger, progress: bool
) -> SystemRun:
    """The DocChat agent over the probes: router -> search tool (the floors and R scored as retrieval) ->
    memory -> answerer. A run that stops before answering every entry is a UsageError saying how to resume."""
    assert plan.candidates is not None and setup.answerer is not None
    texts = plan.corpus.first_chunks if plan.corpus is not None else {}
    hits = {i: [(d, 0.0 if s is None else s) for d, s in r] for i, r in retrieval.retrieved.items()}
    # An entry whose retrieval (the user's function) failed is a system error: the agent never answers it.
    errors = {e.id: plan.candidates.errors[e.id] for e in plan.entries if e.id in plan.candidates.errors}
    # The user's function returning nothing is its own refusal, not a floor's (no floor was involved).
    unretrieved = [e.id for e in plan.entries if plan.user_retriever and not plan.candidates.ranked.get(e.id)]
    # A follow-up is routed to the pin its conversation moved to (the same queries the candidates were made with).
    turns = turn_queries(plan.entries, plan.corpus, setup.rewrite, setup.memory_reset)
    pins = {i: (t.library, t.version) for i, t in turns.items()}
    search = PrecomputedSearch(plan.candidates.routed, hits, texts, plan.floors.of, unretrieved, pins)
    # The offline answerer is pure Python under the GIL: threads would only add their overhead.
    offline_answerer = is_offline(setup.answerer_cfg)
    outcome = run_agent(
        [p for p in plan.probes() if p.id not in errors],
        search,
        setup.answerer,
        warm_memory=setup.warm,
        journal_path=setup.agent_journal,
        max_concurrency=1 if offline_answerer else setup.max_concurrency,
        ledger=ledger,
        progress=progress,
        conversation_of=plan.conversations(),
        reset_ids=setup.reset_ids(plan),
        remote=docchat_remote(setup, plan),
    )
    missing = [e.id for e in plan.entries if e.id not in outcome.records and e.id not in errors]
    if missing and outcome.stopped_reason != "budget":
        why = f"LLM calls failed ({'; '.join(list(outcome.errors.values())[:2]) or outcome.stopped_reason});"
        what = f"agent stopped before answering {len(missing)} of {len(plan.entries)} entries"
        raise _stopped(what, why, setup.agent_journal)
    # A budget stop is an incomplete run (exit 4): the entries answered are scored, the others left out.
    replies = {
        e.id: Reply(e.id, None, error=errors[e.id]) if e.id in errors else outcome.records[e.id]
        for e in plan.entries
        if e.id not in missing
    }
    for entry_id, (start, seconds) in plan.candidates.timings.items():
        if entry_id in replies:  # the user's retriever function is the system: its call is timed too
            replies[entry_id].timing = {
                **replies[entry_id].timing,
                "retrieve_start": start,
                "retrieve_s": seconds,
            }
    stop = plan.candidates.stopped
    if missing:
        stop = (
            f"{budget_stop(setup)}: the agent answered {len(plan.entries) - len(missing)} of "
            f"{len(plan.entries)} entries; raise it and rerun to resume from {setup.agent_journal}"
        )
    return SystemRun(replies, outcome.total_usage(), outcome.resumed, stop is not None, len(errors), stop)


def budget_stop(setup: AgentSetup) -> str:
    return f"the budget run.budget_usd={setup.budget_usd} was reached"


def run_assistant(plan: RunPlan, setup: AgentSetup, options: EvalOptions) -> SystemRun:
    """The user's assistant over the probes (a fresh session per entry unless warm memory), journaled and
    resumable; a failed call is that entry's system error. Past ``--max-errors`` the run stops cleanly."""
    # lazy: start-up (the assistant run loop and clients, ~60 ms, load only for an external assistant)
    from doceval.harness.agents import run_external

    assert plan.agent is not None
    outcome = run_external(
        plan.probes(),
        plan.agent,
        warm_memory=setup.warm,
        journal_path=setup.agent_journal,
        max_concurrency=setup.max_concurrency,
        max_errors=options.max_errors,
        max_abandoned=setup.max_abandoned,
        progress=options.progress,
        conversation_of=plan.conversations(),
        reset_ids=setup.reset_ids(plan),
        engine=setup.engine,
    )
    # An entry never asked (the run stopped first) has no reply.
    replies = {e.id: outcome.responses[e.id] for e in plan.entries if e.id in outcome.responses}
    # The assistant's own accounting (e.g. tokens), summed over the run as the role "system".
    totals: dict[str, float] = {}
    for reply in replies.values():
        for key, value in reply.usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
    return SystemRun(
        replies,
        {"system": totals} if totals else {},
        outcome.resumed,
        outcome.stopped,
        outcome.n_errors,
        outcome.stop_reason,
    )


def answer_text_unknown(plan: RunPlan) -> str | None:
    """Why doceval's answerer cannot know the text of the documents it answers from, or None when it can.

    A built-in retriever's ids are documents of the corpus; a user's retriever's ids are when the corpus at
    ``paths.docs`` is theirs (:func:`doceval.harness.plan.known_corpus`) and every id it returned is in it.
    Otherwise the answerer would "answer" with the ids themselves, and the metrics that read the answer's
    text (``answer_text``) would grade ids: they are not measured."""
    if plan.agent is not None or not plan.user_retriever:
        return None
    if plan.corpus is None:
        return (
            "the retriever's ids are not documents of a doceval corpus, so doceval's answerer cannot read "
            "their text; build your docs with `doceval stage docs` into paths.docs to measure answers"
        )
    assert plan.candidates is not None
    known = plan.corpus.doc_ids()
    unknown = sorted(
        {d for e in plan.entries for d, _ in plan.candidates.ranked.get(e.id, []) if d not in known}
    )
    if not unknown:
        return None
    shown = ", ".join(repr(d) for d in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
    return (
        f"the retriever returned {len(unknown)} id(s) that are not documents of {plan.corpus.root} ({shown}), "
        "so doceval's answerer cannot read their text"
    )


def unmeasured_answers(answers: AnswerScores) -> AnswerScores:
    """The answer scores with every metric that reads the answer's text set to NaN (not measured)."""
    blank = {
        m: np.full_like(v, np.nan) if m in names("answer_text") else v for m, v in answers.per_entry.items()
    }
    return dataclasses.replace(answers, per_entry=blank)


def score_answers(
    plan: RunPlan, setup: AgentSetup, run: SystemRun, ledger: Ledger, progress: bool
) -> AnswerScores:
    """Judge the system's answers (only those it gave: refusals and system errors are never judged), then the
    per-entry answer metrics. A judge error stays a verdict of None, excluded from answer_accuracy."""
    entries, replies = plan.entries, run.replies
    judging = None
    stopped: str | None = None
    if setup.judge is not None:
        # An out-of-scope answer is never judged: no metric reads its verdict (answer_accuracy is over the
        # in-scope entries), and a verdict beside hallucinated_out_of_scope would read as "correct" (design 4).
        answers = {e.id: replies[e.id] for e in entries if replies[e.id].error is None and not e.out_of_scope}
        judging = judge_answers(
            plan.labelled_probes(),
            answers,
            {e.id: e.reference_answer for e in entries},
            setup.judge,
            ledger=ledger,
            journal_path=setup.judge_journal,
            max_concurrency=setup.max_concurrency,
            progress=progress,
        )
        if (
            judging.stopped_reason == "budget"
        ):  # an incomplete run (exit 4): the unjudged answers stay unscored
            stopped = (
                f"{budget_stop(setup)}: {len(judging.verdicts)} of {judging.todo} answers judged; raise it "
                f"and rerun to resume from {setup.judge_journal}"
            )
    verdicts = judging.verdicts if judging is not None else {}
    rep = [replies[e.id] for e in entries]
    per = answer_scores(
        np.array([e.out_of_scope for e in entries], dtype=bool),
        np.array([r.refused for r in rep], dtype=bool),
        [r.answer for r in rep],
        [list(e.expected_apis) for e in entries],
        [list(e.forbidden_apis) for e in entries],
        [v.verdict if (v := verdicts.get(e.id)) is not None else None for e in entries],
        judge_ran=setup.judge is not None,  # no judge: answer_accuracy is "not judged" (null), never 0
        expected_any=[[list(g) for g in e.expected_any] for e in entries],
    )
    return AnswerScores({m: per[m] for m in ANSWER_NAMES}, verdicts, judging, stopped)


@command_session()  # engine=ray: one Ray session for retrieval, answering and judging (the CLI holds one too)
def evaluate(cfg: Config, options: EvalOptions | None = None, plan: RunPlan | None = None) -> Summary:
    """Score one configuration on one split: its typed :class:`~doceval.summary.Summary`.
    ``plan``: one :func:`plan_run` made for these ``cfg`` and ``options`` (the evaluate stage plans once for
    all its sections); None plans here."""
    options = options or EvalOptions()
    register_config(
        config_dict(cfg)
    )  # every writer below scrubs what the config holds or points at (API too)
    plan = plan if plan is not None else plan_run(cfg, options)
    # The system's first calls are the run's: an assistant's probe request (one that does not answer fails
    # before any work; once per command: repeat 0's), or the live retrieval a plan awaits.
    if plan.agent is not None:
        if options.repeat == 0:
            plan.agent.check()
        if options.repeats > 1:  # the assistant is sent the repeat index and its seed (design 7.5)
            # lazy: start-up (the external systems' modules, ~60 ms; an assistant's plan has loaded them)
            from doceval.system.external.agents import with_sampling

            sampled = with_sampling(plan.agent, options.repeat, cfg.seed + options.repeat)
            plan = dataclasses.replace(plan, agent=sampled)
    plan = retrieve_live(cfg, options, plan)
    setup = prepare_agent(cfg, options, plan)
    unknown_text = answer_text_unknown(plan)
    if unknown_text is not None:
        # Judging answers made of ids would spend the budget on a number that means nothing.
        print_note(f"{', '.join(names('answer_text'))}: not measured: {unknown_text}")
        setup = dataclasses.replace(setup, judge=None, judge_cfg=schema.JudgeNone(name="none"))
    journals = [p for p in (setup.agent_journal, setup.judge_journal) if p is not None]
    run_dir = journals[0].parent if journals else None
    # One run at a time writes a run's journals: a second identical run exits 2 naming the first.
    with journal_lock(run_dir):
        return _journaled_run(cfg, options, plan, setup, unknown_text, journals)


def _journaled_run(
    cfg: Config,
    options: EvalOptions,
    plan: RunPlan,
    setup: AgentSetup,
    unknown_text: str | None,
    journals: list[Path],
) -> Summary:
    """The system asked (or replayed from its journals), then scored, under the run's journal lock."""
    reuse = plan_journals(
        journals[0].parent if journals else None, journals, resume=options.resume, fresh=options.fresh
    )
    ledger = open_ledger(setup, plan)
    total = len(plan.entries)
    if plan.agent is None:
        assert plan.candidates is not None
        # Retrieval stopped early (the user's function, past --max-errors): entries never asked are not scored.
        plan = dataclasses.replace(plan, entries=[e for e in plan.entries if e.id in plan.candidates.ranked])
        retrieval = score_retrieval(plan)
        run = run_docchat(plan, retrieval, setup, ledger, options.progress)
        if len(run.replies) < len(plan.entries):  # the budget stopped the agent: score what it answered
            plan = dataclasses.replace(plan, entries=[e for e in plan.entries if e.id in run.replies])
            retrieval = score_retrieval(plan)
    else:
        run = run_assistant(plan, setup, options)
        plan = dataclasses.replace(plan, entries=[e for e in plan.entries if e.id in run.replies])
        retrieval = score_sources(plan, run.replies)
    answers = score_answers(plan, setup, run, ledger, options.progress)
    if unknown_text is not None:
        answers = unmeasured_answers(answers)
    journal = {"mode": reuse.mode, "dir": None if reuse.run_dir is None else str(reuse.run_dir)}
    summary = build_summary(
        cfg, plan, setup, retrieval, run, answers, ledger, total, unmeasured=unknown_text, journal=journal
    )
    if summary.complete:
        mark_finished(reuse, {"entries": len(plan.entries), "system_errors": run.n_errors})
        finish_retrieval(plan.candidates.journal if plan.candidates is not None else None, len(plan.entries))
    return summary
