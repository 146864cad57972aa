"""Runnable examples; a package so that `retriever.target=examples.askdocs.retrievers:overlap` resolves."""
