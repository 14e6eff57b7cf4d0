"""The run root's attempts, as the live run steps read them (sabot_assets.waves.live_runs): sealed
and unmodified or refused, ingested into the store, reused where made with the same identity."""

from pathlib import Path

from dagster_duckdb import DuckDBResource

from sabot import runroot
from sabot.exchange_journal import finish_killed
from sabot.pricing import PriceTable
from sabot.seal import SealError
from sabot.trace import TraceError
from sabot.store.runs import ingest_attempt
from sabot.store.spend import record_key
from sabot_assets.waves.sealed_reads import read_verified


def run_root_of(store: DuckDBResource) -> Path:
    return run_root_beside(store.database)


def run_root_beside(store_path) -> Path:
    return Path(store_path).parent / "runroot"


def sealed_attempt(run_root: Path, directory: Path, refused: dict | None = None):
    """The attempt in `directory` if it is sealed and unmodified; else None, with the one-line
    reason recorded in `refused` (directory -> reason). A refused attempt is never ingested,
    reused or replayed."""
    try:
        return read_verified(run_root, directory)  # once per command where the command asked (sealed_reads)
    except (SealError, TraceError) as exc:
        if refused is not None:
            refused[str(directory)] = str(exc)
        return None


def ingest_pending(
    con,
    run_root: Path,
    wave: str,
    slots,
    dagster_run_id: str,
    refused: dict | None = None,
    skip=frozenset(),
) -> int:
    """Ingest every finished, sealed attempt of these slots that the store does not hold yet (but those in
    `skip`: attempts the step ingests itself)."""
    done = 0
    for operator, probe in slots:
        for directory in runroot.finished_attempts(run_root, wave, probe, operator):
            if directory in skip:
                continue
            attempt = sealed_attempt(run_root, directory, refused)
            done += ingest_attempt(con, attempt, dagster_run_id) if attempt else 0
    return done


def finish_killed_attempts(run_root: Path, wave: str, slots, prices: PriceTable) -> int:
    """Finish, as `stopped` from their exchange journals, the attempts of these slots whose process was
    killed, so the calls they were answered are stored and counted. Touches the run root only, so a held
    store lock never leaves a killed attempt unfinished while its slot runs again."""
    return sum(len(finish_killed(run_root, wave, probe, operator, prices)) for operator, probe in slots)


def reusable_attempts(run_root: Path, wave: str, slots, identity, refused: dict | None = None) -> dict:
    """slot -> its stored run (latest complete sealed attempt) where that run was made with `identity`.
    Read from the run root, so a held store lock cannot force a paid run to be repeated."""
    from adapters.run_attempt import is_replay

    out = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory, refused)
            if attempt is None:
                continue
            if attempt.outcome == "complete":
                if is_replay(attempt.identity) and not is_replay(identity):
                    continue  # a replay never answers for live work; the live run it replayed still may
                if attempt.identity == identity:
                    out[(operator, probe)] = attempt
                break
    return out


def rerun_reasons(run_root: Path, wave: str, slots, identity) -> dict[str, int]:
    """Why stored runs will not be reused: reason -> how many slots, for each slot whose latest
    complete attempt was made with another identity (e.g. "pass criterion my_checks.py changed")."""
    from adapters.run_attempt import is_replay

    reasons: dict[str, int] = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory)
            if attempt is not None and attempt.outcome == "complete":
                if is_replay(attempt.identity) and not is_replay(identity):
                    continue  # as reuse reads them (reusable_attempts)
                if attempt.identity != identity:
                    reason = identity.change_from(attempt.identity)
                    reasons[reason] = reasons.get(reason, 0) + 1
                break
    return reasons


def attempts_made_by(run_root: Path, wave: str, slots, dagster_run_id: str) -> dict:
    """slot -> the latest finished attempt a given Dagster run (the wave's schedule) made there."""
    out = {}
    for operator, probe in slots:
        for directory in reversed(runroot.finished_attempts(run_root, wave, probe, operator)):
            attempt = sealed_attempt(run_root, directory)  # a refused one is named where it is ingested
            if attempt is not None and attempt.dagster_run_id == dagster_run_id:
                out[(operator, probe)] = directory
                break
    return out


def settle_cost(breaker, attempt, spec) -> None:
    """A launched run's reservation gives way to what its record cost, keyed as the store keys it."""
    cost = ((attempt.record.extra or {}).get("usage") or {}).get("cost_usd")
    breaker.add(cost, spec, record_key(attempt.wave, attempt.operator, attempt.probe.key, attempt.record))
