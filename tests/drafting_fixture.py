"""A two-version library of your own docs ("shipit" 1.0 and 2.0) with one planted difference of each kind the
drafter knows, with or without a migration page in 2.0; and the differences it must report, no more."""

from __future__ import annotations

from pathlib import Path

PLANTED = {
    ("renamed", "dispatch", "ship"),  # a method, found by the sentence that changed only in that name
    ("renamed", "RoutePlanner", "RouteOptimizer"),  # a class, in a section whose heading changed too
    ("removed", "purge_all", ""),
    ("added", "", "print_label"),
    ("moved", "retry", "retry"),  # from shipit.tasks to shipit.retries
    ("default_changed", "timeout", "timeout"),  # connect(): 10 -> 30
}

_COMMON = {
    "index.md": "# Shipit\n\nShipit sends parcels from Python code.\n\n## Installation\n\n"
    "Install it with `pip install shipit=={version}`. Shipit {version} supports Python 3.9 and later.\n",
}
_V1 = {
    "client.md": "# Client\n\nThe client talks to the depot.\n\n## Connecting\n\n"
    "`connect(url, timeout=10)` opens a connection to the depot; the `timeout` defaults to `10` seconds.\n\n"
    '## Sending parcels\n\nSend a parcel with `client.dispatch(parcel, "express")`: it returns a `Receipt` '
    "whose `number` names it.\n\n## Tracking\n\n`client.track(number)` returns where the parcel is now.\n",
    "planning.md": "# Planning\n\nPlanning decides what a van does.\n\n## Route planner\n\n"
    "`RoutePlanner(depot)` works out the order in which a van visits the addresses of the day.\n\n"
    "## Purging\n\n`client.purge_all()` deletes every parcel that was never sent.\n",
    "retries.md": "# Retries\n\nSends can fail.\n\n## Retrying failed sends\n\n"
    "Wrap a send in a retry:\n\n```python\nfrom shipit.tasks import retry\n\nretry(send, attempts=3)\n```\n",
}
_V2 = {
    "client.md": "# Client\n\nThe client talks to the depot.\n\n## Connecting\n\n"
    "`connect(url, timeout=30)` opens a connection to the depot; the `timeout` defaults to `30` seconds.\n\n"
    '## Sending parcels\n\nSend a parcel with `client.ship(parcel, "express")`: it returns a `Receipt` '
    "whose `number` names it.\n\n## Tracking\n\n`client.track(number)` returns where the parcel is now.\n\n"
    "## Labels\n\n`client.print_label(number)` prints the shipping label of a parcel, ready to stick on.\n",
    "planning.md": "# Planning\n\nPlanning decides what a van does.\n\n## Route optimizer\n\n"
    "`RouteOptimizer(depot)` works out the order in which a van visits the addresses of the day.\n",
    "retries.md": "# Retries\n\nSends can fail.\n\n## Retrying failed sends\n\n"
    "Wrap a send in a retry:\n\n```python\nfrom shipit.retries import retry\n\nretry(send, attempts=3)\n```\n",
}
MIGRATION = (
    "# Migrating from 1.0\n\nWhat changed in 2.0.\n\n## Renamed and removed\n\n"
    "`dispatch` was renamed to `ship`. `RoutePlanner` was renamed to `RouteOptimizer`. "
    "`purge_all` was removed in 2.0.\n"
)


def write_library(root: Path, migration: bool) -> Path:
    """``root/1.0/*.md`` and ``root/2.0/*.md`` (``root/2.0/migration.md`` when ``migration``); returns root."""
    for version, files in (("1.0", _V1), ("2.0", _V2)):
        folder = root / version
        folder.mkdir(parents=True)
        for name, text in {**_COMMON, **files}.items():
            (folder / name).write_text(
                text.format(version=version) if name == "index.md" else text, encoding="utf-8"
            )
    if migration:
        (root / "2.0" / "migration.md").write_text(MIGRATION, encoding="utf-8")
    return root


def reported(records: list[dict[str, object]]) -> set[tuple[str, str, str]]:
    """The (kind, old, new) of every difference in a NAME.differences.jsonl."""
    return {(str(r["kind"]), str(r["old"]), str(r["new"])) for r in records}
