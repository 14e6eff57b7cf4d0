"""A cell as one complete record on its `cell_verdicts` partition: its §2 outcome and the tier
that decided it, the judge's ruling and quote, and links to everything behind it (the judge and
baseline partitions, the fault run's partition, and the sealed record, events and model exchanges
on the file server beside the UI).

The §2 outcome is read with the funnel's own per-cell indicators (`judges.hard.funnel`), so the
cell says exactly what the board counts it as. The hard tier never reads the judge: a cell scored
before its judge ruled says so ("undecided: not judged yet"), and the scoreboard, rebuilt after
both, counts it then.
"""

import json
from pathlib import Path

import dagster as dg

from judges.hard.funnel import derived_counts, with_soft
from judges.hard.tables import HEADLINE_COLUMN
from sabot import runroot
from sabot.registry import WaveDef
from sabot_assets.file_server.addresses import attempt_dir_of, record_url
from sabot_assets.waves.ui_links import explain_cell_command, partition_url
from sabot_assets.waves.ui_text import shortened

QUOTE_CHARS = 160  # the judge's evidence quote in the panel; the rest on the judge partition and via `sabot explain`


def section2_outcome(row: dict, judgement: dict | None) -> tuple[str, str]:
    """(outcome, the tier that decided it) of one cell's headline verdict row, as the §2 funnel counts it."""
    if row["status"] != "valid":
        return "not counted (outside the denominator)", "none: an exclusion is itemized, never a miss"
    scored = with_soft([row], {(row["operator"], row["probe"]): judgement} if judgement else {})[0]
    counts = derived_counts(scored)
    if counts["detected_hard"]:
        return (
            HEADLINE_COLUMN,
            "hard: the pipeline's own check acted on the fault (the mapping's act, or an anchored FLAG)",
        )
    if counts["detected_soft"]:
        return "DETECTED_SOFT (judge only)", "soft: the judge says the fault was noticed, but no own check acted"
    if counts["missed"]:
        return "MISSED", "both: no own check acted, and the judge says nothing noticed the fault"
    if counts["soft_pre_injection"]:
        return "undecided", "soft tier: the judge's notice quotes text written before the fault was planted"
    if judgement is None:
        return "undecided", "soft tier: not judged yet when this cell was scored (the scoreboard counts it once judged)"
    return "undecided", f"soft tier: judge exclusion ({judgement.get('reason') or judgement['status']})"


def judge_ruling(wave: WaveDef, key: str, judgement: dict | None) -> dict:
    link = {"judge verdict partition": dg.MetadataValue.url(partition_url(wave.name, key, "judge_verdicts"))}
    if judgement is None:
        return {"judge ruling": "none yet", **link}
    if judgement["status"] != "ok":
        return {"judge ruling": f"judge exclusion: {judgement.get('reason') or judgement['status']}", **link}
    ruling = "noticed" if judgement["noticed"] else "not noticed"
    component = judgement.get("by_which_component")
    return {
        "judge ruling": f"{ruling}"
        + (f" by {component}" if component else "")
        + f" ({judgement.get('backend') or 'judge'}, variant 0)",
        "judge quote": shortened(judgement.get("evidence_quote") or "none", QUOTE_CHARS, "the judge verdict partition"),
        **link,
    }


def run_links(wave: WaveDef, key: str, probe: str, fault_source: str | None) -> dict:
    """The partitions and the file-server pages behind a cell."""
    links = {
        "fault run partition": dg.MetadataValue.url(partition_url(wave.name, key, "fault_runs")),
        "baseline partition": dg.MetadataValue.url(partition_url(wave.name, probe, "baseline_runs")),
    }
    if wave.source == "live" and fault_source:
        links |= {
            "fault run record (sealed)": dg.MetadataValue.url(record_url(fault_source)),
            "fault run events": dg.MetadataValue.url(record_url(fault_source, "events")),
            "fault run model exchanges": dg.MetadataValue.url(record_url(fault_source, "exchanges")),
        }
    elif fault_source:
        links["fault run file"] = (
            f"{fault_source} (imported corpus: `{explain_cell_command(wave.name, key)}` prints its events)"
        )
    return links


def unfinished_attempt_links(run_root: Path, fault_source: str | None) -> dict:
    """Links to the model exchanges of the cell's other attempts that did not complete (a run killed in flight,
    one cut off looping on its fault, a RUN_ERROR): the calls that say why, every one of them paid."""
    if not fault_source:
        return {}
    current = Path(run_root) / attempt_dir_of(fault_source)
    links = {}
    for other in sorted(current.parent.glob("attempt-*"), key=lambda d: int(d.name.rsplit("-", 1)[-1])):
        try:
            outcome = json.loads((other / runroot.META_FILE).read_text()).get("outcome")
        except (OSError, ValueError):
            continue  # unfinished (or unreadable): nothing sealed to link yet
        if other != current and outcome != "complete":
            source = other.relative_to(run_root).as_posix() + "/" + Path(fault_source).name
            links[f"{other.name.replace('-', ' ')} ({outcome}) model exchanges"] = dg.MetadataValue.url(
                record_url(source, "exchanges")
            )
    return links


def cell_record(wave: WaveDef, key: str, head: dict, judgement: dict | None, fault_source: str | None) -> dict:
    """The record's leading entries: outcome and tier first, then the judge, then the links."""
    outcome, tier = section2_outcome(head, judgement)
    return {
        f"§2 outcome ({wave.headline_ruleset})": outcome,
        "decided by tier": tier,
        **judge_ruling(wave, key, judgement),
        **run_links(wave, key, head["probe"], fault_source),
    }
