"""doceval: an evaluation harness for version-pinned documentation QA assistants."""

__version__ = "0.1.0"
