"""The fields of a run record the scorer reads, kept beside the record in `runs.scored`.

A live record is mostly model exchanges and usage (`extra`), which no verdict reads; the reference
schema's fields (`sabot.trace.RESULT_KEYS`) are about a sixth of it. They are written with the record
(`sabot.store.runs.write_slots`) and read by `read_scored_runs`; rows stored before the column existed
are filled here when the store is next opened for writing.
"""

import duckdb

from sabot.trace import RESULT_KEYS


def scored_fields(record: dict) -> dict:
    """What `runs.scored` holds for a record (as a JSON object): its RESULT_KEYS, null where absent,
    as json_extract picks them in `picked_sql`."""
    return {k: record.get(k) for k in RESULT_KEYS}


def scored_column(con, alias: str) -> str:
    """`alias.scored` in SQL, or NULL in a store from before the column that is open read-only (the
    column is added when a store is opened for writing): its rows are then read from their records."""
    present = con.execute(
        "SELECT 1 FROM duckdb_columns() WHERE table_name = 'runs' AND column_name = 'scored'"
    ).fetchall()
    return f"{alias}.scored" if present else "NULL"


def picked_sql(record: str) -> tuple[str, str]:
    """(the record's RESULT_KEYS as one JSON object, NULL without a record; the `parts` it is built
    from): `record` is parsed once, by json_extract."""
    paths = ", ".join(f"'$.{k}'" for k in RESULT_KEYS)
    fields = ", ".join(f"'{k}', parts[{i + 1}]" for i, k in enumerate(RESULT_KEYS))
    return f"CASE WHEN parts IS NULL THEN NULL ELSE json_object({fields}) END", f"json_extract({record}, [{paths}])"


def fill_scored(con) -> None:
    """Fill `runs.scored` of the rows stored before it existed, from their records (once: after that
    no row is left to fill). A record that is not JSON is left to the whole read, which names it."""
    picked, parts = picked_sql("record")
    try:
        con.execute(
            f"UPDATE runs SET scored = p.scored FROM (SELECT wave, operator, probe, {picked} AS scored FROM ("
            f"SELECT wave, operator, probe, {parts} AS parts FROM runs WHERE scored IS NULL AND record IS NOT NULL)) p "
            "WHERE runs.wave = p.wave AND runs.operator = p.operator AND runs.probe = p.probe"
        )
    except duckdb.InvalidInputException:
        pass
