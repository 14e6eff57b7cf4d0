"""The scorer's read of stored runs picks each record's reference-schema fields in the store: the
same records as a whole read, less the live extras (model exchanges, usage) no verdict reads."""

import dataclasses
import json

import pytest

from sabot.matrix import Probe
from sabot.store.db import connect, transaction
from sabot.store.runs import RunSlot, read_runs, read_scored_runs, write_slots
from sabot.trace import parse_runresult, to_runresult
from tests.conftest import WAVE2_DIR, require_corpus

PROBE = "langgraph.default.T1.s11"


def live_like(tmp_path):
    """A store holding one fault run and its baseline as a live run stores them: the reference
    records plus the exchanges and endpoint a live record carries."""
    require_corpus()
    block = WAVE2_DIR / "langgraph" / "default" / "T1"
    runs = [block / "baseline" / "seed11" / "baseline-runresult.json", block / "O2" / "seed11" / "runresult.json"]
    store = tmp_path / "store.duckdb"
    slots = []
    for i, path in enumerate(runs):
        record = parse_runresult(json.loads(path.read_text()), str(path))
        record = dataclasses.replace(
            record,
            extra={**record.extra, "exchanges": [{"request": {"n": i}, "reply": "x" * 5000}], "endpoint": "simulation"},
        )
        slots.append(RunSlot(record.operator, Probe.parse(PROBE), f"runs/{i}.json", record, f"sha{i}"))
    with connect(store) as con, transaction(con):
        write_slots(con, "w", slots, "dagster-run")
    return store, [(s.operator or "", PROBE) for s in slots]


def test_the_scored_read_is_the_whole_read_less_the_live_extras(tmp_path):
    store, keys = live_like(tmp_path)
    with connect(store, read_only=True) as con:
        whole, scored = read_runs(con, "w", keys), read_scored_runs(con, "w", keys)
    assert whole.keys() == scored.keys() == set(keys)
    for key in keys:
        assert whole[key].record.extra["exchanges"] and scored[key].record.extra == {}
        assert dataclasses.replace(whole[key].record, extra={}) == scored[key].record
        assert (whole[key].status, whole[key].source_path, whole[key].source_sha256) == (
            scored[key].status,
            scored[key].source_path,
            scored[key].source_sha256,
        )
        assert to_runresult(scored[key].record)["trace"] == to_runresult(whole[key].record)["trace"]


def test_a_record_the_store_cannot_read_as_json_fails_as_the_whole_read_does(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        [(op, probe, rel)] = con.execute(
            "SELECT operator, probe, source_path FROM runs WHERE wave = 'public_wave2' AND status = 'present' "
            "AND record IS NULL ORDER BY probe, operator LIMIT 1"
        ).fetchall()
    broken = scored_wave2.store_path.with_name("broken.duckdb")
    broken.write_bytes(scored_wave2.store_path.read_bytes())
    with connect(broken) as con:
        con.execute("UPDATE corpus_files SET body = '{\"trace\": ' WHERE wave = 'public_wave2' AND rel_path = ?", [rel])
    with connect(broken, read_only=True) as con:
        with pytest.raises(json.JSONDecodeError) as whole:
            read_runs(con, "public_wave2", [(op, probe)])
        with pytest.raises(json.JSONDecodeError) as scored:
            read_scored_runs(con, "public_wave2", [(op, probe)])
    assert str(scored.value) == str(whole.value)


def test_the_scored_fields_are_stored_with_the_record_and_filled_in_for_older_rows(tmp_path):
    """A live record's scored fields are written beside it. A store from before the column reads the
    same, read-only, and gains them the next time it is opened for writing; a row without them reads
    the same, picked from its record."""
    store, keys = live_like(tmp_path)
    with connect(store, read_only=True) as con:
        written = dict(con.execute("SELECT operator, scored::VARCHAR FROM runs").fetchall())
        expected = read_scored_runs(con, "w", keys)
    assert set(written) == {op for op, _ in keys} and all(written.values())
    with connect(store) as con:
        con.execute("ALTER TABLE runs DROP COLUMN scored")  # a store from before the column,
        con.execute("DROP TABLE store_schema")  # and before its schema was recorded
    with connect(store, read_only=True) as con:  # read-only, such a store is read from its records
        assert "scored" not in [
            c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'").fetchall()
        ]
        assert read_scored_runs(con, "w", keys) == expected
    with connect(store) as con:  # opening for writing adds the column and fills it
        filled = dict(con.execute("SELECT operator, scored::VARCHAR FROM runs").fetchall())
        con.execute("UPDATE runs SET scored = NULL WHERE operator = ''")
    assert {op: json.loads(v) for op, v in filled.items()} == {op: json.loads(v) for op, v in written.items()}
    with connect(store, read_only=True) as con:  # a row without them is picked from its record
        assert con.execute("SELECT count(*) FROM runs WHERE scored IS NULL").fetchone() == (1,)
        assert read_scored_runs(con, "w", keys) == expected
