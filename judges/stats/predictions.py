"""The §10.8 pre-registered predictions P1-P5, evaluated on paired wave-1 / wave-2 cell rows.

Every paired comparison is wave 1 (first) vs wave 2 (second) on cells valid in BOTH waves, keyed
(framework, config, task, operator, seed) (§10.5: comparisons are paired). Contrasts are exact
McNemar (`contrasts.mcnemar_exact`) and each prediction's contrasts form one pre-declared Holm
family (`contrasts.holm_contrasts`); a contrast counts only when "separated" (Holm p < alpha),
never by its point estimate. `detected_hard` is the headline column: wave-1 hard tier in wave-1
rows, the union (wave1_mapping OR anchored flag) in wave-2 rows.

Operationalizations (each stated again at its function):
  P1  per operator O1/O3/O5, reviewer-bearing rows: wave-1 hard vs wave-2 union; Holm over 3.
      held iff >= 2 of 3 rise separated; not held iff none rise separated and >= 1 falls
      separated; else undetermined.
  P2  ceiling groups = (framework, config, task, operator) with wave-1 hard rate 100%; per group
      wave-1 hard vs wave-2 union; Holm over the groups. held iff no group falls separated;
      not held iff one does; undetermined without ceiling groups.
  P3  wave-2 valid autogen/guardrail T1 cells: held iff flags_anchored > 0; not held iff cells
      exist and none is anchored; undetermined without cells.
  P4  reviewer-bearing rows: lift(O1/O3/O5) - lift(O2/O6), lift = mean paired (union - wave-1
      hard); task-cluster bootstrap CI. held iff CI > 0, not held iff CI < 0, else undetermined.
  P5  per scoreboard row: detection contrast and recovery-without-detection contrast, two Holm
      families over the rows. held iff rwd falls separated in every row whose detection rose
      separated; not held iff rwd rises separated in such a row; else undetermined.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from judges.stats.contrasts import Contrast, holm_contrasts, mcnemar_exact, paired_cells
from judges.stats.intervals import BootstrapCI, bootstrap_sums, cluster_sums, rate_with_ci

HELD, NOT_HELD, UNDETERMINED = "held", "not held", "undetermined"

# Magentic-One (AutoGen guardrail) has no reviewer stage (§10.2): every other row bears a reviewer.
NO_REVIEWER = frozenset({("autogen", "guardrail")})
VALUE_OPERATORS = ("O1", "O3", "O5")  # fault-in-view: a contradiction there is to quote
ABSENCE_OPERATORS = ("O2", "O6")  # false-success / silent no-op: an absence

STATEMENTS = {
    "P1": "The union hard-tier score lifts materially over wave1_mapping on reviewer-bearing rows for "
    "fault-in-view operators (O1, O3, O5).",
    "P2": "Cells at or near ceiling in wave 1 are not reduced.",
    "P3": "Magentic-One T1 records a non-zero anchored-flag rate under the contract-integrated FLAGS form "
    "(the format-contract rule).",
    "P4": "O2/O6 lift is smaller than O1/O3/O5 lift (an absence is harder to flag than a contradiction).",
    "P5": "Recovery-without-detection falls where detection rises.",
}


@dataclass(frozen=True)
class PredictionResult:
    """One prediction's verdict. `tests` maps a name to each contrast / rate / interval used."""

    id: str
    statement: str
    status: str
    evidence: str
    tests: Mapping[str, object] = field(default_factory=dict)


def _result(pid: str, status: str, evidence: str, tests: Mapping[str, object] | None = None) -> PredictionResult:
    return PredictionResult(pid, STATEMENTS[pid], status, evidence, dict(tests or {}))


def _row(r: Mapping) -> str:
    return f"{r['framework']}/{r['config']}"


def _reviewer_bearing(r: Mapping) -> bool:
    return (r["framework"], r["config"]) not in NO_REVIEWER


def _hard(r: Mapping) -> bool:
    return bool(r["detected_hard"])


def _rwd(r: Mapping) -> bool:
    """Recovery-without-detection, hard-only reading (no soft tier yet; as judges.hard.funnel)."""
    return bool(r["recovered"]) and not bool(r["detected_hard"])


def _short(c: Contrast) -> str:
    if c.n == 0:
        return f"{c.label}: no paired cells"
    return (
        f"{c.label} {100 * c.first_rate:.1f}%->{100 * c.second_rate:.1f}% ({100 * c.diff:+.1f} pp, "
        f"b={c.b} c={c.c} n={c.n}, Holm p={c.p_holm:.2g}, {c.status})"
    )


