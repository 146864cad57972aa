"""Conversations in a golden set (docs/design.md section 3): one line, several turns, each turn labelled.

A conversation line is ``{"id", "split", "kind": "conversation", "turns": [TURN, ...]}`` with at least two
turns. A turn carries an entry's fields (question, pin, scope, relevant ids, reference answer, APIs, its own
``kind``) plus ``needs_memory``; it has no ``id`` (it is ``<conversation id>#<n>``, n from 1) and no
``split`` (the conversation's). This module checks the conversation's own structure and turns each turn into
an entry record, which the golden set parser then checks like any single-question entry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

CONVERSATION_KIND = "conversation"
TURN_SEPARATOR = "#"  # a turn's id is the conversation's id, this, and its position from 1
MIN_TURNS = 2
CONVERSATION_FIELDS = ("id", "split", "kind", "turns")
# Fields a turn takes from its conversation: problems with them are reported once, on the conversation.
FROM_CONVERSATION = ("id", "split")
# A needs_memory turn's optional rewrite as a question of its own (docs/design.md section 3): what the standalone
# replay asks in its place. Kept in the turn entry's ``extra``; read through doceval.inputs.standalone.
STANDALONE = "standalone"

Report = Callable[[str, str], None]


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation line, as an entry record (its derived id and the conversation's split)."""

    number: int  # from 1
    record: dict[str, Any]
    needs_memory: bool


class _TurnLike(Protocol):
    @property
    def conversation(self) -> str | None: ...
    @property
    def needs_memory(self) -> bool: ...
    @property
    def out_of_scope(self) -> bool: ...


def is_conversation(rec: Any) -> bool:
    return isinstance(rec, dict) and ("turns" in rec or rec.get("kind") == CONVERSATION_KIND)


def turn_id(conversation_id: str, number: int) -> str:
    return f"{conversation_id}{TURN_SEPARATOR}{number}"


def turn_field(number: int, name: str) -> str:
    """The field a turn's problem names: ``turns[2].question`` (turns counted from 1, as their ids are);
    the id and split, which the turn takes from its conversation, unprefixed."""
    return name if name in FROM_CONVERSATION else f"turns[{number}].{name}"


def conversation_turns(rec: dict[str, Any], entry_fields: Collection[str], report: Report) -> list[Turn]:
    """The turns of a conversation line as entry records; reports what is wrong with the conversation's own
    fields and with each turn's structure (a missing or mistyped entry field is left to the entry checks)."""
    _check_conversation_fields(rec, entry_fields, report)
    turns = rec.get("turns")
    if not isinstance(turns, list) or len(turns) < MIN_TURNS:
        got = f"{len(turns)} turn(s)" if isinstance(turns, list) else _type_name(turns)
        report(
            "turns",
            f"a conversation needs a list of at least {MIN_TURNS} turns, got {got}; add the turns, or make a "
            "single question an entry of its own (no turns, its own kind)",
        )
        return []
    out = []
    for number, turn in enumerate(turns, start=1):
        built = _turn_of(rec, number, turn, report)
        if built is not None:
            out.append(built)
    return out


def _check_conversation_fields(rec: dict[str, Any], entry_fields: Collection[str], report: Report) -> None:
    cid = rec.get("id")
    if isinstance(cid, str) and TURN_SEPARATOR in cid:
        report(
            "id",
            f"a conversation id must not contain {TURN_SEPARATOR!r} (its turns are "
            f"{turn_id('ID', 1)}, {turn_id('ID', 2)}, ...): rename {cid!r}",
        )
    if rec.get("kind") != CONVERSATION_KIND:
        report(
            "kind",
            f'a line with "turns" is a conversation: set "kind": "{CONVERSATION_KIND}" (each turn has its own '
            f"kind), got {rec.get('kind')!r}",
        )
    for name in rec:
        if name in entry_fields and name not in CONVERSATION_FIELDS:
            report(name, f'"{name}" belongs to each turn, not to the conversation: move it into its turns')


