"""External systems under test: the user's assistant behind a Python callable (:mod:`.agents`) or HTTP
(:mod:`.http`). Like every system, they import neither the harness nor the scorers."""
