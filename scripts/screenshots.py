"""The two MLflow screenshots of docs/mlflow.md (docs/img/), taken with headless Chromium on a running MLflow UI.

    make repro                      # the evaluate stage logs the test run with its entry traces
    make mlflow-ui &                # http://127.0.0.1:5000 over ./mlruns
    apt-get install -y chromium     # the Debian package; playwright only drives it
    python3 -m venv /tmp/shots && /tmp/shots/bin/pip install playwright
    /tmp/shots/bin/python scripts/screenshots.py [--ui http://127.0.0.1:5000] [--out docs/img]

Finds the newest `evaluate` run of the `doceval-test` experiment and, in it, an out-of-scope entry whose trace
got sources (failure stage `hallucinated_out_of_scope`) through the MLflow REST API, then saves the run's
trace list (`mlflow-run-traces.png`) and that trace with its assessments open (`mlflow-oos-trace.png`).
Standard library and playwright only: it never imports doceval or mlflow.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from pathlib import Path
from typing import Any

_OPEN_ASSISTANT = "mlflow.assistant.panelOpen_v1"  # the UI's assistant side panel would hide the traces


def _api(ui: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{ui}/api/{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as resp:
        out: dict[str, Any] = json.load(resp)
        return out


def _targets(ui: str) -> tuple[str, str, str]:
    """(experiment id, run id, trace id of an out-of-scope entry that got sources)."""
    with urllib.request.urlopen(f"{ui}/api/2.0/mlflow/experiments/get-by-name?experiment_name=doceval-test") as r:
        exp = json.load(r)["experiment"]["experiment_id"]
    runs = _api(ui, "2.0/mlflow/runs/search", {"experiment_ids": [exp], "filter": "tags.stage = 'evaluate'",
                                                "order_by": ["attributes.start_time DESC"], "max_results": 1})
    run = runs["runs"][0]["info"]["run_id"]
    found = _api(ui, "3.0/mlflow/traces/search", {
        "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": exp}}],
        "filter": f"tags.`doceval.stage` = 'hallucinated_out_of_scope' AND metadata.`mlflow.sourceRun` = '{run}'",
        "max_results": 1,
    })  # fmt: skip
    if not found.get("traces"):
        raise SystemExit(f"run {run} has no out-of-scope entry with sources: nothing to show")
    return exp, run, found["traces"][0]["trace_id"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ui", default="http://127.0.0.1:5000")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "img")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    exp, run, trace = _targets(args.ui)
    page_url = f"{args.ui}/#/experiments/{exp}/runs/{run}/traces"
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(page_url)
        page.wait_for_timeout(3000)
        page.evaluate(f"localStorage.setItem('{_OPEN_ASSISTANT}', 'false')")
        page.reload()
        page.wait_for_timeout(5000)
        page.screenshot(path=str(args.out / "mlflow-run-traces.png"))
        page.goto(f"{page_url}?selectedEvaluationId={trace}")
        page.wait_for_timeout(5000)
        page.get_by_role("button", name="Assess").first.click()  # the trace's expectations and feedback
        page.wait_for_timeout(1500)
        page.screenshot(path=str(args.out / "mlflow-oos-trace.png"))
        browser.close()
    print(f"wrote {args.out / 'mlflow-run-traces.png'} and {args.out / 'mlflow-oos-trace.png'} (run {run}, {trace})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