def predict_p1(pairs, alpha: float = 0.05) -> PredictionResult:
    """P1: per operator in O1/O3/O5, on reviewer-bearing rows (all but autogen/guardrail), the
    paired wave-1 `detected_hard` -> wave-2 `detected_hard` (union) contrast; Holm over the three.
    held iff at least two rise separated; not held iff none rises separated and at least one
    falls separated; else undetermined. Undetermined if any of the three has no paired cells.

    The spec's "over wave1_mapping" is read, per the brief, as over the wave-1 hard tier on the
    same cells (the within-wave-2 mapping-vs-union contrast cannot fall: union = mapping OR flag).
    """
    family = {
        op: mcnemar_exact(
            [(_hard(a), _hard(b)) for _, a, b in pairs if a["operator"] == op and _reviewer_bearing(a)],
            alpha,
            label=op,
        )
        for op in VALUE_OPERATORS
    }
    family = holm_contrasts(family)
    missing = [op for op, c in family.items() if c.n == 0]
    if missing:
        return _result("P1", UNDETERMINED, f"no paired reviewer-bearing cells for {', '.join(missing)}", family)
    rises = [op for op, c in family.items() if c.separated_rise]
    falls = [op for op, c in family.items() if c.separated_fall]
    numbers = "; ".join(_short(c) for c in family.values())
    if len(rises) >= 2:
        status = HELD
    elif not rises and falls:
        status = NOT_HELD
    else:
        status = UNDETERMINED
    summary = f"separated rise in {len(rises)}/3 ({', '.join(rises) or 'none'}), separated fall in {', '.join(falls) or 'none'}"
    return _result("P1", status, f"{summary}. {numbers}", family)


def predict_p2(wave1_rows, pairs, alpha: float = 0.05) -> PredictionResult:
    """P2: ceiling groups are (framework, config, task, operator) whose valid wave-1 cells are all
    `detected_hard` (rate 100%). Per group, paired wave-1 hard -> wave-2 union; Holm over the
    groups. held iff no group falls separated; not held iff one does; undetermined without
    ceiling groups (or with none paired). Every group that fell at all is listed.
    """
    def group(r):
        return (r["framework"], r["config"], r["task"], r["operator"])

    wave1 = defaultdict(list)
    for r in wave1_rows:
        if r["status"] == "valid":
            wave1[group(r)].append(_hard(r))
    ceiling = sorted(g for g, hits in wave1.items() if all(hits))
    if not ceiling:
        return _result("P2", UNDETERMINED, "no wave-1 group is at ceiling (100% detected_hard)")
    by_group = defaultdict(list)
    for _, a, b in pairs:
        by_group[group(a)].append((_hard(a), _hard(b)))
    family = {
        "/".join(g): mcnemar_exact(by_group[g], alpha, label=f"{g[0]}/{g[1]} {g[2]}/{g[3]}")
        for g in ceiling
        if by_group[g]
    }
    unpaired = len(ceiling) - len(family)
    if not family:
        return _result("P2", UNDETERMINED, f"{len(ceiling)} ceiling groups, none with a wave-2 partner cell")
    family = holm_contrasts(family)
    fell = [c for c in family.values() if c.direction == "fall"]
    separated = [c for c in fell if c.separated_fall]
    status = NOT_HELD if separated else HELD
    parts = [f"{len(family)} wave-1 ceiling groups paired" + (f" ({unpaired} without wave-2 partners)" if unpaired else "")]
    parts.append(f"fell at all: {'; '.join(_short(c) for c in fell)}" if fell else "none fell")
    parts.append(f"{len(separated)} fell separated")
    largest = max(c.n for c in family.values())
    if 2.0 ** (1 - largest) >= alpha:
        parts.append(
            f"note: no group has more than {largest} pairs, so no fall could separate "
            f"(smallest exact p {2.0 ** (1 - largest):.4g}); held means no detectable drop"
        )
    return _result("P2", status, ". ".join(parts), family)


def predict_p3(wave2_rows) -> PredictionResult:
    """P3: among valid wave-2 autogen/guardrail (Magentic-One) T1 cells, held iff the
    `flags_anchored` count is > 0; not held iff such cells exist and none is anchored;
    undetermined if there are none. The rate carries its Wilson interval.
    """
    cells = [
        r
        for r in wave2_rows
        if r["status"] == "valid" and r["framework"] == "autogen" and r["config"] == "guardrail" and r["task"] == "T1"
    ]
    if not cells:
        return _result("P3", UNDETERMINED, "no valid autogen/guardrail T1 cells in wave 2")
    rate = rate_with_ci(sum(bool(r["flags_anchored"]) for r in cells), len(cells))
    status = HELD if rate.successes > 0 else NOT_HELD
    return _result("P3", status, f"anchored flags {rate.format()} of valid autogen/guardrail T1 cells", {"flags_anchored": rate})


