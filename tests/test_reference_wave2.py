"""The scorer, run through the asset graph, reproduces the published wave-2 langgraph/default row."""

from judges.hard.tables import WAVE2_COLUMNS, funnel_lines
from judges.hard.funnel import funnel
from sabot.store.db import connect
from sabot.store.verdicts import read_verdicts
from tests.conftest import WAVE2_DIR
from tests.published import markdown_rows, reference_rows

FIELDS = {  # reference field -> our column
    "excluded": "excluded",
    "wave1_mapping": "mapping",
    "flags_anchored": "flags_anchored",
    "flags_noticed": "flags_noticed",
    "union": "detected_hard",
    "reacted": "reacted",
    "recovered": "recovered",
    "flags": "flags",
}


def test_every_cell_matches_the_published_verdict(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        ours = {(r["task"], r["operator"], r["seed"]): r for r in read_verdicts(con, "public_wave2", "v0.2.0")}
    published = reference_rows(WAVE2_DIR / "wave2-rows.json", "langgraph", "default")
    assert len(published) == 150
    mismatches = [
        (key, ref_field, cell[ref_field], ours[key][our_field])
        for cell in published
        for key in [(cell["task"], cell["operator"], cell["seed"])]
        for ref_field, our_field in FIELDS.items()
        if ours[key][our_field] != cell[ref_field]
    ]
    assert mismatches == []
    assert sum(1 for r in ours.values() if r["status"] == "valid") == 138


def test_row_aggregate_equals_the_published_line(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        rows = read_verdicts(con, "public_wave2", "v0.2.0")
    ours = funnel_lines(funnel(rows, ("framework", "config")), WAVE2_COLUMNS)
    published = [r for r in markdown_rows(WAVE2_DIR / "WAVE2-RESULTS.md", "## Scoreboard") if r[0] == "langgraph/default"]
    # The published line also carries the wave-1 matrix column (third), which needs wave-1 traces.
    assert ours == [[p[0], p[1], *p[3:]] for p in published]
    assert ours[0][:2] == ["langgraph/default", "138"]
    assert [cell.split("(")[1].split("/")[0] for cell in ours[0][2:]] == ["26", "75", "76", "26", "101", "82"]


def test_the_twelve_unrun_cells_are_baseline_fail_not_missing(scored_wave2):
    found = scored_wave2.imported.scan
    assert found.missing == []
    assert len(found.not_run) == 12 and all("/T4/" in p and ("seed12" in p or "seed15" in p) for p in found.not_run)


def test_clean_baseline_base_rates_match_the_published_t3_slice(scored_wave2):
    """The anchor-collision review publishes T3 clean fires per row: langgraph/default is 0 of 5 for every operator."""
    import json

    from sabot.store.published import read_report

    with connect(scored_wave2.store_path, read_only=True) as con:
        board = json.loads(read_report(con, "public_wave2", "v0.2.0", "board.json"))
    assert board["baselines_scanned"] == 25
    assert board["base_rates_by_task"]["anchor"]["T3"] == [0, 30]  # 5 baselines x 6 operators, no fire
    # T1's source carries a natural 47.1-vs-41.7 discrepancy the reviewers quote: the registered anchors fire on clean runs.
    assert board["base_rates"]["anchor"]["O1"][0] > 0 and board["base_rates"]["anchor"]["O1"][1] == 25
