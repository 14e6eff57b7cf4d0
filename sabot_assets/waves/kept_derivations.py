"""What the scoreboard derives from a whole wave's runs, kept beside a digest of what it read.

Two of the scoreboard's inputs read every run of the wave: the conformance label (each run's
endpoint, from its record) and where each noticed judge verdict's quote was written (the fault run
whole). Together they cost about as much as scoring a reading (`docs/figures.md`), and a new rule
changes neither. Each is a function of the rows it reads (the runs by content hash, their attempts,
the judge's verdicts by the run that wrote them) and of the code that derives it, so it is stored
in `reports` with the digest of those and derived again only when that digest moves.
"""

import hashlib
import json
from collections.abc import Callable

from judges.soft.location import UNLOCATED
from sabot.registry import WaveDef
from sabot.store.db import rows_digest
from sabot.store.published import read_report, write_report
from sabot_assets.waves.board_inputs import board_code_hash, judge_digest, runs_digest
from sabot_assets.waves.judging import judged_verdicts, quote_locations

KEPT = "derived"  # the `ruleset` column of the reports rows holding these values


def _attempts_digest(con, wave: str) -> str:
    present = con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'attempts'").fetchall()
    columns = "operator, probe, coalesce(source_sha256, ''), coalesce(endpoint, '')"
    return rows_digest(con, "attempts", columns, "wave = ?", [wave]) if present else ""


def kept(con, wave: str, name: str, inputs: dict, derive: Callable[[], object], dagster_run_id: str):
    """`derive()`, or its value as stored under the same `inputs` (call inside the writer's transaction)."""
    digest = hashlib.sha256(json.dumps({**inputs, "code": board_code_hash()}, sort_keys=True).encode()).hexdigest()
    stored = read_report(con, wave, KEPT, name)
    if stored is not None and (doc := json.loads(stored))["inputs"] == digest:
        return doc["value"]
    value = derive()
    write_report(con, wave, KEPT, name, json.dumps({"inputs": digest, "value": value}), dagster_run_id)
    return value


def kept_label(con, wave: WaveDef, derive: Callable[[], str], dagster_run_id: str) -> str:
    """The conformance label: its runs' endpoints, read from their records or, for a run that ended
    before its record said, from its attempts."""
    if wave.source == "import":
        return derive()  # the wave's registered label: nothing is read
    inputs = {"runs": runs_digest(con, wave.name), "attempts": _attempts_digest(con, wave.name)}
    return kept(con, wave.name, "label", inputs, derive, dagster_run_id)


def kept_located_judgements(con, wave: str, dagster_run_id: str) -> dict:
    """`judging.located_judgements`, its quote locations kept while the runs and verdicts are unchanged."""
    judged = judged_verdicts(con, wave)
    inputs = {"runs": runs_digest(con, wave), "judge": judge_digest(con, wave)}
    where = kept(
        con,
        wave,
        "quote_locations",
        inputs,
        lambda: {f"{op}|{probe}": loc for (op, probe), loc in quote_locations(con, wave, judged).items()},
        dagster_run_id,
    )
    return {
        (op, probe): {**v, "quote_location": where.get(f"{op}|{probe}", UNLOCATED)} for (op, probe), v in judged.items()
    }
