"""judges.stats' §10.8 predictions P1-P5: held, not held or undetermined, on hand-built waves; none
on simulated data, and none where a cell of its domain is missing or undecided.

Expected values are computed by hand in the comments, never by calling the code under test.
"""

import pytest

from judges.stats import evaluate_predictions, holm_contrasts, mcnemar_exact
from judges.stats.contrasts import paired_cells
from judges.stats.coverage import cell_key
from sabot.matrix import OPERATORS, TASKS as MATRIX_TASKS
from judges.stats.predictions import predict_p1, predict_p2, predict_p3, predict_p4, predict_p5
from tests.test_stats import cell


def waves(specs):
    """specs: (cell kwargs, wave-1 flags, wave-2 flags) -> (wave-1 rows, wave-2 rows)."""
    return [cell(**k, **f1) for k, f1, _ in specs], [cell(**k, **f2) for k, _, f2 in specs]


def predict(pid, wave1, wave2, **kw):
    """One prediction alone (evaluate_predictions runs all five; each Holm family costs statsmodels a
    full gc.collect(), slow in a process that has loaded dagster through conftest)."""
    pairs = paired_cells(wave1, wave2)
    run = {
        "P1": lambda: predict_p1(wave2),
        "P2": lambda: predict_p2(wave1, pairs),
        "P3": lambda: predict_p3(wave2),
        "P4": lambda: predict_p4(wave2, **kw),
        "P5": lambda: predict_p5(pairs),
    }[pid]
    result = run()
    assert result.id == pid
    return result


DETECTED, MISSED = {"detected_hard": True}, {"detected_hard": False}
TASKS = ("T1", "T2", "T3", "T4")


def spread(operator, w1, w2, seeds=(11, 12, 13), tasks=TASKS, **where):
    """One spec per (task, seed) for an operator: len(tasks) * len(seeds) cells."""
    return [(dict(task=t, operator=operator, seed=s, **where), w1, w2) for t in tasks for s in seeds]


UNION_ONLY = {"mapping": False, "detected_hard": True}  # an anchored flag the mapping missed
BOTH = {"mapping": True, "detected_hard": True}


def test_p1_held_when_the_union_lifts_materially_over_the_mapping_for_all_three():
    # 12 wave-2 cells each, union-only in all: c = 12, b = 0, p = 2/2^12, lift +100 pp >= 10 pp.
    _, w2 = waves(
        spread("O1", MISSED, UNION_ONLY) + spread("O3", MISSED, UNION_ONLY) + spread("O5", MISSED, UNION_ONLY)
    )
    p1 = predict("P1", [], w2)
    assert p1.status == "held", p1.evidence
    assert all(p1.tests[op].separated_rise for op in ("O1", "O3", "O5"))


def test_p1_not_held_when_an_operator_has_no_material_lift():
    # O5: union = mapping on all 40 cells: lift 0; Newcombe upper end 3.84/(40 + 3.84) = 8.8 pp < 10 pp.
    _, w2 = waves(
        spread("O1", MISSED, UNION_ONLY)
        + spread("O3", MISSED, UNION_ONLY)
        + spread("O5", MISSED, BOTH, seeds=range(11, 21))
    )
    p1 = predict("P1", [], w2)
    assert p1.status == "not held", p1.evidence
    assert p1.tests["O5"].hi < 0.10


def test_p1_reads_union_vs_mapping_on_wave2_cells_not_wave1_vs_wave2():
    """The constructed case: wave 1 detected nothing and wave 2's mapping detects everything, with no
    anchored flag adding anything. Wave 1 vs wave 2 rises separated for every operator (the old
    reading: held); the union does not lift over wave1_mapping at all (§10.8: not held)."""
    specs = sum((spread(op, MISSED, BOTH, seeds=range(11, 21)) for op in ("O1", "O3", "O5")), [])  # 40 cells each
    w1, w2 = waves(specs)
    wave1_vs_wave2 = {
        op: mcnemar_exact(
            [(a["detected_hard"], b["detected_hard"]) for _, a, b in paired_cells(w1, w2) if a["operator"] == op]
        )
        for op in ("O1", "O3", "O5")
    }
    assert all(c.separated_rise for c in holm_contrasts(wave1_vs_wave2).values())  # the other reading would say held
    p1 = predict("P1", w1, w2)
    assert p1.status == "not held", p1.evidence
    assert all(p1.tests[op].diff == 0 for op in ("O1", "O3", "O5"))


