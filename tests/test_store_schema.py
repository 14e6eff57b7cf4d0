"""The store's schema on a store made by an older version: it is brought up to date when opened."""

import json

import duckdb

from sabot.matrix import Probe
from sabot.store.db import connect, transaction
from sabot.store.runs import RunSlot, read_runs, write_slots
from sabot.trace import parse_runresult
from tests.conftest import CORPUS, require_corpus

OLD_EVENTS = """CREATE TABLE events (wave VARCHAR NOT NULL, operator VARCHAR NOT NULL, probe VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL, seq INTEGER NOT NULL, agent VARCHAR NOT NULL, kind VARCHAR NOT NULL,
    payload JSON NOT NULL, PRIMARY KEY (wave, operator, probe, seq))"""


def test_an_older_store_loses_its_second_copy_of_event_payloads_and_keeps_its_events(tmp_path):
    require_corpus()
    path = CORPUS / "harness/runs/wave2/langgraph/default/T1/O1/seed11/runresult.json"
    record = parse_runresult(json.loads(path.read_text()), str(path))
    store = tmp_path / "old.duckdb"
    with duckdb.connect(str(store)) as old:
        old.execute(OLD_EVENTS)
        old.execute("INSERT INTO events VALUES ('w', 'O1', 'old', 'r0', 1, 'a', 'agent-msg', '{\"text\": \"kept\"}')")
    with connect(store) as con:
        columns = [
            r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'events'").fetchall()
        ]
        assert "payload" not in columns and "kind" in columns
        assert con.execute("SELECT run_id, seq, kind FROM events").fetchall() == [("r0", 1, "agent-msg")]
        probe = Probe.parse("langgraph.default.T1.s11")
        with transaction(con):
            write_slots(con, "w", [RunSlot("O1", probe, str(path), record, "sha")], "dagster-run")
        stored = con.execute("SELECT seq, agent, kind FROM events WHERE probe = ? ORDER BY seq", [probe.key]).fetchall()
        assert stored == [(e.seq, e.agent, e.kind) for e in record.events]
        # the payloads are the record's, read back whole
        assert read_runs(con, "w", [("O1", probe.key)])[("O1", probe.key)].record.events == record.events
