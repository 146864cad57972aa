"""Answerers: turn the passages that cleared the floors (plus surfaced memory) into an answer or a refusal.

:data:`ANSWERERS` (the one plug-in rule, :class:`~doceval.common.registry.Registry`) maps ``answerer.name`` to
a builder and says whether the answerer runs offline (no model, no cache, no budget).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from doceval.common.registry import Registry, as_variant
from doceval.config import schema
from doceval.llm import LLMConfig, PromptTemplate, TemplatedChat
from doceval.system.docchat.types import MemoryItem, Passage, Probe

# What the answer prompt tells the model to reply when the passages do not answer the question.
REFUSAL_MARKER = "I don't know"


@runtime_checkable
class Answerer(Protocol):
    name: str

    def answer(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> tuple[str | None, bool, str | None]:
        """(answer, refused, reason). A refusal has answer None and a reason."""
        ...


def is_refusal(reply: str) -> bool:
    """The model's own refusal: the marker anywhere in the reply (curly quotes and case ignored)."""
    norm = reply.replace("\u2019", "'").casefold()
    return REFUSAL_MARKER.casefold() in norm


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _first_sentences(text: str, n: int) -> str:
    flat = " ".join(text.split())
    return " ".join(_SENTENCE_END.split(flat)[:n])


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


class ExtractiveAnswerer:
    """Offline default: the answer is built from the passages themselves, so it needs no model.

    Each of the top passages contributes its header line (the signature) and the first sentences of its body.
    Surfaced memory is appended as ``Related earlier answer: ...`` lines, which is what makes a memory leak
    observable offline.
    """

    name = "extractive"

    def __init__(
        self, max_passages: int, sentences: int = 2, max_chars: int = 700, memory_chars: int = 240
    ) -> None:
        self.max_passages = max_passages
        self.sentences = sentences
        self.max_chars = max_chars
        self.memory_chars = memory_chars

    def answer(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> tuple[str | None, bool, str | None]:
        if not passages:
            return None, True, "no passages to answer from"
        parts = []
        for p in passages[: self.max_passages]:
            header, _, body = p.text.strip().partition("\n")
            lead = _first_sentences(body, self.sentences)
            parts.append(f"{header.strip()}: {lead}" if lead else header.strip())
        text = _clip(
            f"According to the {probe.library} {probe.version} docs: " + " | ".join(parts), self.max_chars
        )
        for item in memory:
            text += "\nRelated earlier answer: " + _clip(" ".join(item.answer.split()), self.memory_chars)
        return text, False, None


def _format_passages(passages: Sequence[Passage]) -> str:
    return "\n\n".join(f"[{p.doc_id}]\n{p.text.strip()}" for p in passages)


def _format_memory(memory: Sequence[MemoryItem]) -> str:
    if not memory:
        return "(none)"
    return "\n\n".join(f"Q ({m.library} {m.version}): {m.question}\nA: {m.answer}" for m in memory)


class OpenAIAnswerer(TemplatedChat):
    """An OpenAI-compatible chat model (OpenAI, or a local vLLM/Ollama/llama.cpp server via ``base_url``)."""

    name = "openai"

    def __init__(self, cfg: LLMConfig, template: PromptTemplate, *, max_passages: int | None = None) -> None:
        super().__init__(cfg, template, "answerer")
        self.max_passages = max_passages

    def messages(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> list[dict[str, str]]:
        shown = passages if self.max_passages is None else passages[: self.max_passages]
        return self.template.render(
            library=probe.library,
            version=probe.version,
            passages=_format_passages(shown),
            memory=_format_memory(memory),
            question=probe.question,
            refusal=REFUSAL_MARKER,
        )

    def answer(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> tuple[str | None, bool, str | None]:
        # No passages: refuse without a call (the runner normally refuses before reaching the answerer).
        if not passages:
            return None, True, "no passages to answer from"
        result = self.client.complete(
            self.messages(probe, passages, memory), template_id=self.template.template_id
        )
        reply = result.content.strip()
        if not reply or is_refusal(reply):
            return None, True, "model refused"
        return reply, False, None

    def close(self) -> None:
        self.client.close()


@dataclass(frozen=True)
class RegisteredAnswerer:
    build: Callable[[schema.Answerer], Answerer]
    offline: bool  # no model behind it: nothing to cache, journal or budget, and it may answer on any node


ANSWERERS: Registry[RegisteredAnswerer] = Registry("answerer")


def register_answerer(
    name: str, *, offline: bool = False
) -> Callable[[Callable[[schema.Answerer], Answerer]], Callable[[schema.Answerer], Answerer]]:
    """Decorator: ``build(block) -> Answerer`` serves ``answerer.name == name``."""

    def decorate(build: Callable[[schema.Answerer], Answerer]) -> Callable[[schema.Answerer], Answerer]:
        ANSWERERS.add(name, RegisteredAnswerer(build, offline))
        return build

    return decorate


def is_offline(cfg: schema.Answerer | None) -> bool:
    """Whether the configured answerer needs no model (False for none or an unknown name)."""
    entry = ANSWERERS.get(cfg.name) if cfg is not None else None
    return entry is not None and entry.offline


def make_answerer(cfg: schema.Answerer) -> Answerer:
    """The ``answerer`` block's answerer, built by the builder registered under ``cfg.name``."""
    return ANSWERERS.require(cfg.name).build(cfg)


@register_answerer("extractive", offline=True)
def _build_extractive(cfg: schema.Answerer) -> Answerer:
    """An unset option keeps :class:`ExtractiveAnswerer`'s own limit."""
    block = as_variant(cfg, schema.AnswererExtractive, "answerer")
    options = {
        "max_passages": block.max_passages,
        "sentences": block.sentences,
        "max_chars": block.max_chars,
        "memory_chars": block.memory_chars,
    }
    return ExtractiveAnswerer(**{k: v for k, v in options.items() if v is not None})


@register_answerer("openai")
def _build_openai(cfg: schema.Answerer) -> Answerer:
    """An OpenAI-compatible model (``cfg.llm``), its prompt ``cfg.template``."""
    block = as_variant(cfg, schema.AnswererOpenAI, "answerer")
    return OpenAIAnswerer(block.llm, PromptTemplate.load(block.template), max_passages=block.max_passages)
