"""What one cell's partition says about itself, in the Dagster UI.

- A run partition (`fault_runs`, `baseline_runs`): outcome, attempt, calls, tokens, cost,
  duration, models; a RUN_ERROR attempt reports its reason as an observation on the partition.
- A `cell_verdicts` partition: the cell's own verdict under every ruleset (exclusion or valid; the
  mapping act, the flag, DETECTED_HARD, reacted, recovered), the acts that decided it (surface,
  seq, quote) and the attempt and record hash it read.
- A `judge_verdicts` partition: the judge's noticed / component / quote per prompt variant.

Tokens and cost are shown when the run record carries the usage its calls reported (`usage`);
a run against the scripted model reports what the scripted model reports. A value shortened to
fit the UI ends in a visible marker naming its full length and where to read all of it.
"""

import datetime as dt

import dagster as dg

from judges.hard.tables import HEADLINE_COLUMN
from sabot.runroot import Attempt
from sabot.registry import WaveDef
from sabot.trace import EventKind
from sabot_assets.constants import RERUN_TAG
from sabot_assets.file_server.addresses import record_url
from sabot_assets.waves.ui_links import LATER_READINGS, explain_cell_command, partition_url
from sabot_assets.waves.ui_text import shortened

OWN_CHECK_KINDS = (EventKind.GUARDRAIL_EVENT, EventKind.VERDICT)  # the event kinds the mappings read acts from
QUOTE_CHARS = 60  # a quote cell of a metadata table (it must fit the panel): longer ones are shortened with a marker
RUN_ERROR_KEY = "RUN_ERROR reason"


def rerun_job_name(wave: str, asset: str) -> str:
    return f"{wave}__rerun_{asset}"


def rerun_hint(wave: str, asset: str) -> str:
    """How to run a cell again from the UI, said where the user looks (descriptions, a failed cell)."""
    return (
        f"To rerun cells (new attempts, even where a matching complete run is stored): launch the job "
        f"`{rerun_job_name(wave, asset)}` and pick the partitions, or Materialize the partitions with the tag "
        f"`{RERUN_TAG}=true`; without the tag a stored complete run at the same runner, endpoint, models and protocol "
        "is reused (a backfill of failed and missing partitions runs only the cells without a good run). "
        f"CLI: `sabot wave run {wave} --rerun` with the slice's flags."
    )


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
    """RUN_ERROR (infrastructure), or whether the pipeline's task passed: a run that completed but
    whose task did not pass is a result, not a failure of the run."""
    r = attempt.record
    if attempt.outcome != "complete":
        return "RUN_ERROR" if attempt.outcome == "run_error" else attempt.outcome
    return "task passed" if r.task_passed else "task not passed"


def attempt_metadata(attempt: Attempt, reused: bool) -> dict:
    r = attempt.record
    meta = {
        "outcome": outcome_of(attempt),
        "run": "reused (stored, same runner, endpoint, models and protocol)" if reused else "ran",
        "attempt": attempt.number,
        "run id": r.run_id,
        "endpoint": attempt.identity.endpoint,
        "served model ids": ", ".join(sorted(r.served_model_ids())) or "none",
        "model calls": len(r.extra.get("exchanges", []))
        if "exchanges" in r.extra
        else dg.MetadataValue.text("not recorded"),
        "own-check events": sum(1 for e in r.events if e.kind in OWN_CHECK_KINDS),
        "events": len(r.events),
        "injection verified": r.injection_verified if r.operator else dg.MetadataValue.text("baseline"),
        **record_links(attempt.source_path),
        "sha256": attempt.sha256,
    }
    seconds = _seconds(attempt)
    if seconds is not None:
        meta["duration (s)"] = seconds
    meta.update({f"usage {k}": v for k, v in sorted(_usage(r).items())})
    return meta


def record_links(source_path: str) -> dict:
    """A live run's sealed record, its events and its model exchanges, as pages of the file server."""
    return {
        "record (sealed)": dg.MetadataValue.url(record_url(source_path)),
        "events page": dg.MetadataValue.url(record_url(source_path, "events")),
        "model exchanges page": dg.MetadataValue.url(record_url(source_path, "exchanges")),
    }


def carved_out_metadata(wave: WaveDef, cell) -> dict:
    framework, config, operators = wave.carveout_of(cell)
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


def add_partition_metadata(context: dg.AssetExecutionContext, by_partition: dict[str, dict]) -> None:
    """Give each partition of the run its own metadata, merged into the materializations Dagster
    writes for the step (so code version, data version and input provenance stay Dagster's own).

    Dagster's public `add_asset_metadata(partition_key=...)` checks each key against the run's whole
    partition range; the cell partitions expand a range once (`sabot_assets.partitions.CellPartitions`).
    """
    for key, metadata in by_partition.items():
        context.add_asset_metadata(metadata, partition_key=key)


def run_error_observation(asset_key: dg.AssetKey, key: str, attempt: Attempt) -> dg.AssetObservation:
    """The reason a cell's run ended in RUN_ERROR, on its own partition: the step fails (so the
    partition is Failed and "backfill failed and missing" picks it), and this says why."""
    return dg.AssetObservation(
        asset_key,
        partition=key,
        metadata={
            RUN_ERROR_KEY: attempt.record.error or "no error recorded",  # first: the sentence a reader looks for
            "outcome": "RUN_ERROR",
            "cell attempt": attempt.number,
            "endpoint": attempt.identity.endpoint,
            **record_links(attempt.source_path),
            "rerun": rerun_hint(asset_key.path[0], asset_key.path[-1]),
        },
    )


def _yes(value) -> str:
    return "yes" if value else "no"


