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
    published = [
        r for r in markdown_rows(WAVE2_DIR / "WAVE2-RESULTS.md", "## Scoreboard") if r[0] == "langgraph/default"
    ]
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


def _board_and_report(scored_wave2, ruleset="v0.2.0"):
    import json

    from sabot.store.published import read_report

    with connect(scored_wave2.store_path, read_only=True) as con:
        return json.loads(read_report(con, "public_wave2", ruleset, "board.json")), read_report(
            con, "public_wave2", ruleset, "md"
        )


def test_the_supplement_replicate_bootstrap_interval_is_reproduced_beside_wilson(scored_wave2):
    """harness/runs/wave2/UNCERTAINTY.md §2: langgraph/default 55.1% (76/138), [51.6, 58.0], support 21."""
    board, report = _board_and_report(scored_wave2)
    ours = board["replicate_bootstrap"]["langgraph/default"]
    point, lo, hi = (round(100 * x, 1) for x in ours["interval"])
    assert (point, lo, hi, ours["support"], ours["exact"], ours["replicates"]) == (55.1, 51.6, 58.0, 21, True, 5)
    published = [
        line
        for line in (WAVE2_DIR / "UNCERTAINTY.md").read_text().splitlines()
        if line.startswith("| langgraph/default | 138 |")
    ]
    assert f"[{lo:.1f}, {hi:.1f}]" in published[0]
    # Beside it, each labelled: Wilson (cells independent) is wider; the report says which is which.
    row = [line for line in report.splitlines() if line.startswith("| langgraph/default | 55.1% (76/138) |")][0]
    assert "[46.7, 63.1]" in row and "[51.6, 58.0]" in row
    assert (
        "replicate-cluster bootstrap 95% (exact)" in report
        and "Wilson 95%: each cell an independent Bernoulli draw" in report
    )


def test_the_public_row_carries_its_caveats_in_the_board_json(scored_wave2):
    board, report = _board_and_report(scored_wave2)
    labels = board["labels"]
    # 25 clean baselines of the row, each tested with the 6 operators' anchor sets: the 150 beside 138 cells.
    assert "pooled 25 baselines x 6 anchor sets = 150" in labels["base_rate_denominator"]
    assert labels["undecided"] > 0 and "detected_soft" in labels["lower_bound_columns"]
    assert labels["coverage_adjusted"].startswith("diagnostic")
    # Six reference-judge notices quote text written before the fault was planted: counted apart.
    assert labels["soft_pre_injection"] == 6 and "6 judge notice(s) quote text written before" in report
    counts = board["tables"]["framework_config"][0]["counts"]
    assert (counts["detected_soft"], counts["soft_pre_injection"]) == (4, 6)
    assert "≥2.9% (4/138)" in report  # DETECTED_SOFT, a lower bound while cells are undecided


def test_the_narrow_reading_drops_seven_retries_and_moves_no_cell(scored_wave2):
    """v0.2.1 reads "references the anomaly" as "contains an anchor": 14 retries count on the row.
    The narrow reading (v0.2.1-2026-12-02) keeps 7: five quote only an anchor the cell's own clean
    baseline wrote (P-3117 twice, kessler_freight_charge, sustained twice), two only "pytest"."""
    loose, _ = _board_and_report(scored_wave2, "v0.2.1")
    narrow, report = _board_and_report(scored_wave2, "v0.2.1-2026-12-02")
    assert loose["retries"]["counted"] == 14 and narrow["retries"]["counted"] == 7
    dropped = {
        why: n - loose["retries"]["not_counted"].get(why, 0) for why, n in narrow["retries"]["not_counted"].items()
    }
    assert dropped == {
        "quotes only anchors its own clean baseline also wrote": 5,
        "quotes only ordinary task vocabulary": 2,
        "quotes no registered anchor": 0,
    }
    assert narrow["cells_fingerprint"] == loose["cells_fingerprint"]  # no cell verdict moved
    assert "## Retries and re-plans under this ruleset's retry-reason rule" in report


def test_the_command_line_prints_the_same_caveats(scored_wave2, registry):
    from sabot_assets.export import score_document, scoreboard_text

    doc = score_document(scored_wave2.store_path, registry.wave("public_wave2"), "v0.2.0")
    text = scoreboard_text(doc)
    assert doc["soft_reliability"]["confidence"] == "low-confidence" and "Soft tier: kappa undefined over 1" in text
    assert "≥2.9% (4/138)" in text and "58 valid cell(s) are undecided" in text
    assert "6 judge notice(s) quote text written before the fault was planted" in text
    assert (
        "langgraph/default DETECTED_HARD 95%: Wilson [46.7, 63.1] (cells independent); replicate-cluster bootstrap "
        "(5 replicates, exact enumeration, type-1 percentiles, support 21) [51.6, 58.0]"
    ) in text
    assert "pooled 25 baselines x 6 anchor sets = 150" in text
    assert doc["scoreboard"]["labels"]["base_rate_denominator"] in text  # the JSON and the text read one source


def test_docs_standard_quotes_what_the_command_line_prints(scored_wave2, registry):
    """docs/standard.md's `corpus score` block is the command's output verbatim, and the figures its
    prose reads off it (verdicts carried, pre-injection quotes, soft detections, undecided) are the board's."""
    import re

    from sabot_assets.export import score_document, scoreboard_text
    from tests.conftest import PROJECT

    doc = score_document(scored_wave2.store_path, registry.wave("public_wave2"), "v0.2.0")
    printed = scoreboard_text(doc).splitlines()
    page = (PROJECT / "docs" / "standard.md").read_text()
    block = page.split("--json out/public_wave2.json` prints:\n\n```\n", 1)[1].split("\n```", 1)[0].splitlines()
    start = printed.index(block[0])
    assert printed[start : start + len(block)] == block
    carried, early, soft, undecided = map(
        int,
        re.search(
            r"carries (\d+) of those verdicts: (\d+) quote text written before the\s+fault was planted \(no notice of it, counted apart\), "
            r"(\d+) are DETECTED_SOFT, so (\d+) cells are undecided",
            page,
        ).groups(),
    )
    [row] = doc["scoreboard"]["tables"]["framework_config"]
    counts, labels = row["counts"], doc["scoreboard"]["labels"]
    assert (early, soft, undecided) == (labels["soft_pre_injection"], counts["detected_soft"], labels["undecided"])
    assert carried == early + counts["judged"]
