"""The agent under test: router/search -> memory -> answerer, run by :mod:`doceval.system.docchat.runner`.

Only the light data types are re-exported here; import ``answerers`` / ``runner`` (which pull in the LLM
client) from their modules.
"""

from doceval.system.docchat.memory import Memory
from doceval.system.docchat.types import MemoryItem, Passage, Probe, RunOutcome, SearchResult

__all__ = ["Memory", "MemoryItem", "Passage", "Probe", "RunOutcome", "SearchResult"]
