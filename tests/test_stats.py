"""judges.stats: Wilson, cluster bootstrap, exact paired contrasts, Holm, kappa (the §10.8 predictions:
tests/test_predictions.py).

Expected values are computed by hand in the comments, never by calling the code under test.
"""

import math

import pytest

from judges.stats import (
    cluster_bootstrap,
    cohen_kappa,
    holm,
    holm_contrasts,
    kappa_confidence,
    mcnemar_exact,
    newcombe_paired_ci,
    paired_rows,
    rate_with_ci,
    wilson,
)

FLAGS = ("mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")


def cell(
    task="T1", operator="O1", seed=11, framework="langgraph", config="default", status="valid", noticed=False, **flags
):
    row = {
        "framework": framework,
        "config": config,
        "task": task,
        "operator": operator,
        "seed": seed,
        "status": status,
        "noticed": noticed,
    }
    row.update({f: False for f in FLAGS})
    row["clean_fire"] = False  # the anchors never fire on the cell's clean baseline (P1/P4's clean-baseline term)
    row.update(flags)
    return row


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
    rows = [cell(seed=11, task=t, detected_hard=True) for t in ("T1", "T2", "T3")] + [
        cell(seed=12, task=t) for t in ("T1", "T2", "T3")
    ]
    ci = replicate_bootstrap(rows, "detected_hard")
    assert (ci.point, ci.lo, ci.hi, ci.clusters, ci.support, ci.exact) == (0.5, 0.0, 1.0, 2, 3, True)
    assert "exact enumeration" in ci.label() and "2 replicates" in ci.label()
