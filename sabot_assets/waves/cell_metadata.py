"""What one cell's partition says about itself: outcome, acts, calls, tokens, cost, duration, models.

Tokens and cost are shown when the run record carries the usage its calls reported (`usage`);
a run against the scripted model reports what the scripted model reports.
"""

import datetime as dt

import dagster as dg

from sabot.runroot import Attempt
from sabot.registry import WaveDef

OWN_CHECK_KINDS = ("guardrail-event", "verdict")  # the event kinds the mappings read acts from


def _seconds(attempt: Attempt) -> float | None:
    try:
        start, end = dt.datetime.fromisoformat(attempt.started_at), dt.datetime.fromisoformat(attempt.finished_at)
    except ValueError:
        return None
    return round((end - start).total_seconds(), 2)


def _usage(record) -> dict:
    usage = record.extra.get("usage")
    if not isinstance(usage, dict):
        return {}
    return {k: v for k, v in usage.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def outcome_of(attempt: Attempt) -> str:
    r = attempt.record
    if attempt.outcome != "complete":
        return "RUN_ERROR" if attempt.outcome == "run_error" else attempt.outcome
    return "passed" if r.task_passed else "failed"


def attempt_metadata(attempt: Attempt, reused: bool) -> dict:
    r = attempt.record
    meta = {
        "outcome": outcome_of(attempt),
        "run": "reused (stored, same runner, endpoint, models and protocol)" if reused else "ran",
        "attempt": attempt.number,
        "run id": r.run_id,
        "endpoint": attempt.identity.endpoint,
        "served model ids": ", ".join(sorted(r.served_model_ids())) or "none",
        "model calls": len(r.extra.get("exchanges", [])) if "exchanges" in r.extra else dg.MetadataValue.text("not recorded"),
        "own-check events": sum(1 for e in r.events if e.kind in OWN_CHECK_KINDS),
        "events": len(r.events),
        "injection verified": r.injection_verified if r.operator else dg.MetadataValue.text("baseline"),
        "record": dg.MetadataValue.path(attempt.source_path),
        "sha256": attempt.sha256,
    }
    seconds = _seconds(attempt)
    if seconds is not None:
        meta["duration (s)"] = seconds
    meta.update({f"usage {k}": v for k, v in sorted(_usage(r).items())})
    return meta


def carved_out_metadata(wave: WaveDef) -> dict:
    framework, config, operators = wave.carveout
    return {
        "outcome": "carved out",
        "run": "never run: a pre-registered carve-out (SPEC v0.2.1 §10.6), a structural zero, itemized as carved_out, never a miss",
        "carve-out": f"{framework}/{config}, operators {', '.join(sorted(operators))}",
    }


def log_line(asset: str, key: str, attempt: Attempt, seconds: float | None) -> str:
    """One run-log line per finished cell: outcome, calls, duration, endpoint, and the error if any."""
    r = attempt.record
    calls = len(r.extra.get("exchanges", [])) if "exchanges" in r.extra else "?"
    seconds = seconds if seconds is not None else _seconds(attempt)
    took = f"{seconds:.1f} s" if seconds is not None else "duration unknown"
    line = f"{asset} {key}: {outcome_of(attempt)} (attempt {attempt.number}, {calls} model calls, {took}, endpoint {attempt.identity.endpoint})"
    if r.error:
        line += f": {r.error}"
    return line
