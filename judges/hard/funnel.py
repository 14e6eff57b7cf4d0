"""The Sabot funnel per group: valid denominator, detection surfaces, reaction, recovery.

Rows are plain mappings with the store's column names, so the same functions aggregate our own
cell verdicts and a published per-cell table. Excluded and incomplete cells never enter a
denominator; exclusions are itemized separately, never counted as misses.
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
    """Per-cell indicators for every funnel column, plus the derived outcomes."""
    counts = {c: int(bool(row[c])) for c in FUNNEL_COLUMNS}
    # Until a soft tier exists this is the hard-only reading: recovered with no hard detection.
    counts["recovered_without_detection"] = int(bool(row["recovered"]) and not row["detected_hard"])
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
    tally = Counter((r["framework"], r["config"], r["task"], r["operator"], r["excluded"]) for r in rows if r["status"] == "excluded")
    return [(*key, n) for key, n in sorted(tally.items())]


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
