"""Shared plumbing: atomic file IO, hashing, JSONL scanning, run provenance."""
