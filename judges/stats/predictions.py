"""The §10.8 pre-registered predictions P1-P5, each read as §10.8 words it.

The readings, with every threshold the words leave open, are registered data
(`data/standard/predictions.v2.json`, "ours", with the date we registered them); each result carries
its reading. Contrasts are exact McNemar (`contrasts.mcnemar_exact`) with the Newcombe paired
interval; each prediction's contrasts form one Holm family. A contrast counts only when
"separated" (Holm p < alpha), never by its point estimate.

  P1  on the same wave-2 cells: wave1_mapping (or the anchors firing on the cell's clean baseline)
      vs union, per O1/O3/O5, reviewer-bearing rows: pure noise lifts nothing.
  P2  wave-1 groups at or near ceiling: wave-1 hard vs wave-2 union, pooled, non-inferiority.
  P3  wave-2 Magentic-One T1: any anchored flag.
  P4  P1's lift (clean-baseline term included), O1/O3/O5 vs O2/O6, task-cluster bootstrap.
  P5  per row, paired waves: detection and recovery-without-detection as §2 defines it (neither
      hard nor soft; cells judged in both waves).
On simulated data no verdict is given: the numbers are shown, the status says why (`simulation`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from judges.stats.coverage import CellKey, coverage, incomplete_reason
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
    reading: str = ""  # our reading where §10.8's words need one (registered data)
    registered: str = ""  # the date that reading was registered


def _result(pid: str, status: str, evidence: str, tests: Mapping[str, object] | None = None) -> PredictionResult:
    return PredictionResult(pid, STATEMENTS[pid], status, evidence, dict(tests or {}))


def _row(r: Mapping) -> str:
    return f"{r['framework']}/{r['config']}"


def _reviewer_bearing(r: Mapping) -> bool:
    return (r["framework"], r["config"]) not in NO_REVIEWER


def _hard(r: Mapping) -> bool:
    return bool(r["detected_hard"])


def _rwd(r: Mapping) -> bool:
    """Recovery-without-detection as §2 defines it: recovered, neither hard nor soft (judged cells)."""
    return bool(r["recovered"]) and not bool(r["detected_hard"]) and not bool(r["noticed"])


def _judged(r: Mapping) -> bool:
    return r.get("noticed") is not None


def _short(c: Contrast) -> str:
    if c.n == 0:
        return f"{c.label}: no paired cells"
    return (
        f"{c.label} {100 * c.first_rate:.1f}%->{100 * c.second_rate:.1f}% ({100 * c.diff:+.1f} pp, "
        f"b={c.b} c={c.c} n={c.n}, Holm p={c.p_holm:.2g}, {c.status})"
    )


def _lift_cells(rows, operators) -> list[Mapping]:
    return [r for r in rows if r["status"] == "valid" and r["operator"] in operators and _reviewer_bearing(r)]


def _without_noise(r: Mapping) -> bool:
    """What the cell scores with no signal from the protocol: its mapping surface, or the anchor rule
    firing on the cell's own clean baseline (the same FLAGS lines, written with no fault planted)."""
    return bool(r["mapping"]) or bool(r["clean_fire"])


def _lift_pairs(rows, operators) -> list[tuple[bool, bool]]:
    """(wave1_mapping or the clean-baseline fire, union) of each valid reviewer-bearing wave-2 cell of
    these operators: a lift counts only above what the anchors fire on with no fault planted."""
    return [(_without_noise(r), _hard(r)) for r in _lift_cells(rows, operators)]


def _unknown_clean_term(rows, operators) -> str | None:
    """Why the clean-baseline term is missing, where it is: a lift is never read without it."""
    unknown = [r for r in _lift_cells(rows, operators) if r.get("clean_fire") is None]
    if not unknown:
        return None
    return (
        f"the clean-baseline term is unknown for {len(unknown)} cell(s) (no clean baseline scanned with their anchors)"
    )


