"""The caveats a number carries, in one place: every surface (CLI, Markdown, HTML, JSON) prints these.

A reader meets a rate in one of four places; each must carry the same warning beside it:
  * soft-tier rates are lower bounds while any valid cell is undecided (neither a hard act nor a
    judge verdict), marked "≥";
  * the soft tier's reliability: Cohen's kappa over the double-judged pairs and its confidence label
    (low-confidence when kappa is unmeasured or under the bound);
  * a base rate's denominator spelled out (clean baselines x the anchor sets tested on each);
  * an adjusted figure (the coverage-adjusted floor) is a diagnostic, never a score (§3);
  * a reading registered after the data were public carries its registration date;
  * each interval names its method, and why the methods differ.
`board_labels` gathers them as JSON for a board; the renderers read that, never their own wording.
"""

from __future__ import annotations

LOWER_BOUND_MARK = "≥"
# Rates that can only rise as undecided cells get a verdict (DETECTED_SOFT, soft notice, MISSED,
# recovery without detection): an undecided cell is neither soft nor MISSED.
LOWER_BOUND_COLUMNS = frozenset({"detected_soft", "soft_notice", "missed", "recovered_without_detection"})
DATA_PUBLIC = (
    "2026-07-24"  # the published wave-2 reference traces (data/waves/public_wave2.json); wave 1's were earlier
)
DIAGNOSTIC = "diagnostic, not a score (§3: no adjusted scores)"
LOW_CONFIDENCE = "low-confidence"

INTERVALS = {
    "wilson": "Wilson 95%: each cell an independent Bernoulli draw. Too narrow for these data: cells of one "
    "replicate share a clean baseline, cells of one task share its material.",
    "task_bootstrap": "task-cluster bootstrap 95% (tasks resampled, B=2000, seed 0): tasks as the unit; "
    "wide, since a handful of tasks is far from a population of tasks.",
    "replicate_bootstrap": "replicate-cluster bootstrap 95% (the reference supplement's method): the "
    "replicates (seeds) resampled whole, every multiset enumerated exactly (126 for 5), type-1 "
    "percentiles; it captures repetition-to-repetition variation only, not task or "
    "operator selection, which is why it is the narrowest of the three.",
}


def lower_bound(column: str, undecided: int) -> bool:
    return column in LOWER_BOUND_COLUMNS and undecided > 0


def marked(text: str, column: str, undecided: int) -> str:
    """A formatted rate with the lower-bound mark where it is one."""
    return f"{LOWER_BOUND_MARK}{text}" if lower_bound(column, undecided) else text


def lower_bound_note(undecided: int) -> str:
    if not undecided:
        return "Every valid cell is decided: the soft-tier rates are point values."
    return (
        f"{LOWER_BOUND_MARK} marks a lower bound: {undecided} valid cell(s) are undecided (no hard act, no judge "
        "verdict), so DETECTED_SOFT, soft notice, MISSED and recovery-without-detection can only rise."
    )


def kappa_label(kappa: dict | None, backends=()) -> dict:
    """{"confidence", "text"} for the soft tier's reliability."""
    if kappa is None or not kappa.get("n"):
        out = {"confidence": LOW_CONFIDENCE, "text": f"kappa not measured (no double-judged pairs): {LOW_CONFIDENCE}"}
    elif kappa["kappa"] != kappa["kappa"]:  # nan: the pairs show no variation to agree on
        out = {
            "confidence": LOW_CONFIDENCE,
            "text": f"kappa undefined over {kappa['n']} double-judged pair(s) (no variation to "
            f"agree on); bound {kappa['bound']}: {LOW_CONFIDENCE}",
        }
    else:
        out = {
            "confidence": kappa["confidence"],
            "text": f"Cohen's kappa {kappa['kappa']:.3f} [{kappa['lo']:.3f}, {kappa['hi']:.3f}] over {kappa['n']} "
            f"double-judged pairs; bound {kappa['bound']}: {kappa['confidence']}",
        }
    if list(backends) == ["offline"]:
        out["text"] += (
            ". The offline judge is a deterministic rule that reads both prompt variants the same way:"
            " its kappa is 1 by construction and measures no reliability; its verdicts are simulation"
        )
    return out


def pre_injection_note(count: int) -> str:
    return (
        (
            f"{count} judge notice(s) quote text written before the fault was planted: no notice of the planted "
            "fault, so not DETECTED_SOFT; counted apart and left undecided."
        )
        if count
        else ""
    )


def _denominators(by_key: dict[str, int]) -> str:
    values = set(by_key.values())
    if not values:
        return ""
    return f"{values.pop()} each" if len(values) == 1 else ", ".join(f"{k} {n}" for k, n in sorted(by_key.items()))


def base_rate_denominator(by_operator: dict[str, int], by_task: dict[str, int], baselines: int) -> str:
    """What a clean-baseline base rate is over: each baseline tested once per operator's anchor set.
    The denominators are the base-rate tables' own (a task's baselines need not be equal in number)."""
    operators = len(by_operator)
    return (
        f"a base rate counts (clean baseline, operator anchor set) tests, not cells: per operator (its baselines) "
        f"{_denominators(by_operator) or 'none'}; per task (its baselines x {operators} anchor sets) "
        f"{_denominators(by_task) or 'none'}; pooled {baselines} baselines x {operators} anchor sets = {baselines * operators}"
    )


INTERVALS_DOC = "standard/intervals.v1.json"


def not_estimable(clusters: int, minimum: int, unit: str) -> str | None:
    """Why a cluster interval is not printed: fewer clusters than the registered minimum."""
    if clusters >= minimum:
        return None
    return f"not estimable: {clusters} {unit}(s), fewer than the registered minimum of {minimum}"


def registered_label(registered: str | None, data_public: str = DATA_PUBLIC) -> str:
    """The registration date beside a reading, saying when it came after the data were public."""
    if not registered:
        return "not registered"
    after = registered > data_public  # ISO dates compare as strings
    return f"registered {registered}" + (f", after the wave-2 data were public ({data_public})" if after else "")


def board_labels(board: dict, ruleset_registered: str | None = None) -> dict:
    """The caveats of one board as JSON (stored with it; Markdown, HTML and the CLI read them)."""
    rows = board["tables"]["framework_config"]
    undecided = sum(e["counts"].get("undecided", 0) for e in rows)
    early = sum(e["counts"].get("soft_pre_injection", 0) for e in rows)
    return {
        "undecided": undecided,
        "lower_bound_columns": sorted(LOWER_BOUND_COLUMNS) if undecided else [],
        "lower_bound_note": lower_bound_note(undecided),
        "soft_pre_injection": early,
        "pre_injection_note": pre_injection_note(early),
        "base_rate_denominator": base_rate_denominator(
            {op: n for op, (_, n) in board["base_rates"]["anchor"].items()},
            {t: n for t, (_, n) in board.get("base_rates_by_task", {}).get("anchor", {}).items()},
            board["baselines_scanned"],
        ),
        "coverage_adjusted": DIAGNOSTIC,
        "intervals": INTERVALS,
        "ruleset_registered": registered_label(ruleset_registered),
    }
