"""Wave-1 slices: Magentic-One stall re-plans, partial cells, and the crewai T4 baseline failures."""

import json

from judges.hard.funnel import exclusion_appendix
from sabot.store.db import connect
from sabot.store.verdicts import read_acts, read_verdicts
from tests.conftest import CORPUS
from tests.published import markdown_rows

MATRIX = "harness/runs/matrix"


def verdicts(scored, ruleset):
    with connect(scored.store_path, read_only=True) as con:
        return {
            (r["framework"], r["config"], r["task"], r["operator"], r["seed"]): r
            for r in read_verdicts(con, "public_wave1", ruleset)
        }


def acts(scored, ruleset, operator, probe):
    with connect(scored.store_path, read_only=True) as con:
        return read_acts(con, "public_wave1", ruleset, operator, probe)


def test_stall_replans_count_under_v013_and_not_under_v021(scored_wave1):
    old, new = verdicts(scored_wave1, "v0.1.3"), verdicts(scored_wave1, "v0.2.1")
    for seed in (11, 13):
        key = ("autogen", "guardrail", "T3", "O1", seed)
        probe = f"autogen.guardrail.T3.s{seed}"
        replans_old = [a for a in acts(scored_wave1, "v0.1.3", "O1", probe) if a["act"] == "retry_with_reason"]
        replans_new = [a for a in acts(scored_wave1, "v0.2.1", "O1", probe) if a["act"] == "retry_with_reason"]
        assert replans_old and all(a["component"] == "MagenticOneOrchestrator" and a["counted"] for a in replans_old)
        assert old[key]["detected_hard"] and old[key]["mapping"] and old[key]["reacted"]
        assert [a["seq"] for a in replans_new] == [a["seq"] for a in replans_old]
        assert not any(a["counted"] for a in replans_new)
        assert all("does not reference the planted anomaly" in a["note"] for a in replans_new)
        assert not new[key]["detected_hard"] and not new[key]["reacted"]


def test_cells_without_their_baseline_are_reported_missing(scored_wave1):
    cells = verdicts(scored_wave1, "v0.1.3")
    seed13 = cells[("autogen", "guardrail", "T3", "O1", 13)]
    assert seed13["status"] == "incomplete"
    assert seed13["missing"] == [f"{MATRIX}/autogen/guardrail/T3/baseline/seed13/baseline-runresult.json"]
    assert cells[("autogen", "guardrail", "T3", "O1", 11)]["status"] == "valid"
    missing = scored_wave1.imported.scan.missing
    assert len(missing) == 20  # exactly the files the sample's ATTRIBUTION.md lists as not copied
    assert f"{MATRIX}/autogen/guardrail/T3/O2/seed11/runresult.json" in missing
    assert {f"{MATRIX}/autogen/guardrail/T3/baseline/seed{s}/baseline-runresult.json" for s in (12, 13, 15)} <= set(
        missing
    )


def test_crewai_t4_baseline_failures_match_the_exclusion_appendix(scored_wave1):
    rows = [
        r
        for r in verdicts(scored_wave1, "v0.1.3").values()
        if (r["framework"], r["config"], r["task"]) == ("crewai", "guardrail", "T4")
    ]
    ours = [list(map(str, e)) for e in exclusion_appendix(rows)]
    published = [
        r
        for r in markdown_rows(CORPUS / "harness" / "RESULTS.md", "## Exclusion appendix")
        if r[:3] == ["crewai", "guardrail", "T4"]
    ]
    assert len(published) == 6 and ours == published  # four of five seeds per operator
    assert sorted(r["seed"] for r in rows if r["status"] == "valid" and r["operator"] == "O1") == [12]


def test_published_cell_verdicts_are_reproduced_under_v013(scored_wave1, scored_wave2):
    """Every published cellverdict.json whose run is in the sample: same acts, exclusion and funnel."""
    checked = 0
    for scored, wave, corpus_dir in ((scored_wave1, "public_wave1", "matrix"), (scored_wave2, "public_wave2", "wave2")):
        ours = {(r["operator"], r["probe"]): r for r in read_all(scored, wave)}
        for path in sorted((CORPUS / "harness" / "runs" / corpus_dir).rglob("cellverdict.json")):
            if not (path.parent / "runresult.json").exists():
                continue
            fw, cfg, task, op, seed_dir = path.parts[-6:-1]
            probe = f"{fw}.{cfg}.{task}.s{seed_dir[4:]}"
            published = json.loads(path.read_text())
            with connect(scored.store_path, read_only=True) as con:
                our_acts = [
                    {k: a[k] for k in ("act", "component", "reason", "seq")}
                    for a in read_acts(con, wave, "v0.1.3", op, probe)
                    if a["surface"] == "mapping"
                ]
            row = ours[(op, probe)]
            assert our_acts == published["acts"], path
            assert (row["excluded"], row["detected_hard"], row["reacted"], row["recovered"]) == (
                published["excluded"],
                published["detected_hard"],
                published["reacted"],
                published["recovered"],
            ), path
            checked += 1
    assert checked == 30


def read_all(scored, wave):
    with connect(scored.store_path, read_only=True) as con:
        return read_verdicts(con, wave, "v0.1.3")
