"""Optional phrasing of drafted questions by an LLM (``doceval golden draft --llm``; docs/design.md 3.5).

The model rewrites each question in a user's words through the LLM client settings block (``doceval.llm``:
cache, retries, accounting). It changes ``question`` and ``provenance.phrasing`` only: labels always come
from the docs. A reply that is not one question, names an expected or forbidden string, or drops the
version, is not used (the template question stays, and provenance says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from doceval.common.concurrency import map_concurrent
from doceval.drafting.entries import Draft
from doceval.drafting.questions import names_in
from doceval.llm import ChatClient, LLMConfig, LLMError, PromptTemplate

TEMPLATE = "phrase.txt"
ROLE = "phrasing"
_MAX_CHARS = 300


def phrase(drafts: Sequence[Draft], cfg: LLMConfig) -> dict[str, int]:
    """Rewrite the question of every draft (a conversation: its first turn and each turn's ``standalone``)
    in place; counts of questions rephrased and kept."""
    template = PromptTemplate.load(TEMPLATE)
    client = ChatClient(cfg, ROLE)
    slots = [(d, q) for d in drafts for q in _questions(d.record)]
    counts = {"rephrased": 0, "kept": 0}
    try:
        results = map_concurrent(lambda slot: _ask(client, template, *slot[1]), slots, cfg.max_concurrency)
        for (draft, (holder, key)), outcome in zip(slots, results, strict=True):
            text, why = outcome
            prov = draft.record["provenance"]
            if text is None:
                counts["kept"] += 1
                prov["phrasing"] = f"template (llm:{cfg.model} reply not used: {why})"
                continue
            holder[key] = text
            counts["rephrased"] += 1
            prov["phrasing"] = f"llm:{cfg.model}"
    finally:
        client.close()
    return counts


def _questions(rec: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Where the questions of a draft are: (the mapping holding one, its key)."""
    if "turns" not in rec:
        return [(rec, "question")]
    first = rec["turns"][0]
    return [(first, "question"), *((t, "standalone") for t in rec["turns"][1:] if "standalone" in t)]


def _labels(rec: dict[str, Any]) -> list[str]:
    return [
        *rec.get("expected_apis", []),
        *rec.get("forbidden_apis", []),
        *(a for g in rec.get("expected_any", []) for a in g),
    ]


def _ask(
    client: ChatClient, template: PromptTemplate, holder: dict[str, Any], key: str
) -> tuple[str | None, str]:
    question = holder[key]
    avoid = [n for n in _labels(holder) if not names_in(question, [n])]
    messages = template.render(
        library=str(holder.get("library", "")),
        version=str(holder.get("version", "")),
        question=question,
        avoid=", ".join(avoid) or "(none)",
    )
    try:
        reply = client.complete(messages, template_id=template.template_id).content.strip()
    except LLMError as exc:
        return None, f"call failed: {str(exc)[:120]}"
    return _checked(reply, question, avoid, str(holder.get("version", "")))


def _checked(reply: str, question: str, avoid: Sequence[str], version: str) -> tuple[str | None, str]:
    text = " ".join(reply.split())
    if not text or "\n" in reply.strip() or len(text) > _MAX_CHARS or not text.endswith("?"):
        return None, "not one question"
    if names_in(text, avoid):
        return None, "it names an expected or forbidden string"
    if version and version.split(".")[0] not in text and version in question:
        return None, "it drops the version"
    return text, ""
