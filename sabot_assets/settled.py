"""Whether a command has anything to do: a wave's inputs, code and stored results as its last
complete settling left them.

A command that finishes settling a wave (every selected run reused or stored, its verdicts, the
kappa audit, the board and report materialized) tags the Dagster run that made the board with a
fingerprint of everything the board was made from:

- the code versions Dagster holds for every asset of the wave (they carry the ruleset, rubric,
  scorer and registry hashes: a rule file edited or added changes one);
- what the command was asked to settle (the selection, or the corpus's digest);
- which stored run answers every selected slot (the sealed attempt, at the current identity:
  runner version, endpoint, model ids, protocol, a project's code);
- every row the wave's materializations wrote to the store, by key and the Dagster run that wrote
  it (runs, cell and judge verdicts, scoreboard, reports): any later write changes it.

The next command computes the same fingerprint before launching anything; when a successful board
run carries it, nothing is stale and nothing is materialized. The store records each settling beside
the tag (`settlements`, written once the board run has succeeded and been tagged), so that lookup
needs no Dagster instance: creating one imports Dagster's storage, about half a second of CPU, more
than the rest of a command with nothing to do. Dagster's own per-partition stale
status was the first thing tried: it needs the asset graph's stale resolver per partition (an
internal API, hundreds of event-log reads for a wave), does not propagate across the board's
fan-in of more than 100 partitions, and cannot see a run stored by another command without a
materialization. The fingerprint reads one small query per table and one row of `settlements`.
"""

import hashlib
import json
from pathlib import Path

import dagster as dg

from sabot.registry import Registry, WaveDef
from sabot.store.db import connect, rows_digest
from sabot.store.settlements import record_settlement, settling_run

SETTLED_TAG = "sabot/settled"  # on a board run: the fingerprint of the state it settled

# Every table a wave's materializations write, with the columns that name a row.
_WRITTEN = {
    "runs": "operator, probe, status, coalesce(source_sha256, '')",
    "cell_verdicts": "ruleset, ruleset_hash, operator, probe",
    "judge_verdicts": "operator, probe, CAST(prompt_variant AS VARCHAR)",
    "scoreboard": "ruleset, ruleset_hash, table_name, group_key",
    "reports": "ruleset, format, sha256",
}


def stored_state(store_path: Path, wave: str, con=None) -> dict[str, str]:
    """table -> a digest of the wave's rows there (their keys and the Dagster run that wrote each).
    `con`: a connection the caller holds on the store (opening one costs tens of milliseconds)."""
    if con is None:
        if not Path(store_path).exists():
            return {}
        with connect(store_path, read_only=True) as con:
            return stored_state(store_path, wave, con)
    return {
        table: rows_digest(con, table, f"{columns}, dagster_run_id", "wave = ?", [wave])
        for table, columns in _WRITTEN.items()
    }


def code_versions(assets, wave: WaveDef) -> dict[str, str]:
    """Dagster's code version of every asset of the wave, as the definitions (or the wave's own
    assets, `sabot_assets.waves.factory.build_wave`) hold them now."""
    out = {}
    for asset in assets:
        for key, version in asset.code_versions_by_key.items():
            if key.path[0] == wave.name:
                out[key.to_user_string()] = version or ""
    return out


def own_assets(registry: Registry, wave: WaveDef) -> list:
    """The wave's own assets, built for their code versions alone: a command that may have nothing
    to do asks the fingerprint before it builds the whole code location's definitions."""
    from sabot_assets.quiet import beta_used_on_purpose
    from sabot_assets.waves.factory import build_wave

    with beta_used_on_purpose():
        return build_wave(wave, registry).assets


def fingerprint(
    registry: Registry, assets, store_path: Path, wave: WaveDef, asked: dict, answers: dict, con=None
) -> str:
    """One hash over what a settling of `wave` depends on. `assets`: the definitions' assets (the
    wave's are picked out); `asked`: what the command settles (its selection, a corpus digest);
    `answers`: slot -> what answers it (an attempt's run file hash); `con`: as `stored_state`'s."""
    doc = {
        "registry": registry.content_hash,
        "code": code_versions(assets, wave),
        "asked": asked,
        "answers": sorted(f"{op or ''}|{probe}|{sha}" for (op, probe), sha in answers.items()),
        "stored": stored_state(store_path, wave.name, con),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def settled_by(store_path: Path, wave: WaveDef, print_: str, con=None) -> str | None:
    """The id of the successful board run that settled exactly this state, if there is one.
    `con`: as `stored_state`'s."""
    if con is None:
        if not Path(store_path).exists():
            return None
        with connect(store_path, read_only=True) as con:
            return settling_run(con, wave.name, print_)
    return settling_run(con, wave.name, print_)


def mark_settled(
    instance: dg.DagsterInstance, store_path: Path, wave: WaveDef, board_run_id: str, print_: str, con=None
) -> None:
    """Tag the board run with the state it settled (shown with the run in the UI), then record it in
    the store, where the next command looks: a recorded settling always names a tagged, successful run.
    `con`: a connection for writing the caller holds on the store."""
    instance.add_run_tags(board_run_id, {SETTLED_TAG: print_})
    if con is None:
        with connect(store_path) as con:
            record_settlement(con, wave.name, print_, board_run_id)
    else:
        record_settlement(con, wave.name, print_, board_run_id)
