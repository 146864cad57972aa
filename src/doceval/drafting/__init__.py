"""Drafting a golden set from the docs (`doceval golden draft`, docs/design.md section 3.5): the API inventory
of each pin, the differences between versions, entries drafted from them with their graded documents, and the
review that accepts them. Never imports the harness or the system under test: labels come from the docs."""