def predict_p1(wave2_rows, alpha: float = 0.05, material_pp: float = 10.0) -> PredictionResult:
    """P1 as §10.8 words it: union over wave1_mapping on the same wave-2 cells, per operator O1, O3,
    O5 on reviewer-bearing rows (Holm over the three), with the clean-baseline term: the first arm is
    the mapping OR the anchor rule firing on the cell's own clean baseline (`clean_fire`), so a
    FLAGS rate the anchors reach with no fault planted lifts nothing. held iff every one rises separated by at least
    `material_pp` points; not held iff any one's paired interval ends below `material_pp`; else
    undetermined (also when an operator has no cells)."""
    unknown = _unknown_clean_term(wave2_rows, VALUE_OPERATORS)
    if unknown:
        return _result("P1", UNDETERMINED, unknown)
    family = holm_contrasts(
        {
            op: mcnemar_exact(_lift_pairs(wave2_rows, (op,)), alpha, label=f"{op} mapping|clean->union")
            for op in VALUE_OPERATORS
        }
    )
    missing = [op for op, c in family.items() if c.n == 0]
    if missing:
        return _result("P1", UNDETERMINED, f"no valid reviewer-bearing wave-2 cells for {', '.join(missing)}", family)
    material = material_pp / 100
    lifted = [op for op, c in family.items() if c.separated_rise and c.diff >= material]
    short = [op for op, c in family.items() if c.hi < material]
    status = HELD if len(lifted) == len(family) else NOT_HELD if short else UNDETERMINED
    summary = (
        f"material lift (separated, >= {material_pp:g} pp) in {len(lifted)}/3 ({', '.join(lifted) or 'none'}); "
        f"interval below {material_pp:g} pp in {', '.join(short) or 'none'}"
    )
    return _result("P1", status, f"{summary}. " + "; ".join(_short(c) for c in family.values()), family)


def predict_p2(
    wave1_rows, pairs, alpha: float = 0.05, ceiling: float = 0.8, margin_pp: float = 10.0
) -> PredictionResult:
    """P2: groups (framework, config, task, operator) whose valid wave-1 hard rate is at least
    `ceiling` ("at or near ceiling"); their cells paired wave-1 hard -> wave-2 union, pooled. not held
    iff the pooled contrast falls separated; held iff not, and the paired interval's lower end is
    above -`margin_pp` points (a drop that size is ruled out); else undetermined. Groups that fell
    at all are listed."""

    def group(r):
        return (r["framework"], r["config"], r["task"], r["operator"])

    wave1 = defaultdict(list)
    for r in wave1_rows:
        if r["status"] == "valid":
            wave1[group(r)].append(_hard(r))
    at_ceiling = {g for g, hits in wave1.items() if sum(hits) / len(hits) >= ceiling}
    if not at_ceiling:
        return _result("P2", UNDETERMINED, f"no wave-1 group is at or near ceiling (hard rate >= {100 * ceiling:.0f}%)")
    paired = [(a, b) for _, a, b in pairs if group(a) in at_ceiling]
    if not paired:
        return _result(
            "P2", UNDETERMINED, f"{len(at_ceiling)} groups at or near ceiling, none with a wave-2 partner cell"
        )
    pooled = holm_contrasts(
        {"pooled": mcnemar_exact([(_hard(a), _hard(b)) for a, b in paired], alpha, label="ceiling groups, pooled")}
    )["pooled"]
    by_group = defaultdict(list)
    for a, b in paired:
        by_group[group(a)].append((_hard(a), _hard(b)))
    fell = [
        f"{'/'.join(g)} {sum(x for x, _ in v)}/{len(v)}->{sum(y for _, y in v)}/{len(v)}"
        for g, v in sorted(by_group.items())
        if sum(y for _, y in v) < sum(x for x, _ in v)
    ]
    if pooled.separated_fall:
        status = NOT_HELD
    elif pooled.lo > -margin_pp / 100:
        status = HELD
    else:
        status = UNDETERMINED
    evidence = (
        f"{len(by_group)} groups at or near ceiling paired ({len(paired)} cells); {_short(pooled)}, "
        f"paired 95% [{100 * pooled.lo:+.1f}, {100 * pooled.hi:+.1f}] pp vs margin -{margin_pp:g} pp; "
        + (f"fell at all: {'; '.join(fell)}" if fell else "no group fell")
    )
    return _result("P2", status, evidence, {"pooled": pooled})


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
    return _result(
        "P3", status, f"anchored flags {rate.format()} of valid autogen/guardrail T1 cells", {"flags_anchored": rate}
    )


