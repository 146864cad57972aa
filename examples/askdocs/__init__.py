"""The AskDocs handbook example: data, two retriever functions, a gate (see README.md)."""
