"""`doceval eval --dry-run`: what a run would ask of each LLM role, before any call is made.

The stated rules (docs/design.md section 8.1):

- requests: every entry answered and every in-scope entry judged, times ``--repeats`` (an upper bound: an entry
  the router or the floors refuse is never answered, a refusal never judged); of those, the **cached** ones are
  the entries this configuration's journals already hold (an earlier or interrupted run with the same run key:
  its answerer and judge requests are the ones the response cache holds, so a rerun pays nothing for them;
  an assistant that answers differently this time makes its judge requests new ones);
- tokens per request to send: the means of the replies the response cache holds for the role's model and
  template (at least ``MIN_OBSERVED``); else prompts at 4 characters a token of the rendered templates (the
  answerer's with ``max_passages`` passages of the corpus's mean chunk length, the judge's with an answer of
  ``max_tokens`` or ``UNBOUNDED_ANSWER_TOKENS``) and completions at ``max_tokens`` (upper bounds, said so);
- cost: from the configured prices (per 1M tokens, or per 1k).

Nothing is retrieved, embedded, sent or written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.journal import load_records
from doceval.config import schema
from doceval.errors import UsageError
from doceval.harness.evaluate import run_key_of
from doceval.harness.plan import plan_run
from doceval.harness.repeats import repeat_config
from doceval.inputs.golden import GoldenEntry
from doceval.llm.cache import observed_usage
from doceval.llm.prompts import PromptTemplate
from doceval.scoring.judging import load_verdicts
from doceval.seam import Reply

if TYPE_CHECKING:
    from doceval.config.schema import Config
    from doceval.harness.plan import EvalOptions
    from doceval.llm.config import LLMConfig

CHARS_PER_TOKEN = 4
# The length of an answer the judge reads when no LLM answerer bounds it (the extractive answerer, the user's
# assistant): an estimate, as long as an LLM answer at the conf/ default max_tokens.
UNBOUNDED_ANSWER_TOKENS = 512
MIN_OBSERVED = 5  # cached replies of a role's model and template before their mean replaces max_tokens

Journaled = list[dict[str, set[str]]]  # per repeat: role -> the entry ids its journals hold


def _tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _prompt_tokens(template: PromptTemplate, **values: str) -> int:
    return sum(_tokens(m["content"]) for m in template.render(**values))


def usage_rule(llm: LLMConfig, template: PromptTemplate) -> tuple[float, float, str] | None:
    """Prompt and completion tokens per request observed in the response cache for the role's model and
    template (at least MIN_OBSERVED replies), with the rule's words; None: not observed."""
    seen = observed_usage(llm.cache_path, llm.model, template.template_id)
    if seen is None or seen[2] < MIN_OBSERVED:
        return None
    prompt, completion, n = seen
    return (
        prompt,
        completion,
        f"observed means over {n} cached replies: prompt {prompt:.1f}, completion {completion:.1f}",
    )


def _row(
    role: str, llm: LLMConfig, template: PromptTemplate, per_entry: Mapping[str, int], journaled: Journaled
) -> dict[str, Any]:
    """One role's estimate: ``per_entry`` prompt tokens of the entries it would be asked about (characters / 4),
    per repeat, unless the cache observed this model and template."""
    requests = len(per_entry) * len(journaled)
    todo = [i for held in journaled for i in per_entry if i not in held.get(role, set())]
    observed = usage_rule(llm, template)
    if observed is None:
        prompt = sum(per_entry[i] for i in todo)
        completion = len(todo) * llm.max_tokens
        rule = "prompts: characters / 4; completions: max_tokens (no cached replies of this model and template: an upper bound)"
    else:
        prompt, completion = round(len(todo) * observed[0]), round(len(todo) * observed[1])
        rule = observed[2]
    return {
        "role": role,
        "model": llm.model,
        "requests": requests,
        "cached": requests - len(todo),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "completion_rule": rule,
        "cost_usd": llm.cost_usd(prompt, completion),
    }


