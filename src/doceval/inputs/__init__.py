"""What the harness reads: the docs corpus (built from wheels or a folder), golden sets, BEIR imports."""
