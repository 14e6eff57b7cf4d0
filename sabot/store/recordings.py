"""What a replay answers from: the model exchanges stored in a cell's run record, and its intent log.

Replay re-executes a run with every model call answered from these exchanges; the intent log (which
the scorer never reads) is carried over unchanged, since no scripted model runs to produce it.
"""

import json
from dataclasses import dataclass


class RecordingMissing(LookupError):
    """A cell asked to be replayed has no stored run record to answer from."""


@dataclass(frozen=True)
class StoredRecording:
    exchanges: list
    endpoint_label: str
    intent: list
    source: str  # the stored run it replays: its run file and content hash (what a replay is stamped with)


def read_recording(con, wave: str, operator: str | None, probe: str, cell: str) -> StoredRecording:
    row = con.execute("SELECT record, source_path, source_sha256 FROM runs WHERE wave = ? AND operator = ? AND probe = ? AND status = 'present'",
                      [wave, operator or "", probe]).fetchone()
    if not row or not row[0]:
        raise RecordingMissing(f"replay of {cell}: the store holds no recorded run for this cell; nothing was sent")
    record = json.loads(row[0])
    if "exchanges" not in record:
        raise RecordingMissing(f"replay of {cell}: its stored run has no recorded model exchanges (made before they were recorded)")
    intent = con.execute("SELECT intent FROM simulator_intent WHERE wave = ? AND operator = ? AND probe = ?",
                         [wave, operator or "", probe]).fetchone()
    source = f"{row[1]}@{(row[2] or '')[:12]}"
    return StoredRecording(record["exchanges"], record.get("endpoint") or "", json.loads(intent[0]) if intent else [], source)
