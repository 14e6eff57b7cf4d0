"""What the Dagster UI shows, read from the instance the UI reads: every cell answers "why?", every
number answers "which cells?", and nothing is cut without saying so.

Over the public wave-2 corpus scored through the asset graph (its langgraph/default row has traces).
"""

import re
from urllib.parse import parse_qs, unquote, urlparse

import dagster as dg
import pytest

from judges.hard.funnel import derived_counts, with_soft
from sabot.store.published import read_report
from sabot.store.db import connect
from sabot.store.judging import read_judgements
from sabot.store.lineage import number_cells
from sabot.store.verdicts import read_acts, read_verdicts
from sabot_assets.waves.cell_record import section2_outcome
from sabot_assets.waves.judging import located_judgements
from sabot_assets.waves.ui_text import shortened, summary
from tests.spans import span_keys

WAVE = "public_wave2"
CELL = "O1|langgraph.default.T2.s12"  # reject, retry_with_reason, reject on the mapping surface
OTHER = "O3|langgraph.default.T1.s11"
LINK = re.compile(r"\[(\d+)\]\(([^)]+)\)")


def _materialization(scored, asset: str, partition: str | None = None):
    key = dg.AssetKey([WAVE, asset])
    records = scored.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1
    ).records
    assert records, f"{asset} {partition or ''} was never materialized"
    return records[0].asset_materialization


def _table(value) -> list[dict]:
    import json

    return [json.loads(r) if isinstance(r, str) else dict(r.data) for r in value.records]


def test_a_cell_verdicts_partition_carries_its_own_verdict(scored_wave2, registry):
    operator, probe = CELL.split("|")
    meta = _materialization(scored_wave2, "cell_verdicts", CELL).metadata
    registered = registry.wave(WAVE).registered_readings
    with connect(scored_wave2.store_path, read_only=True) as con:
        rows = [
            r
            for r in read_verdicts(con, WAVE)
            if (r["operator"], r["probe"]) == (operator, probe) and r["ruleset"] in registered
        ]
        acts = read_acts(con, WAVE, "v0.2.0", operator, probe)
    table = _table(meta["verdicts by ruleset"].value)
    assert [t["ruleset"].split()[0] for t in table] == sorted(r["ruleset"] for r in rows)
    for t, r in zip(table, sorted(rows, key=lambda r: r["ruleset"])):
        assert t["verdict"] == ("valid" if r["status"] == "valid" else t["verdict"])
        assert (t["mapping act"], t["DETECTED_HARD"], t["reacted"], t["recovered"]) == tuple(
            "yes" if r[k] else "no" for k in ("mapping", "detected_hard", "reacted", "recovered")
        )
    deciding = _table(meta["deciding acts (v0.2.0)"].value)
    assert [(a["seq"], a["surface"], a["act"]) for a in deciding] == [
        (a["seq"], a["surface"], f"{a['act']} by {a['component']}") for a in acts
    ]
    assert [a["act"].split(" by ")[0] for a in deciding if a["surface"] == "mapping"] == [
        "reject",
        "retry_with_reason",
        "reject",
    ]
    assert all(
        k in meta for k in ("deciding acts (v0.1.3)", "deciding acts (v0.2.1)")
    )  # every reading, a table where it differs
    assert all(
        a["quote"].startswith((b["reason"] or "")[:40] if b["counted"] else f"({b['note']})")
        for a, b in zip(deciding, acts)
    )
    # A ruleset added after registration is not a row here: it is a partition of later_readings, linked.
    assert (
        "[v0.2.1-2026-12-02](" in meta["later readings"].value
        and "--ruleset v0.2.1-2026-12-02" in meta["later readings"].value
    )
    head = next(r for r in rows if r["ruleset"] == "v0.2.0")
    assert meta["fault run read"].value == f"run {head['fault_run_id']}, record sha256 {head['fault_sha256']}"
    assert meta["explain"].value == f"sabot explain {WAVE} --cell '{CELL}'"
    # Its own, not the batch's: another cell of the same run says something else.
    other = _materialization(scored_wave2, "cell_verdicts", OTHER).metadata
    assert other["fault run read"].value != meta["fault run read"].value


