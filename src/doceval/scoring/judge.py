"""LLM-as-judge: grade an answer against the version's reference answer (run over a system's answers by
:mod:`doceval.scoring.judging`).

The reference answer is a label: it comes from the golden set, never through the probe the system saw.
A judge never guesses: an unparsable verdict or a failed call is a *judge error* (verdict None), which the
metrics count and exclude from answer_accuracy instead of scoring it right or wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from doceval.errors import UsageError
from doceval.llm import LLMConfig, LLMError, PromptTemplate, TemplatedChat, redact
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
        data = json.loads(text[start : end + 1])
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
            snippet = redact(" ".join(result.content.split())[:120])
            return None, None, f"malformed judge output: {exc}: {snippet!r}"
        return verdict, reason, None

    def close(self) -> None:
        self.client.close()


def make_judge(cfg: Mapping[str, Any]) -> Judge | None:
    """``{"name": "none"}`` -> None (no judge); ``{"name": "openai", ...}`` (keys as :class:`LLMConfig`)."""
    name = str(cfg.get("name", "none"))
    if name in ("none", "", "null"):
        return None
    if name == "openai":
        llm_cfg = LLMConfig.from_mapping(cfg, "judge")
        template = PromptTemplate.load(str(cfg.get("template") or "judge.txt"))
        return OpenAIJudge(llm_cfg, template)
    raise UsageError(f"judge.name: unknown judge {name!r}; choose none or openai")