def predict_p4(
    wave2_rows, alpha: float = 0.05, B: int = 2000, seed: int = 0, cluster: str = "task"
) -> PredictionResult:
    """P4: P1's lift (union - (wave1_mapping or the clean-baseline fire), same cells), reviewer-bearing rows
    (Magentic-One's O2/O6 cells are carved out, §10.6). The difference lift(O1/O3/O5) - lift(O2/O6)
    gets a percentile bootstrap interval resampling tasks. held iff it lies above 0, not held iff
    below 0, else undetermined. The two pooled lifts are reported as a Holm family of two."""
    groups = {"O1/O3/O5": VALUE_OPERATORS, "O2/O6": ABSENCE_OPERATORS}
    unknown = _unknown_clean_term(wave2_rows, VALUE_OPERATORS + ABSENCE_OPERATORS)
    if unknown:
        return _result("P4", UNDETERMINED, unknown)
    lifts = holm_contrasts(
        {name: mcnemar_exact(_lift_pairs(wave2_rows, ops), alpha, label=f"lift {name}") for name, ops in groups.items()}
    )
    missing = [name for name, c in lifts.items() if c.n == 0]
    if missing:
        return _result("P4", UNDETERMINED, f"no valid reviewer-bearing wave-2 cells for {', '.join(missing)}", lifts)

    def values(r):
        d = int(_hard(r)) - int(_without_noise(r))
        return (d, 1, 0, 0) if r["operator"] in VALUE_OPERATORS else (0, 0, d, 1)

    def statistic(t):
        return t[:, 0] / t[:, 1] - t[:, 2] / t[:, 3]  # nan where a resample lacks one side

    records = [
        r
        for r in wave2_rows
        if r["status"] == "valid" and _reviewer_bearing(r) and r["operator"] in VALUE_OPERATORS + ABSENCE_OPERATORS
    ]
    keys, sums = cluster_sums(records, lambda r: r[cluster], values)
    point, lo, hi = bootstrap_sums(sums, statistic, B=B, seed=seed, alpha=alpha)
    ci = BootstrapCI("lift(O1/O3/O5) - lift(O2/O6)", point, lo, hi, len(keys), B, seed, cluster)
    tests = {**lifts, "difference": ci}
    if lo != lo or hi != hi:  # nan: the interval is undefined
        return _result("P4", UNDETERMINED, f"bootstrap interval undefined over {len(keys)} {cluster} clusters", tests)
    status = HELD if lo > 0 else NOT_HELD if hi < 0 else UNDETERMINED
    return _result("P4", status, f"{ci.format()}; {_short(lifts['O1/O3/O5'])}; {_short(lifts['O2/O6'])}", tests)


def predict_p5(pairs, alpha: float = 0.05) -> PredictionResult:
    """P5: per scoreboard row (framework/config), paired on cells valid and judged in both waves:
    detection (wave-1 hard -> wave-2 union) and recovery-without-detection (§2: recovered, neither
    hard nor soft) contrasts; one Holm family per measure, over the rows present.
    held iff rwd falls separated in every row whose detection rose separated (and there is such a
    row); not held iff rwd rises separated in such a row; undetermined otherwise (nothing
    separates, or rwd is unresolved in a row where detection rose).
    """
    by_row = defaultdict(list)
    for _, a, b in pairs:
        if _judged(a) and _judged(b):
            by_row[_row(a)].append((a, b))
    if not by_row:
        return _result("P5", UNDETERMINED, "no cells valid and judged in both waves")
    rows = sorted(by_row)
    detection = holm_contrasts(
        {r: mcnemar_exact([(_hard(a), _hard(b)) for a, b in by_row[r]], alpha, label=f"detection {r}") for r in rows}
    )
    rwd = holm_contrasts(
        {r: mcnemar_exact([(_rwd(a), _rwd(b)) for a, b in by_row[r]], alpha, label=f"rwd {r}") for r in rows}
    )
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


