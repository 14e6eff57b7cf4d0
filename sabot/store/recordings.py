"""What a replay answers from: the model exchanges stored in a cell's run record, and its intent log.

Replay re-executes a run with every model call answered from these exchanges; the intent log (which
the scorer never reads) is carried over unchanged, since no scripted model runs to produce it.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from sabot import runroot, seal
from sabot.store.runs import record_sql


class RecordingMissing(LookupError):
    """A cell asked to be replayed has no stored run record to answer from."""


class RecordingRefused(ValueError):
    """A stored recording that does not match its sealed run file: never replayed."""


@dataclass(frozen=True)
class StoredRecording:
    exchanges: list
    endpoint_label: str
    intent: list
    source: str  # the stored run it replays: its run file and content hash (what a replay is stamped with)


def read_recording(con, wave: str, operator: str | None, probe: str, cell: str, run_root: Path) -> StoredRecording:
    """The cell's stored exchanges, after checking them against the sealed attempt they came from
    (before the first call is answered): the store's record must hash to its `source_sha256`, and
    that must be the hash the attempt's seal holds for its run file."""
    row = con.execute(
        f"SELECT {record_sql()}, source_path, source_sha256, attempt FROM runs WHERE wave = ? AND operator = ? AND probe = ? AND status = 'present'",
        [wave, operator or "", probe],
    ).fetchone()
    if not row or not row[0]:
        raise RecordingMissing(f"replay of {cell}: the store holds no recorded run for this cell; nothing was sent")
    record = json.loads(row[0])
    if "exchanges" not in record:
        raise RecordingMissing(
            f"replay of {cell}: its stored run has no recorded model exchanges (made before they were recorded)"
        )
    check_recording(run_root, cell, record, *row[1:])
    intent = con.execute(
        "SELECT intent FROM simulator_intent WHERE wave = ? AND operator = ? AND probe = ?",
        [wave, operator or "", probe],
    ).fetchone()
    source = f"{row[1]}@{(row[2] or '')[:12]}"
    return StoredRecording(
        record["exchanges"], record.get("endpoint") or "", json.loads(intent[0]) if intent else [], source
    )


def check_recording(
    run_root: Path, cell: str, record: dict, source_path: str, source_sha256: str, attempt: int | None
) -> None:
    if attempt is None:
        raise RecordingRefused(
            f"replay of {cell}: its stored run ({source_path}) is not a sealed live attempt; nothing was sent"
        )
    found = seal.sha256_text(runroot.run_file_text(record))
    if found != source_sha256:
        raise RecordingRefused(
            f"replay of {cell}: the store's record of {source_path} differs from the file it was ingested from "
            f"(sha256 {found[:12]}, ingested {source_sha256[:12]}); nothing was sent"
        )
    directory = Path(run_root) / Path(source_path).parent
    try:
        sealed = seal.verify(run_root, directory)
    except seal.SealError as exc:
        raise RecordingRefused(f"replay of {cell}: {exc}; nothing was sent") from exc
    if sealed.files.get(Path(source_path).name) != source_sha256:
        raise RecordingRefused(
            f"replay of {cell}: the store's hash of {source_path} is not the one its seal holds; nothing was sent"
        )