def verdict_word(row: dict) -> str:
    """valid, or why the cell is outside the denominator (an exclusion is never a miss)."""
    if row["status"] == "valid":
        return "valid"
    if row["status"] == "excluded":
        return f"excluded: {row['excluded']}"
    if row["status"] == "carved_out":
        return "carved out (pre-registered structural zero, SPEC §10.6)"
    return "incomplete: " + (", ".join(row["missing"]) or "missing input")


def _flag(row: dict) -> str:
    if row["flags_anchored"]:
        return "anchored"
    return "noticed, not anchored" if row["flags_noticed"] else "none"


VERDICT_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn(name)
        for name in ("ruleset", "verdict", "mapping act", "flag", HEADLINE_COLUMN, "reacted", "recovered")
    ]
)
ACT_SCHEMA = dg.TableSchema(columns=[dg.TableColumn(name) for name in ("seq", "surface", "act", "counted", "quote")])


def _act_table(acts: list[dict], explain: str) -> dg.MetadataValue:
    return dg.MetadataValue.table(
        [
            dg.TableRecord(
                {
                    "seq": a["seq"],
                    "surface": a["surface"],
                    "act": f"{a['act']} by {a['component']}",
                    "counted": "yes" if a["counted"] else "no",
                    "quote": shortened(
                        a["reason"] if a["counted"] else f"({a['note']}) {a['reason'] or ''}", QUOTE_CHARS, explain
                    ),
                }
            )
            for a in acts
        ],
        ACT_SCHEMA,
    )


def _same_acts(a: list[dict], b: list[dict]) -> bool:
    key = lambda acts: [(x["seq"], x["surface"], x["act"], x["component"], x["counted"]) for x in acts]  # noqa: E731
    return key(a) == key(b)


def deciding_acts(rulesets: list[str], headline: str, acts: list[dict], explain: str) -> dict:
    """The acts behind the verdict: the headline ruleset's as a table, another ruleset's only where they differ."""
    by_ruleset = {r: [a for a in acts if a["ruleset"] == r] for r in rulesets}
    head = by_ruleset[headline]
    out = {
        f"deciding acts ({headline})": _act_table(head, explain)
        if head
        else "none: no own-check act at or after the injection"
    }
    for ruleset in rulesets:
        if ruleset != headline:
            theirs = by_ruleset[ruleset]
            out[f"deciding acts ({ruleset})"] = (
                f"the same as {headline}"
                if _same_acts(theirs, head)
                else (_act_table(theirs, explain) if theirs else "none")
            )
    return out


def verdict_metadata(wave: WaveDef, key: str, rows: list[dict], acts: list[dict], attempt_read: int | None) -> dict:
    """A cell_verdicts partition's own verdict: one row per ruleset, the deciding acts, what it read."""
    head = next(r for r in rows if r["ruleset"] == wave.headline_ruleset)
    explain = explain_cell_command(wave.name, key)
    table = [
        dg.TableRecord(
            {
                "ruleset": r["ruleset"] + (" (headline)" if r["ruleset"] == wave.headline_ruleset else ""),
                "verdict": verdict_word(r),
                "mapping act": _yes(r["mapping"]),
                "flag": _flag(r),
                HEADLINE_COLUMN: _yes(r["detected_hard"]),
                "reacted": _yes(r["reacted"]),
                "recovered": _yes(r["recovered"]),
            }
        )
        for r in rows
    ]
    meta = {
        "verdict": verdict_word(head),
        f"{HEADLINE_COLUMN} ({wave.headline_ruleset})": _yes(head["detected_hard"])
        if head["status"] == "valid"
        else "not counted (outside the denominator)",
        "verdicts by ruleset": dg.MetadataValue.table(table, VERDICT_SCHEMA),  # the registered readings
        **deciding_acts([r["ruleset"] for r in rows], wave.headline_ruleset, acts, explain),
        "fault run read": _read(head, "fault", attempt_read),
        "baseline read": _read(head, "baseline", None),
        "explain": explain,
    }
    if wave.later_readings:  # rulesets added after registration: a partition each, not a row here
        meta["later readings"] = dg.MetadataValue.md(
            "\n".join(
                f"- [{v}]({partition_url(wave.name, v, LATER_READINGS)}): `{explain} --ruleset {v}`"
                for v in wave.later_readings
            )
        )
    return meta


def _read(row: dict, which: str, attempt: int | None) -> str:
    run_id, sha = row[f"{which}_run_id"], row[f"{which}_sha256"]
    if not run_id and not sha:
        return "none stored"
    numbered = f"attempt {attempt}, " if attempt is not None else ""
    return f"{numbered}run {run_id or 'unknown'}, record sha256 {sha or 'unknown'}"


def judgement_metadata(wave: WaveDef, key: str, rows: list[dict], why_none: str) -> dict:
    """A judge_verdicts partition's own verdicts, one per prompt variant (1 only on the kappa subset)."""
    if not rows:
        return {"judged": "no", "why": why_none}
    rows = sorted(rows, key=lambda r: r["prompt_variant"])
    first = rows[0]
    meta = {"judged": "yes" if first["status"] == "ok" else f"judge exclusion: {first['reason'] or first['status']}"}
    for r in rows:
        tag = f"variant {r['prompt_variant']}"
        if r["status"] == "ok":
            meta[f"{tag}: noticed"] = _yes(r["noticed"])
            meta[f"{tag}: component"] = r["by_which_component"] or "none named"
            meta[f"{tag}: quote"] = (
                shortened(r["evidence_quote"], QUOTE_CHARS * 2, explain_cell_command(wave.name, key)) or "none"
            )
        else:
            meta[f"{tag}: judge exclusion"] = r["reason"] or r["status"]
        meta[f"{tag}: backend"] = f"{r['backend']} {r['backend_version'] or ''}".strip()
    meta["tier"] = "soft (the headline never reads it)"
    return meta
