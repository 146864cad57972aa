"""The tables of docs/architecture.md that the code can say itself: metrics (from the registry), config groups,
their options' keys and the top-level keys (from conf/), commands (from the argument parser), and `doceval eval`'s
flags that are overrides' aliases (doceval.cli.aliases).

`python tests/architecture_tables.py` rewrites them between their markers; `tests/test_architecture_doc.py`
regenerates them and fails when the page differs (a metric, option, key or command added without rerunning this).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from doceval.cli.aliases import EVAL_OVERRIDE_ALIASES
from doceval.cli.main import build_parser
from doceval.common.io import write_text_atomic
from doceval.common.metric_names import METRICS

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
DOC = ROOT / "docs" / "architecture.md"
SCRIPT = "tests/architecture_tables.py"

# Which modules read each config group: the one column conf/ cannot say. A new group fails generation until named.
GROUP_READERS = {
    "docs": "`doceval.inputs.docs`",
    "retriever": "`doceval.system.retrievers`",
    "agent": "`doceval.harness.plan`, `doceval.system.external.agents`",
    "embedder": "`doceval.index.embed`, `doceval.index.hardware`",
    "store": "`doceval.index.store`",
    "answerer": "`doceval.system.docchat.answerers`",
    "judge": "`doceval.scoring.judge`, `doceval.scoring.reference_judge`",
    "floors": "`doceval.harness.floors`",
    "split": "`doceval.harness.evaluate`",
    "gate": "`doceval.results.gating`",
    "calibration": "`doceval.harness.calibrate`, `doceval.harness.floor_search`",
    "engine": "`doceval.engine`, `doceval.config.engine_choice` (chosen on a command or by `$DOCEVAL_ENGINE`, "
    "never in params.yaml)",
    "experiment": "(overrides other groups and keys)",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def metrics_table() -> str:
    rows = [
        (
            f"`{m.name}`",
            m.family,
            m.population.replace("_", " "),
            "higher" if m.higher_is_better else "lower",
            "yes" if m.at_k else "no",
            m.description,
        )
        for m in METRICS
    ]
    return _table(("metric", "family", "population", "better", "at k", "per entry"), rows)


def _defaults() -> dict[str, str | None]:
    config = yaml.safe_load((CONF / "config.yaml").read_text(encoding="utf-8"))
    picked: dict[str, str | None] = {}
    for item in config["defaults"]:
        if isinstance(item, dict):
            picked.update(item)
    return picked


def _groups() -> list[str]:
    order = [g for g in _defaults() if (CONF / g).is_dir()]
    return order + sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name not in order)


def _options(group: str) -> list[str]:
    names = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
    default = _defaults().get(group)
    return [default] + [n for n in names if n != default] if default in names else names


def groups_table() -> str:
    rows = []
    for group in _groups():
        if group not in GROUP_READERS:
            raise SystemExit(f"{SCRIPT}: name the modules that read conf/{group}/ in GROUP_READERS")
        options = ", ".join(f"`{group}={o}`" for o in _options(group))
        if _defaults().get(group) is None:
            options = "none by default; " + options
        rows.append((f"`conf/{group}/`", options, GROUP_READERS[group]))
    return _table(("group", "options (default first)", "read by"), rows)


def _leaves(data: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _leaves(value, f"{prefix}.{key}")
    else:
        yield prefix, data


def _value(value: Any) -> str:
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        return f"{len(value)} entries"
    return "`" + (yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...") or "{}") + "`"


def options_table() -> str:
    rows = []
    for group in _groups():
        for option in _options(group):
            data = yaml.safe_load((CONF / group / f"{option}.yaml").read_text(encoding="utf-8")) or {}
            if group == "experiment":  # `# @package _global_`: overrides other groups and top-level keys
                picks = [
                    f"`{k.removeprefix('override /')}={v}`"
                    for d in data.pop("defaults", [])
                    for k, v in d.items()
                ]
                keys = picks + [f"`{k.removeprefix('.')}` {_value(v)}" for k, v in _leaves(data, "") if k]
            else:
                keys = [f"extends `{group}={d}`" for d in data.pop("defaults", [])]
                keys += [f"`{k}` {_value(v)}" for k, v in _leaves(data, group) if k != f"{group}.name"]
            rows.append((f"`{group}={option}`", ", ".join(keys) or "(no keys)"))
    return _table(("option", "keys and their values"), rows)


_KEY_LINE = re.compile(r"^( *)([A-Za-z_]\w*):(.*?)(?:\s+#\s*(.*))?$")


def _comments() -> dict[str, str]:
    """The comment of each key of conf/config.yaml, by dotted key: the comment lines above it and the one on its
    line (continuation lines included); a key without one says its block's."""
    found: dict[str, str] = {}
    path: list[str] = []
    last, above = "", ""
    for line in (CONF / "config.yaml").read_text(encoding="utf-8").splitlines():
        match = _KEY_LINE.match(line)
        if match and not line.lstrip().startswith("-"):
            depth = len(match.group(1)) // 2
            path = [*path[:depth], match.group(2)]
            last = ".".join(path)
            parent = found.get(".".join(path[:-1]), "") if depth else ""
            found[last] = " ".join(filter(None, (above, match.group(4)))) or parent
            above = ""
        elif re.match(r"^ +#", line) and last:
            found[last] += " " + line.strip().removeprefix("#").strip()
        elif line.startswith("#"):
            above = (above + " " + line.removeprefix("#").strip()).strip()
            last = ""
        else:
            last = ""
    return found


