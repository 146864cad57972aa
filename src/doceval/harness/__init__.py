"""The harness: candidate caching, floors and their calibration, the evaluate core, sweeps."""
