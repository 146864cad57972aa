"""Scoring: pure metrics, the metric registry, the LLM judge, intervals and tests, aggregation.

Nothing here imports the system under test.
"""
