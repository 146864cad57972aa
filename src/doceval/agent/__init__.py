"""The agent under test: router/search -> memory -> answerer -> judge, run by :mod:`doceval.agent.runner`.

Only the light data types are re-exported here; import ``answerers`` / ``runner`` (which pull in the LLM
client) from their modules.
"""

from doceval.agent.memory import Memory
from doceval.agent.types import AgentRecord, MemoryItem, Passage, Probe, RunOutcome, SearchResult

__all__ = ["AgentRecord", "Memory", "MemoryItem", "Passage", "Probe", "RunOutcome", "SearchResult"]
