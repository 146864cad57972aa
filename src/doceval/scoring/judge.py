"""LLM-as-judge: grade an answer against the version's reference answer (run over a system's answers by
:mod:`doceval.scoring.judging`).

The reference answer is a label: it comes from the golden set, never through the probe the system saw.
A judge never guesses: an unparsable verdict or a failed call is a *judge error* (verdict None), which the
metrics count and exclude from answer_accuracy instead of scoring it right or wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from doceval.common.bounded_json import loads
from doceval.common.naming import judge_hash
from doceval.common.redact import redact_url, scrub_message
from doceval.config import schema
from doceval.errors import UsageError
from doceval.llm import LLMConfig, LLMError, PromptTemplate, TemplatedChat
from doceval.scoring.reference_judge import EncoderFactory, ReferenceJudge, VersionStrings
from doceval.scoring.reference_judge import identity as reference_identity

__all__ = ["Judge", "OpenAIJudge", "judge_hash", "judge_id", "judge_identity", "judge_input", "make_judge",
           "parse_verdict"]  # fmt: skip
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


def make_judge(
    cfg: schema.Judge,
    labels: Mapping[str, VersionStrings] | None = None,
    encoder: EncoderFactory | None = None,
) -> Judge | None:
    """The configured judge: ``judge=none`` -> None (no judge); ``judge=openai`` (its client settings in
    ``cfg.llm``); ``judge=reference``, which needs the entries' version strings (``labels``) and what it embeds
    with (``encoder``: the harness passes :func:`doceval.index.embed.judge_encoder`)."""
    if isinstance(cfg, schema.JudgeOpenAI):
        return OpenAIJudge(cfg.llm, PromptTemplate.load(cfg.template))
    if isinstance(cfg, schema.JudgeReference):
        if encoder is None:
            raise ValueError("judge=reference embeds answers: pass make_judge(..., encoder=judge_encoder)")
        return ReferenceJudge(float(cfg.threshold), labels or {}, encoder, float(cfg.facts_threshold))
    return None


def judge_identity(cfg: schema.Judge) -> dict[str, Any] | None:
    """What decides a verdict, and nothing else (not the key, retries or budget): the model, endpoint (no
    credentials), template text hash, temperature and seed of an LLM judge; the rule and threshold of the
    reference judge. None: no judge."""
    if isinstance(cfg, schema.JudgeReference):
        return reference_identity(cfg)
    if not isinstance(cfg, schema.JudgeOpenAI):
        return None
    template = PromptTemplate.load(cfg.template)
    llm = cfg.llm
    return {
        "name": cfg.name,
        "model": llm.model,
        "base_url": redact_url(str(llm.base_url)) if llm.base_url else None,
        "template": template.template_id,
        "template_sha256": hashlib.sha256(template.text.encode()).hexdigest(),
        "temperature": llm.temperature,
        "seed": llm.seed,
        "max_tokens": llm.max_tokens,
        "response_format": None if llm.response_format is None else dict(llm.response_format),
    }


def judge_id(judge_cfg: schema.Judge) -> dict[str, Any] | None:
    """``{"hash", "identity"}`` of a configured judge, None without one (the summary's ``config.judge_id``)."""
    identity = judge_identity(judge_cfg)
    return None if identity is None else {"hash": judge_hash(identity), "identity": identity}


def judge_input(recorded: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the judge was sent for one summary entry, rebuilt from the summary's recorded ``config`` (its
    ``judge`` block and ``judge_id``): the answer and the reference answer, an LLM judge's rendered messages
    (when its template's text still has the recorded sha256; else ``messages`` null and why), the offline
    judge's rule and the entry's version strings. The entry trace's judge span shows it (design 6.7)."""
    block = recorded.get("judge") or {}
    identity = (recorded.get("judge_id") or {}).get("identity") or {}
    out: dict[str, Any] = {"answer": entry.get("answer"), "reference": entry.get("reference_answer")}
    if block.get("name") == "reference":
        strings = {k: entry.get(k) for k in ("expected_apis", "expected_any", "forbidden_apis")}
        return {**out, "rule": identity.get("rule"), "version_strings": strings}
    if block.get("name") != "openai" or not block.get("template"):
        return out
    try:
        template = PromptTemplate.load(str(block["template"]))
    except UsageError as exc:
        return {**out, "messages": None, "messages_note": str(exc)}
    if hashlib.sha256(template.text.encode()).hexdigest() != identity.get("template_sha256"):
        return {**out, "messages": None, "messages_note": "the template changed since the run"}
    values = {k: str(entry.get(k) or "") for k in ("library", "version", "question")}
    messages = template.render(**values, reference=str(entry.get("reference_answer") or ""),
                               answer=str(entry.get("answer") or ""))  # fmt: skip
    return {**out, "messages": messages}
