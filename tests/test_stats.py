"""judges.stats: Wilson, cluster bootstrap, exact paired contrasts, Holm, kappa, §10.8 predictions.

Expected values are computed by hand in the comments, never by calling the code under test.
"""

import math

import pytest

from judges.stats import (
    cluster_bootstrap,
    cohen_kappa,
    evaluate_predictions,
    holm,
    holm_contrasts,
    kappa_confidence,
    mcnemar_exact,
    newcombe_paired_ci,
    paired_rows,
    rate_with_ci,
    wilson,
)
from judges.stats.contrasts import paired_cells
from judges.stats.coverage import cell_key
from sabot.matrix import OPERATORS, TASKS as MATRIX_TASKS
from judges.stats.predictions import predict_p1, predict_p2, predict_p3, predict_p4, predict_p5

FLAGS = ("mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")


def cell(task="T1", operator="O1", seed=11, framework="langgraph", config="default", status="valid", noticed=False, **flags):
    row = {"framework": framework, "config": config, "task": task, "operator": operator, "seed": seed, "status": status, "noticed": noticed}
    row.update({f: False for f in FLAGS})
    row["clean_fire"] = False  # the anchors never fire on the cell's clean baseline (P1/P4's clean-baseline term)
    row.update(flags)
    return row


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


# ---------------------------------------------------------------- Wilson

# Wilson: centre (x + z^2/2)/(n + z^2), half-width z*sqrt(n*p(1-p) + z^2/4)/(n + z^2); z = 1.959964, z^2 = 3.841459.
# 76/138: centre 77.920729/141.841459 = 0.549351, half 1.959964*sqrt(34.144928 + 0.960365)/141.841459 = 0.081871
#         -> [0.467480, 0.631222]
# 0/5:    [0, z^2/(5 + z^2)] = [0, 3.841459/8.841459] = [0, 0.434482]
# 5/5:    [5/(5 + z^2), 1] = [5/8.841459, 1] = [0.565518, 1]
@pytest.mark.parametrize(
    "x, n, lo, hi",
    [(76, 138, 0.467480, 0.631222), (0, 5, 0.0, 0.434482), (5, 5, 0.565518, 1.0)],
)
def test_wilson_matches_hand_computed_bounds(x, n, lo, hi):
    got = wilson(x, n)
    assert got[0] == pytest.approx(lo, abs=5e-5) and got[1] == pytest.approx(hi, abs=5e-5)


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.01])
def test_wilson_returns_statsmodels_floats_exactly(alpha):
    from statsmodels.stats.proportion import proportion_confint

    for n in range(1, 301):
        for x in range(n + 1):
            lo, hi = proportion_confint(x, n, alpha=alpha, method="wilson")
            assert wilson(x, n, alpha) == (float(lo), float(hi)), (x, n, alpha)


def test_wilson_empty_denominator_is_nan_and_bad_counts_raise():
    assert all(math.isnan(v) for v in wilson(0, 0))
    with pytest.raises(ValueError):
        wilson(6, 5)


def test_rate_with_ci_formats_the_published_style():
    rate = rate_with_ci(76, 138)
    assert (rate.successes, rate.n) == (76, 138) and rate.rate == pytest.approx(76 / 138)
    assert rate.format() == "55.1% (76/138) [46.7, 63.1]"
    assert rate_with_ci(0, 0).format() == "n/a (0/0)"


# ---------------------------------------------------------------- cluster bootstrap


def bootstrap_rows():
    # Valid cells per task: T1 4/4, T2 1/4, T3 2/4, T4 0/4, T5 3/4 -> pooled 10/20 = 0.5; the excluded
    # T4 row (detected) must not enter the numerator or the denominator.
    hits = {"T1": 4, "T2": 1, "T3": 2, "T4": 0, "T5": 3}
    rows = [cell(task=t, seed=s, detected_hard=s < 11 + k) for t, k in hits.items() for s in range(11, 15)]
    return rows + [cell(task="T4", seed=15, status="excluded", detected_hard=True)]


def test_cluster_bootstrap_is_deterministic_and_brackets_the_pooled_rate():
    rows = bootstrap_rows()
    first = cluster_bootstrap(rows, "detected_hard", seed=7)
    assert first == cluster_bootstrap(rows, "detected_hard", seed=7)
    rate, lo, hi = first
    assert rate == 0.5
    assert lo <= rate <= hi and lo < hi
    # Task rates span 0..1, so the task-resampled interval is wide but inside the extremes.
    assert 0.0 <= lo < 0.4 and 0.6 < hi <= 1.0


def test_cluster_bootstrap_collapses_when_every_cluster_has_the_same_rate():
    rows = [cell(task=t, seed=s, detected_hard=s == 11) for t in ("T1", "T2", "T3") for s in (11, 12)]
    assert cluster_bootstrap(rows, "detected_hard", B=500) == (0.5, 0.5, 0.5)
    assert all(math.isnan(v) for v in cluster_bootstrap([cell(status="excluded")], "detected_hard"))


