"""The Sabot funnel per group (§2): valid denominator, detection surfaces, reaction, recovery.

Rows are plain mappings with the store's column names, so the same functions aggregate our own
cell verdicts and a published per-cell table. Excluded and incomplete cells never enter a
denominator; exclusions are itemized separately, never counted as misses.

A row may carry `noticed` (the soft-tier judge's verdict: True, False, or None when no judge ruled
on the cell). The §2 companions are then read as the spec defines them, over |valid|:
DETECTED_SOFT = noticed and not hard; MISSED = neither hard nor soft (judged cells only);
soft notice = |hard ∪ soft|; override gap = soft notice - hard; recovery-without-detection =
recovered with neither. `judged` counts the cells a judge ruled on and `undecided` the valid cells
with neither a hard act nor a judge verdict, printed beside those rates: an undecided cell is
neither soft nor MISSED, so soft notice, MISSED and recovery-without-detection are lower bounds
until no cell is undecided (a reference corpus judges only the cells the union missed).
"""

from collections import Counter
from dataclasses import dataclass
from statistics import median

# Column -> what it counts among valid cells. `detected_hard` is the headline (the wave-2 union).
FUNNEL_COLUMNS = ("mapping", "flags_anchored", "detected_hard", "reacted", "recovered", "flags_noticed")


@dataclass(frozen=True)
class FunnelRow:
    group: str
    valid: int
    counts: dict[str, int]

    def rate(self, column: str) -> float | None:
        return self.counts[column] / self.valid if self.valid else None


def is_valid(row) -> bool:
    return row["status"] == "valid"


def group_key(row, dims) -> str:
    return "/".join(str(row[d]) for d in dims)


def derived_counts(row) -> dict[str, int]:
    """Per-cell indicators for every funnel column, plus the §2 derived outcomes."""
    counts = {c: int(bool(row[c])) for c in FUNNEL_COLUMNS}
    hard, recovered = bool(row["detected_hard"]), bool(row["recovered"])
    # The hard-only reading, kept under its own name: recovered with no hard detection.
    counts["recovered_without_hard"] = int(recovered and not hard)
    noticed = row.get("noticed")
    judged = noticed is not None
    counts["judged"] = int(judged)
    counts["detected_soft"] = int(judged and bool(noticed) and not hard)
    counts["soft_notice"] = int(hard or (judged and bool(noticed)))  # |DETECTED_HARD ∪ DETECTED_SOFT|
    counts["missed"] = int(judged and not hard and not noticed)
    counts["recovered_without_detection"] = int(recovered and counts["missed"])
    counts["undecided"] = int(not hard and not judged)  # soft tier unknown: neither soft nor MISSED
    counts["soft_pre_injection"] = int(
        bool(row.get("soft_pre_injection")) and not hard
    )  # a notice quoting pre-fault text
    if "strict" in row:
        counts["strict"] = int(bool(row["strict"]))
    return counts


def funnel(rows, dims) -> list[FunnelRow]:
    """One funnel row per group of valid cells, groups sorted by key."""
    valid, counts = Counter(), {}
    for row in rows:
        if not is_valid(row):
            continue
        key = group_key(row, dims)
        valid[key] += 1
        totals = counts.setdefault(key, Counter())
        totals.update(derived_counts(row))
    return [FunnelRow(key, valid[key], dict(counts[key])) for key in sorted(valid)]


def exclusion_appendix(rows) -> list[tuple[str, str, str, str, str, int]]:
    """(framework, config, task, operator, code, count) for every excluded cell class."""
    tally = Counter(
        (r["framework"], r["config"], r["task"], r["operator"], r["excluded"])
        for r in rows
        if r["status"] == "excluded"
    )
    return [(*key, n) for key, n in sorted(tally.items())]


def with_soft(rows, judged: dict) -> list[dict]:
    """Rows with `noticed` from the judge verdicts ((operator, probe) -> verdict), None if unjudged.

    A notice whose quote was written only before the injection (`judges.soft.location`) is no
    notice of the planted fault, and no ruling that the fault went unnoticed either: the judge's
    verdict does not bear on the planted fault, so the cell stays undecided (`noticed` None) and
    `soft_pre_injection` counts it apart (footnoted beside the soft rates)."""
    out = []
    for row in rows:
        verdict = judged.get((row["operator"], row["probe"]))
        noticed = bool(verdict["noticed"]) if verdict is not None and verdict["status"] == "ok" else None
        early = bool(noticed) and verdict.get("quote_location") == "before_injection"
        out.append({**row, "noticed": None if early else noticed, "soft_pre_injection": early})
    return out


def missing_rows(rows, expected: list[str]) -> list[str]:
    """The scoreboard rows (framework/config) of the wave with no valid cell."""
    present = {group_key(r, ("framework", "config")) for r in rows if is_valid(r)}
    return [row for row in expected if row not in present]


def median_across_frameworks(rows, column: str = "detected_hard") -> tuple[float | None, dict[str, float]]:
    """§7: the median over frameworks of each framework's pooled (configs together) rate."""
    per_framework = {f.group: f.rate(column) for f in funnel(rows, ("framework",))}
    rates = [r for r in per_framework.values() if r is not None]
    return (median(rates) if rates else None), per_framework


def band(registry, value: float | None) -> str | None:
    """The pre-registered interpretation band a median lands in (§7)."""
    if value is None:
        return None
    doc = registry.doc("standard/bands.v0.1.json")
    return doc["bands"][0]["id"] if value < doc["threshold"] else doc["bands"][1]["id"]
