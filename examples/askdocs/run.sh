#!/usr/bin/env bash
# Evaluate two retriever functions on the handbook golden set, then compare them under the CI gate.
# Exits with `doceval compare`'s code: 0 gate PASS, 3 gate FAIL (this example is built to fail), 2 bad input.
set -euo pipefail
cd "$(dirname "$0")/../.."   # doceval reads conf/ from the working directory: run from the repository root

if [[ -x .venv/bin/doceval ]]; then DOCEVAL=.venv/bin/doceval; else DOCEVAL=doceval; fi
RUNS=examples/askdocs/runs
mkdir -p "$RUNS"

for retriever in overlap content_words; do
  echo "== doceval eval: retriever.target=examples.askdocs.retrievers:$retriever"
  "$DOCEVAL" eval --golden examples/askdocs/golden.jsonl --split all --no-track --quiet \
    --output "$RUNS/$retriever.json" \
    retriever=function "retriever.target=examples.askdocs.retrievers:$retriever" k=3 floors=zero
done

echo "== doceval compare: overlap (baseline) vs content_words (new), gate examples/askdocs/gate.yaml"
set +e
"$DOCEVAL" compare "$RUNS/overlap.json" "$RUNS/content_words.json" --gate examples/askdocs/gate.yaml
code=$?
set -e
echo "== doceval compare exited with $code (0: gate PASS, 3: gate FAIL)"
exit "$code"
