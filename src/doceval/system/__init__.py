"""The systems under test: retrievers (the retrieve(question, k) seam) and the DocChat agent.

Nothing here imports the harness or the scorers: a system never grades itself.
"""