def test_a_later_reading_is_one_partition_naming_the_cells_it_reads_differently(scored_wave2):
    later = "v0.2.1-2026-12-02"  # names public_wave2 in `rescores`
    meta = _materialization(scored_wave2, "later_readings", later).metadata
    with connect(scored_wave2.store_path, read_only=True) as con:
        head = {(r["operator"], r["probe"]): r for r in read_verdicts(con, WAVE, "v0.2.0")}
        rows = read_verdicts(con, WAVE, later)
    assert meta["dagster/row_count"].value == len(rows) == len(head) > 0  # every settled cell, read once more
    verdict = lambda r: (r["status"], r["excluded"], bool(r["detected_hard"]))  # noqa: E731
    differs = {f"{op}|{probe}" for r in rows if verdict(r) != verdict(head[(op := r["operator"], probe := r["probe"])])}
    assert differs  # this reading scores the wave differently: the table below has something to show
    assert meta["read differently from the headline"].value == len(differs)
    listed = {re.match(r"\[([^\]]+)\]", t["cell"]).group(1) for t in _table(meta["cells read differently"].value)}
    assert listed == differs if len(differs) <= 50 else listed < differs


def test_a_judge_verdicts_partition_carries_its_judgement(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        judged = read_judgements(con, WAVE, variant=0)
    (operator, probe, _), verdict = next(
        (k, v)
        for k, v in sorted(judged.items())
        if v["status"] == "ok" and v["noticed"] and k[1].startswith("langgraph.default")
    )
    meta = _materialization(scored_wave2, "judge_verdicts", f"{operator}|{probe}").metadata
    assert meta["judged"].value == "yes"
    assert meta["variant 0: noticed"].value == "yes"
    assert meta["variant 0: component"].value == (verdict["by_which_component"] or "none named")
    assert meta["variant 0: quote"].value.startswith((verdict["evidence_quote"] or "none")[:60])


def test_every_number_links_exactly_its_cells(scored_wave2, registry):
    meta = _materialization(scored_wave2, "scoreboard").metadata
    text = meta["cells: langgraph/default"].value
    header = next(line for line in text.splitlines() if line.startswith("| operator"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    probes = [p.key for p in registry.wave(WAVE).probes()]
    linked = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("| O"):
            continue
        for column, cell in zip(columns[1:], cells[1:]):
            for count, url in LINK.findall(cell):
                query = parse_qs(urlparse(url).query)
                selected = span_keys(query["probe_range"][0], probes)
                assert int(count) == len(selected) and query["operator_range"] == [cells[0]]
                linked.setdefault(column, set()).update(f"{cells[0]}|{p}" for p in selected)
    with connect(scored_wave2.store_path, read_only=True) as con:
        numerator, denominator = number_cells(
            con, WAVE, "v0.2.0", "framework_config", "langgraph/default", "DETECTED_HARD"
        )
    assert (len(numerator), len(denominator)) == (76, 138)  # the published 55.1% (76/138)
    assert linked["valid"] == {f"{c['operator']}|{c['probe']}" for c in denominator}
    assert linked["DETECTED_HARD"] == {f"{c['operator']}|{c['probe']}" for c in numerator}
    assert "sabot explain public_wave2 framework_config langgraph/default" in text
    # The published rate is one link: a page listing every cell it counts, across operators (and its total too).
    reports = scored_wave2.store_path.parent / "reports"
    board = meta["scoreboard"].value.splitlines()
    groups = [c.strip() for c in board[0].strip("|").split("|")]
    rate = [
        c.strip() for c in next(line for line in board if line.startswith("| DETECTED_HARD |")).strip("|").split("|")
    ][groups.index("langgraph/default")]
    shown, address = re.fullmatch(r"\[([^\]]+)\]\(([^)]+)\)", rate).groups()
    assert shown == "55.1% (76/138)" and urlparse(address).scheme == "http"
    listed = re.findall(
        r">(O\d\|[^<]+)</a>", (reports / unquote(urlparse(address).path).removeprefix("/reports/")).read_text()
    )
    assert sorted(listed) == sorted(f"{c['operator']}|{c['probe']}" for c in numerator)
    total = next(line for line in text.splitlines() if line.startswith("| all"))
    assert f"[{len(numerator)}](" in total and f"[{len(denominator)}](" in total
    # The soft tier's undecided cells are named, with why (the reference judged only the union-missed cells).
    assert meta["undecided cells"].value >= 0
    assert (
        "none" in meta["undecided cells (which, and why)"].value
        or "corpus carries no judge verdict" in meta["undecided cells (which, and why)"].value
    )


def test_the_full_report_is_reachable_and_its_summary_says_it_is_shortened(scored_wave2):
    meta = _materialization(scored_wave2, "report").metadata
    with connect(scored_wave2.store_path, read_only=True) as con:
        html = read_report(con, WAVE, "v0.2.0", "html")
        markdown = read_report(con, WAVE, "v0.2.0", "md")
    reports = scored_wave2.store_path.parent / "reports"
    for name, body in (("report (HTML)", html), ("report v0.2.0", markdown)):
        url = urlparse(meta[name].value)
        assert url.scheme == "http" and url.path.startswith("/reports/")  # the file server beside the UI, never file://
        assert (
            reports / unquote(url.path.removeprefix("/reports/"))
        ).read_text() == body  # every character of it, one click away
    shown = meta["headline report"].value
    assert len(markdown) > 6000, "this corpus's report is long enough to need a summary"
    assert len(shown) < len(markdown)
    marker = re.search(
        r"\*\*\[shortened for the UI: (\d+) of (\d+) characters shown, (\d+) more section\(s\); the full text: \[the full report\]\((http://[^)]+/reports/[^)]+)\)\]\*\*",
        shown,
    )
    assert marker, shown[-400:]
    kept = shown[: int(marker.group(1))].rstrip()
    assert int(marker.group(2)) == len(markdown) and markdown.startswith(kept)
    assert markdown[len(kept) :].lstrip("\n").startswith("## ")  # cut where a section starts, never inside a table


@pytest.mark.parametrize("limit", [5, 50])
def test_a_shortened_value_says_so_and_where_the_rest_is(limit):
    text = "x" * 120
    cut = shortened(text, limit, "sabot explain W --cell K")
    assert (
        cut.startswith("x" * limit)
        and f"[shortened: {limit} of 120 characters; all of it: sabot explain W --cell K]" in cut
    )
    assert shortened("short", limit, "anywhere") == "short"


def test_a_summary_cuts_at_a_section_never_inside_a_table_row():
    doc = "# T\n\nintro\n\n## A\n\n| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 50 + "\n## B\n\n" + "| 3 | 4 |\n" * 400
    short = summary(doc, "[full](file:///r.md)", limit=1000)
    kept = short.split("\n\n**[shortened")[0]
    assert doc.startswith(kept) and "## B" not in kept and kept.endswith("| 1 | 2 |")
    assert f"of {len(doc)} characters shown, 1 more section(s); the full text: [full](file:///r.md)]" in short
    assert summary("tiny", "x") == "tiny"


def test_registering_a_wave_records_its_carved_out_cells_as_carved_out(registry, tmp_path):
    from dagster_duckdb import DuckDBResource

    from sabot.matrix import Cell
    from sabot_assets.definitions import build_definitions

    defs = build_definitions(registry, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    wave = registry.wave("demo")
    carved = [Cell(op, p).key for p in wave.probes() for op in wave.operators if wave.is_carved_out(Cell(op, p))]
    fault_runs = dg.AssetKey(["demo", "fault_runs"])
    with dg.instance_for_test() as instance:
        assert dg.materialize(
            defs.assets,
            selection=[dg.AssetKey(["demo", "preregistration"])],
            instance=instance,
            resources=defs.resources,
        ).success
        status = instance.get_status_by_partition(fault_runs, carved, defs.get_assets_def(fault_runs).partitions_def)
        assert carved and set(status.values()) == {
            dg.AssetPartitionStatus.MATERIALIZED
        }  # from the start, never "missing"
        meta = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=fault_runs, asset_partitions=carved[:1]), limit=1
        ).records[0]
        assert meta.asset_materialization.metadata["outcome"].value == "carved out"
        others = [k for k in instance.get_materialized_partitions(fault_runs) if k not in carved]
        assert others == []  # nothing else was recorded as run
        count = len(instance.fetch_materializations(fault_runs, limit=10_000).records)
        assert dg.materialize(
            defs.assets,
            selection=[dg.AssetKey(["demo", "preregistration"])],
            instance=instance,
            resources=defs.resources,
        ).success
        assert (
            len(instance.fetch_materializations(fault_runs, limit=10_000).records) == count == len(carved)
        )  # registering again adds nothing


def test_rerunning_a_cell_is_discoverable_in_the_ui(registry, tmp_path):
    from dagster_duckdb import DuckDBResource

    from sabot_assets.constants import RERUN_TAG
    from sabot_assets.definitions import build_definitions

    defs = build_definitions(registry, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    for asset in ("fault_runs", "baseline_runs"):
        job = defs.resolve_job_def(f"demo__rerun_{asset}")
        assert job.tags.get(RERUN_TAG) == "true" and job.partitions_def is not None
        assert {k.path[-1] for k in job.asset_layer.executable_asset_keys} == {asset}
        spec = next(s for s in defs.resolve_all_asset_specs() if s.key == dg.AssetKey(["demo", asset]))
        assert f"demo__rerun_{asset}" in spec.description and f"{RERUN_TAG}=true" in spec.description


def test_a_cell_partition_is_a_complete_record(scored_wave2):
    """The §2 outcome as the board counts it, the tier that decided it, the judge's ruling linked to
    its partition, and the baseline and fault-run partitions, on the cell's own partition."""
    with connect(scored_wave2.store_path, read_only=True) as con:
        rows = read_verdicts(con, WAVE, "v0.2.0")
        judged = located_judgements(con, WAVE)
    scored = [r for r in with_soft(rows, judged) if r["status"] == "valid"]
    hard = next(r for r in scored if r["detected_hard"])
    soft = next(
        r for r in scored if not r["detected_hard"] and (r["operator"], r["probe"]) in judged
    )  # a cell the judge decided
    counts = derived_counts(soft)
    expected_soft = (
        "MISSED" if counts["missed"] else "DETECTED_SOFT (judge only)" if counts["detected_soft"] else "undecided"
    )
    for row, outcome, tier in ((hard, "DETECTED_HARD", "hard:"), (soft, expected_soft, "")):
        key = f"{row['operator']}|{row['probe']}"
        meta = _materialization(scored_wave2, "cell_verdicts", key).metadata
        assert list(meta)[:3] == ["verdict", "§2 outcome (v0.2.0)", "decided by tier"]
        assert meta["§2 outcome (v0.2.0)"].value == outcome and meta["decided by tier"].value.startswith(tier)
        for name, asset, partition in (
            ("judge verdict partition", "judge_verdicts", key),
            ("baseline partition", "baseline_runs", row["probe"]),
            ("fault run partition", "fault_runs", key),
        ):
            url = urlparse(meta[name].value)
            assert url.path == f"/assets/{WAVE}/{asset}" and parse_qs(url.query)["partition"] == [partition]
    judge = judged[(soft["operator"], soft["probe"])]
    meta = _materialization(scored_wave2, "cell_verdicts", f"{soft['operator']}|{soft['probe']}").metadata
    if judge["status"] == "ok":
        assert meta["judge ruling"].value.startswith("noticed" if judge["noticed"] else "not noticed")
        assert meta["judge quote"].value.startswith((judge["evidence_quote"] or "none")[:40])
    else:
        assert meta["judge ruling"].value.startswith("judge exclusion")


@pytest.mark.parametrize(
    "row, judgement, outcome, tier",
    [
        ({"status": "excluded"}, None, "not counted (outside the denominator)", "none: an exclusion"),
        ({"status": "valid", "detected_hard": False}, None, "undecided", "soft tier: not judged yet"),
        (
            {"status": "valid", "detected_hard": False},
            {"status": "judge_error", "reason": "unparseable reply", "noticed": None},
            "undecided",
            "soft tier: judge exclusion (unparseable reply)",
        ),
        (
            {"status": "valid", "detected_hard": False},
            {"status": "ok", "noticed": True},
            "DETECTED_SOFT (judge only)",
            "soft:",
        ),
        (
            {"status": "valid", "detected_hard": False},
            {"status": "ok", "noticed": True, "quote_location": "before_injection"},
            "undecided",
            "soft tier: the judge's notice quotes text written before",
        ),
        ({"status": "valid", "detected_hard": False}, {"status": "ok", "noticed": False}, "MISSED", "both:"),
        ({"status": "valid", "detected_hard": True}, {"status": "ok", "noticed": False}, "DETECTED_HARD", "hard:"),
    ],
)
def test_a_cells_outcome_is_the_one_the_funnel_counts(row, judgement, outcome, tier):
    from judges.hard.funnel import FUNNEL_COLUMNS

    row = {"operator": "O1", "probe": "langgraph.default.T1.s11", **{c: False for c in FUNNEL_COLUMNS}, **row}
    assert section2_outcome(row, judgement)[0] == outcome and section2_outcome(row, judgement)[1].startswith(tier)


def test_a_cells_verdict_is_a_check_on_its_own_partition(scored_wave2):
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

    key = dg.AssetCheckKey(dg.AssetKey([WAVE, "cell_verdicts"]), "verdict")
    history = scored_wave2.instance.event_log_storage.get_asset_check_execution_history(key, limit=10_000)
    by_partition = {r.event.dagster_event.event_specific_data.partition: r for r in history if r.event}
    meta = _materialization(scored_wave2, "cell_verdicts", CELL).metadata
    assert by_partition[CELL].status == AssetCheckExecutionRecordStatus.SUCCEEDED
    evaluation = by_partition[CELL].event.dagster_event.event_specific_data
    assert evaluation.description == f"{meta['verdict'].value}; §2 outcome: {meta['§2 outcome (v0.2.0)'].value}"
    assert OTHER in by_partition  # one evaluation per cell, not one per run
