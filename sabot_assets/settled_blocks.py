"""Which blocks of a wave run have nothing stale: only the others, and what lies downstream of them
(the kappa audit, the board), are materialized again.

A block (one framework, config and task; its baselines, fault runs, judge and cell verdicts) is
settled by a wave run once its verdicts are materialized; the Dagster run that made its cell verdicts
is then tagged with the block's fingerprint (`sabot_assets.settled.fingerprint`, over the block's
own slots): its assets' code versions and the registry (less what only a later reading reads, so
a new rule settles no block again: `later_readings` and the board take it), the sealed attempt
answering each of its slots at the current identity, and every row of its cells and baselines in
the store (by key and the Dagster run that wrote it). The next wave run of a slice where something
is stale (a run missing, a verdict lost, another block's rule) computes each block's fingerprint
before launching anything; a block whose fingerprint a successful run carries is left as it is, since settling it
again would write the same rows from the same runs under the same rules.
"""

import contextlib
from pathlib import Path

import dagster as dg

from sabot.registry import Registry
from sabot.store.db import StoreLocked, connect, rows_digest
from sabot_assets.settled import code_versions

BLOCK_TAG = "sabot/block-settled"  # on a block's cell-verdicts run: the fingerprint of what it settled

# The tables a block's materializations write, with the columns that name a row.
_BLOCK_ROWS = {
    "runs": "operator, probe, status, coalesce(source_sha256, '')",
    "cell_verdicts": "ruleset, ruleset_hash, operator, probe",
    "judge_verdicts": "operator, probe, CAST(prompt_variant AS VARCHAR)",
}


_BLOCK_ASSETS = ("preregistration", "baseline_runs", "fault_runs", "judge_verdicts", "cell_verdicts")


def _registry_for_blocks(registry: Registry, wave) -> str:
    """The registry less the files only later readings use (their ruleset files and the rule files
    no registered reading reads): a new rule is a later reading, which no block reads."""
    from judges.hard.rulesets import load_ruleset

    def files(versions) -> set:
        return set().union(*(load_ruleset(registry, v).files for v in versions))

    return registry.content_hash_without(files(wave.later_readings) - files(wave.registered_readings))


def _stored_rows(con, wave, probes: list[str]) -> dict[str, str]:
    """The block's rows per table. Cell verdicts under a later reading are left out: the board's run
    writes them for every cell of the wave (`later_readings`), not the block's."""
    marks = ", ".join("?" for _ in probes)
    out = {}
    for table, columns in _BLOCK_ROWS.items():
        later = table == "cell_verdicts" and wave.later_readings
        where = f"wave = ? AND probe IN ({marks})" + (
            f" AND ruleset NOT IN ({', '.join('?' for _ in wave.later_readings)})" if later else ""
        )
        out[table] = rows_digest(
            con,
            table,
            f"{columns}, dagster_run_id",
            where,
            [wave.name, *probes, *(wave.later_readings if later else ())],
        )
    return out


def block_fingerprints(registry: Registry, assets, store_path: Path, wave, slots_by_block: dict, identity) -> dict:
    """block -> the fingerprint of its settling, or None when a slot of it has no reusable stored
    run (the block has runs to make, so it is stale). One store connection for every block."""
    import hashlib
    import json

    from sabot_assets.waves.attempts import (
        reusable_attempts,
        run_root_beside,
    )  # the run path: imported where a wave runs

    # What a block is made from: its own assets' code and the registry less a later reading's files.
    code = {k: v for k, v in code_versions(assets, wave).items() if k.split("/")[-1] in _BLOCK_ASSETS}
    rules = _registry_for_blocks(registry, wave)
    out = dict.fromkeys(slots_by_block)
    with contextlib.ExitStack() as held:
        try:
            con = held.enter_context(connect(store_path, read_only=True))
        except StoreLocked:  # another command holds the store: every block counts as stale, which is only slower
            return out
        for block, slots in slots_by_block.items():
            answers = reusable_attempts(run_root_beside(store_path), wave.name, slots, identity)
            if len(answers) < len(slots) or not slots:
                out[block] = None
                continue
            doc = {
                "registry": rules,
                "code": code,
                "identity": repr(identity),
                "slots": sorted(f"{op or ''}|{probe.key}|{answers[(op, probe)].sha256}" for op, probe in slots),
                "stored": _stored_rows(con, wave, sorted({probe.key for _, probe in slots})),
            }
            out[block] = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
    return out


def is_settled(instance: dg.DagsterInstance, wave_name: str, print_: str | None) -> bool:
    if print_ is None:
        return False
    runs = instance.get_run_records(
        dg.RunsFilter(tags={"sabot/wave": wave_name, BLOCK_TAG: print_}, statuses=[dg.DagsterRunStatus.SUCCESS]),
        limit=1,
    )
    return bool(runs)


def mark_block(instance: dg.DagsterInstance, run_id: str, print_: str | None) -> None:
    if print_ is not None:
        instance.add_run_tags(run_id, {BLOCK_TAG: print_})