def estimate(
    cfg: Config,
    entries: Sequence[GoldenEntry],
    *,
    mean_chunk_chars: float,
    external_agent: bool,
    judged: bool,
    repeats: int = 1,
    journaled: Journaled | None = None,
) -> list[dict[str, Any]]:
    """One row per role that would be called: requests (and how many the journals hold), prompt and
    completion tokens of the requests to send, the completion rule, cost (all repeats)."""
    held: Journaled = journaled if journaled is not None else [{} for _ in range(repeats)]
    rows: list[dict[str, Any]] = []
    answerer = cfg.answerer
    if external_agent:
        rows.append(
            {
                "role": "system",
                "model": "(your assistant)",
                "requests": len(entries) * repeats,
                "cached": None,
                "prompt_tokens": None,
                "completion_tokens": None,
                "completion_rule": None,
                "cost_usd": None,
            }
        )
    elif isinstance(answerer, schema.AnswererOpenAI):
        template = PromptTemplate.load(answerer.template)
        # Unset max_passages: the answerer shows every passage of R, at most k.
        shown = answerer.max_passages if answerer.max_passages is not None else cfg.k
        passages = "\n\n".join("x" * int(mean_chunk_chars) for _ in range(shown))
        per_entry = {
            e.id: _prompt_tokens(
                template,
                library=e.library,
                version=e.version,
                passages=passages,
                memory="",
                question=e.question,
                refusal="I cannot answer that from the documentation.",
            )
            for e in entries
        }
        rows.append(_row("answerer", answerer.llm, template, per_entry, held))
    judge = cfg.judge
    if judged and isinstance(judge, schema.JudgeOpenAI):
        template = PromptTemplate.load(judge.template)
        bound = (
            answerer.llm.max_tokens
            if isinstance(answerer, schema.AnswererOpenAI)
            else UNBOUNDED_ANSWER_TOKENS
        )
        answer = "x" * CHARS_PER_TOKEN * bound
        # Out-of-scope answers are never judged (design 4.4).
        per_entry = {
            e.id: _prompt_tokens(
                template,
                library=e.library,
                version=e.version,
                question=e.question,
                reference=e.reference_answer,
                answer=answer,
            )
            for e in entries
            if not e.out_of_scope
        }
        rows.append(_row("judge", judge.llm, template, per_entry, held))
    return rows


def journaled_entries(cfg: Config, options: EvalOptions, repeats: int) -> tuple[Journaled | None, str]:
    """Per repeat, the entries this configuration's journals already hold for each LLM role (answered without a
    system error; judged with a verdict), and where they were read; None when the run cannot be planned
    without doing work (then the reason)."""
    try:
        plan = plan_run(cfg, options)
    except UsageError as exc:
        return None, f"journals not read ({exc})"
    held: Journaled = []
    where = Path(cfg.paths.runs) / "eval"
    for r in range(repeats):
        this_cfg = repeat_config(cfg, r)
        this = dataclasses.replace(options, repeat=r, repeats=repeats)
        this_plan = plan
        if plan.agent is not None and repeats > 1:
            # lazy: start-up (the external systems' modules; an assistant's plan has loaded them)
            from doceval.system.external.agents import with_sampling

            this_plan = dataclasses.replace(plan, agent=with_sampling(plan.agent, r, cfg.seed + r))
        run_dir = this.run_dir or where / run_key_of(this_cfg, this, this_plan)
        replies = load_records(run_dir / "journal.jsonl", Reply.from_json, "a journal record")
        verdicts = load_verdicts(run_dir / "judge.jsonl")
        held.append(
            {
                "answerer": {rep.id for rep in replies if rep.error is None},
                "judge": {i for i, v in verdicts.items() if v.verdict is not None},
            }
        )
    return held, f"journals read from {where}"


def format_estimate(
    rows: Sequence[Mapping[str, Any]], n_entries: int, repeats: int, consulted: str
) -> list[str]:
    lines = [
        f"dry run: {n_entries} entries x {repeats} repeat(s); nothing was sent. Requests are upper bounds (a "
        "refused entry is not answered or judged); cached: held by this configuration's journals (a rerun "
        f"pays nothing for them; {consulted}); tokens ~ characters / 4, of the requests to send."
    ]
    lines.append(
        f"{'role':10s} {'model':20s} {'requests':>9s} {'cached':>7s} {'prompt tok':>11s} "
        f"{'completion tok':>15s} {'cost USD':>9s}"
    )
    total = 0.0

    def num(v: Any) -> str:
        return "n/a" if v is None else f"{v:,}"

    for r in rows:
        cost = "n/a" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"
        total += r["cost_usd"] or 0.0
        lines.append(
            f"{r['role']:10s} {str(r['model'])[:20]:20s} {r['requests']:>9,} {num(r['cached']):>7s} "
            f"{num(r['prompt_tokens']):>11s} {num(r['completion_tokens']):>15s} {cost:>9s}"
        )
    for r in rows:
        if r.get("completion_rule"):
            lines.append(f"  {r['role']} tokens per request: {r['completion_rule']}")
    if not rows:
        lines.append("(no LLM role is configured: the run makes no LLM requests)")
    lines.append(
        f"estimated cost: {total:.4f} USD (from the configured price_per_1m_* or price_per_1k_*; 0 when "
        "unset)"
    )
    return lines