# ---------------------------------------------------------------- paired contrasts


def test_mcnemar_exact_matches_the_hand_binomial():
    # b=7 first-only, c=1 second-only: p = 2 * P(X <= 1 | Bin(8, 1/2)) = 2 * (1 + 8)/256 = 18/256 = 0.0703125.
    pairs = [(True, False)] * 7 + [(False, True)] + [(True, True)] * 2
    c = mcnemar_exact(pairs)
    assert (c.b, c.c, c.n, c.both) == (7, 1, 10, 2)
    assert c.p == pytest.approx(0.0703125, abs=1e-12)
    assert c.diff == pytest.approx((1 - 7) / 10)  # second rate 3/10 - first rate 9/10
    assert c.first_rate == pytest.approx(0.9) and c.second_rate == pytest.approx(0.3)
    assert c.direction == "fall" and c.status == "unresolved"
    assert c.lo < c.diff < c.hi


def test_mcnemar_no_discordance_and_no_pairs_are_unresolved():
    assert mcnemar_exact([(True, True), (False, False)]).p == 1.0
    empty = mcnemar_exact([])
    assert empty.n == 0 and empty.status == "unresolved"


def test_newcombe_interval_matches_the_published_reference():
    # Fagerland, Lydersen & Laake (2017), Cavo et al. 2012 table [[59, 6], [16, 80]]: first - second
    # = -0.0621, Newcombe square-and-add 95% CI [-0.1186, -0.0046]. Ours is second - first: mirrored.
    lo, hi = newcombe_paired_ci(both=59, b=6, c=16, neither=80)
    assert lo == pytest.approx(0.0046, abs=5e-5) and hi == pytest.approx(0.1186, abs=5e-5)


def test_holm_matches_the_hand_step_down():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01 = 0.03; max(0.03, 2*0.03) = 0.06; max(0.06, 1*0.04) = 0.06.
    got = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    assert got == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    # An uncomputable test still counts toward m: a = min(1, 2 * 0.01) = 0.02.
    with_nan = holm({"a": 0.01, "b": float("nan")})
    assert with_nan["a"] == pytest.approx(0.02) and math.isnan(with_nan["b"])
    assert holm({}) == {}


def test_separation_needs_the_holm_adjusted_p():
    # c=6, b=0: exact p = 2/64 = 0.03125 < 0.05 alone; in a family of two, Holm gives 0.0625 for both.
    rising = [(False, True)] * 6
    alone = mcnemar_exact(rising)
    assert alone.p == pytest.approx(0.03125) and alone.status == "separated" and alone.separated_rise
    family = holm_contrasts({"x": alone, "y": mcnemar_exact(rising)})
    assert all(c.p_holm == pytest.approx(0.0625) and c.status == "unresolved" for c in family.values())


def test_paired_rows_keep_only_cells_valid_in_both_waves():
    a = [cell(seed=11, detected_hard=True), cell(seed=12), cell(seed=13, status="excluded"), cell(seed=14)]
    b = [cell(seed=14, detected_hard=True), cell(seed=11), cell(seed=12, status="incomplete"), cell(seed=13)]
    assert paired_rows(a, b, "detected_hard", "detected_hard") == [(True, False), (False, True)]
    with pytest.raises(ValueError):
        paired_rows(a + [cell(seed=11)], b, "detected_hard", "detected_hard")


# ---------------------------------------------------------------- kappa


def judged(tt, tf, ft, ff):
    return [(True, True)] * tt + [(True, False)] * tf + [(False, True)] * ft + [(False, False)] * ff


def test_cohen_kappa_matches_the_hand_computation():
    # Table (rows: first judge yes/no, cols: second judge yes/no) [[20, 5], [10, 15]], n = 50.
    # observed = (20 + 15)/50 = 0.7; margins rows 0.5/0.5, cols 0.6/0.4 -> expected = 0.5*0.6 + 0.5*0.4 = 0.5
    # kappa = (0.7 - 0.5)/(1 - 0.5) = 0.4.
    # ASE (Fleiss-Cohen-Everitt): A = 0.4*(1 - 1.1*0.6)^2 + 0.3*(1 - 0.9*0.6)^2 = 0.04624 + 0.06348 = 0.10972
    #   B = 0.6^2 * (0.1*(0.6 + 0.5)^2 + 0.2*(0.4 + 0.5)^2) = 0.36 * 0.283 = 0.10188;  C = (0.4 - 0.5*0.6)^2 = 0.01
    #   var = (A + B - C)/((1 - 0.5)^2 * 50) = 0.2016/12.5 = 0.016128 -> ASE 0.126996
    #   95% CI = 0.4 -/+ 1.959964*0.126996 = [0.151092, 0.648908]
    k = cohen_kappa(judged(20, 5, 10, 15))
    assert k.kappa == pytest.approx(0.4, abs=1e-12) and k.n == 50
    assert (k.observed, k.expected) == (pytest.approx(0.7), pytest.approx(0.5))
    assert k.lo == pytest.approx(0.151092, abs=5e-5) and k.hi == pytest.approx(0.648908, abs=5e-5)
    assert kappa_confidence(k) == "low-confidence"


