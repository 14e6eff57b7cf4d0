"""What every task skill shares: conflicts, superseded-revision marks, sentences, exact quotes.

Skills read only what a prompt shows (served material and its perturbations), never the oracle.
"""

import re
from dataclasses import dataclass

SUPERSEDED = re.compile(r"[\w-]+ [\w-]+ \(SUPERSEDED[^)\n]*\)|\bSUPERSEDED\b[^\n]*", re.IGNORECASE)
NUMBER = re.compile(r"\$?(-?\d[\d,]*(?:\.\d+)?)(?:\s?(?:km|kg|metres|m|psi|°C|Wh/kg|/kWh|cycles|mm/s))?")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class Conflict:
    quotes: tuple[str, ...]  # exact strings as they appear in the material
    description: str


def superseded_mark(context: str) -> str | None:
    """The exact text marking the context as a superseded revision, if it is marked so."""
    m = SUPERSEDED.search(context)
    return m.group(0).strip() if m else None


def stale_conflict(context: str) -> list[Conflict]:
    mark = superseded_mark(context)
    return [Conflict((mark,), "the context is a superseded revision, not the current one")] if mark else []


def sentences(text: str) -> list[str]:
    """Sentences, line by line (headings and list items are sentences of their own)."""
    out = []
    for line in text.splitlines():
        out += [s.strip() for s in SENTENCE_END.split(line) if s.strip()]
    return out


def distinct(values: list[str], key=lambda v: v) -> list[str]:
    """Values in first-seen order, one per distinct key."""
    seen, out = set(), []
    for v in values:
        if key(v) not in seen:
            seen.add(key(v))
            out.append(v)
    return out


def number(text: str) -> float:
    """The value of a figure as written ("8,400", "$2.00", "140 km"); ValueError for anything else."""
    m = NUMBER.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a figure: {text!r}")
    return float(m.group(1).replace(",", ""))


def mismatch(value: str | None, true_value: str | None, what: str, where: str = "the draft") -> list[Conflict]:
    """A conflict when `where` states `what` differently from the source (numbers compared as numbers)."""
    if value is None or true_value is None:
        return []
    try:
        same = number(value) == number(true_value)
    except ValueError:
        same = value.strip().casefold() == true_value.strip().casefold()
    return (
        [] if same else [Conflict((value, true_value), f"{where} gives {what} as {value}, the source as {true_value}")]
    )


def restated(values: list[str], what: str) -> list[Conflict]:
    """A conflict when the source states one quantity with different values."""
    vals = distinct(values, key=lambda v: number(v))
    return [Conflict(tuple(vals), f"the source states {what} as {' and as '.join(vals)}")] if len(vals) > 1 else []


def dedupe(conflicts: list[Conflict]) -> list[Conflict]:
    return [c for i, c in enumerate(conflicts) if all(set(c.quotes) != set(d.quotes) for d in conflicts[:i])]
