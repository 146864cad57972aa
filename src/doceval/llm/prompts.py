"""Prompt templates: shipped (doceval/prompts/) or a user's file, with a content hash that enters the cache key."""

from __future__ import annotations

import hashlib
import os
import re
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from doceval.errors import UsageError


@dataclass(frozen=True)
class PromptTemplate:
    """A ``$placeholder`` template (``string.Template``) with optional ``[system]`` / ``[user]`` sections.

    ``template_id`` (file name + content hash) is part of the cache key: an edited template misses the cache.
    """

    name: str
    text: str

    @property
    def template_id(self) -> str:
        return f"{self.name}:{hashlib.sha256(self.text.encode()).hexdigest()[:16]}"

    @classmethod
    def load(cls, name_or_path: str) -> PromptTemplate:
        """A shipped template's bare name (``answer.txt``), else a file path (``./answer.txt`` for a local one).

        A bare name prefers the shipped file, so a stray file of that name in the working directory cannot
        silently replace the prompt.
        """
        path = Path(name_or_path)
        if "/" not in name_or_path and os.sep not in name_or_path:
            shipped = resources.files("doceval").joinpath("prompts", name_or_path)
            if shipped.is_file():
                return cls(name_or_path, shipped.read_text(encoding="utf-8"))
        if path.is_file():
            return cls(path.name, path.read_text(encoding="utf-8"))
        raise UsageError(
            f"template {name_or_path!r}: not a file and not a shipped template "
            "(shipped: answer.txt, judge.txt)"
        )

    def render(self, **values: str) -> list[dict[str, str]]:
        try:
            text = string.Template(self.text).substitute(values)
        except KeyError as exc:
            raise UsageError(
                f"template {self.name}: unknown placeholder ${exc.args[0]}; available: "
                + ", ".join(f"${k}" for k in sorted(values))
            ) from None
        except ValueError as exc:  # a lone '$'
            raise UsageError(f"template {self.name}: {exc}; write a literal dollar sign as $$") from None
        sections = re.split(r"^\[(system|user)\]\s*$", text, flags=re.M)
        if len(sections) == 1:
            return [{"role": "user", "content": text.strip()}]
        messages = []
        for role, content in zip(sections[1::2], sections[2::2], strict=True):
            if content.strip():
                messages.append({"role": role, "content": content.strip()})
        return messages
