"""The application layer: commands that orchestrate the harness outside the DVC pipeline (`doceval sweep`)."""