def test_p1_undetermined_with_a_small_lift_or_only_magentic_cells():
    # 3 union-only cells of 12 per operator: c = 3, p = 0.25 unresolved, interval spans 10 pp.
    specs = [
        (k, MISSED, UNION_ONLY if k["seed"] == 11 else MISSED)
        for op in ("O1", "O3", "O5")
        for k, _, _ in spread(op, MISSED, MISSED)
    ]
    _, w2 = waves(specs)
    assert predict("P1", [], w2).status == "undetermined"
    # Magentic-One (autogen/guardrail) has no reviewer: its lift must not count.
    magentic = dict(framework="autogen", config="guardrail")
    _, w2 = waves(sum((spread(op, MISSED, UNION_ONLY, **magentic) for op in ("O1", "O3", "O5")), []))
    p1 = predict("P1", [], w2)
    assert p1.status == "undetermined" and "no valid reviewer-bearing wave-2 cells" in p1.evidence


def test_p2_near_ceiling_is_read_at_the_registered_threshold_and_held_when_a_drop_is_ruled_out():
    # 8 groups x 5 seeds at 4/5 in wave 1 ("near ceiling" at 0.8), unchanged in wave 2: pooled n = 40,
    # b = c = 0, paired interval about [-8.8, +8.8] pp, inside the 10 pp margin -> held.
    specs = [
        (dict(task=t, operator=op, seed=s), DETECTED if s != 15 else MISSED, DETECTED if s != 15 else MISSED)
        for t in TASKS
        for op in ("O1", "O2")
        for s in range(11, 16)
    ]
    p2 = predict("P2", *waves(specs))
    assert p2.status == "held", p2.evidence
    assert "8 groups at or near ceiling" in p2.evidence and p2.tests["pooled"].n == 40
    # At a 0.9 threshold none of them is near ceiling.
    w1, w2 = waves(specs)
    assert predict_p2(w1, paired_cells(w1, w2), ceiling=0.9).status == "undetermined"


def test_p2_undetermined_when_too_few_cells_rule_out_a_drop():
    # One group at ceiling, 5 pairs, one fell: nothing separates, but a 10 pp drop is not ruled out.
    specs = [(dict(task="T1", operator="O1", seed=s), DETECTED, DETECTED if s != 15 else MISSED) for s in range(11, 16)]
    specs += [
        (dict(task="T2", operator="O1", seed=s), DETECTED if s == 11 else MISSED, DETECTED) for s in range(11, 16)
    ]
    p2 = predict("P2", *waves(specs))
    assert p2.status == "undetermined", p2.evidence
    assert "T1/O1" in p2.evidence and "T2/O1" not in p2.evidence  # T2 is not near ceiling


def test_p2_not_held_when_ceiling_cells_drop_separated():
    # 10 replicates all detected in wave 1, none in wave 2: b = 10, p = 2/1024 = 0.00195.
    specs = [(dict(task="T3", operator="O5", seed=s), DETECTED, MISSED) for s in range(1, 11)]
    assert predict("P2", *waves(specs)).status == "not held"


def test_p2_undetermined_without_ceiling_groups():
    specs = [(dict(task="T1", operator="O1", seed=s), DETECTED if s > 12 else MISSED, DETECTED) for s in range(11, 16)]
    assert predict("P2", *waves(specs)).status == "undetermined"


@pytest.mark.parametrize(
    "anchored, status",
    [((False, True, False), "held"), ((False, False, False), "not held"), ((), "undetermined")],
)
def test_p3_on_magentic_t1_anchored_flags(anchored, status):
    wave2 = [
        cell(framework="autogen", config="guardrail", seed=11 + i, flags_anchored=a) for i, a in enumerate(anchored)
    ]
    # Noise that must not count: a non-T1 Magentic cell, an excluded T1 cell, a langgraph T1 cell, all anchored.
    wave2 += [
        cell(framework="autogen", config="guardrail", task="T2", flags_anchored=True),
        cell(framework="autogen", config="guardrail", seed=20, status="excluded", flags_anchored=True),
        cell(flags_anchored=True),
    ]
    p3 = predict("P3", [], wave2)
    assert p3.status == status, p3.evidence
    if anchored:
        assert p3.tests["flags_anchored"].n == len(anchored)


