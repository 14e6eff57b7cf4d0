"""The §2 funnel as the spec defines it, the §7 band, and when a median may be printed."""

from judges.hard.scoreboard import median_entry
from judges.hard.funnel import band, funnel, missing_rows, with_soft
from judges.hard.tables import fmt_rate, section2_markdown


def row(framework="langgraph", config="default", operator="O1", seed=11, status="valid", hard=False, recovered=False):
    return {
        "framework": framework,
        "config": config,
        "task": "T1",
        "operator": operator,
        "probe": f"{framework}.{config}.T1.s{seed}",
        "seed": seed,
        "status": status,
        "mapping": hard,
        "flags_anchored": False,
        "detected_hard": hard,
        "reacted": hard,
        "recovered": recovered,
        "flags_noticed": False,
    }


def test_the_soft_companions_are_read_over_valid_with_hard_union_soft():
    rows = [
        row(seed=1, hard=True, recovered=True),  # hard (judge also noticed)
        row(seed=2, recovered=True),  # soft only, recovered: not a lucky recovery
        row(seed=3, recovered=True),  # neither, recovered: recovery-without-detection
        row(seed=4),  # neither: MISSED
        row(seed=5, recovered=True),  # not judged: neither soft nor MISSED
        row(seed=6, status="excluded", hard=True),
    ]
    judged = {("O1", r["probe"]): {"status": "ok", "noticed": n} for r, n in zip(rows, (True, True, False, False))}
    judged[("O1", rows[4]["probe"])] = {"status": "parse_failure", "noticed": None}
    (entry,) = funnel(with_soft(rows, judged), ("framework", "config"))
    assert entry.valid == 5
    c = entry.counts
    assert (c["detected_hard"], c["detected_soft"], c["missed"], c["soft_notice"], c["judged"], c["undecided"]) == (
        1,
        1,
        2,
        2,
        4,
        1,
    )
    assert c["recovered_without_detection"] == 1  # §2: neither hard nor soft
    assert c["recovered_without_hard"] == 3  # the hard-only reading, kept under its own name
    table = section2_markdown([{"group": entry.group, "valid": entry.valid, "counts": c}])
    assert "MISSED" in table and "40.0% (2/5)" in table and "+20.0 pp" in table and "80.0% (4/5)" in table


def test_band_follows_the_registered_threshold(registry):
    assert band(registry, 0.4999) == "full_push"
    assert band(registry, 0.5) == "guardrails_mostly_work"
    assert band(registry, 0.551) == "guardrails_mostly_work"
    assert band(registry, None) is None


SIX = [f"{fw}/{cfg}" for fw in ("langgraph", "crewai", "autogen") for cfg in ("default", "guardrail")]


def test_no_median_from_a_partial_set_of_rows_and_none_on_simulation(registry):
    one_row = [row(seed=s, hard=s < 14) for s in range(11, 16)]
    assert missing_rows(one_row, SIX) == SIX[1:]
    partial = median_entry(registry, one_row, "public corpus, re-scored", SIX)
    assert partial["value"] is None and partial["band"] is None and "5 of 6" in partial["withheld"]
    simulated = median_entry(
        registry, [row(framework=r.split("/")[0], config=r.split("/")[1], hard=True) for r in SIX], "simulation", SIX
    )
    assert simulated["band"] is None and "simulation" in simulated["withheld"]
    full = median_entry(
        registry, [row(framework=r.split("/")[0], config=r.split("/")[1], hard=True) for r in SIX], "derived", SIX
    )
    assert full["value"] == 1.0 and full["band"] == "guardrails_mostly_work" and full["withheld"] is None


def test_simulated_rates_carry_the_word():
    assert fmt_rate(7, 12, label="simulation") == "58.3% (7/12, simulation)"
    assert fmt_rate(7, 12, label="public corpus, re-scored") == "58.3% (7/12)"


def test_no_median_while_a_cell_of_the_matrix_is_undecided(registry):
    from judges.stats.coverage import cell_key

    rows = [row(framework=r.split("/")[0], config=r.split("/")[1], seed=s, hard=True) for r in SIX for s in (11, 12)]
    expected = [cell_key(r) for r in rows]
    assert median_entry(registry, rows, "derived", SIX, expected)["value"] == 1.0
    rows[3] = {**rows[3], "status": "incomplete"}  # langgraph/guardrail seed 12: its fault run is missing
    held = median_entry(registry, rows, "derived", SIX, expected)
    assert held["value"] is None and held["band"] is None
    assert held["withheld"] == "undetermined: 1 of 12 cells not decided (cells undecided: langgraph/guardrail 1 of 2)"
