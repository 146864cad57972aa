"""One thin ``run(params)`` per DVC stage (docs, index, retrieve, calibrate, evaluate, report)."""