def keys_table() -> str:
    config = yaml.safe_load((CONF / "config.yaml").read_text(encoding="utf-8"))
    comments = _comments()
    rows = []
    for key, value in config.items():
        if key == "defaults":
            continue
        for dotted, leaf in _leaves(value, key):
            rows.append((f"`{dotted}`", _value(leaf), comments.get(dotted, "")))
    return _table(("key", "value in conf/config.yaml", "meaning"), rows)


def _commands(parser: argparse.ArgumentParser, prefix: str = "doceval") -> Iterator[tuple[str, str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                func = sub.get_default("func")
                module = f"`{func.__module__}`" if func is not None else ""
                yield f"`{prefix} {name}`", module, helps.get(name, "")
                yield from _commands(sub, f"{prefix} {name}")


def commands_table() -> str:
    return _table(("command", "module", "does (its `--help` line)"), list(_commands(build_parser())))


def flag_aliases_table() -> str:
    rows = [(f"`{a.flag}`", f"`{a.override}`", a.note) for a in EVAL_OVERRIDE_ALIASES]
    return _table(("`doceval eval` flag", "alias of the override", "note"), rows)


TABLES: dict[str, Callable[[], str]] = {
    "metrics": metrics_table,
    "config groups": groups_table,
    "config options": options_table,
    "top-level keys": keys_table,
    "commands": commands_table,
    "flag aliases": flag_aliases_table,
}


def markers(name: str) -> tuple[str, str]:
    return (f"<!-- generated by {SCRIPT}: {name} -->", f"<!-- end of generated: {name} -->")


def rendered(text: str) -> str:
    """The page with every generated table rewritten between its markers."""
    for name, make in TABLES.items():
        begin, end = markers(name)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), flags=re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"docs/architecture.md has no markers for the {name} table: {begin} ... {end}")
        block = f"{begin}\n{make()}\n{end}"
        text = pattern.sub(lambda _match: block, text)  # noqa: B023 - used at once, in this iteration
    return text


if __name__ == "__main__":
    page = DOC.read_text(encoding="utf-8")
    new = rendered(page)
    if new != page:
        write_text_atomic(DOC, new)
    print(
        "docs/architecture.md: tables " + ("rewritten" if new != page else "already current"), file=sys.stderr
    )
