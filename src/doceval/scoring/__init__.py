"""Scoring: pure metrics, the metric registry, the LLM judge, bootstrap statistics, aggregation.

Nothing here imports the system under test.
"""
