"""`doceval eval --dry-run`: what a run would ask of each LLM role, before any call is made.

Requests are upper bounds (an entry the router or the floors refuse is never answered, a refusal never judged,
a cached reply costs nothing); tokens are estimated at 4 characters a token from the rendered prompts (the
answerer's with ``max_passages`` passages of the corpus's mean chunk length), completions at ``max_tokens``;
cost from the configured prices. Nothing is retrieved, embedded or sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from doceval.config import schema
from doceval.inputs.golden import GoldenEntry
from doceval.llm.prompts import PromptTemplate

if TYPE_CHECKING:
    from doceval.config.schema import Config
    from doceval.llm.config import LLMConfig

CHARS_PER_TOKEN = 4
# The length of an answer the judge reads when no LLM answerer bounds it (the extractive answerer, the user's
# assistant): an estimate, as long as an LLM answer at the conf/ default max_tokens.
UNBOUNDED_ANSWER_TOKENS = 512


def _tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _prompt_tokens(template: PromptTemplate, **values: str) -> int:
    return sum(_tokens(m["content"]) for m in template.render(**values))


def _row(role: str, llm: LLMConfig, requests: int, prompt: int) -> dict[str, Any]:
    completion = requests * llm.max_tokens
    cost = (prompt * llm.price_per_1k_prompt + completion * llm.price_per_1k_completion) / 1000
    return {"role": role, "model": llm.model, "requests": requests, "prompt_tokens": prompt,
            "completion_tokens": completion, "cost_usd": cost}  # fmt: skip


def estimate(
    cfg: Config,
    entries: Sequence[GoldenEntry],
    *,
    mean_chunk_chars: float,
    external_agent: bool,
    judged: bool,
    repeats: int = 1,
) -> list[dict[str, Any]]:
    """One row per role that would be called: requests, prompt and completion tokens, cost (all repeats)."""
    rows: list[dict[str, Any]] = []
    n = len(entries) * repeats
    answerer = cfg.answerer
    if external_agent:
        rows.append({"role": "system", "model": "(your assistant)", "requests": n, "prompt_tokens": None,
                     "completion_tokens": None, "cost_usd": None})  # fmt: skip
    elif isinstance(answerer, schema.AnswererOpenAI):
        template = PromptTemplate.load(answerer.template)
        # Unset max_passages: the answerer shows every passage of R, at most k.
        shown = answerer.max_passages if answerer.max_passages is not None else cfg.k
        passages = "\n\n".join("x" * int(mean_chunk_chars) for _ in range(shown))
        prompt = sum(
            _prompt_tokens(template, library=e.library, version=e.version, passages=passages, memory="",
                           question=e.question, refusal="I cannot answer that from the documentation.")
            for e in entries
        ) * repeats  # fmt: skip
        rows.append(_row("answerer", answerer.llm, n, prompt))
    judge = cfg.judge
    if judged and isinstance(judge, schema.JudgeOpenAI):
        template = PromptTemplate.load(judge.template)
        bound = UNBOUNDED_ANSWER_TOKENS
        if isinstance(answerer, schema.AnswererOpenAI):
            bound = answerer.llm.max_tokens
        answer = "x" * CHARS_PER_TOKEN * bound
        prompt = sum(
            _prompt_tokens(template, library=e.library, version=e.version, question=e.question,
                           reference=e.reference_answer, answer=answer)
            for e in entries
        ) * repeats  # fmt: skip
        rows.append(_row("judge", judge.llm, n, prompt))
    return rows


def format_estimate(rows: Sequence[Mapping[str, Any]], n_entries: int, repeats: int) -> list[str]:
    lines = [f"dry run: {n_entries} entries x {repeats} repeat(s); nothing was sent. Upper bounds: a refused "
             "entry is not answered or judged, a cached reply costs nothing; tokens ~ characters / 4."]  # fmt: skip
    lines.append(
        f"{'role':10s} {'model':20s} {'requests':>9s} {'prompt tok':>11s} {'completion tok':>15s} {'cost USD':>9s}"
    )
    total = 0.0
    for r in rows:

        def num(v: Any) -> str:
            return "n/a" if v is None else f"{v:,}"

        cost = "n/a" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}"
        total += r["cost_usd"] or 0.0
        lines.append(f"{r['role']:10s} {str(r['model'])[:20]:20s} {r['requests']:>9,} {num(r['prompt_tokens']):>11s} "
                     f"{num(r['completion_tokens']):>15s} {cost:>9s}")  # fmt: skip
    if not rows:
        lines.append("(no LLM role is configured: the run makes no LLM requests)")
    lines.append(f"estimated cost: {total:.4f} USD (from the configured price_per_1k_*; 0 when unset)")
    return lines
