"""The import landing zone: a validated corpus scan, stored verbatim in one transaction."""

import json

import pandas as pd

from sabot.corpus import CorpusScan, digest_of
from sabot.store.db import now, transaction


def write_import(con, scan: CorpusScan, registry_hash: str) -> int:
    """Replace a wave's landed files with this scan, in one transaction: the import lands whole or
    the store stays as it was. Files are read again one at a time (their hash checked against the
    scan's), so memory follows the largest file, not the corpus."""
    with transaction(con):
        con.execute("DELETE FROM corpus_files WHERE wave = ?", [scan.wave])
        for f in scan.files:
            con.execute("INSERT INTO corpus_files VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [scan.wave, f.kind, f.operator or "", f.probe.key, f.rel_path, f.sha256, f.body])
        con.execute(
            "INSERT INTO corpus_imports VALUES (?, ?, ?, ?, ?, ?, ?)",
            [scan.wave, str(scan.root), now(), len(scan.files), json.dumps(scan.missing), json.dumps(scan.not_run), registry_hash],
        )
    return len(scan.files)


def landed_runs(con, wave: str, kind: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(operator, probe) -> (rel_path, sha256, body) for the landed run files among `keys`."""
    if not keys:
        return {}
    wanted = pd.DataFrame(keys, columns=["operator", "probe"])
    con.register("_wanted", wanted)
    rows = con.execute(
        "SELECT f.operator, f.probe, f.rel_path, f.sha256, f.body FROM corpus_files f "
        "JOIN _wanted w ON f.operator = w.operator AND f.probe = w.probe WHERE f.wave = ? AND f.kind = ?",
        [wave, kind],
    ).fetchall()
    con.unregister("_wanted")
    return {(op, probe): (path, sha, body) for op, probe, path, sha, body in rows}


def latest_import(con, wave: str) -> dict | None:
    row = con.execute(
        "SELECT corpus_root, imported_at, files, missing, not_run, registry_hash FROM corpus_imports "
        "WHERE wave = ? ORDER BY imported_at DESC LIMIT 1",
        [wave],
    ).fetchone()
    if row is None:
        return None
    root, at, files, missing, not_run, registry_hash = row
    return {"corpus_root": root, "imported_at": at, "files": files, "missing": json.loads(missing), "not_run": json.loads(not_run), "registry_hash": registry_hash}


def landed_digest(con, wave: str) -> str | None:
    """The digest of what is landed for a wave, comparable with `CorpusScan.digest()`."""
    rows = con.execute("SELECT rel_path, sha256 FROM corpus_files WHERE wave = ? ORDER BY rel_path", [wave]).fetchall()
    return digest_of(rows) if rows else None
