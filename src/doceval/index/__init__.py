"""The vector index: embeddings (with a content-addressed cache), the Qdrant store, the index build."""
