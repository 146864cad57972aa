"""The run summary, typed (docs/design.md section 4.1): built in one place from the JSON object the harness
assembles or a summary read back, read by attribute everywhere else. Imports nothing of doceval but
``doceval.common``, so the harness (which builds it), scoring, results, tracking, stages, the CLI and the API (which
read it) may all import it."""

from doceval.summary.model import Entry, Incomplete, Metrics, MetricValue, Summary, as_summary, settings_of
from doceval.summary.settings import CandidatesRecord, Floors, GoldenRecord, RunSettings

__all__ = [
    "CandidatesRecord",
    "Entry",
    "Floors",
    "GoldenRecord",
    "Incomplete",
    "MetricValue",
    "Metrics",
    "RunSettings",
    "Summary",
    "as_summary",
    "settings_of",
]