def _turn_of(conversation: dict[str, Any], number: int, turn: Any, report: Report) -> Turn | None:
    where = f"turns[{number}]"
    if not isinstance(turn, dict):
        report(where, f"each turn must be a JSON object, got {_type_name(turn)}")
        return None
    ok = True
    if "split" in turn:
        report(
            f"{where}.split",
            "a turn has no split: the split is the conversation's (one per conversation, never per turn); "
            "remove it from the turn and set it on the conversation",
        )
        ok = False
    if "id" in turn:
        report(
            f"{where}.id",
            f"a turn has no id of its own (it is {turn_id(str(conversation.get('id')), number)}): remove it",
        )
        ok = False
    needs_memory = turn.get("needs_memory")
    if not isinstance(needs_memory, bool):
        fix = (
            "missing; add" if "needs_memory" not in turn else f"must be true or false, got {needs_memory!r}:"
        )
        report(
            f"{where}.needs_memory",
            f'{fix} "needs_memory" (true when the turn cannot be answered without an earlier one)',
        )
        ok = False
    elif number == 1 and needs_memory:
        report(f"{where}.needs_memory", "the first turn has no earlier turn to need: set it to false")
        ok = False
    ok = _check_standalone(turn, where, needs_memory is True, report) and ok
    if not ok:
        return None
    record = {name: value for name, value in turn.items() if name != "needs_memory"}
    cid = conversation.get("id")
    if "id" in conversation:
        record["id"] = turn_id(cid, number) if isinstance(cid, str) and cid.strip() else cid
    if "split" in conversation:
        record["split"] = conversation["split"]
    return Turn(number, record, needs_memory is True)


def _check_standalone(turn: dict[str, Any], where: str, needs_memory: bool, report: Report) -> bool:
    """``standalone`` (optional): the question a user would ask with no history, on a needs_memory turn only."""
    if STANDALONE not in turn:
        return True
    text = turn[STANDALONE]
    if not isinstance(text, str) or not text.strip():
        report(
            f"{where}.{STANDALONE}",
            f"must be a non-empty string (the question asked with no history), got {text!r}",
        )
        return False
    if not needs_memory:
        report(
            f"{where}.{STANDALONE}",
            "a turn that needs no memory is already its own standalone question: remove it (a standalone "
            "rewrite belongs to needs_memory turns)",
        )
        return False
    return True


def conversation_extra(rec: dict[str, Any]) -> dict[str, Any]:
    """A conversation's fields other than its own and the turns' (kept in each turn's ``extra``)."""
    return {name: value for name, value in rec.items() if name not in CONVERSATION_FIELDS}


def statistics(entries: Iterable[_TurnLike]) -> dict[str, int]:
    """Conversation counts for the validator: conversations, turns, turns that need memory, out-of-scope
    turns; empty for a set without conversations."""
    turns = [e for e in entries if e.conversation is not None]
    if not turns:
        return {}
    return {
        "conversations": len(Counter(e.conversation for e in turns)),
        "turns": len(turns),
        "needs_memory": sum(e.needs_memory for e in turns),
        "out_of_scope": sum(e.out_of_scope for e in turns),
    }


def _type_name(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


class _Selectable(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def conversation(self) -> str | None: ...


S = TypeVar("S", bound=_Selectable)


def records_of(entries: Iterable[_Selectable]) -> list[str]:
    """The golden set's records among ``entries``, in order: a single question's id, or a conversation's id
    once for all its turns."""
    return list(dict.fromkeys(e.conversation if e.conversation is not None else e.id for e in entries))


def first_records(entries: Sequence[S], limit: int) -> list[S]:
    """The entries of the first ``limit`` records (:func:`records_of`): a conversation is kept whole or not at
    all, so no run scores turn 1 of a 2-turn conversation as if it were the conversation."""
    kept = set(records_of(entries)[:limit])
    return [e for e in entries if (e.conversation if e.conversation is not None else e.id) in kept]
