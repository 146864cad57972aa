#!/usr/bin/env bash
# Start the example HTTP assistant on a free port, replay the handbook golden set through it with
# `doceval eval agent=http`, stop the server. Exits with doceval's code. Extra arguments are passed to
# doceval eval as flags (e.g. ./run.sh --warm-memory).
set -euo pipefail
cd "$(dirname "$0")/../.."   # doceval reads conf/ from the working directory: run from the repository root

if [[ -x .venv/bin/doceval ]]; then DOCEVAL=.venv/bin/doceval; else DOCEVAL=doceval; fi
if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
RUNS=examples/http_agent/runs
mkdir -p "$RUNS"

url_file=$(mktemp)
"$PYTHON" examples/http_agent/server.py --host 127.0.0.1 --port 0 >"$url_file" &
server=$!
stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -f "$url_file"
}
trap stop_server EXIT

url=""
for _ in $(seq 100); do   # the server prints its URL as its first line once it listens
  url=$(head -n 1 "$url_file")
  [[ -n "$url" ]] && break
  kill -0 "$server" 2>/dev/null || { echo "run.sh: the server exited before printing its URL" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$url" ]] || { echo "run.sh: the server printed no URL within 10 s" >&2; exit 1; }
echo "== assistant listening on $url"

set +e
"$DOCEVAL" eval --golden examples/askdocs/golden.jsonl --split all --no-track \
  --output "$RUNS/http.json" "$@" agent=http "agent.url=$url/ask" k=3
code=$?
set -e
echo "== doceval eval exited with $code"
exit "$code"
