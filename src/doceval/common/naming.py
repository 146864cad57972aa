"""Short names for what a run evaluated, shared by the headline, report.md, compare, JUnit and MLflow (the run
name and the ``system`` tag `doceval history --system` filters on)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

# The names that tell the system under test apart (conf/agent/docchat.yaml, conf/agent/function.yaml,
# conf/retriever/function.yaml), written once: code asks is_own_agent / is_function_retriever, never the string.
OWN_AGENT: Final = "docchat"  # doceval's own agent, over a configured retriever
USER_FUNCTION: Final = "function"  # the user's function: retriever=function (or agent=function, an assistant)


def is_own_agent(name: object) -> bool:
    """Whether an ``agent.name`` is doceval's own agent (over a retriever), not the user's assistant."""
    return name == OWN_AGENT


def is_function_retriever(name: object) -> bool:
    """Whether a ``retriever.name`` is the user's retriever function (it brings its own documents)."""
    return name == USER_FUNCTION


# A URL on this machine: its port changes from one start of a local server to the next (a free port).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_HTTP_LABEL = re.compile(r"^http:(https?://.*)$")


def system_label(recorded: Mapping[str, Any]) -> str:
    """One short name for the system under test, from a summary's recorded ``config`` block: its ``name``
    when the configuration gave one (``name=ravel-assistant``), else the retriever, the user's function target,
    or the assistant's target or URL (``http:`` + the URL, without its port on a loopback host)."""
    if recorded.get("name"):
        return str(recorded["name"])
    system = recorded.get("system") or {}
    agent = system.get("agent") or {}
    if not is_own_agent(agent.get("name", OWN_AGENT)):
        return canonical_system(f"{agent['name']}:{agent.get('target') or agent.get('url') or '?'}")
    retriever = system.get("retriever") or {}
    if retriever.get("target"):
        return f"function:{retriever['target']}"
    return str(recorded.get("retriever", {}).get("name", "?"))


def canonical_system(label: str) -> str:
    """``label`` as system labels are compared: an HTTP assistant's on a loopback host without its port
    (``http:http://127.0.0.1:8765/answer`` -> ``http:http://127.0.0.1/answer``), so a local server restarted on
    another port stays one system, and tags logged before this rule (with the port) match the new ones."""
    found = _HTTP_LABEL.match(label)
    if not found:
        return label
    try:
        parts = urlsplit(found.group(1))
        port = parts.port
    except ValueError:
        return label
    host = parts.hostname or ""
    if port is None or host not in LOOPBACK_HOSTS:
        return label
    netloc = parts.netloc.rsplit(":", 1)[0]  # the port only: [::1] keeps its brackets
    return "http:" + parts._replace(netloc=netloc).geturl()


def floors_label(floors: Mapping[str, Any]) -> str:
    """The floors a run used, in the words a user chose them with, from a summary's recorded ``floors`` block:
    ``zero``, ``calibrated (PATH)``, ``config (global 0.3; numpy 0.5)``, ``cli (...)``, ``none (why)``. The
    recorded ``source`` alone says ``config`` for ``floors=zero``, which tells a reader nothing."""
    source = str(floors.get("source") or "?")
    global_floor = floors.get("global")
    per_library = floors.get("per_library") or {}
    values = "; ".join(
        [
            *([] if global_floor is None else [f"global {global_floor:g}"]),
            *(f"{lib} {value:g}" for lib, value in sorted(per_library.items())),
        ]
    )
    if source.startswith("calibrated:"):
        return f"calibrated ({source.split(':', 1)[1]})"
    if source.startswith("none"):
        return f"none ({source.split(':', 1)[1].strip()})" if ":" in source else "none"
    if global_floor is None and not per_library:
        return f"none ({source})"
    if source == "config" and global_floor == 0 and not per_library:
        return "zero"
    return f"{source} ({values})"


def judged_share_label(recorded: Mapping[str, Any], k: Any) -> str:
    """``judged_share@k``, or ``precision@k`` when the golden set has no graded judgments: then only its
    relevant ids are judged, and the share of R judged is the share of R relevant."""
    name = "precision" if (recorded.get("golden") or {}).get("qrels") is False else "judged_share"
    return name if k is None else f"{name}@{k}"


def judged_share_note(recorded: Mapping[str, Any], k: Any) -> str:
    """What the run's judged_share measures, from its recorded ``config``: the judgments' kind, the systems
    they were pooled from (the golden set's pool record) and whether this run's system was one of them."""
    golden = recorded.get("golden") or {}
    label = judged_share_label(recorded, k)
    if golden.get("qrels") is False:
        return (
            f"{label}: the golden set has no graded judgments, so only its relevant ids are judged and "
            "the share of R judged is the share relevant: a quality score, not how complete the "
            "judgments are."
        )
    what = f"{label}: share of R the judgments cover (any grade; an unjudged document counts as not relevant)"
    if golden.get("qrels") is None:
        return f"{what}; this summary records neither the judgments' kind nor the pool."
    pool = golden.get("pool")
    if not isinstance(pool, Mapping):
        return (
            f"{what}; which systems were pooled is not recorded (a NAME.pool.json beside the golden "
            "set, docs/design.md 3.4): a pooled system scores 1 by construction."
        )
    system, depth = system_label(recorded), pool.get("depth")
    pooled = f"pooled from the top {depth} of {', '.join(map(str, pool.get('systems') or []))}"
    if system in (pool.get("systems") or []):
        return (
            f"{what}, {pooled}. This run's {system} is a pooled system: 1 by construction up to "
            f"k = {depth}, it says nothing of how complete the judgments are for another system."
        )
    return (
        f"{what}, {pooled}. This run's {system} was not pooled: below 1, the other retrieval metrics may "
        "undercount (`doceval golden pool` lists what to grade)."
    )


# refused_correctly of a user's assistant (agent=function|http) is computed on the sources it returned, not on
# its reply: what every table calls it there (docs/design.md section 4), and the legend under them.
ASSISTANT_REFUSED_CORRECTLY = "no sources on out-of-scope entries"
ASSISTANT_LEGEND = (
    "refused_correctly for an assistant: the share of out-of-scope questions it cited no sources for, not whether "
    "it refused; its own refusal is refusal_rate"
)


def is_assistant(recorded: Mapping[str, Any]) -> bool:
    """Whether a summary's recorded ``config`` is a user's assistant (``agent=function|http``): its retrieval is
    the sources it returned (a summary written before ``system`` was recorded: its ``agent:`` retriever)."""
    agent = (recorded.get("system") or {}).get("agent") or {}
    if agent.get("name"):
        return not is_own_agent(str(agent["name"]))
    retriever = recorded.get("retriever")
    name = retriever.get("name") if isinstance(retriever, Mapping) else retriever
    return str(name or "").startswith("agent:")


def judge_hash(identity: Mapping[str, Any] | None) -> str | None:
    """16 hex digits naming a judge: two answer_accuracy figures with different hashes came from different
    judges and are not comparable."""
    if identity is None:
        return None
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