def test_kappa_bound_is_inclusive_at_exactly_0_7():
    # [[17, 3], [3, 17]], n = 40: observed 34/40 = 0.85, margins all 0.5 -> expected 0.5;
    # kappa = (0.85 - 0.5)/0.5 = 0.7 exactly -> "full".
    k = cohen_kappa(judged(17, 3, 3, 17))
    assert k.kappa == pytest.approx(0.7, abs=1e-12)
    assert kappa_confidence(k) == "full" and kappa_confidence(0.7) == "full"
    assert kappa_confidence(0.6999) == "low-confidence"
    assert kappa_confidence(k.kappa, bound=0.71) == "low-confidence"


def test_kappa_undefined_when_chance_explains_everything():
    k = cohen_kappa(judged(5, 0, 0, 0))  # both judges always "yes": expected agreement 1
    assert math.isnan(k.kappa) and kappa_confidence(k) == "low-confidence"
    assert cohen_kappa([]).n == 0


# ---------------------------------------------------------------- §10.8 predictions

DETECTED, MISSED = {"detected_hard": True}, {"detected_hard": False}
TASKS = ("T1", "T2", "T3", "T4")


def spread(operator, w1, w2, seeds=(11, 12, 13), tasks=TASKS, **where):
    """One spec per (task, seed) for an operator: len(tasks) * len(seeds) cells."""
    return [(dict(task=t, operator=operator, seed=s, **where), w1, w2) for t in tasks for s in seeds]


UNION_ONLY = {"mapping": False, "detected_hard": True}  # an anchored flag the mapping missed
BOTH = {"mapping": True, "detected_hard": True}


def test_p1_held_when_the_union_lifts_materially_over_the_mapping_for_all_three():
    # 12 wave-2 cells each, union-only in all: c = 12, b = 0, p = 2/2^12, lift +100 pp >= 10 pp.
    _, w2 = waves(spread("O1", MISSED, UNION_ONLY) + spread("O3", MISSED, UNION_ONLY) + spread("O5", MISSED, UNION_ONLY))
    p1 = predict("P1", [], w2)
    assert p1.status == "held", p1.evidence
    assert all(p1.tests[op].separated_rise for op in ("O1", "O3", "O5"))


def test_p1_not_held_when_an_operator_has_no_material_lift():
    # O5: union = mapping on all 40 cells: lift 0; Newcombe upper end 3.84/(40 + 3.84) = 8.8 pp < 10 pp.
    _, w2 = waves(spread("O1", MISSED, UNION_ONLY) + spread("O3", MISSED, UNION_ONLY) + spread("O5", MISSED, BOTH, seeds=range(11, 21)))
    p1 = predict("P1", [], w2)
    assert p1.status == "not held", p1.evidence
    assert p1.tests["O5"].hi < 0.10


def test_p1_reads_union_vs_mapping_on_wave2_cells_not_wave1_vs_wave2():
    """The constructed case: wave 1 detected nothing and wave 2's mapping detects everything, with no
    anchored flag adding anything. Wave 1 vs wave 2 rises separated for every operator (the old
    reading: held); the union does not lift over wave1_mapping at all (§10.8: not held)."""
    specs = sum((spread(op, MISSED, BOTH, seeds=range(11, 21)) for op in ("O1", "O3", "O5")), [])  # 40 cells each
    w1, w2 = waves(specs)
    wave1_vs_wave2 = {op: mcnemar_exact([(a["detected_hard"], b["detected_hard"]) for _, a, b in paired_cells(w1, w2) if a["operator"] == op])
                      for op in ("O1", "O3", "O5")}
    assert all(c.separated_rise for c in holm_contrasts(wave1_vs_wave2).values())  # the other reading would say held
    p1 = predict("P1", w1, w2)
    assert p1.status == "not held", p1.evidence
    assert all(p1.tests[op].diff == 0 for op in ("O1", "O3", "O5"))