def p4_specs(value_rises_in, absence_rises_in, tasks=("T1", "T2", "T3", "T4", "T5")):
    specs = []
    for t in tasks:
        for op in ("O1", "O3", "O5", "O2", "O6"):
            rises = t in (value_rises_in if op in ("O1", "O3", "O5") else absence_rises_in)
            specs += [(dict(task=t, operator=op, seed=s), MISSED, UNION_ONLY if rises else MISSED) for s in (11, 12)]
    return specs


def test_p4_held_when_value_lift_exceeds_absence_lift_in_every_task_resample():
    # O1/O3/O5 rise in every task, O2/O6 only in T1: difference 1 - 0.2 = +0.8, every resample >= 0.
    p4 = predict("P4", *waves(p4_specs(("T1", "T2", "T3", "T4", "T5"), ("T1",))))
    assert p4.status == "held", p4.evidence
    assert p4.tests["difference"].point == pytest.approx(0.8) and p4.tests["difference"].lo > 0


def test_p4_not_held_when_absences_lift_more():
    p4 = predict("P4", *waves(p4_specs(("T1",), ("T1", "T2", "T3", "T4", "T5"))))
    assert p4.status == "not held" and p4.tests["difference"].hi < 0


def test_p4_undetermined_when_the_interval_spans_zero_or_a_side_is_missing():
    p4 = predict("P4", *waves(p4_specs(("T1", "T2"), ("T3", "T4"))))
    assert p4.status == "undetermined" and p4.tests["difference"].lo < 0 < p4.tests["difference"].hi
    only_value = [s for s in p4_specs(("T1",), ()) if s[0]["operator"] in ("O1", "O3", "O5")]
    p4 = predict("P4", *waves(only_value))
    assert p4.status == "undetermined" and "O2/O6" in p4.evidence


def test_p4_is_deterministic_for_its_seed():
    w1, w2 = waves(p4_specs(("T1", "T2", "T3"), ("T4",)))
    a = predict("P4", w1, w2, seed=3).tests["difference"]
    assert a == predict("P4", w1, w2, seed=3).tests["difference"]


def test_p5_held_when_lucky_recoveries_become_detections():
    # 10 cells: recovered without detection in wave 1, detected (and recovered) in wave 2.
    # detection c = 10, rwd b = 10: p = 2/1024 each.
    specs = [(dict(seed=s), {"recovered": True}, {"recovered": True, "detected_hard": True}) for s in range(1, 11)]
    p5 = predict("P5", *waves(specs))
    assert p5.status == "held", p5.evidence
    assert p5.tests["rwd langgraph/default"].separated_fall


def test_p5_not_held_when_rwd_rises_where_detection_rose():
    rise = [(dict(seed=s), MISSED, DETECTED) for s in range(1, 11)]  # never recovered: rwd unchanged
    lucky = [(dict(seed=s), {}, {"recovered": True}) for s in range(11, 21)]  # rwd 0 -> 1, no detection
    p5 = predict("P5", *waves(rise + lucky))
    assert p5.status == "not held", p5.evidence


def test_p5_needs_the_fall_in_every_row_where_detection_rose():
    # langgraph/default: lucky recoveries become detections (rwd falls, b = 10).
    # crewai/default: detection rises too, but those cells never recovered: rwd 0 -> 0, unresolved.
    lucky = [(dict(seed=s), {"recovered": True}, {"recovered": True, "detected_hard": True}) for s in range(1, 11)]
    plain = [(dict(seed=s, framework="crewai"), MISSED, DETECTED) for s in range(1, 11)]
    p5 = predict("P5", *waves(lucky + plain))
    assert p5.status == "undetermined" and "unresolved in crewai/default" in p5.evidence
    assert p5.tests["detection crewai/default"].separated_rise


def test_p5_undetermined_when_nothing_separates():
    specs = [(dict(seed=s), {"recovered": True}, {"recovered": True, "detected_hard": True}) for s in (11, 12, 13)]
    assert predict("P5", *waves(specs)).status == "undetermined"


