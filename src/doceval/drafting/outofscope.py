"""Out-of-scope drafts of the kinds the scope checks know (docs/design.md sections 3.3 and 3.5): labels that
hold by construction, never by a guess about the docs.

- ``nonexistent_api``: a plausible name no pin of the library shows anywhere: two documented names of one
  object cut and joined (``model_dump`` + ``validate_json`` -> ``model_json``... only when no pin has it);
- ``unindexed_library``: a version after the newest indexed one of the library, and a library the corpus
  does not index;
- ``off_topic``: a question about something other than software, asked next to the library.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from doceval.drafting.entries import Draft, entry_id, nonexistent_api_draft, provenance, record
from doceval.drafting.inventory import Inventory
from doceval.drafting.names import last

# Libraries with a question each, for "a library not indexed"; those the corpus indexes are skipped.
OTHER_LIBRARIES: tuple[tuple[str, str, str], ...] = (
    ("requests", "2.31.0", "how do I set a timeout on a GET request"),
    ("flask", "3.0.0", "how do I register a blueprint on my app"),
    ("django", "5.0.6", "how do I add a database index to a model field"),
    ("httpx", "0.27.0", "how do I send requests from an async client"),
    ("attrs", "23.2.0", "how do I make a class immutable"),
    ("typer", "0.12.3", "how do I add a --verbose option to a command"),
)
OFF_TOPIC: tuple[str, ...] = (
    "What is a good recipe for pancakes, next to my {library} {version} project?",
    "Which laptop should I buy to work on a {library} {version} codebase?",
    "Who won the football world cup in 1998? Asking while my {library} {version} tests run.",
    "How many hours of sleep does an adult need? I keep debugging {library} {version} at night.",
    "What is the capital of Australia? A colleague asked during our {library} {version} review.",
)


def nonexistent(invs: Sequence[Inventory], seed: int, n: int) -> Iterator[Draft]:
    """Up to ``n`` entries asking a pin about a made-up name: two snake_case names the pin documents cut and
    joined (``get_terminal`` + ``open_file`` -> ``get_file``), kept only where no pin of the
    library shows it anywhere, not even in prose."""
    rng = random.Random(f"{seed}:nonexistent:{invs[0].library}")
    made = 0
    for inv in sorted(invs, key=lambda i: i.pin):
        names = sorted({inv.spelled(n) for n in inv.documented if "_" in n.strip("_")})
        rng.shuffle(names)
        for a, b in zip(names, names[1:], strict=False):
            made_up = f"{a.split('_', 1)[0]}_{b.rsplit('_', 1)[1]}"
            if made_up in (a, b) or any(other.texts.mentions(made_up) for other in invs):
                continue
            eid = entry_id(None, inv.library, inv.version, "nonexistent_api", made_up)
            question = f"In {inv.library} {inv.version}, how do I use `{made_up}`?"
            reference = (
                f"No version of {inv.library} in the corpus documents `{made_up}`; "
                f"{inv.library} {inv.version} has `{last(a)}` and `{last(b)}`."
            )
            prov = provenance(None, "made_up_name", parts=[a, b])
            yield nonexistent_api_draft(eid, question, inv, reference, prov, made_up)
            made += 1
            break
        if made >= n:
            return


def unindexed(
    invs: Sequence[Inventory], indexed_libraries: Sequence[str], tasks: Sequence[str], seed: int, n: int
) -> Iterator[Draft]:
    """A version after the newest indexed one (a task of this library asked of it), and up to ``n - 1``
    libraries the corpus does not index."""
    newest = max(invs, key=lambda i: _version_key(i.version))
    major = _version_key(newest.version)[0] + 1
    version = f"{major}.0"
    rng = random.Random(f"{seed}:unindexed:{newest.library}")
    if tasks and n > 0:
        task = rng.choice(sorted(tasks))
        yield _unindexed(
            newest.library,
            version,
            f"In {newest.library} {version}, {task}?",
            f"doceval indexes {', '.join(i.pin for i in invs)}, not {newest.library} {version}.",
            "unindexed_version",
        )
    others = [o for o in OTHER_LIBRARIES if o[0] not in indexed_libraries]
    rng.shuffle(others)
    for library, ver, question in others[: max(0, n - 1)]:
        yield _unindexed(
            library,
            ver,
            f"In {library} {ver}, {question}?",
            f"{library} is not in the indexed documentation.",
            "unindexed_library",
        )


def _unindexed(library: str, version: str, question: str, reference: str, rule: str) -> Draft:
    eid = entry_id(None, library, version, "unindexed_library", "question")
    rec = {
        "id": eid,
        "question": question,
        "library": library,
        "version": version,
        "out_of_scope": True,
        "relevant_ids": [],
        "reference_answer": reference,
        "expected_apis": [],
        "forbidden_apis": [],
        "split": None,
        "kind": "unindexed_library",
        "draft": True,
        "provenance": provenance(None, rule),
    }
    return Draft(rec)


def off_topic(invs: Sequence[Inventory], seed: int, n: int) -> Iterator[Draft]:
    rng = random.Random(f"{seed}:off_topic:{invs[0].library}")
    questions = list(OFF_TOPIC)
    rng.shuffle(questions)
    for i, template in enumerate(questions[:n]):
        inv = invs[i % len(invs)]
        eid = entry_id(None, inv.library, inv.version, "off_topic", str(i + 1))
        question = template.format(library=inv.library, version=inv.version)
        reference = f"Off-topic: the {inv.library} documentation does not cover this."
        yield Draft(
            record(
                eid,
                question,
                inv,
                "off_topic",
                relevant=[],
                reference=reference,
                labels=None,
                evidence={},
                prov=provenance(None, "off_topic_template"),
                out_of_scope=True,
            )
        )


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.replace("-", ".").split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def version_key(version: str) -> tuple[int, ...]:
    """A version as comparable numbers (``2.0.31`` -> (2, 0, 31)); letters dropped."""
    return _version_key(version)
