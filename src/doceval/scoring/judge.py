"""LLM-as-judge: grade an answer against the version's reference answer (run over a system's answers by
:mod:`doceval.scoring.judging`).

The reference answer is a label: it comes from the golden set, never through the probe the system saw.
A judge never guesses: an unparsable verdict or a failed call is a *judge error* (verdict None), which the
metrics count and exclude from answer_accuracy instead of scoring it right or wrong.

:data:`JUDGES` (the one plug-in rule, :class:`~doceval.common.registry.Registry`) maps ``judge.name`` to its
builder and its identity (what decides a verdict, for the cache keys and the summary).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from doceval.common.bounded_json import loads
from doceval.common.naming import judge_hash
from doceval.common.redact import redact_url, scrub_message
from doceval.common.registry import Registry, as_variant
from doceval.config import schema
from doceval.errors import UsageError
from doceval.llm import LLMConfig, LLMError, PromptTemplate, TemplatedChat
from doceval.scoring.reference_judge import EncoderFactory, ReferenceJudge, VersionStrings
from doceval.scoring.reference_judge import identity as reference_identity

__all__ = [
    "JUDGES",
    "Judge",
    "OpenAIJudge",
    "judge_hash",
    "judge_id",
    "judge_identity",
    "judge_input",
    "make_judge",
    "parse_verdict",
    "register_judge",
]
from doceval.seam import Probe


@runtime_checkable
class Judge(Protocol):
    def judge(self, probe: Probe, answer: str, reference: str) -> tuple[bool | None, str | None, str | None]:
        """(verdict, reason, error); verdict is None exactly when error is set."""
        ...


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)


def parse_verdict(reply: str) -> tuple[bool, str]:
    """``{"verdict": "correct"|"incorrect", "reason": ...}`` (a code fence or prose around it is tolerated).

    Raises ValueError when no such object can be read.
    """
    text = _FENCE.sub("", reply.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        data = loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("the JSON is not an object")
    verdict = str(data.get("verdict", "")).strip().lower()
    if verdict not in ("correct", "incorrect"):
        raise ValueError(f"verdict must be 'correct' or 'incorrect' (got {data.get('verdict')!r})")
    reason = data.get("reason")
    return verdict == "correct", str(reason) if reason is not None else ""


def _is_parsable(reply: str) -> bool:
    try:
        parse_verdict(reply)
    except ValueError:
        return False
    return True


class OpenAIJudge(TemplatedChat):
    name = "openai"

    def __init__(self, cfg: LLMConfig, template: PromptTemplate) -> None:
        super().__init__(cfg, template, "judge")

    def messages(self, probe: Probe, answer: str, reference: str) -> list[dict[str, str]]:
        return self.template.render(
            library=probe.library,
            version=probe.version,
            question=probe.question,
            reference=reference,
            answer=answer,
        )

    def judge(self, probe: Probe, answer: str, reference: str) -> tuple[bool | None, str | None, str | None]:
        try:
            # An unparsable reply is kept out of the cache, so a rerun asks again instead of replaying it.
            result = self.client.complete(
                self.messages(probe, answer, reference),
                template_id=self.template.template_id,
                cache_if=_is_parsable,
            )
        except LLMError as exc:
            return None, None, f"judge call failed: {exc}"
        try:
            verdict, reason = parse_verdict(result.content)
        except ValueError as exc:
            snippet = scrub_message(" ".join(result.content.split())[:120])
            return None, None, f"malformed judge output: {exc}: {snippet!r}"
        return verdict, reason, None

    def close(self) -> None:
        self.client.close()


Labels = Mapping[str, VersionStrings] | None
JudgeBuilder = Callable[[schema.Judge, Labels, "EncoderFactory | None"], "Judge | None"]
# sent(recorded block, recorded identity, summary entry): what the judge was sent beyond the answer and the
# reference, rebuilt from a summary (the entry trace's judge span, design 6.7).
Sent = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


def _nothing_more(
    block: Mapping[str, Any], identity: Mapping[str, Any], entry: Mapping[str, Any]
) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class RegisteredJudge:
    build: JudgeBuilder  # None: no judge (judge=none)
    # What decides a verdict, and nothing else (not the key, retries or budget); None: no judge.
    identity: Callable[[schema.Judge], dict[str, Any] | None]
    sent: Sent = _nothing_more


JUDGES: Registry[RegisteredJudge] = Registry("judge")


def register_judge(
    name: str, *, identity: Callable[[schema.Judge], dict[str, Any] | None], sent: Sent = _nothing_more
) -> Callable[[JudgeBuilder], JudgeBuilder]:
    """Decorator: ``build(block, labels, encoder) -> Judge`` serves ``judge.name == name``; ``identity(block)`` is what
    decides its verdicts (hashed into ``config.judge_id`` and the journal keys); ``sent`` rebuilds what it was
    sent from a summary."""

    def decorate(build: JudgeBuilder) -> JudgeBuilder:
        JUDGES.add(name, RegisteredJudge(build, identity, sent))
        return build

    return decorate


def make_judge(
    cfg: schema.Judge, labels: Labels = None, encoder: EncoderFactory | None = None
) -> Judge | None:
    """The configured judge, built by the builder registered under ``cfg.name``: ``judge=none`` -> None (no
    judge); ``labels``: the entries' version strings (the reference judge reads them); ``encoder``: what a judge
    that embeds answers embeds with (the harness passes :func:`doceval.index.embed.judge_encoder`)."""
    return JUDGES.require(cfg.name).build(cfg, labels, encoder)


def judge_identity(cfg: schema.Judge) -> dict[str, Any] | None:
    """What decides a verdict of the configured judge (its registered identity); None: no judge."""
    return JUDGES.require(cfg.name).identity(cfg)


def _no_identity(cfg: schema.Judge) -> None:
    return None


def _openai_identity(cfg: schema.Judge) -> dict[str, Any]:
    """The model, endpoint (no credentials), template text hash, temperature and seed of an LLM judge."""
    block = as_variant(cfg, schema.JudgeOpenAI, "judge")
    template = PromptTemplate.load(block.template)
    llm = block.llm
    return {
        "name": block.name,
        "model": llm.model,
        "base_url": redact_url(str(llm.base_url)) if llm.base_url else None,
        "template": template.template_id,
        "template_sha256": hashlib.sha256(template.text.encode()).hexdigest(),
        "temperature": llm.temperature,
        "seed": llm.seed,
        "max_tokens": llm.max_tokens,
        "response_format": None if llm.response_format is None else dict(llm.response_format),
    }


def _reference_identity(cfg: schema.Judge) -> dict[str, Any]:
    """The rule and thresholds of the reference judge."""
    return reference_identity(as_variant(cfg, schema.JudgeReference, "judge"))


def judge_id(judge_cfg: schema.Judge) -> dict[str, Any] | None:
    """``{"hash", "identity"}`` of a configured judge, None without one (the summary's ``config.judge_id``)."""
    identity = judge_identity(judge_cfg)
    return None if identity is None else {"hash": judge_hash(identity), "identity": identity}


def judge_input(recorded: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the judge was sent for one summary entry, rebuilt from the summary's recorded ``config`` (its
    ``judge`` block and ``judge_id``): the answer and the reference answer, and what the recorded judge's
    registration adds (an LLM judge's rendered messages when its template's text still has the recorded
    sha256, else ``messages`` null and why; the offline judge's rule and the entry's version strings). The
    entry trace's judge span shows it (design 6.7)."""
    block = recorded.get("judge") or {}
    identity = (recorded.get("judge_id") or {}).get("identity") or {}
    out: dict[str, Any] = {"answer": entry.get("answer"), "reference": entry.get("reference_answer")}
    name = block.get("name")
    entry_of = JUDGES.get(name) if isinstance(name, str) else None
    return out if entry_of is None else {**out, **entry_of.sent(block, identity, entry)}


def _openai_sent(
    block: Mapping[str, Any], identity: Mapping[str, Any], entry: Mapping[str, Any]
) -> dict[str, Any]:
    if not block.get("template"):
        return {}
    try:
        template = PromptTemplate.load(str(block["template"]))
    except UsageError as exc:
        return {"messages": None, "messages_note": str(exc)}
    if hashlib.sha256(template.text.encode()).hexdigest() != identity.get("template_sha256"):
        return {"messages": None, "messages_note": "the template changed since the run"}
    values = {k: str(entry.get(k) or "") for k in ("library", "version", "question")}
    messages = template.render(
        **values, reference=str(entry.get("reference_answer") or ""), answer=str(entry.get("answer") or "")
    )
    return {"messages": messages}


def _reference_sent(
    block: Mapping[str, Any], identity: Mapping[str, Any], entry: Mapping[str, Any]
) -> dict[str, Any]:
    strings = {k: entry.get(k) for k in ("expected_apis", "expected_any", "forbidden_apis")}
    return {"rule": identity.get("rule"), "version_strings": strings}


@register_judge("none", identity=_no_identity)
def _build_none(cfg: schema.Judge, labels: Labels, encoder: EncoderFactory | None) -> None:
    return None


@register_judge("openai", identity=_openai_identity, sent=_openai_sent)
def _build_openai(cfg: schema.Judge, labels: Labels, encoder: EncoderFactory | None) -> Judge:
    block = as_variant(cfg, schema.JudgeOpenAI, "judge")
    return OpenAIJudge(block.llm, PromptTemplate.load(block.template))


@register_judge("reference", identity=_reference_identity, sent=_reference_sent)
def _build_reference(cfg: schema.Judge, labels: Labels, encoder: EncoderFactory | None) -> Judge:
    block = as_variant(cfg, schema.JudgeReference, "judge")
    if encoder is None:
        raise ValueError("judge=reference embeds answers: pass make_judge(..., encoder=judge_encoder)")
    return ReferenceJudge(float(block.threshold), labels or {}, encoder, float(block.facts_threshold))
