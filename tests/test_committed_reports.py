"""The committed published reports are generated from the store and must not fall behind their data.

Regenerate after an intended change with `SABOT_UPDATE_SNAPSHOTS=1 pytest tests/test_committed_reports.py`.
"""

import os
from html.parser import HTMLParser

import pytest

from sabot.store.published import read_report
from sabot.store.db import connect
from tests.conftest import PROJECT

COMMITTED = PROJECT / "reports" / "public_wave2"


@pytest.mark.parametrize(
    ("name", "ruleset", "fmt"),
    [
        ("v0.2.0.md", "v0.2.0", "md"),
        ("v0.2.1.md", "v0.2.1", "md"),
        ("v0.2.1-2026-12-02.md", "v0.2.1-2026-12-02", "md"),
        ("index.html", "v0.2.0", "html"),
    ],
)
def test_committed_report_matches_its_data(scored_wave2, name, ruleset, fmt):
    with connect(scored_wave2.store_path, read_only=True) as con:
        current = read_report(con, "public_wave2", ruleset, fmt)
    path = COMMITTED / name
    if os.environ.get("SABOT_UPDATE_SNAPSHOTS") and (not path.exists() or path.read_text() != current):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(current)
        pytest.fail(f"{path} regenerated: review the diff, then run again without SABOT_UPDATE_SNAPSHOTS")
    assert path.read_text() == current, f"{path} is behind its data: regenerate it"


class TableCells(HTMLParser):
    """The text of every cell of one table (by id), row by row."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.depth, self.rows, self.caption, self._in_caption = table_id, 0, [], "", False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and (self.depth or dict(attrs).get("id") == self.table_id):
            self.depth += 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
        elif self.depth and tag == "caption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "table" and self.depth:
            self.depth -= 1
        elif tag == "caption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_caption:
            self.caption += data
        elif self.depth and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data.strip()


def test_the_html_report_carries_the_scoreboard_and_its_label(scored_wave2):
    """The report rendered from the scored corpus (not the committed copy): the scoreboard table's
    langgraph/default row reads the published union, and the table carries its label."""
    with connect(scored_wave2.store_path, read_only=True) as con:
        html = read_report(con, "public_wave2", "v0.2.0", "html")
    table = TableCells("scoreboard")
    table.feed(html)
    rows = {r[0]: r for r in table.rows if r}
    assert "langgraph/default" in rows, table.rows
    assert rows["langgraph/default"][1] == "138" and "55.1% (76/138)" in rows["langgraph/default"]
    assert "public corpus, re-scored" in table.caption.lower()
    assert "guardrails_mostly_work" not in html  # no band from one of six rows
