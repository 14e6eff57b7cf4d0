"""Where a judge's evidence quote was written: before or after the fault was planted.

SPEC v0.2.1 §2: DETECTED_SOFT is a notice of THE planted fault. A quote that occurs in the fault
run only in what was written before the injection seq existed before the fault did, so it cannot
be a notice of it. The quote is sought in everything the judge is shown (rubric v2's internal
transcript: agent texts and tool calls with their outputs), so a tool output read before the fault
is located too. Such a verdict is counted apart (`soft_pre_injection`), never as DETECTED_SOFT,
and footnoted.
"""

from __future__ import annotations

from sabot.trace import RunRecord

from judges.soft.verdict import normalize_ws, shown_text

BEFORE, AFTER, UNLOCATED = "before_injection", "after_injection", "unlocated"


def quote_seqs(record: RunRecord, quote: str) -> list[int]:
    """Seqs of the events whose shown text holds the quote (whitespace runs collapsed on both sides)."""
    needle = normalize_ws(quote)
    return [
        e.seq for e in record.events if needle and (text := shown_text(e)) is not None and needle in normalize_ws(text)
    ]


def _joined(events) -> str:
    return normalize_ws(" ".join(t for e in sorted(events, key=lambda e: e.seq) if (t := shown_text(e)) is not None))


def quote_location(record: RunRecord, quote: str | None) -> str:
    """BEFORE when every occurrence precedes the injection seq; AFTER when any is at or after it
    (a quote running across events counts by the events it runs over); UNLOCATED when the quote is
    in nothing the judge was shown (or the run records no injection seq)."""
    if not quote or record.injection_seq is None:
        return UNLOCATED
    seqs = quote_seqs(record, quote)
    if seqs:
        return AFTER if max(seqs) >= record.injection_seq else BEFORE
    needle = normalize_ws(quote)
    if needle in _joined(e for e in record.events if e.seq < record.injection_seq):
        return BEFORE
    return AFTER if needle in _joined(record.events) else UNLOCATED


def located(judged: dict, records: dict) -> dict:
    """Judge verdicts ((operator, probe) -> verdict row) with `quote_location` set from the fault
    runs in `records` (same keys); a verdict whose run is not there is left unlocated."""
    out = {}
    for key, verdict in judged.items():
        record = records.get(key)
        where = (
            quote_location(record, verdict.get("evidence_quote"))
            if record is not None and verdict.get("noticed")
            else UNLOCATED
        )
        out[key] = {**verdict, "quote_location": where}
    return out