def test_p1_undetermined_with_a_small_lift_or_only_magentic_cells():
    # 3 union-only cells of 12 per operator: c = 3, p = 0.25 unresolved, interval spans 10 pp.
    specs = [(k, MISSED, UNION_ONLY if k["seed"] == 11 else MISSED) for op in ("O1", "O3", "O5") for k, _, _ in spread(op, MISSED, MISSED)]
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
    specs = [(dict(task=t, operator=op, seed=s), DETECTED if s != 15 else MISSED, DETECTED if s != 15 else MISSED)
             for t in TASKS for op in ("O1", "O2") for s in range(11, 16)]
    p2 = predict("P2", *waves(specs))
    assert p2.status == "held", p2.evidence
    assert "8 groups at or near ceiling" in p2.evidence and p2.tests["pooled"].n == 40
    # At a 0.9 threshold none of them is near ceiling.
    w1, w2 = waves(specs)
    assert predict_p2(w1, paired_cells(w1, w2), ceiling=0.9).status == "undetermined"


def test_p2_undetermined_when_too_few_cells_rule_out_a_drop():
    # One group at ceiling, 5 pairs, one fell: nothing separates, but a 10 pp drop is not ruled out.
    specs = [(dict(task="T1", operator="O1", seed=s), DETECTED, DETECTED if s != 15 else MISSED) for s in range(11, 16)]
    specs += [(dict(task="T2", operator="O1", seed=s), DETECTED if s == 11 else MISSED, DETECTED) for s in range(11, 16)]
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
    wave2 = [cell(framework="autogen", config="guardrail", seed=11 + i, flags_anchored=a) for i, a in enumerate(anchored)]
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
    specs = [(dict(seed=s), {"recovered": True, "noticed": True}, {"recovered": True, "detected_hard": True}) for s in range(1, 11)]
    p5 = predict("P5", *waves(specs))
    assert p5.status == "undetermined" and p5.tests["rwd langgraph/default"].n == 10, p5.evidence
    assert p5.tests["rwd langgraph/default"].b == 0
    # Cells no judge ruled on in either wave are left out of P5.
    unjudged = [(dict(seed=s), {"recovered": True, "noticed": None}, {"recovered": True, "detected_hard": True}) for s in range(1, 11)]
    assert "no cells valid and judged in both waves" in predict("P5", *waves(unjudged)).evidence


def keys(rows):
    return [cell_key(r) for r in rows]


def test_simulated_data_get_no_prediction_verdict_and_readings_carry_their_date(registry):
    _, w2 = waves(spread("O1", MISSED, UNION_ONLY) + spread("O3", MISSED, UNION_ONLY) + spread("O5", MISSED, UNION_ONLY))
    doc = registry.doc("standard/predictions.v2.json")
    real = evaluate_predictions([], w2, doc, B=200, expected=([], keys(w2)))
    assert real[0].status == "held" and real[0].registered == "2026-12-05" and "materially" in real[0].reading
    simulated = evaluate_predictions([], w2, doc, simulated=True, B=200, expected=([], keys(w2)))
    assert {r.status for r in simulated} == {"no verdict (simulation)"}
    assert all("held" not in r.status for r in simulated)


def test_a_partial_corpus_leaves_every_prediction_undetermined_with_a_reason():
    wave1 = [cell(task=t, operator=op, seed=s, detected_hard=True) for t in TASKS for op in ("O1", "O2") for s in (11, 12)]
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


# ---------------------------------------------------------------- replicate bootstrap, exact

def test_exact_cluster_bootstrap_enumerates_multisets_with_their_weights():
    from judges.stats.intervals import _multisets, _ratio, exact_cluster_bootstrap

    # 5 clusters: C(9, 4) = 126 multisets; 5^5 = 3125 ordered draws, so the weights sum to 1.
    sets = list(_multisets(5))
    assert len(sets) == 126 and sum(w for _, w in sets) == pytest.approx(1.0, abs=1e-12)
    # 2 clusters (1/2 and 0/2): {A,A} 1/4 -> 2/4 = 0.5; {A,B} 2/4 -> 1/4 = 0.25; {B,B} 1/4 -> 0.
    # Type-1 2.5%: the smallest value whose cumulative weight reaches 0.025 is 0; 97.5%: 0.5.
    point, lo, hi, support, exact = exact_cluster_bootstrap([[1, 2], [0, 2]], _ratio)
    assert (point, lo, hi, support, exact) == (0.25, 0.0, 0.5, 3, True)


def test_replicate_bootstrap_resamples_seeds_not_cells():
    from judges.stats import replicate_bootstrap

    # Seeds 11 and 12, all hits on 11 and none on 12, 3 cells each: the same lattice as above.
    rows = [cell(seed=11, task=t, detected_hard=True) for t in ("T1", "T2", "T3")] + [cell(seed=12, task=t) for t in ("T1", "T2", "T3")]
    ci = replicate_bootstrap(rows, "detected_hard")
    assert (ci.point, ci.lo, ci.hi, ci.clusters, ci.support, ci.exact) == (0.5, 0.0, 1.0, 2, 3, True)
    assert "exact enumeration" in ci.label() and "2 replicates" in ci.label()