SIMULATION_STATUS = "no verdict (simulation)"


def _domains() -> dict[str, dict[str, object]]:
    """The cells each prediction is defined over, per wave (`wave1`, `wave2`): a verdict needs all of them."""

    def reviewer(ops):
        return lambda k: (k[0], k[1]) not in NO_REVIEWER and k[3] in ops

    everything = lambda _: True  # noqa: E731
    return {
        "P1": {"wave2": reviewer(VALUE_OPERATORS)},
        "P2": {"wave1": everything, "wave2": everything},
        "P3": {"wave2": lambda k: (k[0], k[1]) == ("autogen", "guardrail") and k[2] == "T1"},
        "P4": {"wave2": reviewer(VALUE_OPERATORS + ABSENCE_OPERATORS)},
        "P5": {"wave1": everything, "wave2": everything},
    }


def _guard(
    result: PredictionResult, rows: Mapping[str, list], expected: Mapping[str, list[CellKey]]
) -> PredictionResult:
    """`result` unchanged when its domain is complete in both waves; else undetermined, naming the gaps."""
    checks = {wave: coverage(rows[wave], expected[wave], domain) for wave, domain in _domains()[result.id].items()}
    reason = incomplete_reason(checks)
    if reason is None:
        return result
    return replace(result, status=UNDETERMINED, evidence=reason, tests={})


def evaluate_predictions(
    wave1_rows: Iterable[Mapping],
    wave2_rows: Iterable[Mapping],
    readings: Mapping | None = None,
    simulated: bool = False,
    B: int = 2000,
    seed: int = 0,
    *,
    expected: tuple[list[CellKey], list[CellKey]],
) -> list[PredictionResult]:
    """§10.8 P1-P5 on wave-1 and wave-2 cell rows, under the registered readings (`predictions.v2.json`:
    alpha, P1's material lift, P2's ceiling and margin). Rows carry `noticed` (None if unjudged) for P5.

    `expected` is the registered matrix of each wave (carve-out removed), as cell keys: a prediction
    whose cells are not all decided in both waves (a partial corpus, a run missing) is "undetermined",
    its evidence naming the missing rows and cells (`judges.stats.coverage`); no contrast is computed
    from the part that is there. Simulated data give no verdict at all (the status says simulation).
    """
    doc = readings or {
        "alpha": 0.05,
        "readings": {"P1": {"material_lift_pp": 10}, "P2": {"ceiling_threshold": 0.8, "non_inferiority_margin_pp": 10}},
    }
    alpha, r = doc["alpha"], doc["readings"]
    wave1, wave2 = list(wave1_rows), list(wave2_rows)
    pairs = paired_cells(wave1, wave2)
    results = [
        predict_p1(wave2, alpha, r["P1"]["material_lift_pp"]),
        predict_p2(wave1, pairs, alpha, r["P2"]["ceiling_threshold"], r["P2"]["non_inferiority_margin_pp"]),
        predict_p3(wave2),
        predict_p4(wave2, alpha, B=B, seed=seed),
        predict_p5(pairs, alpha),
    ]
    rows = {"wave1": wave1, "wave2": wave2}
    results = [_guard(x, rows, {"wave1": expected[0], "wave2": expected[1]}) for x in results]
    if readings is not None:
        results = [
            replace(x, reading=r[x.id].get("ours", ""), registered=r[x.id].get("registered", doc["registered"]))
            for x in results
        ]
    if simulated:
        results = [replace(x, status=SIMULATION_STATUS, evidence=x.evidence) for x in results]
    return results