def test_p5_reads_recovery_without_detection_as_neither_hard_nor_soft():
    # Wave 1: recovered, no hard act, but the judge noticed: §2 counts no lucky recovery there, so rwd
    # cannot fall (0 -> 0) although the hard-only reading (recovered and not hard) falls 10 -> 0.
    specs = [
        (dict(seed=s), {"recovered": True, "noticed": True}, {"recovered": True, "detected_hard": True})
        for s in range(1, 11)
    ]
    p5 = predict("P5", *waves(specs))
    assert p5.status == "undetermined" and p5.tests["rwd langgraph/default"].n == 10, p5.evidence
    assert p5.tests["rwd langgraph/default"].b == 0
    # Cells no judge ruled on in either wave are left out of P5.
    unjudged = [
        (dict(seed=s), {"recovered": True, "noticed": None}, {"recovered": True, "detected_hard": True})
        for s in range(1, 11)
    ]
    assert "no cells valid and judged in both waves" in predict("P5", *waves(unjudged)).evidence


def keys(rows):
    return [cell_key(r) for r in rows]


def test_simulated_data_get_no_prediction_verdict_and_readings_carry_their_date(registry):
    _, w2 = waves(
        spread("O1", MISSED, UNION_ONLY) + spread("O3", MISSED, UNION_ONLY) + spread("O5", MISSED, UNION_ONLY)
    )
    doc = registry.doc("standard/predictions.v2.json")
    real = evaluate_predictions([], w2, doc, B=200, expected=([], keys(w2)))
    assert real[0].status == "held" and real[0].registered == "2026-12-05" and "materially" in real[0].reading
    simulated = evaluate_predictions([], w2, doc, simulated=True, B=200, expected=([], keys(w2)))
    assert {r.status for r in simulated} == {"no verdict (simulation)"}
    assert all("held" not in r.status for r in simulated)


def test_a_partial_corpus_leaves_every_prediction_undetermined_with_a_reason():
    wave1 = [
        cell(task=t, operator=op, seed=s, detected_hard=True) for t in TASKS for op in ("O1", "O2") for s in (11, 12)
    ]
    results = evaluate_predictions(wave1, [], expected=(keys(wave1), keys(wave1)))
    assert [r.id for r in results] == ["P1", "P2", "P3", "P4", "P5"]
    assert all(r.status == "undetermined" and r.evidence for r in results)
    assert all(r.statement for r in results)


SEEDS = (11, 12, 13, 14, 15)
VALUE_OPS = ("O1", "O3", "O5")


def one_row_corpus():
    """Wave 2 as the partial public corpus holds it: langgraph/default only, every cell valid, with a
    lift on O1/O3/O5 (union over mapping) and none on O2/O6, the shape that read "P4 held"."""
    lifted = lambda op: {"detected_hard": op in VALUE_OPS, "mapping": False}  # noqa: E731
    wave2 = [cell(task=t, operator=op, seed=s, **lifted(op)) for t in MATRIX_TASKS for op in OPERATORS for s in SEEDS]
    wave1 = [cell(task=t, operator=op, seed=s) for t in MATRIX_TASKS for op in OPERATORS for s in SEEDS]
    return wave1, wave2


def test_a_one_row_corpus_gives_every_prediction_undetermined_naming_the_missing_rows(registry):
    wave1, wave2 = one_row_corpus()
    expected = (registry.wave("public_wave1").cell_keys(), registry.wave("public_wave2").cell_keys())
    results = evaluate_predictions(wave1, wave2, B=200, expected=expected)
    assert [r.status for r in results] == ["undetermined"] * 5, [r.evidence for r in results]
    p4 = results[3]
    # P4's domain is the five reviewer-bearing rows: four of them absent, by name, with the cell count.
    # 5 operators x 5 tasks x 5 seeds = 125 cells a row, 5 rows = 625; 4 rows absent = 500.
    assert "rows absent: autogen/default, crewai/default, crewai/guardrail, langgraph/guardrail)" in p4.evidence
    assert "wave2: 500 of 625 cells not decided" in p4.evidence and p4.tests == {}
    assert "autogen/guardrail" in results[2].evidence  # P3 is defined on Magentic-One T1 alone
    # The same rows read as the whole matrix do give a verdict: the guard, not the data, withholds it.
    alone = evaluate_predictions(wave1, wave2, B=200, expected=(keys(wave1), keys(wave2)))
    assert alone[3].status == "held", alone[3].evidence


def test_an_undecided_cell_inside_the_domain_withholds_the_verdict():
    wave1, wave2 = one_row_corpus()
    wave2[0] = {**wave2[0], "status": "incomplete"}  # a run missing: T1/O1/s11
    p1 = evaluate_predictions(wave1, wave2, B=200, expected=(keys(wave1), keys(wave2)))[0]
    assert p1.status == "undetermined" and "cells undecided: langgraph/default 1 of 75" in p1.evidence
