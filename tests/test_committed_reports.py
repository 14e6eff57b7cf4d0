"""The committed published reports are generated from the store and must not fall behind their data.

Regenerate after an intended change with `SABOT_UPDATE_SNAPSHOTS=1 pytest tests/test_committed_reports.py`.
"""

import os

import pytest

from sabot.store.board import read_report
from sabot.store.db import connect
from tests.conftest import PROJECT

COMMITTED = PROJECT / "reports" / "public_wave2"


@pytest.mark.parametrize(("name", "ruleset", "fmt"), [("v0.2.0.md", "v0.2.0", "md"), ("v0.2.1.md", "v0.2.1", "md"), ("index.html", "v0.2.0", "html")])
def test_committed_report_matches_its_data(scored_wave2, name, ruleset, fmt):
    with connect(scored_wave2.store_path, read_only=True) as con:
        current = read_report(con, "public_wave2", ruleset, fmt)
    path = COMMITTED / name
    if os.environ.get("SABOT_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(current)
    assert path.read_text() == current, f"{path} is behind its data: regenerate it"


def test_the_html_report_carries_the_scoreboard_and_its_label(scored_wave2):
    html = (COMMITTED / "index.html").read_text()
    assert 'id="scoreboard"' in html and "langgraph/default" in html and "55.1% (76/138)" in html
    assert "public corpus, re-scored" in html.lower() or "PUBLIC CORPUS, RE-SCORED" in html
