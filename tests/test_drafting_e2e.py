"""Issue 45's acceptance: a two-version library folder with one planted difference of each kind (renames, a
removal, an addition, a moved function, a changed default), once with a migration page and once without. The
drafter reports every planted difference and no other, every draft passes `golden validate --strict`,
`doceval eval` refuses the drafts without `--allow-drafts`, and the accepted set evaluates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from drafting_fixture import PLANTED, reported, write_library

from doceval.cli.main import main


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("migration", [False, True], ids=["no-migration-page", "migration-page"])
def test_draft_review_accept_evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migration: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    write_library(tmp_path / "shipit", migration)
    assert main(["params"]) == 0  # `docs --folder` reads params.yaml (chunk size)
    assert main(["docs", "--folder", "shipit", "--library", "shipit", "--out", "docs"]) == 0
    assert main(["golden", "draft", "--corpus", "docs", "--out", "draft.jsonl", "--seed", "1"]) == 0
    assert reported(_lines(Path("draft.differences.jsonl"))) == PLANTED
    assert main(["golden", "validate", "draft.jsonl", "--corpus", "docs", "--strict"]) == 0

    run = ["--split", "all", "--no-track", "--quiet", "retriever=bm25", "floors=zero", "paths.docs=docs"]
    assert main(["eval", "--golden", "draft.jsonl", "--output", "drafts.json", *run]) == 2
    assert not Path("drafts.json").exists()
    assert main(["eval", "--golden", "draft.jsonl", "--output", "drafts.json", "--allow-drafts", *run]) == 0

    assert main(["golden", "review", "draft.jsonl", "--out", "review.jsonl"]) == 0
    rows = _lines(Path("review.jsonl"))
    for row in rows:
        row.update(verdict="OK", reviewer="test")
    Path("review.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert (
        main(["golden", "accept", "draft.jsonl", "--verdicts", "review.jsonl", "--out", "accepted.jsonl"])
        == 0
    )
    assert main(["golden", "validate", "accepted.jsonl", "--corpus", "docs", "--strict"]) == 0
    assert main(["eval", "--golden", "accepted.jsonl", "--output", "accepted.json", *run]) == 0

    summary = json.loads(Path("accepted.json").read_text(encoding="utf-8"))
    drafted = json.loads(Path("drafts.json").read_text(encoding="utf-8"))
    assert summary["config"]["golden"]["drafts"] == 0 and summary["config"]["golden"]["allow_drafts"] is False
    assert drafted["config"]["golden"]["allow_drafts"] is True and drafted["config"]["golden"]["drafts"] > 0
    assert len(summary["entries"]) == len(drafted["entries"])  # every draft accepted: the same entries scored
    assert (
        summary["metrics"]["counts"]["n_in_scope"] > 0 and summary["metrics"]["counts"]["n_out_of_scope"] > 0
    )
