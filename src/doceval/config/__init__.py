"""Configuration: Hydra composition of conf/, params.yaml for DVC stages, and the typed schema."""
