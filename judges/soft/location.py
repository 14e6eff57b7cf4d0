"""Where a judge's evidence quote was written: before or after the fault was planted.

SPEC v0.2.1 §2: DETECTED_SOFT is a notice of THE planted fault. A quote that occurs in the fault
run only at events before the injection seq was written before the fault existed, so it cannot be
a notice of it (the reference judge was shown the whole run, so its quotes can land there). Such a
verdict is counted apart (`soft_pre_injection`), never as DETECTED_SOFT, and footnoted.
"""

from __future__ import annotations

from sabot.trace import RunRecord

from judges.soft.verdict import normalize_ws

BEFORE, AFTER, UNLOCATED = "before_injection", "after_injection", "unlocated"


def quote_seqs(record: RunRecord, quote: str) -> list[int]:
    """Seqs of the events whose text holds the quote (whitespace runs collapsed on both sides)."""
    needle = normalize_ws(quote)
    return [e.seq for e in record.events if needle and e.text is not None and needle in normalize_ws(e.text)]


def quote_location(record: RunRecord, quote: str | None) -> str:
    """BEFORE when every occurrence precedes the injection seq; AFTER when any is at or after it;
    UNLOCATED when the quote is in no event text (or the run records no injection seq)."""
    if not quote or record.injection_seq is None:
        return UNLOCATED
    seqs = quote_seqs(record, quote)
    if not seqs:
        return UNLOCATED
    return AFTER if max(seqs) >= record.injection_seq else BEFORE


def located(judged: dict, records: dict) -> dict:
    """Judge verdicts ((operator, probe) -> verdict row) with `quote_location` set from the fault
    runs in `records` (same keys); a verdict whose run is not there is left unlocated."""
    out = {}
    for key, verdict in judged.items():
        record = records.get(key)
        where = quote_location(record, verdict.get("evidence_quote")) if record is not None and verdict.get("noticed") else UNLOCATED
        out[key] = {**verdict, "quote_location": where}
    return out