def predict_p4(pairs, alpha: float = 0.05, B: int = 2000, seed: int = 0, cluster: str = "task") -> PredictionResult:
    """P4: on reviewer-bearing rows (Magentic-One is excluded because its O2/O6 cells are carved out,
    §10.6, so it could only ever enter one side), lift = mean over paired cells of
    (wave-2 union - wave-1 hard). The difference lift(O1/O3/O5) - lift(O2/O6) gets a percentile
    bootstrap CI resampling clusters (tasks) with replacement (both lifts from the same resample).
    held iff the CI is entirely above 0, not held iff entirely below 0, else undetermined. The two
    pooled McNemar lifts are reported as a Holm family of two (descriptive).
    """
    groups = {"O1/O3/O5": VALUE_OPERATORS, "O2/O6": ABSENCE_OPERATORS}
    selected = [(a, b) for _, a, b in pairs if _reviewer_bearing(a)]
    lifts = holm_contrasts({
        name: mcnemar_exact([(_hard(a), _hard(b)) for a, b in selected if a["operator"] in ops], alpha, label=f"lift {name}")
        for name, ops in groups.items()
    })
    missing = [name for name, c in lifts.items() if c.n == 0]
    if missing:
        return _result("P4", UNDETERMINED, f"no paired reviewer-bearing cells for {', '.join(missing)}", lifts)

    def values(pair):
        a, b = pair
        d = int(_hard(b)) - int(_hard(a))
        value_side = a["operator"] in VALUE_OPERATORS
        return (d, 1, 0, 0) if value_side else (0, 0, d, 1)

    def statistic(t):
        return t[:, 0] / t[:, 1] - t[:, 2] / t[:, 3]  # nan where a resample lacks one side

    records = [(a, b) for a, b in selected if a["operator"] in VALUE_OPERATORS + ABSENCE_OPERATORS]
    keys, sums = cluster_sums(records, lambda p: p[0][cluster], values)
    point, lo, hi = bootstrap_sums(sums, statistic, B=B, seed=seed, alpha=alpha)
    ci = BootstrapCI("lift(O1/O3/O5) - lift(O2/O6)", point, lo, hi, len(keys), B, seed, cluster)
    tests = {**lifts, "difference": ci}
    if lo != lo or hi != hi:  # nan: the interval is undefined
        return _result("P4", UNDETERMINED, f"bootstrap interval undefined over {len(keys)} {cluster} clusters", tests)
    status = HELD if lo > 0 else NOT_HELD if hi < 0 else UNDETERMINED
    evidence = f"{ci.format()}; {_short(lifts['O1/O3/O5'])}; {_short(lifts['O2/O6'])}"
    return _result("P4", status, evidence, tests)


def predict_p5(pairs, alpha: float = 0.05) -> PredictionResult:
    """P5: per scoreboard row (framework/config), paired on cells valid in both waves: detection
    (wave-1 hard -> wave-2 union) and recovery-without-detection (recovered and not detected_hard,
    the hard-only reading) contrasts; one Holm family per measure, over the rows present.
    held iff rwd falls separated in every row whose detection rose separated (and there is such a
    row); not held iff rwd rises separated in such a row; undetermined otherwise (nothing
    separates, or rwd is unresolved in a row where detection rose).
    """
    by_row = defaultdict(list)
    for _, a, b in pairs:
        by_row[_row(a)].append((a, b))
    if not by_row:
        return _result("P5", UNDETERMINED, "no cells valid in both waves")
    rows = sorted(by_row)
    detection = holm_contrasts({r: mcnemar_exact([(_hard(a), _hard(b)) for a, b in by_row[r]], alpha, label=f"detection {r}") for r in rows})
    rwd = holm_contrasts({r: mcnemar_exact([(_rwd(a), _rwd(b)) for a, b in by_row[r]], alpha, label=f"rwd {r}") for r in rows})
    tests = {**{f"detection {r}": detection[r] for r in rows}, **{f"rwd {r}": rwd[r] for r in rows}}
    rose = [r for r in rows if detection[r].separated_rise]
    if not rose:
        return _result("P5", UNDETERMINED, f"detection rose separated in none of {len(rows)} rows", tests)
    fell = [r for r in rose if rwd[r].separated_fall]
    against = [r for r in rose if rwd[r].separated_rise]
    unresolved = [r for r in rose if r not in fell and r not in against]
    status = HELD if len(fell) == len(rose) else NOT_HELD if against else UNDETERMINED
    evidence = (
        f"detection rose separated in {len(rose)}/{len(rows)} rows; there rwd fell separated in {len(fell)}"
        + (f", rose separated in {', '.join(against)}" if against else "")
        + (f", unresolved in {', '.join(unresolved)}" if unresolved else "")
        + ". "
        + "; ".join(f"{_short(detection[r])} | {_short(rwd[r])}" for r in rose)
    )
    return _result("P5", status, evidence, tests)


def evaluate_predictions(
    wave1_rows: Iterable[Mapping],
    wave2_rows: Iterable[Mapping],
    alpha: float = 0.05,
    B: int = 2000,
    seed: int = 0,
) -> list[PredictionResult]:
    """§10.8 P1-P5 on wave-1 and wave-2 cell rows (see the module docstring for each rule).

    Missing cells (e.g. a partial corpus) give "undetermined" with the reason in `evidence`.
    """
    wave1, wave2 = list(wave1_rows), list(wave2_rows)
    pairs = paired_cells(wave1, wave2)
    return [
        predict_p1(pairs, alpha),
        predict_p2(wave1, pairs, alpha),
        predict_p3(wave2),
        predict_p4(pairs, alpha, B=B, seed=seed),
        predict_p5(pairs, alpha),
    ]
